// A read-only memory-mapped file (RAII). Checkpoint tensors are zero-copy views into it.
#pragma once

#include <cstddef>
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

// Reads a whole (small) file into a string; throws jet::Error naming the path on failure.
std::string read_text_file(const std::string& path);

}  // namespace jet
