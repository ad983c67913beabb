// `--data-parallel N` for `jetengine generate`: N engine processes, one per GPU (or N on the CPU),
// each decoding its share of the prompts, with the outputs gathered in submission order.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jet/engine.h"

namespace jet::cli {

// What one rank's process reports to the parent: an output (with its index in the whole list),
// progress (prompts done and tokens committed on that rank), or an error that ends the run.
class RankChannel {
 public:
  explicit RankChannel(int fd) : fd_(fd) {}
  void output(size_t index, const nlohmann::json& out) const;
  void progress(size_t done, size_t tokens) const;
  void error(const std::string& message) const;

 private:
  void send(const nlohmann::json& line) const;
  int fd_;
};

// The engine options of rank `rank` of `world`: GPU `rank` for "auto" / "cuda", the CPU's cores
// split between the ranks for "cpu"; an explicit "cuda:N" with world > 1 is an error.
EngineOptions rank_options(EngineOptions options, int rank, int world);

// Forks `world` processes before any engine exists; rank r runs work(r, its share of `costs`
// (include/jet/data_parallel.h), its channel). Calls on_output(index, json) in submission order
// and on_progress(done, tokens) summed over the ranks. If a rank fails, the others are stopped and
// the error is thrown, naming the rank. Returns when every rank has finished.
void run_data_parallel(int world, const std::vector<int64_t>& costs,
                       const std::function<void(int rank, const std::vector<int64_t>& share, const RankChannel&)>& work,
                       const std::function<void(const nlohmann::json&)>& on_output,
                       const std::function<void(size_t done, size_t tokens)>& on_progress);

}  // namespace jet::cli
