// host_memory_available: MemAvailable read from /proc/meminfo.
#include "core/host_memory.h"

#include <fstream>
#include <limits>
#include <string>

namespace jet {

size_t host_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

}  // namespace jet
