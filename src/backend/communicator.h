// Communicator: one tensor-parallel rank's end of its group's collective, the sum of a tensor over
// the ranks (docs/tensor_parallel.md). The ranks of a group live in one process, one thread each
// (core/rank_threads.h); the host implementation serves the CPU backend, NCCL the CUDA one.
#pragma once

#include <memory>
#include <vector>

#include "backend/tensor.h"

namespace jet {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // x (this rank's backend memory) becomes the element-wise sum of every rank's x, the same bits
  // on every rank, so that every rank goes on from the same activations and commits the same
  // tokens. Every rank calls it with the same shape and dtype, in the same order.
  virtual void all_reduce_sum(Tensor& x) = 0;
  // Makes a rank blocked in all_reduce_sum, or arriving there later, throw instead of waiting for
  // a rank that failed; reset() readies the group for the next collective once every rank has
  // stopped. (NCCL waits on the device, where nothing can be cut short: a no-op there.)
  virtual void abort() {}
  virtual void reset() {}
};

// The communicators of `size` ranks over host memory (the CPU backend): each rank sums its own
// share of the elements, in rank order (in fp32 for 16-bit dtypes), into every rank's tensor.
std::vector<std::unique_ptr<Communicator>> make_host_communicators(int size);

}  // namespace jet
