// make_host_communicators: the in-process all-reduce of the CPU backend's tensor-parallel ranks.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/dtype.h"
#include "core/error.h"
#include "backend/communicator.h"

namespace jet {

namespace {

// What the ranks of one group share: each rank's tensor of the collective under way and a
// barrier that an abort opens.
class HostGroup {
 public:
  explicit HostGroup(int size) : size_(size), tensors_(size) {}

  int size() const { return size_; }
  void post(int rank, const Tensor& x) { tensors_[rank] = x; }
  const Tensor& tensor(int rank) const { return tensors_[rank]; }

  // Waits until every rank has arrived; throws once the group is aborted.
  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    JET_CHECK(!aborted_, "tensor parallel: another rank failed during a collective");
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation || aborted_; });
    JET_CHECK(generation_ != generation, "tensor parallel: another rank failed during a collective");
  }
  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }
  void reset() {
    std::lock_guard lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
  }

 private:
  const int size_;
  std::vector<Tensor> tensors_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

// Elements [begin, end) of every rank's tensor become their sum over the ranks, taken in rank
// order in fp32 (the exact sum of what a 16-bit dtype holds, rounded once).
void sum_share(const HostGroup& group, int64_t begin, int64_t end) {
  const DType dtype = group.tensor(0).dtype;
  std::vector<float> sum(static_cast<size_t>(end - begin));
  std::vector<float> part(sum.size());
  for (int r = 0; r < group.size(); ++r) {
    const char* src = group.tensor(r).ptr<char>() + begin * dtype_size(dtype);
    convert_to_f32(dtype, src, r == 0 ? sum.data() : part.data(), sum.size());
    if (r > 0) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
  }
  for (int r = 0; r < group.size(); ++r) {
    char* dst = group.tensor(r).ptr<char>() + begin * dtype_size(dtype);
    convert_from_f32(dtype, sum.data(), dst, sum.size());
  }
}

class HostCommunicator final : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  void all_reduce_sum(Tensor& x) override {
    group_->post(rank_, x);
    group_->arrive_and_wait();
    const Tensor& first = group_->tensor(0);
    for (int r = 0; r < size(); ++r) {
      const Tensor& t = group_->tensor(r);
      JET_ASSERT(t.dtype == first.dtype && t.numel() == first.numel(), "tensor parallel: ranks reduce unlike tensors");
    }
    // Rank r alone reads and writes its share of the elements, so the ranks never race.
    const int64_t n = first.numel();
    const int64_t share = (n + size() - 1) / size();
    const int64_t begin = std::min(n, rank_ * share), end = std::min(n, begin + share);
    if (begin < end) sum_share(*group_, begin, end);
    group_->arrive_and_wait();
  }
  void abort() override { group_->abort(); }
  void reset() override { group_->reset(); }

 private:
  std::shared_ptr<HostGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_host_communicators(int size) {
  JET_CHECK(size >= 1, "tensor parallel: a group needs at least one rank, got ", size);
  auto group = std::make_shared<HostGroup>(size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<HostCommunicator>(group, r));
  return out;
}

}  // namespace jet
