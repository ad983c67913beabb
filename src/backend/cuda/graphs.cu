// CudaBackend::run_recorded: CUDA graphs of repeated work (the engine's denoise forward plus its
// sampling step), one per key. A key's first run is eager: it sizes every buffer the work grows,
// so its second run, which is captured, allocates nothing (an allocation would make the capture
// fail, or record an address about to change). Any allocation or free since a graph was captured
// discards every graph: the memory epoch, bumped by alloc() and by every Buffer's deleter, says so.
#include <list>
#include <unordered_map>

#include "backend/cuda/cuda_backend.h"
#include "core/log.h"

namespace jet::cuda {

namespace {

// Graphs kept at most; the least recently replayed goes first. Each holds a few hundred kernel
// nodes. Streaming keeps a few hundred shapes in use (sequences join and leave, and a varying
// number of them save a block in each forward).
constexpr size_t kMaxGraphs = 256;

}  // namespace

struct CudaBackend::GraphCache {
  struct Entry {
    int eager_runs = 0;
    bool eager_only = false;  // its capture failed: it runs eagerly until the graphs are dropped
    cudaGraphExec_t exec = nullptr;
    std::list<std::string>::iterator lru;  // valid while exec is set
  };
  std::unordered_map<std::string, Entry> entries;
  std::list<std::string> lru;  // front: most recently replayed
  uint64_t epoch = 0;          // memory epoch the graphs were captured in

  ~GraphCache() { clear(); }

  void clear() {
    for (auto& [key, e] : entries) {
      if (e.exec) cudaGraphExecDestroy(e.exec);
    }
    entries.clear();
    lru.clear();
  }

  void evict_oldest() {
    Entry& e = entries.at(lru.back());
    cudaGraphExecDestroy(e.exec);
    e.exec = nullptr;
    lru.pop_back();
  }
};

void CudaBackend::GraphCacheDeleter::operator()(GraphCache* cache) const { delete cache; }

void CudaBackend::run_recorded(const std::string& key, const std::function<void()>& work) {
  if (!graphs_) graphs_.reset(new GraphCache);
  GraphCache& cache = *graphs_;
  if (cache.epoch != *memory_epoch_) {
    cache.clear();
    cache.epoch = *memory_epoch_;
  }
  GraphCache::Entry& entry = cache.entries[key];
  if (entry.exec) {
    throw_decode_fault();  // what an eager denoise_step checks first, for the replayed one
    cache.lru.splice(cache.lru.begin(), cache.lru, entry.lru);
    JET_CUDA_CHECK(cudaGraphLaunch(entry.exec, stream_));
    return;
  }
  if (entry.eager_only || entry.eager_runs++ == 0) {
    work();
    return;
  }

  JET_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    work();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream_, &partial);
    if (partial) cudaGraphDestroy(partial);
    cudaGetLastError();
    throw;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t captured = cudaStreamEndCapture(stream_, &graph);
  if (captured != cudaSuccess || cache.epoch != *memory_epoch_) {
    // Something in the work is not capturable here (or allocated after all): nothing ran yet,
    // so run it eagerly, and keep this key eager.
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    if (captured != cudaSuccess) {
      log_warn("CUDA graph capture failed (", cudaGetErrorName(captured), "): the forwards of shape '", key,
               "' run without a graph");
    }
    entry.eager_only = true;
    work();
    return;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  JET_CUDA_CHECK(instantiated);
  if (cache.lru.size() >= kMaxGraphs) cache.evict_oldest();
  cache.lru.push_front(key);
  entry.exec = exec;
  entry.lru = cache.lru.begin();
  JET_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
}

}  // namespace jet::cuda
