// Row-wise ops without reductions: embedding (row gather), swiglu (silu(gate) * up, in fp32)
// and gather_block_tokens (the block tokens of a step's slots, as the forward's input ids).
// Ids and slots live in device memory, so they are range-checked in the kernels, not on the host
// (that would need a sync): a bad one never causes an out-of-bounds access, and its output is
// marked instead (see each op).
#include "backend/cuda/kernel_util.cuh"

namespace jet::cuda {

namespace {

constexpr int kThreads = 256;

// One block per token: its table row, or zeros when the id is outside the table.
__global__ void embedding_kernel(const int32_t* ids, const bf16* table, int64_t rows, int64_t H, bf16* out) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool valid = id >= 0 && id < rows;
  const bf16* src = table + (valid ? id : 0) * H;
  bf16* dst = out + t * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) dst[i] = valid ? src[i] : __float2bfloat16(0.0f);
}

// One block per token row of gate_up [T, 2I].
__global__ void swiglu_kernel(const bf16* gate_up, int64_t inter, bf16* out) {
  const int64_t t = blockIdx.x;
  const bf16* gate = gate_up + t * 2 * inter;
  const bf16* up = gate + inter;
  for (int64_t i = threadIdx.x; i < inter; i += blockDim.x) {
    const float g = __bfloat162float(gate[i]);
    out[t * inter + i] = __float2bfloat16(g / (1.0f + expf(-g)) * __bfloat162float(up[i]));
  }
}

// ids[i * B + j] = tokens[slots[i], j]; a slot outside [0, num_slots) gives ids of -1, which
// the embedding turns into zero rows.
__global__ void gather_block_tokens_kernel(const int32_t* tokens, int num_slots, int B, const int32_t* slots,
                                           int64_t count, int32_t* ids) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < count; k += int64_t{gridDim.x} * blockDim.x) {
    const int32_t slot = slots[k / B];
    ids[k] = slot >= 0 && slot < num_slots ? tokens[int64_t{slot} * B + k % B] : -1;
  }
}

}  // namespace

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_tensor(ids, "embedding", "ids", DType::I32, {-1});
  check_tensor(table, "embedding", "table", DType::BF16, {-1, -1});
  const int64_t T = ids.dim(0), rows = table.dim(0), H = table.dim(1);
  check_tensor(out, "embedding", "out", DType::BF16, {T, H});
  if (T == 0) return;
  embedding_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream_>>>(ids.ptr<int32_t>(), table.ptr<bf16>(), rows, H,
                                                                       out.ptr<bf16>());
  check_launch("embedding_kernel");
}

void CudaBackend::swiglu(const Tensor& gate_up, Tensor& out) {
  check_tensor(gate_up, "swiglu", "gate_up", DType::BF16, {-1, -1});
  const int64_t T = gate_up.dim(0), width = gate_up.dim(1);
  JET_CHECK(width % 2 == 0, "swiglu: gate_up width ", width, " is odd");
  check_tensor(out, "swiglu", "out", DType::BF16, {T, width / 2});
  if (T == 0) return;
  swiglu_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream_>>>(gate_up.ptr<bf16>(), width / 2, out.ptr<bf16>());
  check_launch("swiglu_kernel");
}

void CudaBackend::gather_block_tokens(const DecodeState& st, const Tensor& slots, Tensor& ids) {
  const int B = st.block_length;
  check_tensor(st.tokens, "gather_block_tokens", "tokens", DType::I32, {st.num_slots, B});
  check_tensor(slots, "gather_block_tokens", "slots", DType::I32, {-1});
  const int64_t n = slots.dim(0);
  check_tensor(ids, "gather_block_tokens", "ids", DType::I32, {n * B});
  if (n * B == 0) return;
  gather_block_tokens_kernel<<<blocks_for(n * B, kThreads), kThreads, 0, stream_>>>(
      st.tokens.ptr<int32_t>(), st.num_slots, B, slots.ptr<int32_t>(), n * B, ids.ptr<int32_t>());
  check_launch("gather_block_tokens_kernel");
}

}  // namespace jet::cuda
