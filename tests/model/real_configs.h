// config.json contents of the real checkpoints (values from reference/models.md), for tests that
// need full-size configurations without the weights.
#pragma once

#include <nlohmann/json.hpp>

namespace jet::test {

// SDAR-4B-Chat as on the HF page: no block_size / mask_token_id keys.
inline nlohmann::json sdar_4b_config() {
  return {{"architectures", {"SDARForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"bos_token_id", 151643},
          {"eos_token_id", 151643},
          {"head_dim", 128},
          {"hidden_act", "silu"},
          {"hidden_size", 2560},
          {"intermediate_size", 9728},
          {"max_position_embeddings", 32768},
          {"model_type", "sdar"},
          {"num_attention_heads", 32},
          {"num_hidden_layers", 36},
          {"num_key_value_heads", 8},
          {"rms_norm_eps", 1e-6},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000000},
          {"sliding_window", nullptr},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_sliding_window", false},
          {"vocab_size", 151936}};
}

inline nlohmann::json sdar_8b_config() {
  nlohmann::json c = sdar_4b_config();
  c["hidden_size"] = 4096;
  c["intermediate_size"] = 12288;
  c["block_size"] = 4;
  c["mask_token_id"] = 151669;
  return c;
}

inline nlohmann::json sdar_30b_moe_config() {
  nlohmann::json c = sdar_4b_config();
  c["architectures"] = {"SDARMoeForCausalLM"};
  c["model_type"] = "sdar_moe";
  c["hidden_size"] = 2048;
  c["intermediate_size"] = 6144;
  c["num_hidden_layers"] = 48;
  c["num_key_value_heads"] = 4;
  c["num_experts"] = 128;
  c["num_experts_per_tok"] = 8;
  c["moe_intermediate_size"] = 768;
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = nlohmann::json::array();
  return c;
}

// LLaDA-8B-Instruct (OLMo key names).
inline nlohmann::json llada_8b_config() {
  return {{"activation_type", "silu"},
          {"alibi", false},
          {"architectures", {"LLaDAModelLM"}},
          {"attention_layer_norm", false},
          {"block_type", "llama"},
          {"d_model", 4096},
          {"embedding_size", 126464},
          {"eos_token_id", 126081},
          {"include_bias", false},
          {"include_qkv_bias", false},
          {"input_emb_norm", false},
          {"layer_norm_type", "rms"},
          {"mask_token_id", 126336},
          {"max_sequence_length", 4096},
          {"mlp_hidden_size", 12288},
          {"mlp_ratio", 4},
          {"model_type", "llada"},
          {"multi_query_attention", nullptr},
          {"n_heads", 32},
          {"n_kv_heads", 32},
          {"n_layers", 32},
          {"pad_token_id", 126081},
          {"rms_norm_eps", 1e-5},
          {"rope", true},
          {"rope_theta", 500000.0},
          {"scale_logits", false},
          {"vocab_size", 126464},
          {"weight_tying", false}};
}

// Fast-dLLM v2 7B: Qwen2.5-7B-Instruct's keys plus bd_size; no mask_token_id key.
inline nlohmann::json fast_dllm_v2_7b_config() {
  return {{"architectures", {"Fast_dLLM_QwenForCausalLM"}},
          {"attention_dropout", 0.0},
          {"bd_size", 32},
          {"bos_token_id", 151643},
          {"eos_token_id", 151645},
          {"hidden_act", "silu"},
          {"hidden_size", 3584},
          {"intermediate_size", 18944},
          {"max_position_embeddings", 32768},
          {"max_window_layers", 28},
          {"model_type", "Fast_dLLM_Qwen"},
          {"num_attention_heads", 28},
          {"num_hidden_layers", 28},
          {"num_key_value_heads", 4},
          {"rms_norm_eps", 1e-6},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000000.0},
          {"sliding_window", 131072},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_cache", true},
          {"use_sliding_window", false},
          {"vocab_size", 152064}};
}

// Dream-v0-Instruct-7B: the same Qwen2.5-7B sizes, model_type "Dream", a mask id, no block size.
inline nlohmann::json dream_7b_config() {
  nlohmann::json c = fast_dllm_v2_7b_config();
  c.erase("bd_size");
  c["architectures"] = {"DreamModel"};
  c["model_type"] = "Dream";
  c["mask_token_id"] = 151666;
  c["pad_token_id"] = 151643;
  c["eos_token_id"] = 151643;
  return c;
}

// LLaDA2.0-mini (peers.md's table of LLaDA2 keys).
inline nlohmann::json llada2_mini_config() {
  return {{"architectures", {"LLaDA2MoeModelLM"}},
          {"model_type", "llada2_moe"},
          {"hidden_size", 2048},
          {"intermediate_size", 5120},
          {"num_hidden_layers", 20},
          {"num_attention_heads", 16},
          {"num_key_value_heads", 4},
          {"head_dim", 128},
          {"vocab_size", 157184},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 600000},
          {"partial_rotary_factor", 0.5},
          {"rotary_dim", 64},
          {"max_position_embeddings", 32768},
          {"tie_word_embeddings", false},
          {"use_qk_norm", true},
          {"use_qkv_bias", false},
          {"use_bias", false},
          {"hidden_act", "silu"},
          {"rope_scaling", nullptr},
          {"using_split_qkv_in_self_attention", false},
          {"num_experts", 256},
          {"num_experts_per_tok", 8},
          {"num_shared_experts", 1},
          {"moe_intermediate_size", 512},
          {"first_k_dense_replace", 1},
          {"score_function", "sigmoid"},
          {"moe_router_enable_expert_bias", true},
          {"router_dtype", "fp32"},
          {"n_group", 8},
          {"topk_group", 4},
          {"routed_scaling_factor", 2.5},
          {"norm_topk_prob", true},
          {"pad_token_id", 156892},
          {"eos_token_id", 156892},
          {"mask_token_id", 156895}};
}

}  // namespace jet::test
