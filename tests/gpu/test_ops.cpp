// Every CUDA op of the core families against the CPU backend on random odd shapes: matmul (bf16
// and f32 output, unaligned operands), matmul_fp8 (both weight scalings), rmsnorm, add_rmsnorm, qk_norm_rope, swiglu,
// embedding, gather_block_tokens and moe (bf16 and FP8 experts); plus the argument checks and the device-side guards
// (bad ids and slots never read out of bounds). Run from anywhere; exits non-zero on any failure.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "core/fp8.h"
#include "gpu_test_util.h"

using namespace jet;
using namespace jet::gpu_test;

namespace {

// Every op's single bf16 rounding (2^-9) plus fp32 ordering differences stay well inside this.
constexpr double kRtol = 1e-2;

std::string shape_name(const char* op, std::initializer_list<int64_t> dims) {
  std::string s = std::string(op) + " [";
  bool first = true;
  for (int64_t d : dims) {
    s += (first ? "" : ", ") + std::to_string(d);
    first = false;
  }
  return s + "]";
}

void test_matmul(Report& report, Twins& tw, std::mt19937& rng) {
  // cuBLASLt's shapes, then those of the weight-streaming kernel (skinny_gemm.cu: up to 8 rows, K a
  // multiple of 8) and the first past it (9, 16 rows): one row, up to 8; column counts that leave
  // a partial 16-column CTA; K that leaves a partial 32-wide chunk (264, 40, 1000) or a partial
  // round of the 8 warps; few columns and long K (2,565 x 2,560, 151 x 9,728: K split across CTAs).
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, std::tuple{7, 13, 11}, std::tuple{3, 1001, 97}, std::tuple{601, 5, 97},
                         std::tuple{33, 257, 130}, std::tuple{130, 96, 2560}, std::tuple{5, 3, 0}, std::tuple{1, 1, 8},
                         std::tuple{4, 2565, 2560}, std::tuple{8, 13, 264}, std::tuple{9, 40, 40},
                         std::tuple{16, 1029, 1000}, std::tuple{3, 151, 9728}}) {
    for (DType out_dtype : {DType::BF16, DType::F32}) {
      const std::string name = shape_name("matmul", {M, N, K}) + (out_dtype == DType::F32 ? " -> f32" : " -> bf16");
      report.run(name, [&, M = M, N = N, K = K] {
        Twin x = tw.floats({M, K}, random_bf16(rng, size_t(M) * K));
        Twin w = tw.floats({N, K}, random_bf16(rng, size_t(N) * K));
        Twin out = tw.poisoned({M, N}, out_dtype);
        tw.cpu().matmul(x.cpu, w.cpu, out.cpu);
        tw.cuda().matmul(x.cuda, w.cuda, out.cuda);
        expect_close(report, name, tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), kRtol);
      });
    }
  }
  // Operands that start one row into their buffers: with an odd K the rows are only 2-byte
  // aligned, which the plan (made for this alignment) must handle.
  for (auto [M, N, K] : {std::tuple{9, 17, 33}, std::tuple{64, 64, 64}, std::tuple{5, 17, 40}}) {
    const std::string name = shape_name("matmul offset operands", {M, N, K});
    report.run(name, [&, M = M, N = N, K = K] {
      Twin x = tw.floats({M + 1, K}, random_bf16(rng, size_t(M + 1) * K));
      Twin w = tw.floats({N + 1, K}, random_bf16(rng, size_t(N + 1) * K));
      Twin out = tw.poisoned({M + 1, N});
      Tensor out_cpu = out.cpu.rows(1, M + 1), out_cuda = out.cuda.rows(1, M + 1);
      tw.cpu().matmul(x.cpu.rows(1, M + 1), w.cpu.rows(1, N + 1), out_cpu);
      tw.cuda().matmul(x.cuda.rows(1, M + 1), w.cuda.rows(1, N + 1), out_cuda);
      expect_close(report, name, tw.cuda_values(out_cuda), tw.cpu_values(out_cpu), kRtol);
    });
  }
  report.run("matmul argument checks", [&] {
    Twin x = tw.poisoned({3, 5}), w = tw.poisoned({4, 6}), out = tw.poisoned({3, 4});
    expect_error(report, "matmul rejects mismatched K", [&] { tw.cuda().matmul(x.cuda, w.cuda, out.cuda); });
    Twin f32_x = tw.poisoned({3, 6}, DType::F32);
    expect_error(report, "matmul rejects an f32 x", [&] { tw.cuda().matmul(f32_x.cuda, w.cuda, out.cuda); });
  });
}

// An FP8 weight [N, K] quantized from random values, the same codes and scales on both backends.
struct Fp8Twin {
  Twin codes, scales;
  Fp8Scaling scaling;
  Linear cpu() const { return {codes.cpu, scales.cpu, scaling}; }
  Linear cuda() const { return {codes.cuda, scales.cuda, scaling}; }
};

Fp8Twin fp8_weight_of(Twins& tw, const std::vector<float>& w, int64_t N, int64_t K, Fp8Scaling scaling) {
  std::vector<uint8_t> codes(w.size());
  std::vector<float> scales(fp8_scale_count(scaling, N, K));
  quantize_e4m3_matrix(w.data(), N, K, scaling, codes.data(), scales.data());
  Twin scale_twin = scaling == Fp8Scaling::PerChannel
                        ? tw.raw(DType::F32, {N}, scales.data())
                        : tw.raw(DType::F32, {(N + 127) / 128, (K + 127) / 128}, scales.data());
  return {tw.raw(DType::F8E4M3, {N, K}, codes.data()), scale_twin, scaling};
}

