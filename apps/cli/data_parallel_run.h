// `--data-parallel N` for `jetengine generate` and `bench`: N engine processes, one per GPU (or N
// on the CPU), forked before any engine exists, each reporting to the parent through a pipe.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "jet/engine.h"

namespace jet::cli {

// What a rank's process has to reach the others: messages to the parent, and a barrier.
class RankChannel {
 public:
  RankChannel(int fd, void* barrier) : fd_(fd), barrier_(barrier) {}
  // To the parent's on_message, in order.
  void send(const nlohmann::json& message) const;
  // Returns once every rank has called it as often (benchmarks start their timed work together).
  void wait_for_all() const;

 private:
  int fd_;
  void* barrier_;
};

// The engine options of rank `rank` of `world`: GPU `rank` for "auto" / "cuda" (GPUs from rank x T
// with tensor_parallel_size T), the CPU's cores split between the ranks for "cpu"; an explicit
// "cuda:N" with world > 1 is an error.
EngineOptions rank_options(EngineOptions options, int rank, int world);

// Forks `world` processes; rank r runs work(r, channel). The parent calls on_message(rank,
// message) for each message as it arrives. If a rank fails (throws, or ends early), the others
// are stopped and the error is thrown, naming the rank. Returns when every rank has finished.
void run_data_parallel(int world, const std::function<void(int rank, const RankChannel&)>& work,
                       const std::function<void(int rank, const nlohmann::json&)>& on_message);

}  // namespace jet::cli
