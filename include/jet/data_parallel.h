// Data parallel: which prompts each of several engines (ranks) decodes. The Python package's
// launcher ranks and the CLI's --data-parallel processes share this one rule.
#pragma once

#include <cstdint>
#include <vector>

namespace jet {

// The indices (ascending) of the items rank `rank` of `world_size` takes: the largest cost first
// to the least loaded rank, ties to the lower index and rank. The same on every rank, every item
// in exactly one share, and the loads within the largest cost of each other.
std::vector<int64_t> data_parallel_share(const std::vector<int64_t>& costs, int world_size, int rank);

}  // namespace jet