Fp8Twin fp8_weight(Twins& tw, std::mt19937& rng, int64_t N, int64_t K, Fp8Scaling scaling) {
  return fp8_weight_of(tw, random_bf16(rng, size_t(N) * K), N, K, scaling);
}

void test_matmul_fp8(Report& report, Twins& tw, std::mt19937& rng) {
  // The weight-streaming kernel's shapes (per-channel, up to 8 rows: one row; a partial 16-column
  // CTA; K in partial 64-wide chunks; K split across CTAs), then cuBLASLt's (9 rows and up, and
  // 128x128 tiles at every row count): partial tiles in N and K, a layer's shapes at batch 128.
  // Activations span magnitudes (x scaled per row), so the per-row scales differ.
  struct Case {
    int M, N, K;
  };
  for (Fp8Scaling scaling : {Fp8Scaling::PerChannel, Fp8Scaling::Block128}) {
    const bool tiles = scaling == Fp8Scaling::Block128;
    for (Case c : {Case{1, 16, 16}, Case{1, 256, 512}, Case{4, 2568, 2560}, Case{8, 24, 272}, Case{3, 152, 9728},
                   Case{9, 40, 48}, Case{16, 384, 768}, Case{33, 264, 144}, Case{130, 200, 304}, Case{130, 96, 2560},
                   Case{512, 6144, 2560}}) {
      const std::string name = shape_name("matmul_fp8", {c.M, c.N, c.K}) + (tiles ? " 128x128 tiles" : " per-channel");
      report.run(name, [&] {
        std::vector<float> x_values = random_bf16(rng, size_t(c.M) * c.K);
        for (int m = 0; m < c.M; ++m) {
          const float row_scale = std::ldexp(1.0f, m % 7 - 3);
          for (int k = 0; k < c.K; ++k) x_values[size_t(m) * c.K + k] *= row_scale;  // exact: a power of two
        }
        Twin x = tw.floats({c.M, c.K}, x_values);
        const Fp8Twin w = fp8_weight(tw, rng, c.N, c.K, scaling);
        Twin out = tw.poisoned({c.M, c.N});
        tw.cpu().matmul_fp8(x.cpu, w.cpu(), out.cpu);
        tw.cuda().matmul_fp8(x.cuda, w.cuda(), out.cuda);
        expect_close(report, name, tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), kRtol);
      });
    }
  }
  report.run("matmul_fp8 argument checks", [&] {
    Twin x = tw.poisoned({3, 40}), out = tw.poisoned({3, 8});
    const Fp8Twin w = fp8_weight(tw, rng, 8, 40, Fp8Scaling::PerChannel);
    expect_error(report, "matmul_fp8 rejects K = 40 (not a multiple of 16)",
                 [&] { tw.cuda().matmul_fp8(x.cuda, w.cuda(), out.cuda); });
    Twin x48 = tw.poisoned({3, 48});
    const Fp8Twin w48 = fp8_weight(tw, rng, 8, 48, Fp8Scaling::PerChannel);
    Linear short_scales = w48.cuda();
    short_scales.scale = short_scales.scale.rows(0, 7);
    expect_error(report, "matmul_fp8 rejects 7 scales for 8 weight rows",
                 [&] { tw.cuda().matmul_fp8(x48.cuda, short_scales, out.cuda); });
    expect_error(report, "matmul rejects an FP8 weight", [&] { tw.cuda().matmul(x48.cuda, w48.codes.cuda, out.cuda); });
  });
}

void test_norms(Report& report, Twins& tw, std::mt19937& rng) {
  const float eps = 1e-6f;
  for (auto [T, H] : {std::pair{1, 1}, std::pair{7, 40}, std::pair{5, 2560}, std::pair{3, 1001}}) {
    const std::string name = shape_name("rmsnorm", {T, H});
    report.run(name, [&, T = T, H = H] {
      Twin x = tw.floats({T, H}, random_bf16(rng, size_t(T) * H, -2.0f, 2.0f));
      Twin w = tw.floats({H}, random_bf16(rng, H, 0.5f, 1.5f));
      Twin out = tw.poisoned({T, H});
      tw.cpu().rmsnorm(x.cpu, w.cpu, eps, out.cpu);
      tw.cuda().rmsnorm(x.cuda, w.cuda, eps, out.cuda);
      expect_close(report, name, tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), kRtol);
    });
    const std::string add_name = shape_name("add_rmsnorm", {T, H});
    report.run(add_name, [&, T = T, H = H] {
      Twin residual = tw.floats({T, H}, random_bf16(rng, size_t(T) * H, -2.0f, 2.0f));
      Twin x = tw.floats({T, H}, random_bf16(rng, size_t(T) * H));
      Twin w = tw.floats({H}, random_bf16(rng, H, 0.5f, 1.5f));
      Twin out = tw.poisoned({T, H});
      tw.cpu().add_rmsnorm(residual.cpu, x.cpu, w.cpu, eps, out.cpu);
      tw.cuda().add_rmsnorm(residual.cuda, x.cuda, w.cuda, eps, out.cuda);
      expect_close(report, add_name + " residual", tw.cuda_values(residual.cuda), tw.cpu_values(residual.cpu), kRtol);
      expect_close(report, add_name + " out", tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), kRtol);
    });
  }
}

