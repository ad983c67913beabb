// libjet_kernel_trace.so: a preloadable library that records the start and end of every kernel the
// program runs on the GPU, CUDA-graph replays included, through CUPTI's activity API, and writes
// them as CSV (name, grid, block, start_ns, end_ns, graph_id) to $JET_KERNEL_TRACE when the
// program's CUDA context goes away (or the program exits). Unlike Nsight Compute, which replays
// kernels one at a time, this is the real run: concurrent launches, graph replays at full speed,
// so the gaps between kernels and the clocks under load are what a user sees. CUPTI does cost
// something between graph launches (about 1 ms of idle GPU per forward, 7% of Mode 1 at batch 128,
// 2026-12-01 run 14): read the time inside forwards from the trace, throughput from an untraced run.
//
//   LD_PRELOAD=build-gpu/bench/libjet_kernel_trace.so JET_KERNEL_TRACE=trace.csv jetengine bench ...
//
// bench/kernel_profile.py --tracer cupti runs this and sums the trace by component.
#include <cupti.h>
#include <cxxabi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  std::string name;
  unsigned grid[3], block[3];
  unsigned long long start, end;
  unsigned graph_id;
};

constexpr size_t kBufferBytes = 8u << 20;

std::mutex records_mutex;
std::vector<KernelRecord> records;
bool written = false;

void check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return;
  const char* message = nullptr;
  cuptiGetResultString(result, &message);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, message ? message : "unknown CUPTI error");
  std::exit(70);
}

// "jet::cuda::(anonymous namespace)::swiglu_kernel<8>(...)" rather than its mangled name.
std::string demangled(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && plain ? plain : name;
  std::free(plain);
  return result;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(records_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    records.push_back(
        {demangled(k->name),
         {static_cast<unsigned>(k->gridX), static_cast<unsigned>(k->gridY), static_cast<unsigned>(k->gridZ)},
         {static_cast<unsigned>(k->blockX), static_cast<unsigned>(k->blockY), static_cast<unsigned>(k->blockZ)},
         k->start,
         k->end,
         k->graphId});
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "kernel_trace: CUPTI dropped %zu records\n", dropped);
  std::free(buffer);
}

// Kernel names are C++ signatures with commas: quoted, with any quote doubled (RFC 4180).
void write_csv_field(std::FILE* f, const std::string& s) {
  std::fputc('"', f);
  for (char c : s) {
    if (c == '"') std::fputc('"', f);
    std::fputc(c, f);
  }
  std::fputc('"', f);
}

void flush_and_write() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(records_mutex);
  if (written || records.empty()) return;
  const char* path = std::getenv("JET_KERNEL_TRACE");
  std::FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s: %s\n", path, std::strerror(errno));
    return;
  }
  std::fprintf(f, "name,grid,block,start_ns,end_ns,graph_id\n");
  for (const KernelRecord& r : records) {
    write_csv_field(f, r.name);
    std::fprintf(f, ",%ux%ux%u,%ux%ux%u,%llu,%llu,%u\n", r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1],
                 r.block[2], r.start, r.end, r.graph_id);
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels written to %s\n", records.size(), path);
  written = true;
}

// The context's records must be flushed before it is destroyed, which at exit happens before
// this library's own destructor runs.
void CUPTIAPI on_resource(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void*) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) flush_and_write();
}

struct Tracer {
  CUpti_SubscriberHandle subscriber = nullptr;

  Tracer() {
    if (!std::getenv("JET_KERNEL_TRACE")) {
      std::fprintf(stderr, "kernel_trace: set JET_KERNEL_TRACE to the CSV file to write\n");
      std::exit(64);
    }
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
    check(cuptiSubscribe(&subscriber, on_resource, nullptr), "cuptiSubscribe");
    check(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
          "cuptiEnableCallback");
  }
  ~Tracer() { flush_and_write(); }
};

Tracer tracer;

}  // namespace
