// Probe: does a denoise forward run faster as two half batches on two CUDA streams, so that one
// half's GEMMs (compute-bound) run beside the other half's attention and row kernels (memory- and
// latency-bound), than as one forward over the whole batch? Each variant is one CUDA graph,
// replayed back to back and timed with events; the variants alternate.
//
//   overlap_probe MODEL_DIR [BATCH=128] [PREFIX=128] [REPS=20]
//
// MODEL_DIR holds a config.json (random weights are made, as --load-format dummy does). Every
// sequence has PREFIX cached keys and one 4-token block of new rows (block-causal, page 64); the
// LM head runs on every row. Variants: "whole" (one forward, one stream), "halves, serial" (two
// forwards of half the sequences, one stream), "halves, overlapped" (the same two forwards, one
// per stream, forked at the start and joined at the end).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"

using namespace jet;

namespace {

constexpr int kBlock = 4;
constexpr int kPageSize = 64;

struct Half {
  ForwardBatch batch;
  Tensor ids;
  Tensor logits;
};

// Sequences [first, first + count): PREFIX cached keys each, kBlock new rows, pages of their own.
Half make_half(Backend& backend, std::vector<Buffer>& owner, int first, int count, int prefix, int pages_per_seq,
               int vocab) {
  Half h;
  BatchLayout& l = h.batch.host;
  l.num_seqs = count;
  l.num_tokens = count * kBlock;
  l.max_pages = pages_per_seq;
  l.mask_block = kBlock;
  l.seq_starts.push_back(0);
  for (int s = 0; s < count; ++s) {
    for (int j = 0; j < kBlock; ++j) l.positions.push_back(prefix + j);
    l.seq_starts.push_back((s + 1) * kBlock);
    l.cached_lens.push_back(prefix);
    for (int p = 0; p < pages_per_seq; ++p) l.page_table.push_back((first + s) * pages_per_seq + p);
  }
  backend.upload_batch(h.batch, owner);
  std::mt19937 rng(first);
  std::vector<int32_t> ids(l.num_tokens);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
  h.ids = backend.alloc_tensor(owner, DType::I32, {l.num_tokens});
  backend.upload(h.ids.data, ids.data(), ids.size() * sizeof(int32_t));
  h.logits = backend.alloc_tensor(owner, DType::F32, {l.num_tokens, vocab});
  return h;
}

#define CHECK(call) ::jet::cuda::check((call), #call)

cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& work) {
  work();  // eager first: sizes every scratch buffer
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  work();
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph);
  return exec;
}

double time_ms(cudaGraphExec_t exec, cudaStream_t stream, int reps) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaGraphLaunch(exec, stream));  // warm
  CHECK(cudaEventRecord(start, stream));
  for (int r = 0; r < reps; ++r) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / reps;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [BATCH=128] [PREFIX=128] [REPS=20]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int batch = argc > 2 ? std::atoi(argv[2]) : 128;
  const int prefix = argc > 3 ? std::atoi(argv[3]) : 128;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 20;

  cuda::CudaBackend a(0), b(0);
  std::unique_ptr<Model> model_a = load_model(dir, a, true);
  std::unique_ptr<Model> model_b = load_model(dir, b, true);
  const ModelConfig& c = model_a->config();
  const int pages_per_seq = (prefix + kBlock + kPageSize - 1) / kPageSize;
  KvCache kv = a.alloc_kv_cache(static_cast<int>(c.layers), batch * pages_per_seq, kPageSize,
                                static_cast<int>(c.kv_heads), static_cast<int>(c.head_dim));
  for (size_t l = 0; l < kv.k.size(); ++l) {
    CHECK(cudaMemset(kv.k[l].data, 0, kv.k[l].nbytes()));
    CHECK(cudaMemset(kv.v[l].data, 0, kv.v[l].nbytes()));
  }
  std::vector<Buffer> owner;
  Half whole = make_half(a, owner, 0, batch, prefix, pages_per_seq, static_cast<int>(c.vocab));
  Half first = make_half(a, owner, 0, batch / 2, prefix, pages_per_seq, static_cast<int>(c.vocab));
  Half second = make_half(a, owner, batch / 2, batch - batch / 2, prefix, pages_per_seq, static_cast<int>(c.vocab));
  CHECK(cudaDeviceSynchronize());

  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  const cudaStream_t sa = a.stream(), sb = b.stream();

  cudaGraphExec_t g_whole = capture(sa, [&] { model_a->forward(whole.batch, whole.ids, kv, &whole.logits); });
  cudaGraphExec_t g_serial = capture(sa, [&] {
    model_a->forward(first.batch, first.ids, kv, &first.logits);
    model_a->forward(second.batch, second.ids, kv, &second.logits);
  });
  cudaGraphExec_t g_overlap = capture(sa, [&] {
    CHECK(cudaEventRecord(fork, sa));
    CHECK(cudaStreamWaitEvent(sb, fork));
    model_a->forward(first.batch, first.ids, kv, &first.logits);
    model_b->forward(second.batch, second.ids, kv, &second.logits);
    CHECK(cudaEventRecord(join, sb));
    CHECK(cudaStreamWaitEvent(sa, join));
  });
  CHECK(cudaDeviceSynchronize());

  std::printf("batch %d, prefix %d, %d rows a forward, %d replays a sample\n", batch, prefix, batch * kBlock, reps);
  const char* names[] = {"whole", "halves, serial", "halves, overlapped"};
  cudaGraphExec_t graphs[] = {g_whole, g_serial, g_overlap};
  std::vector<double> best(3, 1e30);
  for (int round = 0; round < 3; ++round) {
    for (int v = 0; v < 3; ++v) {
      const double ms = time_ms(graphs[v], sa, reps);
      best[v] = std::min(best[v], ms);
      std::printf("round %d  %-20s %8.3f ms\n", round, names[v], ms);
    }
  }
  for (int v = 0; v < 3; ++v) {
    std::printf("best   %-20s %8.3f ms  (%.3f of whole)\n", names[v], best[v], best[v] / best[0]);
  }
  return 0;
}