void test_qk_norm_rope(Report& report, Twins& tw, std::mt19937& rng) {
  const float eps = 1e-6f, theta = 1e6f;
  constexpr int kPageSize = 16;
  struct Case {
    std::vector<int> fresh;  // new tokens per sequence
    int nh, nkv, hd;
    bool with_norm;
    bool with_bias = false;  // Qwen2's q/k/v biases
    int rotary_dim = 0;      // LLaDA2's partial RoPE (0: all of head_dim)
  };
  // Heads of up to 128 go 48 to a block (those of 128 8 lanes a head, 4 a warp) and longer ones 16:
  // 80 heads of 128 and 24 of 256 take two blocks per token; 2 + 1 + 1 heads of 128 put q, k and v
  // in one warp; 130 (odd halves) and 512 take the one-element and the widest paths.
  for (const Case& c : {Case{{5}, 4, 2, 16, true}, Case{{3, 1, 4}, 32, 8, 128, true}, Case{{7, 2}, 3, 1, 6, true},
                        Case{{4}, 4, 4, 128, false}, Case{{2, 19}, 2, 1, 100, true}, Case{{3, 2}, 64, 8, 128, true},
                        Case{{3, 2}, 2, 1, 128, true}, Case{{2, 3}, 16, 4, 256, true}, Case{{3}, 6, 2, 130, true},
                        Case{{2}, 4, 2, 512, true}, Case{{3, 2}, 28, 4, 128, false, true},
                        Case{{2, 3}, 3, 1, 6, false, true}, Case{{3, 2}, 16, 4, 128, true, false, 64},
                        Case{{2, 1}, 3, 1, 32, true, true, 16}, Case{{4}, 2, 2, 130, false, false, 2}}) {
    const int T = std::accumulate(c.fresh.begin(), c.fresh.end(), 0), S = static_cast<int>(c.fresh.size());
    const std::string name = shape_name("qk_norm_rope T,S,nh,nkv,hd", {T, S, c.nh, c.nkv, c.hd}) +
                             (c.with_norm ? " with q/k norm" : " without norm") + (c.with_bias ? ", bias" : "") +
                             (c.rotary_dim ? str(", rotary ", c.rotary_dim) : "");
    report.run(name, [&] {
      const int64_t width = int64_t{c.nh + 2 * c.nkv} * c.hd;
      Twin qkv = tw.floats({T, width}, random_bf16(rng, size_t(T) * width, -2.0f, 2.0f));
      Twin bias, q_norm, k_norm;
      if (c.with_bias) bias = tw.floats({width}, random_bf16(rng, size_t(width), -1.0f, 1.0f));
      if (c.with_norm) {
        q_norm = tw.floats({c.hd}, random_bf16(rng, c.hd, 0.5f, 1.5f));
        k_norm = tw.floats({c.hd}, random_bf16(rng, c.hd, 0.5f, 1.5f));
      }
      // Positions far from 0 too (the angles must round the same way on both backends), in pages
      // of a scrambled order; the pages below a sequence's new tokens all alias page 0, which no
      // token writes.
      BatchLayout layout;
      layout.num_seqs = S;
      layout.num_tokens = T;
      layout.seq_starts = {0};
      std::uniform_int_distribution<int> cached_len(0, 40000);
      for (int s = 0; s < S; ++s) {
        layout.cached_lens.push_back(cached_len(rng));
        layout.seq_starts.push_back(layout.seq_starts.back() + c.fresh[s]);
        for (int i = 0; i < c.fresh[s]; ++i) layout.positions.push_back(layout.cached_lens[s] + i);
        layout.max_pages = std::max(layout.max_pages, (layout.cached_lens[s] + c.fresh[s] + kPageSize - 1) / kPageSize);
      }
      std::vector<int32_t> free_pages(T + S);  // enough for every sequence's new pages
      std::iota(free_pages.begin(), free_pages.end(), 1);
      std::shuffle(free_pages.begin(), free_pages.end(), rng);
      layout.page_table.assign(size_t(S) * layout.max_pages, -1);
      for (int s = 0; s < S; ++s) {
        const int first_new = layout.cached_lens[s] / kPageSize;
        const int end = (layout.cached_lens[s] + c.fresh[s] + kPageSize - 1) / kPageSize;
        for (int page = 0; page < end; ++page) {
          layout.page_table[size_t(s) * layout.max_pages + page] = page < first_new ? 0 : free_pages.back();
          if (page >= first_new) free_pages.pop_back();
        }
      }
      const int num_pages = T + S + 1;
      const size_t cache_elems = size_t(num_pages) * kPageSize * c.nkv * c.hd;
      Twin k_cache = tw.floats({num_pages, kPageSize, c.nkv, c.hd}, random_bf16(rng, cache_elems, -1.0f, 1.0f));
      Twin v_cache = tw.floats({num_pages, kPageSize, c.nkv, c.hd}, random_bf16(rng, cache_elems, -1.0f, 1.0f));
      auto [batch_cpu, batch_cuda] = tw.batches(layout);
      tw.cpu().qk_norm_rope(qkv.cpu, bias.cpu, q_norm.cpu, k_norm.cpu, eps, batch_cpu, theta, c.nh, c.nkv, c.hd,
                            k_cache.cpu, v_cache.cpu, kPageSize, c.rotary_dim);
      tw.cuda().qk_norm_rope(qkv.cuda, bias.cuda, q_norm.cuda, k_norm.cuda, eps, batch_cuda, theta, c.nh, c.nkv, c.hd,
                             k_cache.cuda, v_cache.cuda, kPageSize, c.rotary_dim);
      expect_close(report, name + " qkv", tw.cuda_values(qkv.cuda), tw.cpu_values(qkv.cpu), kRtol);
      expect_close(report, name + " k cache", tw.cuda_values(k_cache.cuda), tw.cpu_values(k_cache.cpu), kRtol);
      // v is copied as it is, unless the bias (rounded to bf16 on the GPU) is added.
      expect_close(report, name + " v cache", tw.cuda_values(v_cache.cuda), tw.cpu_values(v_cache.cpu),
                   c.with_bias ? kRtol : 0.0);
    });
  }
}

