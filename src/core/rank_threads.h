// RankThreads: a thread per tensor-parallel rank, which runs that rank's part of every piece of
// engine work, so that the ranks reach their collectives together (NCCL needs each rank's calls
// on a thread of its own, or grouped; the host all-reduce is a barrier).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace jet {

class RankThreads {
 public:
  // Rank 0 runs on the calling thread, ranks 1 to size - 1 on threads of their own that live as
  // long as this object. on_failure runs when a rank's task throws, so that ranks waiting in a
  // collective for it give up (Communicator::abort); after_failure once every rank has stopped.
  RankThreads(int size, std::function<void()> on_failure = {}, std::function<void()> after_failure = {});
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int size() const { return size_; }
  // Runs task(rank) for every rank at once and returns when all have finished. When tasks throw,
  // rethrows the first error (the one that made the others give up).
  void run(const std::function<void(int rank)>& task);

 private:
  void worker(int rank);
  // Runs task(rank), recording its error, if any, and starting the others' abort.
  void run_one(const std::function<void(int)>& task, int rank);

  const int size_;
  std::function<void()> on_failure_, after_failure_;
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  const std::function<void(int)>* task_ = nullptr;
  unsigned long long generation_ = 0;
  int running_ = 0;  // worker ranks still on the current task
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace jet
