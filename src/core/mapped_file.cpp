// mmap-based MappedFile and a whole-file reader.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace jet {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // Non-blocking, so that a FIFO is refused below instead of waiting for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  JET_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(str("cannot read ", path, ": not a regular file"));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(str("cannot map ", path, ": ", std::strerror(err)));
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

std::string read_text_file(const std::string& path) {
  // A device or a pipe would be read forever; a text file of ours is at most tens of megabytes.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  JET_CHECK(!error, "cannot open ", path, ": ", error.message());
  JET_CHECK(std::filesystem::is_regular_file(status), path, " is not a regular file");
  const uintmax_t size = std::filesystem::file_size(path, error);
  JET_CHECK(!error && size <= kMaxTextFileBytes, path, " is ", size, " bytes, more than a text file may be (",
            kMaxTextFileBytes, ")");
  std::ifstream in(path, std::ios::binary);
  JET_CHECK(in, "cannot open ", path, ": ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace jet
