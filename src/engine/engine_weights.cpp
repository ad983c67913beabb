// The Engine's weight API for RL loops: update_weights / load_weights from the caller's tensors
// (no copy), offload_parameters / free_all_resources, reload_from_path, sleep / wake_up.
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "model/tensor_source.h"

namespace jet {

namespace {

// The caller's views as a TensorSource (no copy: the data stays where the caller keeps it).
TensorMap as_tensor_map(const std::vector<WeightView>& views, const std::string& what, const Backend& backend) {
  TensorMap map(what);
  for (const WeightView& v : views) {
    TensorInfo t;
    t.name = v.name;
    t.dtype = v.dtype == WeightView::DType::F32   ? DType::F32
              : v.dtype == WeightView::DType::F16 ? DType::F16
                                                  : DType::BF16;
    t.shape = v.shape;
    int64_t n = 1;
    for (int64_t d : v.shape) {
      JET_CHECK(d >= 0, what, ": tensor '", v.name, "' has a negative dimension");
      n *= d;
    }
    JET_CHECK(v.data || n == 0, what, ": tensor '", v.name, "' has no data");
    t.data = v.data;
    t.nbytes = static_cast<size_t>(n) * dtype_size(t.dtype);
    t.on_device = v.on_device;
    if (v.on_device && t.nbytes > 0)
      backend.check_device_memory(v.data, t.nbytes, str(what, ": tensor '", v.name, "'"));
    map.add(std::move(t));
  }
  return map;
}

}  // namespace

void Engine::update_weights(const std::vector<WeightView>& weights) {
  impl_->model->use_on_this_thread();
  impl_->model->update(as_tensor_map(weights, "update_weights", impl_->model->backend()));
  if (impl_->scheduler) impl_->scheduler->forget_cached_prefixes();  // their K/V came from the old weights
}

void Engine::offload_parameters() {
  impl_->model->use_on_this_thread();
  impl_->model->release();
}

void Engine::free_all_resources() {
  impl_->model->use_on_this_thread();
  impl_->model->release();
  impl_->scheduler.reset();
  impl_->runner.reset();
}

void Engine::load_weights(const std::vector<WeightView>& weights) {
  impl_->model->use_on_this_thread();
  impl_->model->load(as_tensor_map(weights, "load_weights", impl_->model->backend()));
  if (impl_->scheduler) impl_->scheduler->forget_cached_prefixes();
}

void Engine::reload_from_path(const std::string& dir) {
  EngineOptions opts = impl_->user_options;
  opts.model = dir;
  // Free the old engine's memory first (RL loops reload a model the size of the current one);
  // if the new one fails to load, this engine has no weights and says so.
  free_all_resources();
  impl_ = std::make_unique<Impl>(opts);
}

bool Engine::has_weights() const { return impl_->model->has_weights(); }

void Engine::sleep(int level) {
  JET_CHECK(level == 1 || level == 2,
            "sleep: level must be 1 (the weights to host memory, the KV cache freed) or 2 (both freed), got ", level);
  impl_->model->use_on_this_thread();
  impl_->scheduler.reset();
  impl_->runner.reset();
  if (level == 2) {
    impl_->model->release();
  } else {
    impl_->model->sleep_weights();
  }
}

void Engine::wake_up(bool weights, bool kv_cache) {
  impl_->model->use_on_this_thread();
  if (weights) impl_->model->wake_weights();
  if (kv_cache && !impl_->runner) impl_->build_cache();
}

bool Engine::is_sleeping() const { return impl_->model->weights_asleep(); }

}  // namespace jet
