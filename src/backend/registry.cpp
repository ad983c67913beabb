// make_backend: picks the backend for a device name, and the GPU for "cuda", "cuda:N" and a
// launcher's LOCAL_RANK.
#include <cstdlib>
#include <optional>

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
// The GPU to use out of `visible`: "cuda:N"'s N; for "cuda" / "auto", LOCAL_RANK (set by torchrun
// and accelerate for each process of a host) when it is set and more than one GPU is visible (a
// launcher that also gives each rank its GPU through CUDA_VISIBLE_DEVICES leaves one), else 0.
int cuda_index(const std::string& device, const std::optional<int>& named, int visible) {
  if (named) {
    JET_CHECK(*named < visible, "device '", device, "': ", visible, " CUDA device", visible == 1 ? " is" : "s are",
              " visible (indices 0 to ", visible - 1, "; CUDA_VISIBLE_DEVICES renumbers them)");
    return *named;
  }
  const char* local_rank = std::getenv("LOCAL_RANK");
  if (local_rank == nullptr || visible <= 1) return 0;
  const std::optional<int> rank = parse_index(local_rank);
  JET_CHECK(rank.has_value(), "LOCAL_RANK '", local_rank,
            "' is not a non-negative integer; unset it or pass device 'cuda:N'");
  JET_CHECK(*rank < visible, "LOCAL_RANK ", *rank, " but ", visible,
            " CUDA devices are visible: give each rank its GPU (CUDA_VISIBLE_DEVICES) or pass device 'cuda:N'");
  return *rank;
}
#endif

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads) {
  const std::optional<int> named = named_index(device);
  const bool names_cuda = named || device == "cuda";
  JET_CHECK(names_cuda || device == "cpu" || device == "auto", "unknown device '", device,
            "' (expected cpu, cuda, cuda:N or auto)");
#ifdef JET_HAVE_CUDA
  const int visible = device == "cpu" ? 0 : cuda_device_count();
  JET_CHECK(!names_cuda || visible > 0, "device '", device,
            "': no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES); use device 'cpu'");
  if (visible > 0) {
    const int index = cuda_index(device, named, visible);
    if (index > 0) log_info("device cuda:", index, " of ", visible, " visible");
    return make_cuda_backend(index);
  }
#else
  JET_CHECK(!names_cuda, "device '", device,
            "': this build has no CUDA backend (configure with a CUDA toolkit, JET_CUDA=ON); use device 'cpu'");
#endif
  return make_cpu_backend(num_threads);
}

}  // namespace jet
