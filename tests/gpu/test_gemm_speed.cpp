// The matmul op against its floor: SDAR-4B's GEMMs (reference/models.md §1.1: hidden 2560,
// q/k/v 32/8/8 heads of 128, MLP 9728, vocab 151936) through cuBLASLt alone with the algorithm
// its heuristic ranks first, against the same products through CudaBackend::matmul, both timed
// back to back with CUDA events over 36 layers at several row counts M. Fails when the op is
// more than 5% slower than the floor. Also prints what the fastest of the heuristic's top
// algorithms would give (timed one by one), i.e. what per-shape autotuning could still win.
// Then the same layers under FP8 (INFO lines, no bar): matmul_fp8 on bf16 x, its quantize kernel
// included, against cuBLASLt's FP8 GEMM alone on codes quantized beforehand (outer-vector
// scales): the FP8 GEMM floor bench/results quotes.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <iterator>

#include "backend/cuda/cuda_backend.h"
#include "core/fp8.h"
#include "gpu_test_util.h"

using namespace jet;
using namespace jet::gpu_test;

namespace {

constexpr int kLayers = 36;
constexpr int kWeightSets = 8;  // distinct weights cycled over the layers: 1.6 GB, far beyond L2
constexpr int kTimedReps = 10;
constexpr int kCandidates = 8;  // heuristic results timed for the autotuning estimate
constexpr double kMaxOverhead = 1.05;
constexpr int64_t kHidden = 2560;

struct Shape {
  const char* name;
  int64_t n, k;
};
constexpr Shape kLayerShapes[] = {
    {"qkv", 6144, kHidden}, {"o", kHidden, 4096}, {"gate_up", 19456, kHidden}, {"down", kHidden, 9728}};

#define CHECK_CUDA(call) ::jet::cuda::check((call), #call)

// The floor: one product's descriptors and the heuristic's ranked algorithms, made once.
class RawGemm {
 public:
  // bf16 operands, or e4m3 ones (in_type CUDA_R_8F_E4M3) with outer-vector scales [n] and [m].
  RawGemm(cublasLtHandle_t lt, int64_t m, int64_t n, int64_t k, cudaDataType_t out_type, size_t workspace_bytes,
          cudaDataType_t in_type = CUDA_R_16BF, const float* w_scales = nullptr, const float* x_scales = nullptr)
      : lt_(lt) {
    CHECK_CUDA(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T;
    CHECK_CUDA(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    if (in_type == CUDA_R_8F_E4M3) {
      const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      CHECK_CUDA(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
      CHECK_CUDA(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
      CHECK_CUDA(
          cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)));
      CHECK_CUDA(
          cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales)));
    }
    CHECK_CUDA(cublasLtMatrixLayoutCreate(&a_, in_type, k, n, k));
    CHECK_CUDA(cublasLtMatrixLayoutCreate(&b_, in_type, k, m, k));
    CHECK_CUDA(cublasLtMatrixLayoutCreate(&c_, out_type, n, m, n));
    cublasLtMatmulPreference_t pref;
    CHECK_CUDA(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t bytes = workspace_bytes;
    CHECK_CUDA(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)));
    cublasLtMatmulHeuristicResult_t results[kCandidates];
    int found = 0;
    CHECK_CUDA(cublasLtMatmulAlgoGetHeuristic(lt_, op_, a_, b_, c_, c_, pref, kCandidates, results, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    JET_CHECK(found > 0, "no cuBLASLt algorithm for ", m, "x", n, "x", k);
    for (int i = 0; i < found; ++i) algos_.push_back(results[i].algo);
  }
  ~RawGemm() {
    cublasLtMatrixLayoutDestroy(c_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatmulDescDestroy(op_);
  }
  RawGemm(const RawGemm&) = delete;
  RawGemm& operator=(const RawGemm&) = delete;

  int algo_count() const { return static_cast<int>(algos_.size()); }
  void run(int algo, const void* w, const void* x, void* out, void* workspace, size_t workspace_bytes,
           cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    CHECK_CUDA(cublasLtMatmul(lt_, op_, &alpha, w, a_, x, b_, &beta, out, c_, out, c_, &algos_[algo], workspace,
                              workspace_bytes, stream));
  }

 private:
  cublasLtHandle_t lt_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos_;
};

// Milliseconds of one run of `body`, on the stream.
template <typename F>
double elapsed_ms(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, F&& body) {
  CHECK_CUDA(cudaEventRecord(start, stream));
  body();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

// Fastest of kTimedReps runs of each body after one warm-up each, the bodies alternating so that
// clock and temperature drift reach both alike. Milliseconds.
template <typename... F>
std::array<double, sizeof...(F)> fastest_ms(cudaStream_t stream, F&&... bodies) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  (bodies(), ...);
  std::array<double, sizeof...(F)> best;
  best.fill(1e30);
  for (int rep = 0; rep < kTimedReps; ++rep) {
    size_t i = 0;
    ((best[i] = std::min(best[i], elapsed_ms(stream, start, stop, bodies)), ++i), ...);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// Fills a bf16 tensor with pseudo-random values in [-1, 1) from one host pattern buffer.
void fill_random(Backend& be, const Tensor& t, const std::vector<uint16_t>& pattern) {
  const size_t total = static_cast<size_t>(t.numel());
  for (size_t done = 0; done < total; done += pattern.size()) {
    const size_t n = std::min(pattern.size(), total - done);
    be.upload(t.ptr<uint16_t>() + done, pattern.data(), n * sizeof(uint16_t));
  }
}

// Fills an e4m3 tensor with codes of the pattern's values times 400 (finite, no NaN codes).
void fill_codes(Backend& be, const Tensor& t, const std::vector<uint16_t>& pattern) {
  std::vector<uint8_t> codes(pattern.size());
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = f32_to_e4m3(bf16_to_f32(pattern[i]) * 400.0f);
  const size_t total = static_cast<size_t>(t.numel());
  for (size_t done = 0; done < total; done += codes.size()) {
    const size_t n = std::min(codes.size(), total - done);
    be.upload(t.ptr<uint8_t>() + done, codes.data(), n);
  }
}

struct Timing {
  double op_ms, floor_ms, tuned_ms;
};

void report_timing(Report& report, const std::string& name, const Timing& t, double flop) {
  char detail[256];
  std::snprintf(detail, sizeof detail,
                "op %.3f ms (%.0f TFLOP/s), cuBLASLt floor %.3f ms (%.0f TFLOP/s), op/floor %.3f; best of top-%d "
                "algorithms %.3f ms (floor/best %.3f)",
                t.op_ms, flop / t.op_ms / 1e9, t.floor_ms, flop / t.floor_ms / 1e9, t.op_ms / t.floor_ms, kCandidates,
                t.tuned_ms, t.floor_ms / t.tuned_ms);
  report.check(t.op_ms <= kMaxOverhead * t.floor_ms, name, detail);
}

}  // namespace

int main() {
  if (jet::gpu_test::skip_without_device()) return jet::gpu_test::kSkipWithoutDevice;
  Report report;
  report.run("gemm speed", [&] {
    auto backend = make_cuda_backend();
    auto& be = static_cast<cuda::CudaBackend&>(*backend);
    const cudaStream_t stream = be.stream();
    std::vector<Buffer> owner;
    std::vector<uint16_t> pattern(size_t{1} << 24);
    uint32_t state = 12345;
    for (uint16_t& v : pattern) {  // xorshift32 → uniform [-1, 1) in bf16
      state ^= state << 13;
      state ^= state >> 17;
      state ^= state << 5;
      v = f32_to_bf16(static_cast<float>(state) / 2147483648.0f - 1.0f);
    }
    constexpr int64_t kMaxM = 2048;
    Tensor x = be.alloc_tensor(owner, DType::BF16, {kMaxM, 9728});
    Tensor out = be.alloc_tensor(owner, DType::BF16, {kMaxM, 19456});
    fill_random(be, x, pattern);
    std::vector<std::vector<Tensor>> weights(kWeightSets);
    for (auto& set : weights) {
      for (const Shape& s : kLayerShapes) {
        set.push_back(be.alloc_tensor(owner, DType::BF16, {s.n, s.k}));
        fill_random(be, set.back(), pattern);
      }
    }

    for (int64_t M : {4, 8, 16, 64, 128, 256, 512, 1024, 2048}) {
      std::vector<std::unique_ptr<RawGemm>> raw;
      for (const Shape& s : kLayerShapes) {
        raw.push_back(std::make_unique<RawGemm>(be.lt(), M, s.n, s.k, CUDA_R_16BF, be.gemm_workspace_bytes()));
      }
      auto layers = [&](auto&& product) {
        for (int l = 0; l < kLayers; ++l) {
          for (size_t s = 0; s < std::size(kLayerShapes); ++s) product(s, weights[l % kWeightSets][s]);
        }
      };
      Timing t{};
      const auto [op_ms, floor_ms] = fastest_ms(
          stream,
          [&] {
            layers([&](size_t s, const Tensor& w) {
              Tensor o = out.rows(0, M);
              o.shape[1] = kLayerShapes[s].n;
              Tensor in = x.rows(0, M);
              in.shape[1] = kLayerShapes[s].k;
              be.matmul(in, w, o);
            });
          },
          [&] {
            layers([&](size_t s, const Tensor& w) {
              raw[s]->run(0, w.data, x.data, out.data, be.gemm_workspace(), be.gemm_workspace_bytes(), stream);
            });
          });
      t.op_ms = op_ms;
      t.floor_ms = floor_ms;
      for (size_t s = 0; s < std::size(kLayerShapes); ++s) {  // fastest candidate per shape, summed
        double best = 1e30;
        for (int a = 0; a < raw[s]->algo_count(); ++a) {
          best = std::min(best, fastest_ms(stream, [&] {
                            for (int l = 0; l < kLayers; ++l) {
                              raw[s]->run(a, weights[l % kWeightSets][s].data, x.data, out.data, be.gemm_workspace(),
                                          be.gemm_workspace_bytes(), stream);
                            }
                          })[0]);
        }
        t.tuned_ms += best;
      }
      double flop = 0.0;
      for (const Shape& s : kLayerShapes) flop += 2.0 * M * s.n * s.k * kLayers;
      report_timing(report, "36 SDAR-4B layers, M = " + std::to_string(M), t, flop);
    }

    // FP8: per-channel weights of the same shapes, the op on bf16 x against the GEMM of codes.
    Tensor x_codes = be.alloc_tensor(owner, DType::F8E4M3, {kMaxM, 9728});
    Tensor scales = be.alloc_tensor(owner, DType::F32, {19456});
    fill_codes(be, x_codes, pattern);
    const std::vector<float> scale_values(19456, 1.0f / 448.0f);
    be.upload(scales.data, scale_values.data(), scales.nbytes());
    std::vector<std::vector<Linear>> fp8_weights(kWeightSets);
    for (auto& set : fp8_weights) {
      for (const Shape& s : kLayerShapes) {
        Linear w{be.alloc_tensor(owner, DType::F8E4M3, {s.n, s.k}), scales.rows(0, s.n), Fp8Scaling::PerChannel};
        fill_codes(be, w.weight, pattern);
        set.push_back(w);
      }
    }
    for (int64_t M : {4, 8, 16, 128, 512, 2048}) {
      std::vector<std::unique_ptr<RawGemm>> raw;
      for (const Shape& s : kLayerShapes) {
        raw.push_back(std::make_unique<RawGemm>(be.lt(), M, s.n, s.k, CUDA_R_16BF, be.gemm_workspace_bytes(),
                                                CUDA_R_8F_E4M3, scales.ptr<float>(), scales.ptr<float>()));
      }
      auto layers = [&](auto&& product) {
        for (int l = 0; l < kLayers; ++l) {
          for (size_t s = 0; s < std::size(kLayerShapes); ++s) product(s, fp8_weights[l % kWeightSets][s]);
        }
      };
      const auto [op_ms, floor_ms] = fastest_ms(
          stream,
          [&] {
            layers([&](size_t s, const Linear& w) {
              Tensor o = out.rows(0, M);
              o.shape[1] = kLayerShapes[s].n;
              Tensor in = x.rows(0, M);
              in.shape[1] = kLayerShapes[s].k;
              be.matmul_fp8(in, w, o);
            });
          },
          [&] {
            layers([&](size_t s, const Linear& w) {
              raw[s]->run(0, w.weight.data, x_codes.data, out.data, be.gemm_workspace(), be.gemm_workspace_bytes(),
                          stream);
            });
          });
      double flop = 0.0;
      for (const Shape& s : kLayerShapes) flop += 2.0 * M * s.n * s.k * kLayers;
      std::printf(
          "INFO FP8 36 SDAR-4B layers, M = %lld: op %.3f ms (%.0f TFLOP/s, quantize included), cuBLASLt "
          "FP8 floor %.3f ms (%.0f TFLOP/s), op/floor %.3f\n",
          static_cast<long long>(M), op_ms, flop / op_ms / 1e9, floor_ms, flop / floor_ms / 1e9, op_ms / floor_ms);
    }

    // The LM head: fp32 logits for 4 rows (batch 1's first step) and 384 (batch 128 with 3 masked
    // rows of 4, on average).
    constexpr int64_t kVocab = 151936;
    Tensor lm_head = be.alloc_tensor(owner, DType::BF16, {kVocab, kHidden});
    Tensor logits = be.alloc_tensor(owner, DType::F32, {384, kVocab});
    fill_random(be, lm_head, pattern);
    for (int64_t rows_count : {4, 384}) {
      Tensor rows = x.rows(0, rows_count);
      rows.shape[1] = kHidden;
      Tensor out_rows = logits.rows(0, rows_count);
      RawGemm raw(be.lt(), rows_count, kVocab, kHidden, CUDA_R_32F, be.gemm_workspace_bytes());
      auto lm_head_with = [&](int algo) {
        raw.run(algo, lm_head.data, x.data, logits.data, be.gemm_workspace(), be.gemm_workspace_bytes(), stream);
      };
      Timing t{};
      const auto [op_ms, floor_ms] = fastest_ms(
          stream, [&] { be.matmul(rows, lm_head, out_rows); }, [&] { lm_head_with(0); });
      t.op_ms = op_ms;
      t.floor_ms = floor_ms;
      t.tuned_ms = 1e30;
      for (int a = 0; a < raw.algo_count(); ++a) {
        t.tuned_ms = std::min(t.tuned_ms, fastest_ms(stream, [&] { lm_head_with(a); })[0]);
      }
      report_timing(report, "LM head, " + std::to_string(rows_count) + " rows -> f32", t,
                    2.0 * rows_count * kVocab * kHidden);
    }
  });
  return report.exit_code();
}
