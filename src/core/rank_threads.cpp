// RankThreads: the worker threads of tensor-parallel ranks 1 and up.
#include "core/rank_threads.h"

namespace jet {

RankThreads::RankThreads(int size, std::function<void()> on_failure, std::function<void()> after_failure)
    : size_(size), on_failure_(std::move(on_failure)), after_failure_(std::move(after_failure)) {
  for (int r = 1; r < size_; ++r) threads_.emplace_back([this, r] { worker(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::run_one(const std::function<void(int)>& task, int rank) {
  try {
    task(rank);
  } catch (...) {
    bool first = false;
    {
      std::lock_guard lock(mutex_);
      first = !error_;
      if (first) error_ = std::current_exception();
    }
    if (first && on_failure_) on_failure_();
  }
}

void RankThreads::worker(int rank) {
  unsigned long long seen = 0;
  for (;;) {
    const std::function<void(int)>* task = nullptr;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
    }
    run_one(*task, rank);
    {
      std::lock_guard lock(mutex_);
      --running_;
    }
    work_done_.notify_all();
  }
}

void RankThreads::run(const std::function<void(int rank)>& task) {
  if (size_ == 1) {
    task(0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    running_ = size_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  work_ready_.notify_all();
  run_one(task, 0);
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, [&] { return running_ == 0; });
    error = error_;
    task_ = nullptr;
  }
  if (!error) return;
  if (after_failure_) after_failure_();
  std::rethrow_exception(error);
}

}  // namespace jet
