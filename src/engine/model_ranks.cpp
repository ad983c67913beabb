// ModelRanks: building the ranks and running whole-model work on all of them.
#include "engine/model_ranks.h"

#include "model/checkpoint.h"
#include "model/random_weights.h"

namespace jet {

ModelRanks::ModelRanks(const EngineOptions& options, std::shared_ptr<OpProfile> profile) {
  BackendGroup group = make_backend_group(options.device, options.num_threads, options.tensor_parallel_size);
  backends_ = std::move(group.backends);
  comms_ = std::move(group.comms);
  shared_memory_ = group.shared_memory;
  // Only rank 0 is timed: its all-reduces include the wait for the others.
  if (profile) backends_.front() = make_profiling_backend(std::move(backends_.front()), std::move(profile));
  threads_ = std::make_unique<RankThreads>(
      size(),
      [this] {
        for (auto& c : comms_) c->abort();
      },
      [this] {
        for (auto& c : comms_) c->reset();
      });
  const ModelConfig config = load_model_config(options.model);
  const int ranks_per_memory = shared_memory_ ? size() : 1;
  for (int r = 0; r < size(); ++r) {
    models_.push_back(std::make_unique<Model>(config, *backends_[r], options.quantization == "fp8",
                                              comms_.empty() ? nullptr : comms_[r].get(), ranks_per_memory,
                                              options.enable_expert_parallel));
  }
  if (options.load_format == "dummy") {
    load(RandomWeights(config, 0));
  } else {
    load(Checkpoint(options.model));
  }
}

ModelRanks::~ModelRanks() {
  // Each rank frees its device memory on its own thread, where its device is current.
  try {
    release();
  } catch (...) {  // a destructor must not throw; the process is tearing the engine down
  }
}

void ModelRanks::run(const std::function<void(int rank)>& task) {
  threads_->run([&](int rank) {
    backends_[rank]->use_on_this_thread();
    task(rank);
  });
}

void ModelRanks::load(const TensorSource& source) {
  run([&](int r) { models_[r]->load(source); });
}

void ModelRanks::update(const TensorSource& source) {
  run([&](int r) { models_[r]->update(source); });
}

void ModelRanks::release() {
  run([&](int r) { models_[r]->release(); });
}

void ModelRanks::sleep_weights() {
  run([&](int r) { models_[r]->sleep_weights(); });
}

void ModelRanks::wake_weights() {
  run([&](int r) { models_[r]->wake_weights(); });
}

}  // namespace jet
