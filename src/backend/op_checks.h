// The argument checks of the ops that both backends validate alike (rmsnorm, add_rmsnorm,
// qk_norm_rope, moe), with the backend's activation dtype as the one difference: one place for
// the rules and the messages. Each throws jet::Error naming the op and the tensor, and returns
// the sizes it validated.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace jet {

struct RowsShape {
  int64_t rows = 0, width = 0;
};

struct MoeShape {
  int64_t tokens = 0, hidden = 0, experts = 0, inter = 0;  // inter: one expert's MLP width
  int top_k = 0;
};

RowsShape check_rmsnorm_args(const Tensor& x, const Tensor& w, const Tensor& out, DType dtype);
RowsShape check_add_rmsnorm_args(const Tensor& residual, const Tensor& x, const Tensor& w, const Tensor& out,
                                 DType dtype);
// Returns the token count.
int64_t check_qk_norm_rope_args(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                const ForwardBatch& batch, int nh, int nkv, int hd, DType dtype);
MoeShape check_moe_args(const Tensor& x, const MoeWeights& w, const Tensor& out, DType dtype);

}  // namespace jet
