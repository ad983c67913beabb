// make_backend: the device names it takes (cpu, cuda, cuda:N, auto), a clear error for every other
// one, and LOCAL_RANK, which never moves a machine without a GPU off the CPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "core/error.h"

using namespace jet;

namespace {

// The message make_backend throws for `device`, or "" if it does not throw.
std::string error_of(const std::string& device) {
  try {
    make_backend(device, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Whether this machine runs "auto" on the CPU: built without CUDA, or no GPU visible.
bool cpu_only() { return make_backend("auto", 1)->name() == "cpu"; }

}  // namespace

TEST(BackendRegistry, TakesTheCpuByName) { EXPECT_EQ(make_backend("cpu", 1)->name(), "cpu"); }

TEST(BackendRegistry, RejectsUnknownDeviceNamesNamingTheChoices) {
  for (const char* device : {"gpu", "", "CUDA", "cuda0", "cpu:0"}) {
    EXPECT_NE(
        error_of(device).find("unknown device '" + std::string(device) + "' (expected cpu, cuda, cuda:N or auto)"),
        std::string::npos)
        << device << ": " << error_of(device);
  }
}

TEST(BackendRegistry, RejectsAGpuIndexThatIsNotANumber) {
  for (const char* device : {"cuda:", "cuda:x", "cuda:-1", "cuda:1.5", "cuda:1234567", "cuda: 1"}) {
    EXPECT_NE(error_of(device).find("the GPU index must be a non-negative integer"), std::string::npos)
        << device << ": " << error_of(device);
  }
}

TEST(BackendRegistry, WithoutAGpuCudaNamesAreErrorsAndLocalRankKeepsTheCpu) {
  if (!cpu_only()) GTEST_SKIP() << "a GPU is visible";
  for (const char* device : {"cuda", "cuda:0", "cuda:3"}) {
    const std::string error = error_of(device);
    EXPECT_TRUE(error.find("no CUDA device is visible") != std::string::npos ||
                error.find("this build has no CUDA backend") != std::string::npos)
        << device << ": " << error;
    EXPECT_NE(error.find("use device 'cpu'"), std::string::npos) << error;
  }
  ASSERT_EQ(setenv("LOCAL_RANK", "3", 1), 0);
  EXPECT_EQ(make_backend("auto", 1)->name(), "cpu");
  ASSERT_EQ(setenv("LOCAL_RANK", "not a rank", 1), 0);
  EXPECT_EQ(make_backend("auto", 1)->name(), "cpu");  // no GPU to pick among: the rank is not read
  unsetenv("LOCAL_RANK");
}
