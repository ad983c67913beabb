// Normalisation and rotary embedding: rmsnorm, add_rmsnorm and qk_norm_rope (per-head RMSNorm
// of q and k, then NeoX rotate-half RoPE; models.md §1.3; k and v land in the paged cache).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "backend/op_checks.h"

namespace jet::cpu {

namespace {

// out = x / sqrt(mean(x²) + eps) * w; out may alias x.
void rmsnorm_row(const float* x, const float* w, float eps, int64_t n, float* out) {
  float sum_squares = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum_squares / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// Rotates pairs (i, i + hd/2) of one head by the angles whose cos/sin are given.
void rotate_half(float* head, const float* cos_a, const float* sin_a, int half) {
  for (int i = 0; i < half; ++i) {
    const float x1 = head[i], x2 = head[i + half];
    head[i] = x1 * cos_a[i] - x2 * sin_a[i];
    head[i + half] = x2 * cos_a[i] + x1 * sin_a[i];
  }
}

}  // namespace

void CpuBackend::rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  const RowsShape shape = check_rmsnorm_args(x, w, out, DType::F32);
  const int64_t T = shape.rows, H = shape.width;
  const float *xp = x.ptr<float>(), *wp = w.ptr<float>();
  float* op = out.ptr<float>();
#pragma omp parallel for num_threads(threads_for(T* H))
  for (int64_t t = 0; t < T; ++t) rmsnorm_row(xp + t * H, wp, eps, H, op + t * H);
}

void CpuBackend::add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  const RowsShape shape = check_add_rmsnorm_args(residual, x, w, out, DType::F32);
  const int64_t T = shape.rows, H = shape.width;
  float* rp = residual.ptr<float>();
  const float *xp = x.ptr<float>(), *wp = w.ptr<float>();
  float* op = out.ptr<float>();
#pragma omp parallel for num_threads(threads_for(T* H))
  for (int64_t t = 0; t < T; ++t) {
    float* row = rp + t * H;
    for (int64_t i = 0; i < H; ++i) row[i] += xp[t * H + i];
    rmsnorm_row(row, wp, eps, H, op + t * H);
  }
}

void CpuBackend::qk_norm_rope(Tensor& qkv, const Tensor& bias, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const ForwardBatch& batch, float rope_theta, int nh, int nkv, int hd, Tensor& k_cache,
                              Tensor& v_cache, int page_size, int rotary_dim) {
  const int64_t T =
      check_qk_norm_rope_args(qkv, bias, q_norm, k_norm, batch, nh, nkv, hd, k_cache, v_cache, page_size, DType::F32)
          .tokens;
  const int64_t width = int64_t{nh + 2 * nkv} * hd, kv_width = int64_t{nkv} * hd;
  const bool norm_q = q_norm.data != nullptr, norm_k = k_norm.data != nullptr;
  // The cache slot of every token: (sequence, position) through the page table.
  const BatchLayout& layout = batch.host;
  std::vector<int64_t> slot(T);
  for (int s = 0; s < layout.num_seqs; ++s) {
    for (int32_t t = layout.seq_starts[s]; t < layout.seq_starts[s + 1]; ++t) {
      slot[t] = paged_slot(layout.page_table.data(), layout.max_pages, page_size, s, layout.positions[t]);
    }
  }

  const int rot = rotary_dim == 0 ? hd : rotary_dim;
  JET_CHECK(rot >= 2 && rot <= hd && rot % 2 == 0, "qk_norm_rope: rotary_dim ", rotary_dim,
            " must be even and in [2, head_dim = ", hd, "] (or 0: all of it)");
  const int half = rot / 2;
  // inv_freq and the angles in fp32, the way HF computes them, so positions far from 0 round
  // the same way the checkpoints were trained with.
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = 1.0f / std::pow(rope_theta, static_cast<float>(2 * i) / rot);
  const int32_t* positions = batch.positions.ptr<int32_t>();
  float* data = qkv.ptr<float>();
#pragma omp parallel num_threads(threads_for(T* width))
  {
    std::vector<float> cos_a(half), sin_a(half);
#pragma omp for
    for (int64_t t = 0; t < T; ++t) {
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[t]) * inv_freq[i];
        cos_a[i] = std::cos(angle);
        sin_a[i] = std::sin(angle);
      }
      float* row = data + t * width;
      float* k_row = k_cache.ptr<float>() + slot[t] * kv_width;
      float* v_row = v_cache.ptr<float>() + slot[t] * kv_width;
      std::copy_n(row + int64_t{nh} * hd, kv_width, k_row);
      std::copy_n(row + int64_t{nh} * hd + kv_width, kv_width, v_row);
      if (bias.data) {  // q in place, k and v in the cache
        const float* b = bias.ptr<float>();
        for (int64_t i = 0; i < int64_t{nh} * hd; ++i) row[i] += b[i];
        for (int64_t i = 0; i < kv_width; ++i) {
          k_row[i] += b[int64_t{nh} * hd + i];
          v_row[i] += b[int64_t{nh} * hd + kv_width + i];
        }
      }
      for (int h = 0; h < nh + nkv; ++h) {  // q heads in place, then k heads in the cache
        const bool is_q = h < nh;
        float* head = is_q ? data + t * width + int64_t{h} * hd : k_row + int64_t{h - nh} * hd;
        if (is_q ? norm_q : norm_k) rmsnorm_row(head, (is_q ? q_norm : k_norm).ptr<float>(), eps, hd, head);
        rotate_half(head, cos_a.data(), sin_a.data(), half);
      }
    }
  }
}

}  // namespace jet::cpu