void test_swiglu_embedding(Report& report, Twins& tw, std::mt19937& rng) {
  for (auto [T, I] : {std::pair{1, 1}, std::pair{9, 37}, std::pair{4, 9728}}) {
    const std::string name = shape_name("swiglu T,I", {T, I});
    report.run(name, [&, T = T, I = I] {
      Twin gate_up = tw.floats({T, 2 * I}, random_bf16(rng, size_t(T) * 2 * I, -4.0f, 4.0f));
      Twin out = tw.poisoned({T, I});
      tw.cpu().swiglu(gate_up.cpu, out.cpu);
      tw.cuda().swiglu(gate_up.cuda, out.cuda);
      expect_close(report, name, tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), kRtol);
    });
  }
  report.run("embedding", [&] {
    const int V = 101, H = 67, T = 13;
    Twin table = tw.floats({V, H}, random_bf16(rng, size_t(V) * H));
    std::vector<int32_t> ids(T);
    std::uniform_int_distribution<int32_t> id(0, V - 1);
    for (int32_t& i : ids) i = id(rng);
    ids[0] = 0;
    ids[1] = V - 1;
    Twin ids_t = tw.ints({T}, ids);
    Twin out = tw.poisoned({T, H});
    tw.cpu().embedding(ids_t.cpu, table.cpu, out.cpu);
    tw.cuda().embedding(ids_t.cuda, table.cuda, out.cuda);
    // A row copy: exact, not merely close.
    expect_close(report, "embedding", tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), 0.0);
  });
  report.run("embedding of ids outside the table", [&] {
    const int V = 5, H = 8;
    Twin table = tw.floats({V, H}, random_bf16(rng, size_t(V) * H));
    Twin ids_t = tw.ints({3}, {-1, V, 2});
    Twin out = tw.poisoned({3, H});
    tw.cuda().embedding(ids_t.cuda, table.cuda, out.cuda);
    const std::vector<float> got = tw.cuda_values(out.cuda), rows = tw.cuda_values(table.cuda);
    std::vector<float> expected(size_t(3) * H, 0.0f);  // zero rows for the two bad ids
    std::copy_n(rows.begin() + 2 * H, H, expected.begin() + 2 * H);
    expect_close(report, "embedding of ids outside the table gives zero rows", got, expected, 0.0);
  });
}

void test_gather_block_tokens(Report& report, Twins& tw, std::mt19937& rng) {
  report.run("gather_block_tokens", [&] {
    const int slots = 5, B = 4, mask = 99;
    DecodeState st_cpu = tw.cpu().alloc_decode_state(slots, B, 128);
    DecodeState st_cuda = tw.cuda().alloc_decode_state(slots, B, 128);
    std::uniform_int_distribution<int32_t> token(0, 127);
    for (int s = 0; s < slots; ++s) {
      std::vector<int32_t> block(B);
      for (int32_t& t : block) t = token(rng);
      tw.cpu().start_block(st_cpu, s, block, mask);
      tw.cuda().start_block(st_cuda, s, block, mask);
    }
    const std::vector<int32_t> rows = {3, 0, 4, 2};
    Twin slot_t = tw.ints({4}, rows);
    Twin ids = tw.ints({4 * B}, std::vector<int32_t>(4 * B, -7));
    tw.cpu().gather_block_tokens(st_cpu.tokens, slot_t.cpu, ids.cpu);
    tw.cuda().gather_block_tokens(st_cuda.tokens, slot_t.cuda, ids.cuda);
    report.check(tw.cuda_ints(ids.cuda) == tw.cpu_ints(ids.cpu), "gather_block_tokens matches the CPU");

    Twin bad_slots = tw.ints({2}, {slots, 1});
    Twin bad_ids = tw.ints({2 * B}, std::vector<int32_t>(2 * B, -7));
    tw.cuda().gather_block_tokens(st_cuda.tokens, bad_slots.cuda, bad_ids.cuda);
    const std::vector<int32_t> got = tw.cuda_ints(bad_ids.cuda), tokens = tw.cuda_ints(st_cuda.tokens);
    std::vector<int32_t> expected(B, -1);
    expected.insert(expected.end(), tokens.begin() + B, tokens.begin() + 2 * B);
    report.check(got == expected, "gather_block_tokens gives -1 for a slot outside the state");
  });
}

