// The C ABI of a DLPack tensor (the "dltensor" capsule that `obj.__dlpack__()` returns), declared
// from the DLPack specification: only the fields the weight APIs read. Layout must match the spec.
#pragma once

#include <cstdint>

namespace jet::python::dlpack {

// Device types (DLDeviceType) that hold memory the host can read directly.
constexpr int32_t kCpu = 1;
constexpr int32_t kCudaHost = 3;  // page-locked host memory
constexpr int32_t kCuda = 2;      // named in errors only

// Type codes (DLDataTypeCode).
constexpr uint8_t kFloat = 2;
constexpr uint8_t kBfloat = 4;

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null = compact row-major
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

// The capsule name of an unconsumed legacy (unversioned) DLPack tensor.
constexpr const char* kCapsuleName = "dltensor";

}  // namespace jet::python::dlpack
