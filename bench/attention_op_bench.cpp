// The attention op alone for a large query block, at LLaDA-8B's attention shapes (32 heads MHA of
// 128, page 256): S sequences of N new tokens each over C cached ones, timed with CUDA events, as
// a denoise forward of a B = N block runs it (bidirectional, mask_block 0) and as a causal prefill
// of the same rows runs it (mask_block 1). Prints, per case, the fastest of 20 calls in ms and
// the TFLOP/s of the attention it computes (4 * heads * head_dim FLOPs per query-key pair that
// the mask keeps), so the denoise block's efficiency reads against the prefill's in one run.
// bench/torch_attention.py times PyTorch's scaled_dot_product_attention on the same shapes.
//
//   attention_op_bench [SEQS=1,8] [NEW=1024] [CACHED=0,960]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "core/dtype.h"

using namespace jet;

namespace {

constexpr int kHeads = 32, kHeadDim = 128, kPageSize = 256, kReps = 20;

#define CHECK(call) ::jet::cuda::check((call), #call)

std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// Fills a bf16 tensor with uniform values in [-1, 1) (xorshift32).
void fill_uniform(Backend& be, const Tensor& t, uint32_t seed) {
  std::vector<uint16_t> host(static_cast<size_t>(t.numel()));
  for (uint16_t& v : host) {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    v = f32_to_bf16(static_cast<float>(seed) / 2147483648.0f - 1.0f);
  }
  be.upload(t.data, host.data(), host.size() * sizeof(uint16_t));
}

// Query-key pairs the mask keeps for one sequence of `fresh` new tokens after `cached` ones.
double kept_pairs(int64_t fresh, int64_t cached, bool causal) {
  const double prefix = static_cast<double>(fresh) * cached;
  return prefix + (causal ? fresh * (fresh + 1) / 2.0 : static_cast<double>(fresh) * fresh);
}

double fastest_ms(cuda::CudaBackend& be, const std::function<void()>& body) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  body();
  double best = 1e30;
  for (int rep = 0; rep < kReps; ++rep) {
    CHECK(cudaEventRecord(start, be.stream()));
    body();
    CHECK(cudaEventRecord(stop, be.stream()));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, static_cast<double>(ms));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int64_t> seq_counts = parse_list(argc > 1 ? argv[1] : "1,8");
  const std::vector<int64_t> new_counts = parse_list(argc > 2 ? argv[2] : "1024");
  const std::vector<int64_t> cached_counts = parse_list(argc > 3 ? argv[3] : "0,960");
  auto backend = make_cuda_backend();
  auto& be = static_cast<cuda::CudaBackend&>(*backend);
  std::printf("attention op, %d heads of %d (MHA), page %d; fastest of %d calls\n", kHeads, kHeadDim, kPageSize, kReps);
  std::printf("%5s %6s %7s %-14s %10s %10s\n", "seqs", "new", "cached", "mask", "ms", "TFLOP/s");
  for (int64_t S : seq_counts) {
    for (int64_t N : new_counts) {
      for (int64_t C : cached_counts) {
        std::vector<Buffer> owner;
        const int64_t T = S * N, pages_per_seq = (C + N + kPageSize - 1) / kPageSize;
        Tensor qkv = be.alloc_tensor(owner, DType::BF16, {T, 3 * kHeads * kHeadDim});
        Tensor out = be.alloc_tensor(owner, DType::BF16, {T, kHeads * kHeadDim});
        Tensor k_cache = be.alloc_tensor(owner, DType::BF16, {S * pages_per_seq, kPageSize, kHeads, kHeadDim});
        Tensor v_cache = be.alloc_tensor(owner, DType::BF16, {S * pages_per_seq, kPageSize, kHeads, kHeadDim});
        fill_uniform(be, qkv, 1);
        fill_uniform(be, k_cache, 2);
        fill_uniform(be, v_cache, 3);
        for (const bool causal : {false, true}) {
          ForwardBatch batch;
          BatchLayout& h = batch.host;
          h.num_seqs = static_cast<int>(S);
          h.num_tokens = static_cast<int>(T);
          h.max_pages = static_cast<int>(pages_per_seq);
          h.mask_block = causal ? 1 : 0;
          for (int64_t s = 0; s < S; ++s) {
            h.seq_starts.push_back(static_cast<int32_t>(s * N));
            h.cached_lens.push_back(static_cast<int32_t>(C));
            for (int64_t i = 0; i < N; ++i) h.positions.push_back(static_cast<int32_t>(C + i));
            for (int64_t p = 0; p < pages_per_seq; ++p)
              h.page_table.push_back(static_cast<int32_t>(s * pages_per_seq + p));
          }
          h.seq_starts.push_back(static_cast<int32_t>(T));
          be.upload_batch(batch, owner);
          const double ms = fastest_ms(
              be, [&] { be.attention(qkv, k_cache, v_cache, kPageSize, batch, kHeads, kHeads, kHeadDim, out); });
          const double flop = 4.0 * kHeads * kHeadDim * S * kept_pairs(N, C, causal);
          std::printf("%5lld %6lld %7lld %-14s %10.3f %10.1f\n", static_cast<long long>(S), static_cast<long long>(N),
                      static_cast<long long>(C), causal ? "causal" : "bidirectional", ms, flop / ms / 1e9);
        }
      }
    }
  }
  return 0;
}
