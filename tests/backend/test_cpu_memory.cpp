// The CPU backend refuses an allocation the system cannot give (Linux would grant it and kill the
// process once its pages are touched), naming the sizes; what fits is still granted.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"
#include "core/error.h"
#include "core/host_memory.h"

using namespace jet;

TEST(CpuMemory, AnAllocationBeyondTheAvailableMemoryIsAnError) {
  const size_t available = host_memory_available();
  if (available == 0) GTEST_SKIP() << "no MemAvailable in /proc/meminfo";
  auto backend = make_backend("cpu", 1);
  try {
    backend->alloc(available + (size_t{4} << 30));
    FAIL() << "an allocation 4 GiB beyond MemAvailable was granted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB of host memory is available (MemAvailable)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(backend->alloc(size_t{128} << 20).bytes(), size_t{128} << 20);
}
