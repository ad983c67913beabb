// The host memory an allocation can still get, for checks that refuse work too large for the
// machine before Linux grants it and kills the process once the pages are touched.
#pragma once

#include <cstddef>

namespace jet {

// MemAvailable of /proc/meminfo (what the kernel can give without swapping); 0 when unknown.
size_t host_memory_available();

}  // namespace jet
