// Row-wise ops without reductions: embedding (row gather), swiglu (silu(gate) * up, in fp32)
// and gather_block_tokens (the block tokens of a step's slots, as the forward's input ids).
// Ids and slots live in device memory, so they are range-checked in the kernels, not on the host
// (that would need a sync): a bad one never causes an out-of-bounds access, and its output is
// marked instead (see each op).
#include <algorithm>

#include "backend/cuda/kernel_util.cuh"

namespace jet::cuda {

namespace {

constexpr int kThreads = 256;

// One block per token: its table row, or zeros when the id is outside the table; N elements per access.
template <int N>
__global__ void embedding_kernel(const int32_t* ids, const bf16* table, int64_t rows, int64_t H, bf16* out) {
  await_previous_kernel();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool valid = id >= 0 && id < rows;
  const bf16* src = table + (valid ? id : 0) * H;
  bf16* dst = out + t * H;
  BfPack<N> zero;
#pragma unroll
  for (int j = 0; j < N; ++j) zero.v[j] = __float2bfloat16(0.0f);
  for (int64_t i = int64_t{threadIdx.x} * N; i < H; i += int64_t{blockDim.x} * N) {
    store_pack<N>(dst + i, valid ? load_pack<N>(src + i) : zero);
  }
}

// Block (x, y): packs [x * blockDim.x, (x + 1) * blockDim.x) of N elements of rows y, y + gridDim.y, ...
// of out [T, I]; gate_up is [T, 2I]. Rows come from the grid, not from dividing a flat index (a
// 64-bit division per pack cost a third of the kernel's time).
template <int N>
__global__ void swiglu_kernel(const bf16* gate_up, int64_t T, int64_t inter, bf16* out) {
  await_previous_kernel();
  const int64_t i = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * N;
  if (i >= inter) return;
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
    const BfPack<N> gate = load_pack<N>(gate_up + t * 2 * inter + i);
    const BfPack<N> up = load_pack<N>(gate_up + t * 2 * inter + inter + i);
    BfPack<N> result;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float g = __bfloat162float(gate.v[j]);
      result.v[j] = __float2bfloat16(g / (1.0f + expf(-g)) * __bfloat162float(up.v[j]));
    }
    store_pack<N>(out + t * inter + i, result);
  }
}

// ids[i * B + j] = tokens[slots[i], j]; a slot outside [0, num_slots) gives ids of -1, which
// the embedding turns into zero rows.
__global__ void gather_block_tokens_kernel(const int32_t* tokens, int num_slots, int B, const int32_t* slots,
                                           int64_t count, int32_t* ids) {
  await_previous_kernel();
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
  launch_kernel("embedding_kernel", packs_of_8(H, {table.data, out.data}) ? embedding_kernel<8> : embedding_kernel<1>,
                static_cast<unsigned>(T), kThreads, 0, stream_, ids.ptr<int32_t>(), table.ptr<bf16>(), rows, H,
                out.ptr<bf16>());
}

void CudaBackend::swiglu(const Tensor& gate_up, Tensor& out) {
  check_tensor(gate_up, "swiglu", "gate_up", DType::BF16, {-1, -1});
  const int64_t T = gate_up.dim(0), width = gate_up.dim(1);
  JET_CHECK(width % 2 == 0, "swiglu: gate_up width ", width, " is odd");
  check_tensor(out, "swiglu", "out", DType::BF16, {T, width / 2});
  if (T == 0) return;
  const int64_t inter = width / 2;
  constexpr int64_t kMaxGridRows = 65535;  // grid.y limit; later rows by stride
  const auto grid_rows = static_cast<unsigned>(std::min(T, kMaxGridRows));
  // 16-byte accesses need both halves of every gate_up row and every out row 16-byte aligned.
  const bool packs = packs_of_8(inter, {gate_up.data, out.data});
  const dim3 grid(blocks_for(packs ? inter / 8 : inter, kThreads), grid_rows);
  launch_kernel("swiglu_kernel", packs ? swiglu_kernel<8> : swiglu_kernel<1>, grid, kThreads, 0, stream_,
                gate_up.ptr<bf16>(), T, inter, out.ptr<bf16>());
}

void CudaBackend::gather_block_tokens(const Tensor& blocks, const Tensor& slots, Tensor& ids) {
  check_tensor(blocks, "gather_block_tokens", "blocks", DType::I32, {-1, -1});
  const auto num_slots = static_cast<int>(blocks.dim(0)), B = static_cast<int>(blocks.dim(1));
  check_tensor(slots, "gather_block_tokens", "slots", DType::I32, {-1});
  const int64_t n = slots.dim(0);
  check_tensor(ids, "gather_block_tokens", "ids", DType::I32, {n * B});
  if (n * B == 0) return;
  launch_kernel("gather_block_tokens_kernel", gather_block_tokens_kernel, blocks_for(n * B, kThreads), kThreads, 0,
                stream_, blocks.ptr<int32_t>(), num_slots, B, slots.ptr<int32_t>(), n * B, ids.ptr<int32_t>());
}

}  // namespace jet::cuda
