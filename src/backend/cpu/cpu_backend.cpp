// CpuBackend's construction (thread counts), memory (aligned host allocations, refused when the
// system cannot give them; memcpy copies) and the default KV-cache budget; make_cpu_backend.
#include "backend/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_backend_impl.h"
#include "core/host_memory.h"

namespace jet {

namespace cpu {

namespace {

// Vector loads of every op stay within one cache line at row starts.
constexpr size_t kAlignment = 64;
constexpr size_t kMaxDefaultKvBudget = size_t{8} << 30;

// Allocations from this size on are checked against the memory the system can still give:
// Linux grants more than it has and kills the process when the pages are touched, which for a
// model too large for the machine would be a silent death instead of an error.
constexpr size_t kCheckedAllocation = size_t{64} << 20;

std::atomic<int> g_thread_count{1};

}  // namespace

int thread_count() { return g_thread_count.load(std::memory_order_relaxed); }

CpuBackend::CpuBackend(int num_threads) {
  g_thread_count = num_threads > 0 ? num_threads : omp_get_num_procs();
  // One thread pool only: OpenBLAS's own threads would compete with OpenMP's, which keep
  // spinning after each parallel region (measured on 2 cores: paged attention 15x slower), so every
  // BLAS call is single-threaded and gemm splits products over OpenMP threads itself.
  openblas_set_num_threads(1);
}

Buffer CpuBackend::alloc(size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment (and a zero-byte request
  // still gets a real, freeable pointer).
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (bytes >= kCheckedAllocation) {
    const size_t available = host_memory_available();
    JET_CHECK(available == 0 || bytes <= available, "cpu backend: cannot allocate ", bytes >> 20, " MiB: only ",
              available >> 20, " MiB of host memory is available (MemAvailable); the weights (in f32 on the ",
              "CPU) and the KV cache must fit in memory");
  }
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  JET_CHECK(ptr != nullptr, "cpu backend: out of host memory allocating ", bytes, " bytes");
  return Buffer(ptr, bytes, [](void* p) { std::free(p); });
}

void CpuBackend::upload(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuBackend::download(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

size_t CpuBackend::available_memory_bytes() const { return host_memory_available(); }

// A quarter of physical memory (the weights and activations need the rest), capped at 8 GiB. Host
// memory is shared with everything else on the machine, so no utilisation share applies.
size_t CpuBackend::default_kv_budget_bytes(double /*memory_utilization*/) const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return size_t{1} << 30;  // unknown: a modest 1 GiB
  return std::min(static_cast<size_t>(pages) * static_cast<size_t>(page_size) / 4, kMaxDefaultKvBudget);
}

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend(int num_threads) { return std::make_unique<cpu::CpuBackend>(num_threads); }

}  // namespace jet
