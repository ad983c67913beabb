// make_backend and make_backend_group: pick the backend for a device name, the GPU(s) for
// "cuda", "cuda:N" and a launcher's LOCAL_RANK, and join tensor-parallel ranks with communicators.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <thread>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/log.h"

#ifdef JET_HAVE_CUDA
#include "backend/cuda/cuda_factory.h"
#endif

namespace jet {

namespace {

// A non-negative decimal index of at most 6 digits, else nullopt.
std::optional<int> parse_index(const std::string& s) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(s);
}

// The GPU index "cuda:N" names, if the name has that form; throws for "cuda:" with a bad index.
std::optional<int> named_index(const std::string& device) {
  const std::string prefix = "cuda:";
  if (device.rfind(prefix, 0) != 0) return std::nullopt;
  const std::optional<int> index = parse_index(device.substr(prefix.size()));
  JET_CHECK(index.has_value(), "device '", device,
            "': the GPU index must be a non-negative integer (cuda:0, cuda:1, ...)");
  return index;
}

#ifdef JET_HAVE_CUDA
// The first of the `count` GPUs to use out of `visible`: "cuda:N"'s N; for "cuda" / "auto",
// LOCAL_RANK x count (torchrun and accelerate set LOCAL_RANK for each process of a host) when it is
// set and more GPUs than count are visible (a launcher that also gives each rank its GPUs through
// CUDA_VISIBLE_DEVICES leaves no more), else 0.
int first_cuda_index(const std::string& device, const std::optional<int>& named, int visible, int count) {
  auto check_fits = [&](int first, const std::string& from) {
    JET_CHECK(first + count <= visible, from, count == 1 ? "" : str(" and tensor_parallel_size ", count),
              " need CUDA device", count == 1 ? " " : "s ", first, count == 1 ? "" : str(" to ", first + count - 1),
              ", but ", visible, " ", visible == 1 ? "is" : "are",
              " visible (indices from 0; CUDA_VISIBLE_DEVICES renumbers them)");
    return first;
  };
  if (named) return check_fits(*named, str("device '", device, "'"));
  const char* local_rank = std::getenv("LOCAL_RANK");
  if (local_rank == nullptr || visible <= count) return 0;
  const std::optional<int> rank = parse_index(local_rank);
  JET_CHECK(rank.has_value(), "LOCAL_RANK '", local_rank,
            "' is not a non-negative integer; unset it or pass device 'cuda:N'");
  return check_fits(*rank * count, str("LOCAL_RANK ", *rank));
}
#endif

}  // namespace

BackendGroup make_backend_group(const std::string& device, int num_threads, int size) {
  JET_CHECK(size >= 1 && size <= kMaxTensorParallel, "tensor_parallel_size must be in [1, ", kMaxTensorParallel,
            "], got ", size);
  const std::optional<int> named = named_index(device);
  const bool names_cuda = named || device == "cuda";
  JET_CHECK(names_cuda || device == "cpu" || device == "auto", "unknown device '", device,
            "' (expected cpu, cuda, cuda:N or auto)");
  BackendGroup group;
#ifdef JET_HAVE_CUDA
  const int visible = device == "cpu" ? 0 : cuda_device_count();
  JET_CHECK(!names_cuda || visible > 0, "device '", device,
            "': no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES); use device 'cpu'");
  if (visible > 0) {
    const int first = first_cuda_index(device, named, visible, size);
    if (first > 0 || size > 1) {
      log_info("device", size == 1 ? str(" cuda:", first) : str("s cuda:", first, " to cuda:", first + size - 1),
               " of ", visible, " visible");
    }
    for (int r = 0; r < size; ++r) group.backends.push_back(make_cuda_backend(first + r));
    if (size > 1) {
      std::vector<Backend*> ranks;
      for (const auto& b : group.backends) ranks.push_back(b.get());
      group.comms = make_nccl_communicators(ranks);
    }
    return group;
  }
#else
  JET_CHECK(!names_cuda, "device '", device,
            "': this build has no CUDA backend (configure with a CUDA toolkit, JET_CUDA=ON); use device 'cpu'");
#endif
  // The ranks share the host's cores (0: all of them).
  const int cores = num_threads > 0 ? num_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (int r = 0; r < size; ++r) {
    group.backends.push_back(make_cpu_backend(size == 1 ? num_threads : std::max(1, cores / size)));
  }
  if (size > 1) group.comms = make_host_communicators(size);
  group.shared_memory = true;
  return group;
}

std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads) {
  return std::move(make_backend_group(device, num_threads, 1).backends.front());
}

}  // namespace jet
