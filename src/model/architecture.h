// The architecture layer: one Architecture per model family, each defined in its own file under
// src/model/arch/ (sdar.cpp, sdar_moe.cpp, llada.cpp, fast_dllm_v2.cpp, dream.cpp, llada2_moe.cpp). It says how the
// family is detected from config.json, which keys it reads (and the defaults where real checkpoints omit them), which
// keys switch on something the engine does not implement, its tensor names, and its default mask and stop ids. The
// shared forward (model.cpp) and loader read a family only through it. A new family that needs no new op is one file
// here, one line in architecture.cpp's table, and its tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_object.h"
#include "model/model_config.h"

namespace jet {

// How one family names its tensors. Per-layer names are layer_prefix + index + "." + suffix;
// expert names are layer_prefix + index + "." + experts_infix + expert + "." + expert suffix.
// nullptr (a field left out): the family has no such tensor. A family without k_proj and v_proj
// stores q, k and v as one fused tensor under q_proj ([(nh + 2 nkv) hd, H], LLaDA2).
struct NamingScheme {
  const char* embed = nullptr;
  const char* final_norm = nullptr;
  const char* lm_head = nullptr;
  const char* layer_prefix = nullptr;
  const char* attn_norm = nullptr;
  const char* q_proj = nullptr;
  const char* k_proj = nullptr;
  const char* v_proj = nullptr;
  const char* o_proj = nullptr;
  const char* q_bias = nullptr;
  const char* k_bias = nullptr;
  const char* v_bias = nullptr;
  const char* q_norm = nullptr;
  const char* k_norm = nullptr;
  const char* mlp_norm = nullptr;
  const char* gate_proj = nullptr;
  const char* up_proj = nullptr;
  const char* down_proj = nullptr;
  const char* router = nullptr;
  const char* router_bias = nullptr;  // the router's fp32 expert bias (LLaDA2)
  const char* experts_infix = nullptr;
  const char* shared_experts_infix = nullptr;  // + gate_proj / up_proj / down_proj (LLaDA2)
};

// A config.json key that switches on something the engine does not implement. It may be absent
// or null, or hold one of the supported values (the first is the one an error names).
struct FixedKey {
  const char* key;
  std::vector<Json> supported;
};

struct Architecture {
  const char* model_type;       // config.json's model_type
  const char* hf_architecture;  // its `architectures` entry, used when model_type is absent
  ModelFamily family;
  // Fills the family's fields of `c` from config.json (sizes, layer options: qk-norm, attention
  // mask, qkv bias, shifted logits, experts; the block size and mask id with their defaults);
  // throws jet::Error naming a missing or bad key.
  void (*read)(const JsonObject& config, ModelConfig& c);
  std::vector<FixedKey> fixed_keys;
  NamingScheme names;
  std::vector<int64_t> default_eos_ids;  // when neither generation_config.json nor config.json says
  // Whether a checkpoint without config.json's block_size takes it from a "-bN" in its name
  // (JetLM publishes SDAR-4B-Chat-b64 and its kin with the config of the block-4 model).
  bool block_size_from_name = false;
  // model_type is the autoregressive base model's ("qwen3"), which plain Qwen3 checkpoints share:
  // only the `architectures` entry identifies this architecture, and its name is the family's.
  bool model_type_is_base = false;

  // The family's name: model_type, or the architectures entry when model_type is the base's.
  const char* name() const { return model_type_is_base ? hf_architecture : model_type; }
};

// Every supported architecture, and the lookups by config.json's keys and by family.
const std::vector<const Architecture*>& architectures();
// find_architecture skips the architectures whose model_type is their base model's.
const Architecture* find_architecture(const std::string& model_type);               // nullptr if unknown
const Architecture* find_architecture_by_hf_name(const std::string& architecture);  // nullptr if unknown
const Architecture& architecture_of(ModelFamily family);
std::string supported_model_types();  // "sdar, sdar_moe, llada, ..."

// Typed key reads the architectures share; each throws jet::Error naming the file and key.
int64_t positive_int(const JsonObject& config, const std::string& key);
int64_t positive_int(const JsonObject& config, const std::string& key, int64_t fallback);
double positive_number(const JsonObject& config, const std::string& key);

}  // namespace jet
