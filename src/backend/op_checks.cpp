// The shared argument checks of backend/op_checks.h.
#include "backend/op_checks.h"

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

int64_t check_qk_norm_rope_args(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                const ForwardBatch& batch, int nh, int nkv, int hd, DType dtype) {
  JET_CHECK(nh > 0 && nkv > 0 && hd > 0 && hd % 2 == 0, "qk_norm_rope: bad head layout nh=", nh, " nkv=", nkv,
            " hd=", hd, " (head_dim must be even)");
  check_tensor(qkv, "qk_norm_rope", "qkv", dtype, {-1, int64_t{nh + 2 * nkv} * hd});
  const int64_t T = qkv.dim(0);
  check_tensor(batch.positions, "qk_norm_rope", "positions", DType::I32, {T});
  if (q_norm.data) check_tensor(q_norm, "qk_norm_rope", "q_norm", dtype, {hd});
  if (k_norm.data) check_tensor(k_norm, "qk_norm_rope", "k_norm", dtype, {hd});
  return T;
}

MoeShape check_moe_args(const Tensor& x, const MoeWeights& w, const Tensor& out, DType dtype) {
  check_tensor(x, "moe", "x", dtype, {-1, -1});
  MoeShape s;
  s.tokens = x.dim(0);
  s.hidden = x.dim(1);
  check_tensor(w.router, "moe", "router", dtype, {-1, s.hidden});
  s.experts = w.router.dim(0);
  check_tensor(w.gate_up, "moe", "gate_up", dtype, {s.experts, -1, s.hidden});
  JET_CHECK(w.gate_up.dim(1) % 2 == 0, "moe: gate_up has an odd row count ", w.gate_up.dim(1));
  s.inter = w.gate_up.dim(1) / 2;
  check_tensor(w.down, "moe", "down", dtype, {s.experts, s.hidden, s.inter});
  check_tensor(out, "moe", "out", dtype, {s.tokens, s.hidden});
  s.top_k = w.top_k;
  JET_CHECK(s.top_k >= 1 && s.top_k <= s.experts, "moe: top_k ", s.top_k, " must be in [1, ", s.experts, " experts]");
  return s;
}

}  // namespace jet
