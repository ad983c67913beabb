// make_backend: picks the backend for a device name.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/log.h"

#ifdef JET_HAVE_CUDA
#include "backend/cuda/cuda_factory.h"
#endif

namespace jet {

std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads) {
#ifdef JET_HAVE_CUDA
  if (device == "cuda" || (device == "auto" && cuda_device_available())) return make_cuda_backend();
#else
  JET_CHECK(device != "cuda",
            "device 'cuda': this build has no CUDA backend (configure with a CUDA toolkit, "
            "JET_CUDA=ON); use device 'cpu'");
#endif
  if (device == "cpu" || device == "auto") return make_cpu_backend(num_threads);
  throw Error(str("unknown device '", device, "' (expected cpu, cuda or auto)"));
}

}  // namespace jet
