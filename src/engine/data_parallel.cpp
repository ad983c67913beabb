// data_parallel_share (include/jet/data_parallel.h): longest-processing-time-first assignment.
#include "jet/data_parallel.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace jet {

std::vector<int64_t> data_parallel_share(const std::vector<int64_t>& costs, int world_size, int rank) {
  JET_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "data parallel: rank ", rank, " of ", world_size,
            " is not a rank of that world");
  std::vector<int64_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return costs[a] > costs[b]; });
  std::vector<int64_t> loads(world_size, 0);
  std::vector<int64_t> mine;
  for (int64_t index : order) {
    const auto target = std::min_element(loads.begin(), loads.end()) - loads.begin();  // the first of equals
    loads[target] += costs[index];
    if (target == rank) mine.push_back(index);
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

}  // namespace jet
