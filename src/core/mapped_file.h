// A read-only memory-mapped file (RAII). Checkpoint tensors are zero-copy views into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jet {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws jet::Error naming the path on failure
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// The largest file read_text_file takes (tokenizer.json files are tens of megabytes).
constexpr uintmax_t kMaxTextFileBytes = uintmax_t{1} << 30;

// Reads a whole (small) regular file into a string; throws jet::Error naming the path on failure,
// for anything but a regular file (a device or a pipe would be read forever) and past
// kMaxTextFileBytes.
std::string read_text_file(const std::string& path);

}  // namespace jet
