// The shared argument checks of backend/op_checks.h.
#include "backend/op_checks.h"

#include <algorithm>
#include <string>

#include "backend/tensor_checks.h"
#include "core/error.h"

namespace jet {

RowsShape check_rmsnorm_args(const Tensor& x, const Tensor& w, const Tensor& out, DType dtype) {
  check_tensor(x, "rmsnorm", "x", dtype, {-1, -1});
  const RowsShape s{x.dim(0), x.dim(1)};
  check_tensor(w, "rmsnorm", "w", dtype, {s.width});
  check_tensor(out, "rmsnorm", "out", dtype, {s.rows, s.width});
  return s;
}

RowsShape check_add_rmsnorm_args(const Tensor& residual, const Tensor& x, const Tensor& w, const Tensor& out,
                                 DType dtype) {
  check_tensor(residual, "add_rmsnorm", "residual", dtype, {-1, -1});
  const RowsShape s{residual.dim(0), residual.dim(1)};
  check_tensor(x, "add_rmsnorm", "x", dtype, {s.rows, s.width});
  check_tensor(w, "add_rmsnorm", "w", dtype, {s.width});
  check_tensor(out, "add_rmsnorm", "out", dtype, {s.rows, s.width});
  return s;
}

int64_t check_kv_cache_args(const char* op, const Tensor& k_cache, const Tensor& v_cache, int page_size, int nkv,
                            int hd, DType dtype) {
  JET_CHECK(page_size > 0, op, ": page_size ", page_size, " must be positive");
  check_tensor(k_cache, op, "k_cache", dtype, {-1, page_size, nkv, hd});
  check_tensor(v_cache, op, "v_cache", dtype, {k_cache.dim(0), page_size, nkv, hd});
  return k_cache.dim(0);
}

PagedBatchShape check_paged_batch(const char* op, const ForwardBatch& batch, int64_t T, int page_size,
                                  int64_t num_pages) {
  const BatchLayout& h = batch.host;
  const int S = h.num_seqs;
  JET_CHECK(S >= 0 && S <= 65535 && h.num_tokens == T && h.max_pages >= 0, op, ": batch has ", S,
            " sequences (at most 65535) and ", h.num_tokens, " tokens for ", T, " qkv rows");
  JET_CHECK(h.positions.size() == size_t(T) && h.seq_starts.size() == size_t(S) + 1 &&
                h.cached_lens.size() == size_t(S) && h.page_table.size() == size_t(S) * h.max_pages,
            op, ": the batch's host layout has ", h.positions.size(), " positions, ", h.seq_starts.size(),
            " seq_starts, ", h.cached_lens.size(), " cached_lens and ", h.page_table.size(), " page-table entries for ",
            S, " sequences, ", T, " tokens and ", h.max_pages, " pages per sequence");
  check_tensor(batch.positions, op, "positions", DType::I32, {T});
  check_tensor(batch.seq_starts, op, "seq_starts", DType::I32, {S + 1});
  check_tensor(batch.cached_lens, op, "cached_lens", DType::I32, {S});
  check_tensor(batch.page_table, op, "page_table", DType::I32, {S, h.max_pages});
  JET_CHECK(h.seq_starts[0] == 0 && h.seq_starts[S] == T, op, ": seq_starts must run from 0 to ", T, " tokens, got ",
            h.seq_starts[0], "..", h.seq_starts[S]);
  PagedBatchShape shape{.tokens = T};
  for (int s = 0; s < S; ++s) {
    const int32_t begin = h.seq_starts[s], end = h.seq_starts[s + 1];
    JET_CHECK(begin <= end && h.cached_lens[s] >= 0, op, ": sequence ", s, " has seq_starts ", begin, "..", end,
              " and cached_len ", h.cached_lens[s]);
    shape.longest_new = std::max(shape.longest_new, end - begin);
    const int64_t keys = int64_t{h.cached_lens[s]} + (end - begin);
    JET_CHECK(keys <= int64_t{h.max_pages} * page_size, op, ": sequence ", s, " has ", keys,
              " keys but its page table holds ", h.max_pages, " pages of ", page_size);
    for (int64_t page = 0; page * page_size < keys; ++page) {
      const int32_t id = h.page_table[s * int64_t{h.max_pages} + page];
      JET_CHECK(id >= 0 && id < num_pages, op, ": sequence ", s, " page ", page, " is ", id, ", outside the cache's ",
                num_pages, " pages");
    }
    for (int32_t t = begin; t < end; ++t) {
      JET_CHECK(h.positions[t] >= 0 && h.positions[t] < keys, op, ": token ", t, " of sequence ", s, " has position ",
                h.positions[t], " outside [0, ", keys, ")");
    }
  }
  return shape;
}

PagedBatchShape check_qk_norm_rope_args(const Tensor& qkv, const Tensor& bias, const Tensor& q_norm,
                                        const Tensor& k_norm, const ForwardBatch& batch, int nh, int nkv, int hd,
                                        const Tensor& k_cache, const Tensor& v_cache, int page_size, DType dtype) {
  JET_CHECK(nh > 0 && nkv > 0 && hd > 0 && hd % 2 == 0, "qk_norm_rope: bad head layout nh=", nh, " nkv=", nkv,
            " hd=", hd, " (head_dim must be even)");
  check_tensor(qkv, "qk_norm_rope", "qkv", dtype, {-1, int64_t{nh + 2 * nkv} * hd});
  const int64_t T = qkv.dim(0);
  if (bias.data) check_tensor(bias, "qk_norm_rope", "bias", dtype, {int64_t{nh + 2 * nkv} * hd});
  if (q_norm.data) check_tensor(q_norm, "qk_norm_rope", "q_norm", dtype, {hd});
  if (k_norm.data) check_tensor(k_norm, "qk_norm_rope", "k_norm", dtype, {hd});
  const int64_t num_pages = check_kv_cache_args("qk_norm_rope", k_cache, v_cache, page_size, nkv, hd, dtype);
  return check_paged_batch("qk_norm_rope", batch, T, page_size, num_pages);
}

void check_fp8_linear(const Linear& w, const char* op, const char* name, std::initializer_list<int64_t> dims) {
  check_tensor(w.weight, op, name, DType::F8E4M3, dims);
  const bool experts_stacked = dims.size() == 3;
  const int64_t experts = experts_stacked ? w.weight.shape[0] : 1;
  const int64_t n = w.weight.shape[experts_stacked ? 1 : 0], k = w.weight.shape[experts_stacked ? 2 : 1];
  const std::string scale_name = str(name, " scale");
  if (w.scaling == Fp8Scaling::PerChannel) {
    if (experts_stacked) {
      check_tensor(w.scale, op, scale_name.c_str(), DType::F32, {experts, n});
    } else {
      check_tensor(w.scale, op, scale_name.c_str(), DType::F32, {n});
    }
  } else {
    const int64_t nb = (n + 127) / 128, kb = (k + 127) / 128;
    if (experts_stacked) {
      check_tensor(w.scale, op, scale_name.c_str(), DType::F32, {experts, nb, kb});
    } else {
      check_tensor(w.scale, op, scale_name.c_str(), DType::F32, {nb, kb});
    }
  }
}

MatmulShape check_matmul_fp8_args(const Tensor& x, const Linear& w, const Tensor& out, DType dtype) {
  check_tensor(x, "matmul_fp8", "x", dtype, {-1, -1});
  const int64_t M = x.dim(0), K = x.dim(1);
  check_fp8_linear(w, "matmul_fp8", "w", {-1, K});
  const int64_t N = w.weight.dim(0);
  check_tensor(out, "matmul_fp8", "out", dtype, {M, N});
  return {M, N, K};
}

MoeShape check_moe_args(const Tensor& x, const MoeWeights& w, const Tensor& out, DType dtype) {
  check_tensor(x, "moe", "x", dtype, {-1, -1});
  MoeShape s;
  s.tokens = x.dim(0);
  s.hidden = x.dim(1);
  check_tensor(w.router, "moe", "router", dtype, {-1, s.hidden});
  s.experts = w.router.dim(0);
  const bool fp8 = w.gate_up.fp8();
  const auto check_experts = [&](const Linear& l, const char* name, std::initializer_list<int64_t> dims) {
    if (fp8) {
      check_fp8_linear(l, "moe", name, dims);
    } else {
      check_tensor(l.weight, "moe", name, dtype, dims);
    }
  };
  check_experts(w.gate_up, "gate_up", {-1, -1, s.hidden});
  s.held = w.gate_up.weight.dim(0);
  s.expert0 = w.expert0;
  JET_CHECK(s.expert0 >= 0 && s.held >= 1 && s.expert0 + s.held <= s.experts, "moe: the weights hold experts [",
            s.expert0, ", ", s.expert0 + s.held, "), not a run of the router's ", s.experts);
  JET_CHECK(w.gate_up.weight.dim(1) % 2 == 0, "moe: gate_up has an odd row count ", w.gate_up.weight.dim(1));
  s.inter = w.gate_up.weight.dim(1) / 2;
  check_experts(w.down, "down", {s.held, s.hidden, s.inter});
  check_tensor(out, "moe", "out", dtype, {s.tokens, s.hidden});
  s.top_k = w.top_k;
  JET_CHECK(s.top_k >= 1 && s.top_k <= s.experts, "moe: top_k ", s.top_k, " must be in [1, ", s.experts, " experts]");
  const MoeRouting& r = w.routing;
  if (r.bias.data) check_tensor(r.bias, "moe", "routing bias", DType::F32, {s.experts});
  JET_CHECK(r.n_group >= 1 && s.experts % r.n_group == 0 && r.topk_group >= 1 && r.topk_group <= r.n_group,
            "moe: ", s.experts, " experts cannot form ", r.n_group, " groups of which ", r.topk_group, " are kept");
  JET_CHECK(s.top_k <= s.experts / r.n_group * r.topk_group, "moe: top_k ", s.top_k, " exceeds the ",
            s.experts / r.n_group * r.topk_group, " experts of the kept groups");
  if (w.shared_down.weight.data) {
    const bool shared_fp8 = w.shared_down.fp8();
    const auto check_shared = [&](const Linear& l, const char* name, std::initializer_list<int64_t> dims) {
      if (shared_fp8) {
        check_fp8_linear(l, "moe", name, dims);
      } else {
        check_tensor(l.weight, "moe", name, dtype, dims);
      }
    };
    check_shared(w.shared_down, "shared_down", {s.hidden, -1});
    check_shared(w.shared_gate_up, "shared_gate_up", {2 * w.shared_down.weight.dim(1), s.hidden});
  }
  return s;
}

}  // namespace jet
