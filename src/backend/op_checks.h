// The argument checks of the ops that both backends validate alike (rmsnorm, add_rmsnorm,
// qk_norm_rope, attention's cache and paged batch, matmul_fp8, moe), with the backend's activation dtype as
// the one difference: one place for the rules and the messages. Each throws jet::Error naming
// the op and the tensor, and returns the sizes it validated.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backend/backend.h"

namespace jet {

struct RowsShape {
  int64_t rows = 0, width = 0;
};

struct MoeShape {
  int64_t tokens = 0, hidden = 0, experts = 0, inter = 0;  // inter: one expert's MLP width
  int64_t held = 0, expert0 = 0;                           // the experts [expert0, expert0 + held) the weights hold
  int top_k = 0;
};

RowsShape check_rmsnorm_args(const Tensor& x, const Tensor& w, const Tensor& out, DType dtype);
RowsShape check_add_rmsnorm_args(const Tensor& residual, const Tensor& x, const Tensor& w, const Tensor& out,
                                 DType dtype);
// The K/V cache layer of qk_norm_rope and attention: [pages, page_size, nkv, hd] each. Returns
// the page count.
int64_t check_kv_cache_args(const char* op, const Tensor& k_cache, const Tensor& v_cache, int page_size, int nkv,
                            int hd, DType dtype);
// What check_paged_batch validated: the batch's tokens and the new tokens of its longest
// sequence (which the CUDA launches size their grids by).
struct PagedBatchShape {
  int64_t tokens = 0;
  int longest_new = 0;
};

// A batch of T tokens over a paged cache of num_pages pages (BatchLayout's rules): the device
// arrays' shapes, and on the host copy that sequences tile the tokens, every key a sequence has
// (cached + new) lies in a page of the cache, and every position is one of its keys.
PagedBatchShape check_paged_batch(const char* op, const ForwardBatch& batch, int64_t T, int page_size,
                                  int64_t num_pages);
// Checks the cache layer and the paged batch too.
PagedBatchShape check_qk_norm_rope_args(const Tensor& qkv, const Tensor& bias, const Tensor& q_norm,
                                        const Tensor& k_norm, const ForwardBatch& batch, int nh, int nkv, int hd,
                                        const Tensor& k_cache, const Tensor& v_cache, int page_size, DType dtype);
// An FP8 weight whose codes are [dims...] (dims as check_tensor's) with scales of its
// scaling's shape (backend.h, Linear); returns nothing, throws naming the op.
void check_fp8_linear(const Linear& w, const char* op, const char* name, std::initializer_list<int64_t> dims);
// Checks x [M, K], an FP8 w [N, K] and out [M, N] of matmul_fp8; returns {M, N, K}.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
};
MatmulShape check_matmul_fp8_args(const Tensor& x, const Linear& w, const Tensor& out, DType dtype);
MoeShape check_moe_args(const Tensor& x, const MoeWeights& w, const Tensor& out, DType dtype);

}  // namespace jet
