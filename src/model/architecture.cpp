// The table of architectures (each defined in src/model/arch/) and the key reads they share.
#include "model/architecture.h"

#include "core/error.h"
#include "model/arch/families.h"

namespace jet {

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> all = {
      &sdar_architecture(),  &sdar_moe_architecture(),   &llada_architecture(),        &fast_dllm_v2_architecture(),
      &dream_architecture(), &llada2_moe_architecture(), &efficient_dlm_architecture()};
  return all;
}

const Architecture* find_architecture(const std::string& model_type) {
  for (const Architecture* a : architectures()) {
    if (!a->model_type_is_base && model_type == a->model_type) return a;
  }
  return nullptr;
}

const Architecture* find_architecture_by_hf_name(const std::string& architecture) {
  for (const Architecture* a : architectures()) {
    if (architecture == a->hf_architecture) return a;
  }
  return nullptr;
}

const Architecture& architecture_of(ModelFamily family) {
  for (const Architecture* a : architectures()) {
    if (a->family == family) return *a;
  }
  throw Error(str("no architecture for family ", static_cast<int>(family)));
}

std::string supported_model_types() {
  std::string out;
  for (const Architecture* a : architectures()) {
    out += (out.empty() ? "" : ", ") + std::string(a->name());
  }
  return out;
}

int64_t positive_int(const JsonObject& config, const std::string& key) {
  int64_t v = config.get_int(key);
  JET_CHECK(v > 0, config.source(), ": key '", key, "' must be positive, got ", v);
  return v;
}

int64_t positive_int(const JsonObject& config, const std::string& key, int64_t fallback) {
  return config.has(key) ? positive_int(config, key) : fallback;
}

double positive_number(const JsonObject& config, const std::string& key) {
  double v = config.get_number(key);
  JET_CHECK(v > 0, config.source(), ": key '", key, "' must be positive, got ", v);
  return v;
}

}  // namespace jet
