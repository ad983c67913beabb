// Reader of one .safetensors file: the header is parsed and fully validated, tensors are
// zero-copy views into the memory-mapped file.
//
// Format: 8-byte little-endian header length N, N bytes of JSON header, then the data section.
// The header maps tensor name -> {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the data section); an optional "__metadata__" entry (string -> string) is ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace jet {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // aligned to the element size (the reader rejects misaligned tensors)
  size_t nbytes;
  bool on_device = false;  // data is backend memory (a device tensor handed to the weight APIs)

  int64_t numel() const;
};

// Parses and validates the header of a safetensors image held in `bytes` (the whole file). The
// returned views point into `bytes`; `source` names the file in errors. Throws jet::Error (and
// nothing else) on any malformed input; this is the function the fuzzer drives.
std::vector<TensorInfo> parse_safetensors(const unsigned char* bytes, size_t size, const std::string& source);

// Dtypes a tensor may have, in the spelling of the format; the ones the reader accepts.
inline constexpr const char* kSupportedSafetensorsDtypes = "BF16, F16, F32, I32, F8_E4M3";

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // maps and validates the file

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* find(const std::string& name) const;               // nullptr when absent
  const TensorInfo& get(const std::string& name) const;                // throws naming file and tensor
  std::vector<std::string> names() const;                              // sorted

 private:
  MappedFile file_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace jet
