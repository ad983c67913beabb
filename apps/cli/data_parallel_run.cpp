// run_data_parallel: fork, one pipe of JSON lines per rank, poll, gather in submission order.
#include "data_parallel_run.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "core/error.h"
#include "jet/data_parallel.h"

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

void RankChannel::output(size_t index, const nlohmann::json& out) const { send({{"index", index}, {"output", out}}); }
void RankChannel::progress(size_t done, size_t tokens) const { send({{"done", done}, {"tokens", tokens}}); }
void RankChannel::error(const std::string& message) const { send({{"error", message}}); }

EngineOptions rank_options(EngineOptions options, int rank, int world) {
  if (world == 1) return options;
  if (options.device == "cpu") {
    const unsigned cores =
        options.num_threads > 0 ? unsigned(options.num_threads) : std::thread::hardware_concurrency();
    options.num_threads = static_cast<int>(std::max(1u, cores / unsigned(world)));
    return options;
  }
  JET_CHECK(options.device == "auto" || options.device == "cuda", "--data-parallel ", world,
            " runs one engine on each of GPUs 0..", world - 1, ": give --device cuda (or auto, or cpu), not ",
            options.device);
  options.device = "cuda:" + std::to_string(rank);
  return options;
}

namespace {

struct Rank {
  pid_t pid = -1;
  int fd = -1;
  std::string pending;  // bytes after the last full line
  size_t done = 0, tokens = 0;
  bool finished = false;
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

void run_data_parallel(int world, const std::vector<int64_t>& costs,
                       const std::function<void(int, const std::vector<int64_t>&, const RankChannel&)>& work,
                       const std::function<void(const nlohmann::json&)>& on_output,
                       const std::function<void(size_t, size_t)>& on_progress) {
  std::fflush(nullptr);  // nothing buffered may be written twice
  std::vector<Rank> ranks(world);
  for (int r = 0; r < world; ++r) {
    int fds[2];
    JET_CHECK(pipe(fds) == 0, "--data-parallel: cannot make a pipe: ", std::strerror(errno));
    const pid_t pid = fork();
    if (pid == 0) {  // the rank: its share, then exit without running the parent's destructors
      close(fds[0]);
      for (int q = 0; q < r; ++q) close(ranks[q].fd);
      const RankChannel channel(fds[1]);
      int status = 0;
      try {
        work(r, data_parallel_share(costs, world, r), channel);
      } catch (const std::exception& e) {
        channel.error(e.what());
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

  std::map<size_t, nlohmann::json> waiting;  // outputs that arrived before an earlier one
  size_t next = 0;
  std::optional<std::string> failure;
  auto handle = [&](int r, const std::string& line) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("error")) {
      failure = str("rank ", r, ": ", j["error"].get<std::string>());
    } else if (j.contains("output")) {
      waiting.emplace(j["index"].get<size_t>(), j["output"]);
      for (auto it = waiting.find(next); it != waiting.end(); it = waiting.find(++next)) {
        on_output(it->second);
        waiting.erase(it);
      }
    } else {
      ranks[r].done = j["done"].get<size_t>();
      ranks[r].tokens = j["tokens"].get<size_t>();
      size_t done = 0, tokens = 0;
      for (const Rank& q : ranks) done += q.done, tokens += q.tokens;
      on_progress(done, tokens);
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
  JET_CHECK(waiting.empty() && next == costs.size(), "--data-parallel: ", costs.size() - next,
            " outputs never arrived");
}

}  // namespace jet::cli
