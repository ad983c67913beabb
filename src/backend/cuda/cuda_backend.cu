// CudaBackend's life cycle (device, stream, cuBLASLt handle, GEMM workspace and split counters,
// made once), device memory and host<->device copies, the default KV-cache budget, the CUDA
// error checks, the JET_PDL switch (kernel_util.cuh), and the factory functions registry.cpp calls.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_factory.h"
#include "backend/cuda/gemm_plans.h"
#include "backend/cuda/kernel_util.cuh"

namespace jet {

namespace cuda {

namespace {

// cuBLASLt's guidance for Hopper: 32 MiB lets every algorithm it may pick run.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;
// The few-rows matmul's counters (one per column tile it splits; it splits under 4 waves of tiles).
constexpr int64_t kSplitCounters = 4096;
// What stays free beside the KV cache for activations, MoE scratch and CUDA graph pools.
constexpr size_t kKvMargin = size_t{1} << 30;

// Releases what the constructor made, in reverse order; errors are ignored (this runs from the
// destructor and from a constructor that is already throwing).
void release(cudaStream_t stream, cublasLtHandle_t lt, void* workspace) {
  if (stream) cudaStreamSynchronize(stream);
  if (lt) cublasLtDestroy(lt);
  if (workspace) cudaFree(workspace);
  if (stream) cudaStreamDestroy(stream);
}

}  // namespace

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(str("CUDA error ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ") in ", what));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(
        str("cuBLASLt error ", cublasLtGetStatusName(status), " (", cublasLtGetStatusString(status), ") in ", what));
  }
}

bool programmatic_launch_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("JET_PDL");
    return value == nullptr || std::string(value) != "0";
  }();
  return enabled;
}

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the error, it is an answer here
    return 0;
  }
  return count;
}

CudaBackend::CudaBackend(int device) : device_(device) {
  try {
    JET_CUDA_CHECK(cudaSetDevice(device_));
    // Non-blocking: the legacy default stream (used by stray library calls) never serialises ours.
    JET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    JET_CUDA_CHECK(cublasLtCreate(&lt_));
    // The counters sit after the workspace, which other ops borrow as scratch, and stay zero.
    JET_CUDA_CHECK(cudaMalloc(&workspace_, kGemmWorkspaceBytes + kSplitCounters * sizeof(int)));
    workspace_bytes_ = kGemmWorkspaceBytes;
    split_counters_ = reinterpret_cast<int*>(static_cast<char*>(workspace_) + kGemmWorkspaceBytes);
    num_split_counters_ = kSplitCounters;
    JET_CUDA_CHECK(cudaMemset(split_counters_, 0, kSplitCounters * sizeof(int)));
    gemm_plans_ = std::make_unique<GemmPlans>(lt_, workspace_, workspace_bytes_);
  } catch (...) {
    release(stream_, lt_, workspace_);
    throw;
  }
}

CudaBackend::~CudaBackend() {
  graphs_.reset();
  gemm_plans_.reset();
  release(stream_, lt_, workspace_);
}

// "cuda", like the device option that selects this backend ("cpu" names the CPU backend).
std::string CudaBackend::name() const { return "cuda"; }

void CudaBackend::use_on_this_thread() { JET_CUDA_CHECK(cudaSetDevice(device_)); }

Buffer CudaBackend::alloc(size_t bytes) {
  if (bytes == 0) return Buffer(nullptr, 0, [](void*) {});  // an empty tensor needs no memory
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // an out-of-memory error is not sticky; clear it so later calls still work
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw Error(str("cuda backend: cannot allocate ", bytes, " bytes of device memory (", cudaGetErrorName(status),
                    "; ", free_bytes, " of ", total_bytes, " bytes free)"));
  }
  ++*memory_epoch_;
  *allocated_bytes_ += bytes;
  return Buffer(ptr, bytes, [epoch = memory_epoch_, allocated = allocated_bytes_, bytes](void* p) {
    cudaFree(p);
    ++*epoch;
    *allocated -= bytes;
  });
}

// Pinned, so that the copies run at the link's rate; pageable memory when the system will not pin
// that much.
Buffer CudaBackend::alloc_host(size_t bytes) {
  void* ptr = nullptr;
  if (cudaMallocHost(&ptr, bytes ? bytes : 1) == cudaSuccess)
    return Buffer(ptr, bytes, [](void* p) { cudaFreeHost(p); });
  cudaGetLastError();
  return Backend::alloc_host(bytes);
}

void CudaBackend::check_device_memory(const void* p, size_t bytes, const std::string& what) const {
  cudaPointerAttributes at{};
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) cudaGetLastError();
  JET_CHECK(at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged, what,
            " is not CUDA device memory of this process (a pointer CUDA does not know)");
  JET_CHECK(at.device == device_, what, " is in the memory of GPU ", at.device, ", and the engine runs on GPU ",
            device_, ": move it there (tensor.to('cuda:", device_, "')) or to the CPU");
  (void)bytes;
}

// The tensor's producer (a trainer's stream) may still be writing it: wait for the whole device
// first. The caller may free `src` as soon as this returns.
void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  JET_CUDA_CHECK(cudaDeviceSynchronize());
  JET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  JET_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  JET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  // The caller may free or reuse `src` as soon as this returns (the model loader's staging
  // buffers do), and a copy from pageable memory may still be reading it: wait for it.
  JET_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::download(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  JET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  JET_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::synchronize() { JET_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

size_t CudaBackend::available_memory_bytes() const {
  size_t free_bytes = 0, total_bytes = 0;
  JET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

// The engine may fill memory_utilization of the device's memory: the cache gets that share less
// what this backend holds already (the weights, our workspaces), never more than is free (other
// processes keep theirs), less the margin. Two engines of 0.45 each share one GPU.
size_t CudaBackend::default_kv_budget_bytes(double memory_utilization) const {
  size_t free_bytes = 0, total_bytes = 0;
  JET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double share = static_cast<double>(total_bytes) * memory_utilization;
  const double held = static_cast<double>(*allocated_bytes_ + workspace_bytes_);
  const double budget = std::min(share - held, static_cast<double>(free_bytes)) - static_cast<double>(kKvMargin);
  return budget > 0 ? static_cast<size_t>(budget) : 0;
}

}  // namespace cuda

int cuda_device_count() { return cuda::device_count(); }

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<cuda::CudaBackend>(device); }

}  // namespace jet
