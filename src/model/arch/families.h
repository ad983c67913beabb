// The architectures of src/model/arch/, one accessor per file, for architecture.cpp's table; and
// the Qwen3 keys that SDAR and SDAR-MoE share (sdar.cpp), and the Qwen2 ones of Fast-dLLM v2 and
// Dream (fast_dllm_v2.cpp).
#pragma once

#include "model/architecture.h"

namespace jet {

const Architecture& sdar_architecture();           // sdar.cpp
const Architecture& sdar_moe_architecture();       // sdar_moe.cpp
const Architecture& llada_architecture();          // llada.cpp
const Architecture& fast_dllm_v2_architecture();   // fast_dllm_v2.cpp
const Architecture& dream_architecture();          // dream.cpp
const Architecture& llada2_moe_architecture();     // llada2_moe.cpp
const Architecture& efficient_dlm_architecture();  // efficient_dlm.cpp

// SDAR's dense Qwen3 keys (sizes, norms, RoPE, block size, mask id), which SDAR-MoE reads too.
void read_qwen3_keys(const JsonObject& config, ModelConfig& c);
// The Qwen3 names of SDAR and SDAR-MoE, and the keys they refuse.
const NamingScheme& qwen3_names();
const std::vector<FixedKey>& qwen3_fixed_keys();

// The Qwen2 keys, names and refused keys that Fast-dLLM v2 and Dream share (fast_dllm_v2.cpp):
// sizes, norms, RoPE, tying; qkv bias and shifted logits on, no q/k norm.
void read_qwen2_keys(const JsonObject& config, ModelConfig& c);
const NamingScheme& qwen2_names();
const std::vector<FixedKey>& qwen2_fixed_keys();

}  // namespace jet
