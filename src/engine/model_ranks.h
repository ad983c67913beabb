// ModelRanks: the model on each tensor-parallel rank (docs/tensor_parallel.md): per rank a
// backend, the model's shard on it and a thread, the ranks joined by communicators. Whole-model
// work (loading, updates, sleep, every forward through ModelRunner) runs on all ranks at once.
// One rank is a model on its backend, run on the calling thread.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/profiling_backend.h"
#include "jet/engine.h"
#include "model/model.h"
#include "core/rank_threads.h"

namespace jet {

class ModelRanks {
 public:
  // options.tensor_parallel_size ranks on the backends options.device names (make_backend_group),
  // loaded from options.model; with `profile`, rank 0's ops are timed into it.
  ModelRanks(const EngineOptions& options, std::shared_ptr<OpProfile> profile);
  ~ModelRanks();

  int size() const { return static_cast<int>(backends_.size()); }
  Backend& backend(int rank = 0) const { return *backends_[rank]; }
  Model& model(int rank = 0) const { return *models_[rank]; }
  const ModelConfig& config() const { return models_.front()->config(); }
  // Whether the ranks' backends all take the host's memory (which each rank's budget then shares).
  bool shared_memory() const { return shared_memory_; }

  // Makes the calling thread's device calls go to rank 0's device (the thread runs rank 0).
  void use_on_this_thread() { backends_.front()->use_on_this_thread(); }
  // Runs task(rank) for every rank, each on its own thread with its device current; returns once
  // all have finished, rethrowing the first error.
  void run(const std::function<void(int rank)>& task);

  // Model's whole-model operations, on every rank.
  void load(const TensorSource& source);
  void update(const TensorSource& source);
  void release();
  void sleep_weights();
  void wake_weights();
  bool has_weights() const { return models_.front()->has_weights(); }
  bool weights_asleep() const { return models_.front()->weights_asleep(); }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  bool shared_memory_ = false;
  std::vector<std::unique_ptr<Model>> models_;
  std::unique_ptr<RankThreads> threads_;
};

}  // namespace jet
