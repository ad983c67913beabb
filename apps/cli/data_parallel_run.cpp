// run_data_parallel: fork, one pipe of JSON lines per rank, poll; a process-shared barrier.
#include "data_parallel_run.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"

namespace jet::cli {

void RankChannel::send(const nlohmann::json& line) const {
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);  // the parent is gone: nobody is left to tell
    written += static_cast<size_t>(n);
  }
}

void RankChannel::wait_for_all() const { pthread_barrier_wait(static_cast<pthread_barrier_t*>(barrier_)); }

EngineOptions rank_options(EngineOptions options, int rank, int world) {
  if (world == 1) return options;
  if (options.device == "cpu") {
    const unsigned cores =
        options.num_threads > 0 ? unsigned(options.num_threads) : std::thread::hardware_concurrency();
    options.num_threads = static_cast<int>(std::max(1u, cores / unsigned(world)));
    return options;
  }
  const int tp = options.tensor_parallel_size;
  JET_CHECK(options.device == "auto" || options.device == "cuda", "--data-parallel ", world,
            " runs one engine on each of GPUs 0..", world * tp - 1, tp > 1 ? str(" (", tp, " each)") : "",
            ": give --device cuda (or auto, or cpu), not ", options.device);
  options.device = "cuda:" + std::to_string(rank * tp);  // its tensor-parallel ranks take the next tp - 1
  return options;
}

namespace {

struct Rank {
  pid_t pid = -1;
  int fd = -1;
  std::string pending;  // bytes after the last full line
  bool finished = false;
};

// A barrier of `count` processes in memory the forked ranks share; unmapped when this goes.
class SharedBarrier {
 public:
  explicit SharedBarrier(unsigned count) {
    void* p = mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    JET_CHECK(p != MAP_FAILED, "--data-parallel: cannot map shared memory: ", std::strerror(errno));
    barrier_ = static_cast<pthread_barrier_t*>(p);
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(barrier_, &attr, count);
    pthread_barrierattr_destroy(&attr);
  }
  ~SharedBarrier() {
    pthread_barrier_destroy(barrier_);
    munmap(barrier_, sizeof(pthread_barrier_t));
  }
  SharedBarrier(const SharedBarrier&) = delete;
  SharedBarrier& operator=(const SharedBarrier&) = delete;
  void* get() const { return barrier_; }

 private:
  pthread_barrier_t* barrier_;
};

void stop_all(std::vector<Rank>& ranks) {
  for (Rank& r : ranks) {
    if (r.pid > 0) kill(r.pid, SIGTERM);
  }
  for (Rank& r : ranks) {
    if (r.pid > 0) waitpid(r.pid, nullptr, 0);
    if (r.fd >= 0) close(r.fd);
    r.pid = r.fd = -1;
  }
}

}  // namespace

void run_data_parallel(int world, const std::function<void(int, const RankChannel&)>& work,
                       const std::function<void(int, const nlohmann::json&)>& on_message) {
  std::fflush(nullptr);  // nothing buffered may be written twice
  const SharedBarrier barrier(static_cast<unsigned>(world));
  std::vector<Rank> ranks(world);
  for (int r = 0; r < world; ++r) {
    int fds[2];
    JET_CHECK(pipe(fds) == 0, "--data-parallel: cannot make a pipe: ", std::strerror(errno));
    const pid_t pid = fork();
    if (pid == 0) {  // the rank: its share, then exit without running the parent's destructors
      close(fds[0]);
      for (int q = 0; q < r; ++q) close(ranks[q].fd);
      const RankChannel channel(fds[1], barrier.get());
      int status = 0;
      try {
        work(r, channel);
      } catch (const std::exception& e) {
        channel.send({{"error", e.what()}});
        status = 1;
      }
      std::fflush(nullptr);
      _exit(status);
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      stop_all(ranks);
      throw Error(str("--data-parallel: cannot start rank ", r, ": ", std::strerror(errno)));
    }
    ranks[r].pid = pid;
    ranks[r].fd = fds[0];
  }

  std::optional<std::string> failure;
  auto handle = [&](int r, const std::string& line) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.is_object() && j.contains("error")) {
      failure = str("rank ", r, ": ", j["error"].get<std::string>());
    } else {
      try {
        on_message(r, j);
      } catch (const std::exception& e) {  // the ranks are stopped below either way
        failure = e.what();
      }
    }
  };
  for (size_t open = ranks.size(); open > 0 && !failure;) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int r = 0; r < world; ++r) {
      if (!ranks[r].finished) fds.push_back({ranks[r].fd, POLLIN, 0}), which.push_back(r);
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      failure = str("--data-parallel: poll failed: ", std::strerror(errno));
      break;
    }
    for (size_t k = 0; k < fds.size() && !failure; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Rank& rank = ranks[which[k]];
      char buffer[1 << 16];
      const ssize_t n = read(rank.fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // the rank closed its pipe: it has exited
        rank.finished = true;
        --open;
        int status = 0;
        waitpid(rank.pid, &status, 0);
        rank.pid = -1;
        if (!failure && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
          failure =
              str("rank ", which[k], " ended without finishing its share (",
                  WIFSIGNALED(status) ? str("signal ", WTERMSIG(status)) : str("exit ", WEXITSTATUS(status)), ")");
        }
        continue;
      }
      rank.pending.append(buffer, static_cast<size_t>(n));
      for (size_t end; !failure && (end = rank.pending.find('\n')) != std::string::npos;) {
        const std::string line = rank.pending.substr(0, end);
        rank.pending.erase(0, end + 1);
        handle(which[k], line);
      }
    }
  }
  stop_all(ranks);
  if (failure) throw Error(*failure);
}

}  // namespace jet::cli