// MoE cases at the edges of the grouped expert GEMMs (moe.cu): experts without a token, one expert
// taking every token, top_k = E, expert counts that are not powers of two, widths that are not
// multiples of 128 (or of 8: the element-wise path), 1 row, 4,096 rows and more than one chunk of
// routes, tiles of each row count (16, 32, 64, 128) on both copy paths, and SDAR-30B-A3B's
// own layer shape; weights that hold a run of the experts (expert parallelism).
void test_moe(Report& report, Twins& tw, std::mt19937& rng) {
  struct Case {
    int T, H, E, I, top_k;
    bool renormalize;
    bool one_expert = false;  // router row 3 dominates every token's logits
  };
  for (Case c :
       {Case{9, 40, 8, 24, 2, true}, Case{1, 16, 4, 8, 1, true}, Case{5, 33, 8, 17, 8, false},
        Case{33, 256, 16, 96, 4, true}, Case{7, 64, 40, 32, 3, false}, Case{2, 128, 64, 64, 2, true},
        Case{1, 200, 6, 40, 6, true}, Case{300, 128, 8, 64, 2, true, true}, Case{300, 72, 8, 24, 1, false, true},
        Case{4096, 136, 24, 72, 4, true}, Case{5000, 64, 12, 40, 8, true}, Case{128, 256, 32, 64, 4, true},
        Case{64, 2048, 128, 768, 8, true}, Case{256, 2048, 128, 768, 8, true}, Case{512, 2048, 128, 768, 8, true},
        Case{1024, 2048, 128, 768, 8, true}, Case{2048, 2048, 128, 768, 8, true}, Case{2000, 33, 8, 33, 2, false},
        Case{700, 200, 16, 200, 4, true}}) {
    const std::string name = shape_name("moe T,H,E,I,top_k", {c.T, c.H, c.E, c.I, c.top_k}) +
                             (c.renormalize ? " renormalised" : "") + (c.one_expert ? " all to expert 3" : "");
    report.run(name, [&] {
      std::vector<float> x_values = random_bf16(rng, size_t(c.T) * c.H, c.one_expert ? 0.05f : -1.0f, 1.0f);
      std::vector<float> router_values =
          random_bf16(rng, size_t(c.E) * c.H, c.one_expert ? -0.1f : -1.0f, c.one_expert ? 0.1f : 1.0f);
      if (c.one_expert) std::fill_n(router_values.begin() + 3 * c.H, c.H, 1.0f);
      Twin x = tw.floats({c.T, c.H}, x_values);
      Twin router = tw.floats({c.E, c.H}, router_values);
      Twin gate_up = tw.floats({c.E, 2 * c.I, c.H}, random_bf16(rng, size_t(c.E) * 2 * c.I * c.H));
      Twin down = tw.floats({c.E, c.H, c.I}, random_bf16(rng, size_t(c.E) * c.H * c.I));
      MoeWeights w_cpu{router.cpu, {gate_up.cpu}, {down.cpu}, c.top_k};
      MoeWeights w_cuda{router.cuda, {gate_up.cuda}, {down.cuda}, c.top_k};
      w_cpu.routing.renormalize = w_cuda.routing.renormalize = c.renormalize;
      Twin out = tw.poisoned({c.T, c.H});
      tw.cpu().moe(x.cpu, w_cpu, out.cpu);
      tw.cuda().moe(x.cuda, w_cuda, out.cuda);
      // Routing is discontinuous: the two backends' router logits differ in their fp32 summation
      // order, so a token whose k-th and (k+1)-th probabilities tie to ~1e-7 may take another
      // expert. At most one such row per 1,024 (none below that). The CUDA op keeps the hidden
      // activations in bf16, the CPU op in fp32: hence the row's own scale (expect_rows_close).
      expect_rows_close(report, name, tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), c.H, kRtol, c.T / 1024);
    });
  }
  // Expert parallelism: weights holding a run of the experts (expert0 on) run the routes to those
  // alone, the others adding nothing; against the CPU op on the same run, for each run of a split
  // in 2 and 4 (SDAR-30B-A3B's layer among them).
  for (Case c : {Case{33, 256, 16, 96, 4, true}, Case{300, 128, 8, 64, 2, true, true}, Case{5, 33, 8, 17, 8, false},
                 Case{512, 2048, 128, 768, 8, true}}) {
    for (int runs : {2, 4}) {
      const std::string name =
          shape_name("moe held runs of experts T,H,E,I,top_k,runs", {c.T, c.H, c.E, c.I, c.top_k, runs}) +
          (c.one_expert ? " all to expert 3" : "");
      report.run(name, [&] {
        std::vector<float> x_values = random_bf16(rng, size_t(c.T) * c.H, c.one_expert ? 0.05f : -1.0f, 1.0f);
        std::vector<float> router_values =
            random_bf16(rng, size_t(c.E) * c.H, c.one_expert ? -0.1f : -1.0f, c.one_expert ? 0.1f : 1.0f);
        if (c.one_expert) std::fill_n(router_values.begin() + 3 * c.H, c.H, 1.0f);
        const std::vector<float> gate_up_values = random_bf16(rng, size_t(c.E) * 2 * c.I * c.H);
        const std::vector<float> down_values = random_bf16(rng, size_t(c.E) * c.H * c.I);
        Twin x = tw.floats({c.T, c.H}, x_values);
        Twin router = tw.floats({c.E, c.H}, router_values);
        const int held = c.E / runs;
        for (int first = 0; first < c.E; first += held) {
          const size_t gate_up_size = size_t(held) * 2 * c.I * c.H, down_size = size_t(held) * c.H * c.I;
          const auto gate_up_begin = gate_up_values.begin() + first * (gate_up_size / held);
          const auto down_begin = down_values.begin() + first * (down_size / held);
          Twin gate_up = tw.floats({held, 2 * c.I, c.H}, {gate_up_begin, gate_up_begin + gate_up_size});
          Twin down = tw.floats({held, c.H, c.I}, {down_begin, down_begin + down_size});
          MoeWeights w_cpu{router.cpu, {gate_up.cpu}, {down.cpu}, c.top_k};
          MoeWeights w_cuda{router.cuda, {gate_up.cuda}, {down.cuda}, c.top_k};
          w_cpu.expert0 = w_cuda.expert0 = first;
          w_cpu.routing.renormalize = w_cuda.routing.renormalize = c.renormalize;
          Twin out = tw.poisoned({c.T, c.H});
          tw.cpu().moe(x.cpu, w_cpu, out.cpu);
          tw.cuda().moe(x.cuda, w_cuda, out.cuda);
          // As above (a near-tie may route a row differently, at most one per 1,024).
          expect_rows_close(report, name + " from expert " + std::to_string(first), tw.cuda_values(out.cuda),
                            tw.cpu_values(out.cpu), c.H, kRtol, c.T / 1024);
        }
      });
    }
  }
  // LLaDA2's routing (sigmoid scores, an fp32 expert bias for the choice, n_group groups of which
  // topk_group are kept, renormalised weights times 2.5) and its shared expert, at LLaDA2-mini's
  // own layer (256 experts in 8 groups, 4 kept, top-8, width 512, a shared expert of 512) too.
  struct Llada2Case {
    int T, H, E, I, top_k, n_group, topk_group, S;
  };
  for (Llada2Case c : {Llada2Case{9, 64, 8, 32, 2, 4, 2, 32}, Llada2Case{33, 128, 32, 64, 4, 8, 4, 64},
                       Llada2Case{1, 40, 6, 24, 3, 1, 1, 0}, Llada2Case{300, 2048, 256, 512, 8, 8, 4, 512},
                       Llada2Case{4, 2048, 256, 512, 8, 8, 4, 512}}) {
    const std::string name = shape_name("moe sigmoid T,H,E,I,top_k,groups,kept,shared",
                                        {c.T, c.H, c.E, c.I, c.top_k, c.n_group, c.topk_group, c.S});
    report.run(name, [&] {
      Twin x = tw.floats({c.T, c.H}, random_bf16(rng, size_t(c.T) * c.H));
      Twin router = tw.floats({c.E, c.H}, random_bf16(rng, size_t(c.E) * c.H, -0.2f, 0.2f));
      Twin gate_up = tw.floats({c.E, 2 * c.I, c.H}, random_bf16(rng, size_t(c.E) * 2 * c.I * c.H, -0.1f, 0.1f));
      Twin down = tw.floats({c.E, c.H, c.I}, random_bf16(rng, size_t(c.E) * c.H * c.I, -0.1f, 0.1f));
      std::vector<float> bias(c.E);
      std::normal_distribution<float> bias_of(0.0f, 0.1f);
      for (float& b : bias) b = bias_of(rng);
      Twin bias_t = tw.raw(DType::F32, {c.E}, bias.data());
      Twin shared_gate_up, shared_down;
      if (c.S > 0) {
        shared_gate_up = tw.floats({2 * c.S, c.H}, random_bf16(rng, size_t(2) * c.S * c.H, -0.1f, 0.1f));
        shared_down = tw.floats({c.H, c.S}, random_bf16(rng, size_t(c.H) * c.S, -0.1f, 0.1f));
      }
      MoeWeights w_cpu{router.cpu, {gate_up.cpu}, {down.cpu}, c.top_k};
      MoeWeights w_cuda{router.cuda, {gate_up.cuda}, {down.cuda}, c.top_k};
      for (auto [w, b, sgu, sd] : {std::tuple{&w_cpu, bias_t.cpu, shared_gate_up.cpu, shared_down.cpu},
                                   std::tuple{&w_cuda, bias_t.cuda, shared_gate_up.cuda, shared_down.cuda}}) {
        w->routing.score = MoeRouting::Score::Sigmoid;
        w->routing.bias = b;
        w->routing.n_group = c.n_group;
        w->routing.topk_group = c.topk_group;
        w->routing.scaling = 2.5f;
        w->shared_gate_up.weight = sgu;
        w->shared_down.weight = sd;
      }
      Twin out = tw.poisoned({c.T, c.H});
      tw.cpu().moe(x.cpu, w_cpu, out.cpu);
      tw.cuda().moe(x.cuda, w_cuda, out.cuda);
      // As above: a near-tie in the biased scores may route a row differently, at most one in 256.
      expect_rows_close(report, name, tw.cuda_values(out.cuda), tw.cpu_values(out.cpu), c.H, kRtol, c.T / 256);
    });
  }
  report.run("moe argument checks", [&] {
    Twin x = tw.poisoned({2, 8}), router = tw.poisoned({4, 8}), gate_up = tw.poisoned({4, 6, 8});
    Twin down = tw.poisoned({4, 8, 3}), out = tw.poisoned({2, 8});
    MoeWeights w{router.cuda, {gate_up.cuda}, {down.cuda}, 5};
    expect_error(report, "moe rejects top_k above the expert count", [&] { tw.cuda().moe(x.cuda, w, out.cuda); });
  });
}

