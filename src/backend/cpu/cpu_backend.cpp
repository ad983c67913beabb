// CpuBackend's construction (thread counts), memory (aligned host allocations, memcpy copies)
// and the default KV-cache budget; make_cpu_backend.
#include "backend/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_backend_impl.h"

namespace jet {

namespace cpu {

namespace {

// Vector loads of every op stay within one cache line at row starts.
constexpr size_t kAlignment = 64;
constexpr size_t kMaxDefaultKvBudget = size_t{8} << 30;

}  // namespace

CpuBackend::CpuBackend(int num_threads) {
  const int threads = num_threads > 0 ? num_threads : omp_get_num_procs();
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

Buffer CpuBackend::alloc(size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment (and a zero-byte request
  // still gets a real, freeable pointer).
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
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

// A quarter of physical memory (the weights and activations need the rest), capped at 8 GiB.
size_t CpuBackend::default_kv_budget_bytes() const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return size_t{1} << 30;  // unknown: a modest 1 GiB
  return std::min(static_cast<size_t>(pages) * static_cast<size_t>(page_size) / 4, kMaxDefaultKvBudget);
}

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend(int num_threads) { return std::make_unique<cpu::CpuBackend>(num_threads); }

}  // namespace jet
