// Views of Python tensors for the engine's weight APIs: numpy arrays and anything else with the
// buffer protocol, torch / JAX tensors through DLPack (no import of either library). Data already
// contiguous in a dtype the engine takes (f32, f16, bf16) is borrowed, not copied; strided host
// tensors are gathered and f64 is narrowed to f32 in a private copy. CUDA tensors are borrowed as
// device views (contiguous, f32 / f16 / bf16), which the engine copies on its GPU.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "jet/engine.h"

namespace jet::python {

namespace py = pybind11;

using NamedTensors = std::vector<std::pair<std::string, py::object>>;

class HostWeights {
 public:
  // Throws jet::Error naming the tensor when it is neither in host nor in CUDA memory or has a
  // dtype or layout the engine cannot take, and py::type_error when it supports neither the buffer protocol nor DLPack.
  // Needs the GIL; so does destruction, which releases the Python buffers and capsules.
  explicit HostWeights(const NamedTensors& named_tensors);

  // Valid while this object lives.
  const std::vector<WeightView>& views() const { return views_; }

 private:
  enum class Element { F32, F16, BF16, F64 };
  struct Strided {  // what either protocol tells about a tensor
    Element element;
    std::vector<int64_t> shape;
    std::vector<int64_t> byte_strides;
    const std::byte* data;
    bool on_device = false;  // DLPack CUDA memory: the engine checks that it is its GPU's
  };

  Strided read_buffer(const std::string& name, const py::object& tensor);
  Strided read_dlpack(const std::string& name, const py::object& tensor);
  void add_view(const std::string& name, const Strided& tensor);

  std::vector<py::buffer_info> buffers_;  // held buffer-protocol views
  std::vector<py::object> capsules_;      // unconsumed DLPack capsules: their producer frees them
  std::vector<std::vector<std::byte>> copies_;
  std::vector<WeightView> views_;
};

}  // namespace jet::python