// A layer's experts [E, N, K] quantized one by one (per channel or in 128x128 tiles), experts
// [first, first + held) of them as a rank of expert parallelism holds them: the same codes and
// scales on both backends.
Fp8Twin fp8_experts(Twins& tw, const std::vector<float>& w, int64_t N, int64_t K, Fp8Scaling scaling, int64_t first,
                    int64_t held) {
  const int64_t per_scales = fp8_scale_count(scaling, N, K);
  std::vector<uint8_t> codes(size_t(held) * N * K);
  std::vector<float> scales(size_t(held) * per_scales);
  for (int64_t e = 0; e < held; ++e) {
    quantize_e4m3_matrix(w.data() + (first + e) * N * K, N, K, scaling, codes.data() + e * N * K,
                         scales.data() + e * per_scales);
  }
  Twin scale_twin = scaling == Fp8Scaling::PerChannel
                        ? tw.raw(DType::F32, {held, N}, scales.data())
                        : tw.raw(DType::F32, {held, (N + 127) / 128, (K + 127) / 128}, scales.data());
  return {tw.raw(DType::F8E4M3, {held, N, K}, codes.data()), scale_twin, scaling};
}

// FP8 experts (docs/fp8.md), per channel and in 128x128 tiles, against the CPU op on the same codes:
// the element-wise and copy-engine paths (rows of 16 bytes or not), partial 128-column k blocks,
// more than one chunk of routes, SDAR-30B-A3B's layer at 1 and 512 tokens, a held run of the
// experts, and LLaDA2-mini's layer with its FP8 shared expert.
// Activations span magnitudes (x scaled per row by powers of two), so the per-row scales differ.
void test_moe_fp8(Report& report, Twins& tw, std::mt19937& rng) {
  struct Case {
    int T, H, E, I, top_k;
    int runs = 1;         // expert parallelism: the weights hold the first of `runs` runs of experts
    bool llada2 = false;  // LLaDA2's routing (sigmoid, bias, 8 groups of which 4 kept) and a shared expert of I
  };
  for (Fp8Scaling scaling : {Fp8Scaling::PerChannel, Fp8Scaling::Block128}) {
    const bool tiles = scaling == Fp8Scaling::Block128;
    for (Case c :
         {Case{9, 40, 8, 24, 2}, Case{5, 33, 8, 17, 8}, Case{1, 2048, 128, 768, 8}, Case{33, 256, 16, 96, 4},
          Case{300, 136, 8, 192, 2}, Case{700, 208, 16, 128, 4}, Case{5000, 64, 12, 64, 8},
          Case{512, 2048, 128, 768, 8}, Case{512, 2048, 128, 768, 8, 2}, Case{300, 2048, 256, 512, 8, 1, true}}) {
      if (tiles && c.I % 64 != 0) continue;  // refused below
      const std::string name = shape_name("moe fp8 T,H,E,I,top_k,runs", {c.T, c.H, c.E, c.I, c.top_k, c.runs}) +
                               (tiles ? " 128x128 tiles" : " per-channel") + (c.llada2 ? " LLaDA2 + shared" : "");
      report.run(name, [&] {
        std::vector<float> x_values = random_bf16(rng, size_t(c.T) * c.H);
        for (int t = 0; t < c.T; ++t) {
          const float row_scale = std::ldexp(1.0f, t % 7 - 3);
          for (int k = 0; k < c.H; ++k) x_values[size_t(t) * c.H + k] *= row_scale;  // exact: a power of two
        }
        const float spread = c.llada2 ? 0.1f : 1.0f;
        const std::vector<float> gate_up_values = random_bf16(rng, size_t(c.E) * 2 * c.I * c.H, -spread, spread);
        const std::vector<float> down_values = random_bf16(rng, size_t(c.E) * c.H * c.I, -spread, spread);
        Twin x = tw.floats({c.T, c.H}, x_values);
        Twin router = tw.floats({c.E, c.H}, random_bf16(rng, size_t(c.E) * c.H, -0.2f, 0.2f));
        const int held = c.E / c.runs;
        const Fp8Twin gate_up = fp8_experts(tw, gate_up_values, 2 * c.I, c.H, scaling, 0, held);
        const Fp8Twin down = fp8_experts(tw, down_values, c.H, c.I, scaling, 0, held);
        MoeWeights w_cpu{router.cpu, gate_up.cpu(), down.cpu(), c.top_k};
        MoeWeights w_cuda{router.cuda, gate_up.cuda(), down.cuda(), c.top_k};
        Twin bias;
        std::vector<float> shared_gate_up_values, shared_down_values;
        Fp8Twin shared_gate_up, shared_down;
        if (c.llada2) {
          std::vector<float> bias_values(c.E);
          std::normal_distribution<float> bias_of(0.0f, 0.1f);
          for (float& b : bias_values) b = bias_of(rng);
          bias = tw.raw(DType::F32, {c.E}, bias_values.data());
          shared_gate_up_values = random_bf16(rng, size_t(2) * c.I * c.H, -spread, spread);
          shared_down_values = random_bf16(rng, size_t(c.H) * c.I, -spread, spread);
          shared_gate_up = fp8_weight_of(tw, shared_gate_up_values, 2 * c.I, c.H, scaling);
          shared_down = fp8_weight_of(tw, shared_down_values, c.H, c.I, scaling);
          for (auto [w, b, sgu, sd] : {std::tuple{&w_cpu, bias.cpu, shared_gate_up.cpu(), shared_down.cpu()},
                                       std::tuple{&w_cuda, bias.cuda, shared_gate_up.cuda(), shared_down.cuda()}}) {
            w->routing.score = MoeRouting::Score::Sigmoid;
            w->routing.bias = b;
            w->routing.n_group = 8;
            w->routing.topk_group = 4;
            w->routing.scaling = 2.5f;
            w->shared_gate_up = sgu;
            w->shared_down = sd;
          }
        }
        Twin out = tw.poisoned({c.T, c.H});
        tw.cpu().moe(x.cpu, w_cpu, out.cpu);
        tw.cuda().moe(x.cuda, w_cuda, out.cuda);
        const std::vector<float> got = tw.cuda_values(out.cuda), expected = tw.cpu_values(out.cpu);
        // Held to FP8's own error, not the bf16 rule: the tensor cores sum e4m3 products at about
        // 1e-4 of fp32 (within each 128 columns of k; the CPU op's sums are fp32), which moves a
        // few hidden activations across an e4m3 rounding boundary, one code step (1/16) each. In
        // rows whose activations the case scales by 4 or 8, SiLU leaves a few hidden values
        // dominant, so such a step moves the row by a few percent, past the bf16 rule (the same
        // rows fail it when the CPU op's gate/up sums get noise of that size). LLaDA2's shared
        // expert runs through matmul_fp8, whose bf16 outputs round its activations before their
        // quantization (the CPU op's stay fp32). So the two backends' FP8 outputs must differ by
        // well under what FP8 differs from float: the CPU op on the float weights the codes were
        // quantized from.
        MoeWeights w_float = w_cpu;
        const std::vector<float> held_gate_up(gate_up_values.begin(),
                                              gate_up_values.begin() + gate_up_values.size() / c.runs);
        const std::vector<float> held_down(down_values.begin(), down_values.begin() + down_values.size() / c.runs);
        Twin float_gate_up = tw.floats({held, 2 * c.I, c.H}, held_gate_up);
        Twin float_down = tw.floats({held, c.H, c.I}, held_down);
        w_float.gate_up = {float_gate_up.cpu};
        w_float.down = {float_down.cpu};
        Twin float_shared_gate_up, float_shared_down;
        if (c.llada2) {
          float_shared_gate_up = tw.floats({2 * c.I, c.H}, shared_gate_up_values);
          float_shared_down = tw.floats({c.H, c.I}, shared_down_values);
          w_float.shared_gate_up = {float_shared_gate_up.cpu};
          w_float.shared_down = {float_shared_down.cpu};
        }
        Twin out_float = tw.poisoned({c.T, c.H});
        tw.cpu().moe(x.cpu, w_float, out_float.cpu);
        const std::vector<float> float_values = tw.cpu_values(out_float.cpu);
        std::vector<float> backend_diff(got.size()), fp8_error(got.size());
        for (size_t i = 0; i < got.size(); ++i) {
          backend_diff[i] = got[i] - expected[i];
          fp8_error[i] = expected[i] - float_values[i];
        }
        const double ratio = rms(backend_diff) / rms(fp8_error);
        report.check(std::isfinite(ratio) && ratio <= 0.5, name,
                     "rms(cuda - cpu) / rms(cpu FP8 - cpu float) = " + std::to_string(ratio) + " (at most 0.5)");
      });
    }
  }
  report.run("moe fp8 argument checks", [&] {
    const int E = 4, H = 128, I = 96;
    Twin x = tw.floats({2, H}, random_bf16(rng, size_t(2) * H)), router = tw.poisoned({E, H}),
         out = tw.poisoned({2, H});
    const Fp8Twin gate_up =
        fp8_experts(tw, random_bf16(rng, size_t(E) * 2 * I * H), 2 * I, H, Fp8Scaling::Block128, 0, E);
    const Fp8Twin down = fp8_experts(tw, random_bf16(rng, size_t(E) * H * I), H, I, Fp8Scaling::Block128, 0, E);
    MoeWeights w{router.cuda, gate_up.cuda(), down.cuda(), 2};
    expect_error(report, "moe refuses 128x128-tiled FP8 experts of width 96 (not a multiple of 64)",
                 [&] { tw.cuda().moe(x.cuda, w, out.cuda); });
  });
}

}  // namespace

int main() {
  if (jet::gpu_test::skip_without_device()) return jet::gpu_test::kSkipWithoutDevice;
  Report report;
  report.run("test_ops", [&] {
    Twins tw;
    std::mt19937 rng(1234);
    test_matmul(report, tw, rng);
    test_matmul_fp8(report, tw, rng);
    test_norms(report, tw, rng);
    test_qk_norm_rope(report, tw, rng);
    test_swiglu_embedding(report, tw, rng);
    test_gather_block_tokens(report, tw, rng);
    test_moe(report, tw, rng);
    test_moe_fp8(report, tw, rng);
  });
  return report.exit_code();
}
