// make_backend: picks the backend for a device name.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace jet {

std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads) {
  if (device == "cpu" || device == "auto") return make_cpu_backend(num_threads);
  if (device == "cuda") {
    throw Error("device 'cuda': this build has no CUDA backend yet; use device 'cpu'");
  }
  throw Error(str("unknown device '", device, "' (expected cpu, cuda or auto)"));
}

}  // namespace jet
