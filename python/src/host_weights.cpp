// HostWeights: reads Python tensors through the buffer protocol or DLPack into WeightViews.
#include "host_weights.h"

#include <cstring>

#include "core/error.h"
#include "dlpack_abi.h"

namespace jet::python {

namespace {

size_t element_size(int bits) { return static_cast<size_t>(bits) / 8; }

// Copies a strided tensor into `out` in row-major order, one element at a time through `copy`
// (which also converts).
template <typename CopyElement>
void gather(const std::byte* src, const int64_t* shape, const int64_t* byte_strides, size_t ndim, std::byte*& out,
            size_t out_size, const CopyElement& copy) {
  if (ndim == 0) {
    copy(src, out);
    out += out_size;
    return;
  }
  for (int64_t i = 0; i < shape[0]; ++i) {
    gather(src + i * byte_strides[0], shape + 1, byte_strides + 1, ndim - 1, out, out_size, copy);
  }
}

}  // namespace

HostWeights::HostWeights(const NamedTensors& named_tensors) {
  views_.reserve(named_tensors.size());
  for (const auto& [name, tensor] : named_tensors) {
    // numpy and other buffer exporters first: numpy refuses to export read-only arrays (memory
    // maps) through DLPack. torch tensors have no buffer protocol and take the DLPack path.
    add_view(name, PyObject_CheckBuffer(tensor.ptr()) ? read_buffer(name, tensor) : read_dlpack(name, tensor));
  }
}

HostWeights::Strided HostWeights::read_buffer(const std::string& name, const py::object& tensor) {
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(tensor).request();
  // A native or explicitly little-endian format ('@', '=', '<' prefixes) of one element.
  std::string format = info.format;
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) format.erase(0, 1);
  Element element;
  if (format == "f" && info.itemsize == 4) {
    element = Element::F32;
  } else if (format == "e" && info.itemsize == 2) {
    element = Element::F16;
  } else if (format == "d" && info.itemsize == 8) {
    element = Element::F64;
  } else {
    throw Error(str("weight ", name, ": element format '", info.format, "' (", info.itemsize,
                    " bytes) is not a float32, float16 or float64 buffer"));
  }
  Strided t{element, info.shape, info.strides, static_cast<const std::byte*>(info.ptr)};
  buffers_.push_back(std::move(info));
  return t;
}

HostWeights::Strided HostWeights::read_dlpack(const std::string& name, const py::object& tensor) {
  if (!py::hasattr(tensor, "__dlpack__")) {
    throw py::type_error(str("weight ", name, ": a ", Py_TYPE(tensor.ptr())->tp_name,
                             " supports neither the buffer protocol nor DLPack (__dlpack__)"));
  }
  py::object capsule = tensor.attr("__dlpack__")();
  // The capsule is read, not consumed: its name stays "dltensor", so the producer's capsule
  // destructor frees the tensor when the capsule object goes away.
  auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
  if (managed == nullptr) throw py::error_already_set();
  capsules_.push_back(capsule);
  const dlpack::Tensor& dl = managed->dl_tensor;

  const int32_t device = dl.device.device_type;
  JET_CHECK(device == dlpack::kCpu || device == dlpack::kCudaHost || device == dlpack::kCuda, "weight ", name,
            " is in device memory of DLPack device type ", device,
            ", which the weight APIs cannot read: move it to the CPU first (e.g. tensor.cpu())");
  const dlpack::DataType dt = dl.dtype;
  Element element;
  if (dt.lanes == 1 && dt.code == dlpack::kFloat && dt.bits == 32) {
    element = Element::F32;
  } else if (dt.lanes == 1 && dt.code == dlpack::kFloat && dt.bits == 16) {
    element = Element::F16;
  } else if (dt.lanes == 1 && dt.code == dlpack::kBfloat && dt.bits == 16) {
    element = Element::BF16;
  } else if (dt.lanes == 1 && dt.code == dlpack::kFloat && dt.bits == 64) {
    element = Element::F64;
  } else {
    throw Error(str("weight ", name, ": DLPack dtype (code ", int{dt.code}, ", ", int{dt.bits}, " bits, ", dt.lanes,
                    " lanes) is not float32, float16, bfloat16 or float64"));
  }

  Strided t{element, {}, {}, static_cast<const std::byte*>(dl.data) + dl.byte_offset, device == dlpack::kCuda};
  const size_t size = element_size(dt.bits);
  t.shape.assign(dl.shape, dl.shape + dl.ndim);
  for (int64_t d : t.shape) JET_CHECK(d >= 0, "weight ", name, ": DLPack shape has a negative dimension ", d);
  t.byte_strides.resize(dl.ndim);
  int64_t compact = static_cast<int64_t>(size);
  for (int32_t d = dl.ndim - 1; d >= 0; --d) {
    t.byte_strides[d] = dl.strides ? dl.strides[d] * static_cast<int64_t>(size) : compact;
    compact *= dl.shape[d];
  }
  return t;
}

void HostWeights::add_view(const std::string& name, const Strided& tensor) {
  static constexpr WeightView::DType kViewType[] = {WeightView::DType::F32, WeightView::DType::F16,
                                                    WeightView::DType::BF16, WeightView::DType::F32};
  static constexpr size_t kSize[] = {4, 2, 2, 8};
  const auto kind = static_cast<size_t>(tensor.element);
  WeightView view{name, kViewType[kind], tensor.shape, tensor.data, tensor.on_device};

  // Row-major contiguous: every dimension longer than 1 has the compact stride.
  bool contiguous = true;
  int64_t compact = static_cast<int64_t>(kSize[kind]);
  for (size_t d = tensor.shape.size(); d-- > 0;) {
    if (tensor.shape[d] != 1 && tensor.byte_strides[d] != compact) contiguous = false;
    compact *= tensor.shape[d];
  }
  if (tensor.on_device) {  // read by the engine on the device, as it is: only its layout is checked here
    JET_CHECK(contiguous && tensor.element != Element::F64, "weight ", name,
              " is a GPU tensor that is not contiguous or is float64: pass tensor.contiguous() in float32, "
              "float16 or bfloat16 (jetengine.LLM.update_weights does)");
    views_.push_back(std::move(view));
    return;
  }
  if (!contiguous || tensor.element == Element::F64) {
    const size_t in_size = kSize[kind];
    const size_t out_size = tensor.element == Element::F64 ? sizeof(float) : in_size;
    std::vector<std::byte>& copy = copies_.emplace_back(static_cast<size_t>(compact) / in_size * out_size);
    std::byte* out = copy.data();
    if (tensor.element == Element::F64) {
      gather(tensor.data, tensor.shape.data(), tensor.byte_strides.data(), tensor.shape.size(), out, out_size,
             [](const std::byte* src, std::byte* dst) {
               double wide;
               std::memcpy(&wide, src, sizeof wide);
               const auto narrow = static_cast<float>(wide);
               std::memcpy(dst, &narrow, sizeof narrow);
             });
    } else {
      gather(tensor.data, tensor.shape.data(), tensor.byte_strides.data(), tensor.shape.size(), out, out_size,
             [in_size](const std::byte* src, std::byte* dst) { std::memcpy(dst, src, in_size); });
    }
    view.data = copy.data();
  }
  views_.push_back(std::move(view));
}

}  // namespace jet::python
