// Our Hopper GEMM for the MLP's first half: out = silu(x · gateᵀ) * (x · upᵀ), bf16 operands, fp32
// accumulation, on wgmma tensor cores fed by TMA, with the SwiGLU in the epilogue.
//
// Structure (a warp-specialised, persistent kernel, one CTA per multiprocessor):
//   * tiles of 128 rows x 256 weight rows (128 gate rows and the 128 matching up rows), walked
//     along the 64-wide K steps;
//   * a producer warp group: one thread issues the TMA copies of x's and w's tiles into a ring of
//     kStages shared-memory stages (128-byte swizzle, the layout wgmma reads) and arms each
//     stage's "full" barrier with the bytes to expect;
//   * two consumer warp groups, 64 rows each: wait for a stage, run 4 wgmma m64n256k16 on it,
//     release it through its "empty" barrier, and after the last K step turn their 64 x 256
//     fp32 accumulators (128 registers a thread) into 64 x 128 bf16 outputs;
//   * CTAs take tiles t = blockIdx.x, + gridDim.x, ...; the row tile varies fastest, so CTAs
//     running together share a weight tile (read from DRAM once, from L2 by the others) while
//     the activations stay in L2. The tiles of a last partial wave are split along K (Schedule).
// SwiGLU: a tile's 256 weight rows are gate rows n.. and the matching up rows I + n.. of w, so
// every thread holds gate and up of the same outputs (accumulator columns c and c + 128) and
// writes silu(gate) * up: no gate_up round trip through memory and no swiglu kernel.
// Launched with programmatic dependent launch like our other kernels (kernel_util.cuh).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/hopper_gemm.h"
#include "backend/cuda/kernel_util.cuh"

// Device passes for other architectures compile the kernel as a trap, leaving its helpers unused.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#pragma nv_diag_suppress 177
#endif

namespace jet::cuda {

namespace {

constexpr int kBlockM = 128;  // rows of x per tile (two consumer groups of 64)
constexpr int kBlockN = 256;  // rows of w per tile (the wgmma's N)
constexpr int kHalfN = kBlockN / 2;
constexpr int kBlockK = 64;  // one 128-byte swizzle row of bf16
constexpr int kStages = 4;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kATileElems = kBlockM * kBlockK;
constexpr int kBTileElems = kBlockN * kBlockK;
constexpr uint32_t kStageBytes = (kATileElems + kBTileElems) * sizeof(bf16);
// The stages, plus slack to align them to the 1,024 bytes the 128-byte swizzle repeats over.
constexpr size_t kSmemBytes = size_t{kStages} * kStageBytes + 1024;

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// --- mbarriers and TMA (PTX) ------------------------------------------------------------------

__device__ __forceinline__ void barrier_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count));
}
__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}
// Arrives and adds `bytes` to the transactions the current phase waits for.
__device__ __forceinline__ void barrier_arrive_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}
// Waits until the phase of parity `parity` has completed. A fresh barrier is in phase 0, so a wait
// for parity 1 returns at once: the producer's first pass over the empty stages.
__device__ __forceinline__ void barrier_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_address(bar)), "r"(parity)
                 : "memory");
  }
}

// The box of `map` at (inner coordinate k, row) into shared memory; completes on `bar`.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int k, int row, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(smem_address(bar))
      : "memory");
}

// --- wgmma (PTX) --------------------------------------------------------------------------------

// Shared-memory matrix descriptor of a K-major tile in the 128-byte swizzle: rows of 64 bf16
// (128 bytes), 8-row groups 1,024 bytes apart (stride byte offset 64 x 16), leading byte offset
// unused (1), base offset 0 (tiles are 1,024-aligned). K steps of 16 advance the start by 32 bytes.
__device__ __forceinline__ uint64_t tile_descriptor(const bf16* tile) {
  return ((uint64_t{smem_address(tile)} & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{64} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most `Pending` committed batches of this warp group are still running.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

// d[64 x 256] (+)= a[64 x 16] · b[256 x 16]ᵀ, both from shared memory; accumulate = 0 overwrites d.
// Thread layout of d: warp w, lane l holds rows 16 w + l / 4 (+ 8) and, for each 8-column block
// j, columns 8 j + 2 (l % 4) (+ 1): d[4 j + 0, 1] row r, d[4 j + 2, 3] row r + 8.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),
        "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <int Count>
__device__ __forceinline__ void registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Count));
}
template <int Count>
__device__ __forceinline__ void registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Count));
}

__device__ __forceinline__ void store_pair(bf16* dst, float lo, float hi) {
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(lo, hi);
}

__device__ __forceinline__ float rounded_to_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// SwiGLU of an fp32 gate and up, rounded to bf16 first as the unfused matmul would store them.
__device__ __forceinline__ float swiglu_of_bf16(float gate, float up) {
  return swiglu_value(rounded_to_bf16(gate), rounded_to_bf16(up));
}

// The work units of a launch, in the order producer and consumers both walk them (unit u,
// u + gridDim.x, ...). The first tiles - split_tiles units are whole tiles, the row tile varying
// fastest. The last split_tiles tiles, the launch's last partial wave, are cut into `parts`
// ranges of K steps each, so that wave ends sooner (a quarter of the tiles left over would
// otherwise idle three quarters of the GPU for a whole tile's time); their parts add up through
// the scratch space.
struct Schedule {
  int tiles_m, tiles, split_tiles, parts, k_steps;
  __device__ int units() const { return tiles - split_tiles + split_tiles * parts; }
};

struct Unit {
  int tile, split = -1, part = 0;  // split: index among the split tiles, -1 for a whole tile
  int k_begin, k_end;
};

__device__ __forceinline__ Unit unit_at(const Schedule& s, int u) {
  const int whole = s.tiles - s.split_tiles;
  if (u < whole) return Unit{.tile = u, .k_begin = 0, .k_end = s.k_steps};
  const int split = (u - whole) / s.parts, part = (u - whole) % s.parts;
  return Unit{.tile = whole + split,
              .split = split,
              .part = part,
              .k_begin = part * s.k_steps / s.parts,
              .k_end = (part + 1) * s.k_steps / s.parts};
}

// Synchronises the 128 threads of consumer group `consumer` (named barriers 1 and 2).
__device__ __forceinline__ void consumer_group_sync(int consumer) {
  asm volatile("bar.sync %0, 128;" ::"r"(consumer + 1) : "memory");
}

// Writes a consumer thread's outputs from its 128 accumulator elements, value(i) for element i
// (the wgmma layout: rows `row` and row + 8, columns col + 8 j (+ 1)); gate and up are the tile's
// columns c and c + 128.
template <typename Value>
__device__ __forceinline__ void write_tile(bf16* out, int M, int out_cols, int row, int col, Value value) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (row + 8 * h >= M) continue;
    bf16* dst = out + int64_t{row + 8 * h} * out_cols + col;
#pragma unroll
    for (int j = 0; j < kHalfN / 8; ++j) {
      const int gate = 4 * j + 2 * h, up = 4 * (j + kHalfN / 8) + 2 * h;
      store_pair(dst + 8 * j, swiglu_of_bf16(value(gate), value(up)), swiglu_of_bf16(value(gate + 1), value(up + 1)));
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    hopper_gemm_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map, bf16* out,
                       int M, int N, Schedule sched, float* partial, int* counters) {
  // The body is wgmma code: device code for sm_90a only (and seen by the host pass).
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[kStages], empty[kStages];
  __shared__ int last_part[kConsumers];
  bf16* stages = reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  auto a_tile = [&](int s) { return stages + s * (kATileElems + kBTileElems); };
  auto b_tile = [&](int s) { return a_tile(s) + kATileElems; };
  const int out_cols = N / 2;
  const int units = sched.units();

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], kConsumers * 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  await_previous_kernel();  // x is the previous kernel's output

  const int group = threadIdx.x / 128;
  if (group == 0) {  // producer
    registers_down<40>();
    if (threadIdx.x != 0) return;
    int stage = 0;
    uint32_t phase = 0;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const Unit unit = unit_at(sched, u);
      const int row = unit.tile % sched.tiles_m * kBlockM, col_tile = unit.tile / sched.tiles_m;
      const int gate_row = col_tile * kHalfN, up_row = out_cols + gate_row;  // the weight tile's halves
      for (int kb = unit.k_begin; kb < unit.k_end; ++kb) {
        barrier_wait(&empty[stage], phase ^ 1);
        barrier_arrive_expect(&full[stage], kStageBytes);
        tma_load(a_tile(stage), &x_map, kb * kBlockK, row, &full[stage]);
        tma_load(b_tile(stage), &w_map, kb * kBlockK, gate_row, &full[stage]);
        tma_load(b_tile(stage) + kHalfN * kBlockK, &w_map, kb * kBlockK, up_row, &full[stage]);
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
    return;
  }

  registers_up<232>();
  const int consumer = group - 1, thread = threadIdx.x % 128;
  const int warp = thread / 32, lane = threadIdx.x % 32;
  int stage = 0;
  uint32_t phase = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Unit unit = unit_at(sched, u);
    float acc[128];  // scoped to the unit, so the split path's sums can reuse its registers
#pragma unroll
    for (float& v : acc) v = 0.0f;
    // One batch of 4 wgmma in flight while the next stage is awaited: a stage is released once
    // the batch after it has been issued and its own batch has completed.
    int previous = -1;
    for (int kb = unit.k_begin; kb < unit.k_end; ++kb) {
      barrier_wait(&full[stage], phase);
      const uint64_t desc_a = tile_descriptor(a_tile(stage) + consumer * 64 * kBlockK);
      const uint64_t desc_b = tile_descriptor(b_tile(stage));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        wgmma_m64n256k16(acc, desc_a + 2 * kk, desc_b + 2 * kk, kb > unit.k_begin || kk > 0);
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (previous >= 0) barrier_arrive(&empty[previous]);
      previous = stage;
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    wgmma_wait<0>();
    if (previous >= 0) barrier_arrive(&empty[previous]);

    const int row = unit.tile % sched.tiles_m * kBlockM + consumer * 64 + warp * 16 + lane / 4;
    const int col = unit.tile / sched.tiles_m * kHalfN + 2 * (lane % 4);
    if (unit.split < 0) {
      write_tile(out, M, out_cols, row, col, [&](int i) { return acc[i]; });
      continue;
    }
    // A part of a split tile: store this thread's 128 sums; the group whose part lands last adds
    // the parts up, in part order (the same sum whichever lands last), and writes the tile.
    // A part's sums as [32 float4][128 threads], so each store and load of a warp is 512 bytes in a row.
    const int64_t group_slot = (int64_t{unit.split} * kConsumers + consumer) * sched.parts;
    auto part_sums = [&](int p) { return reinterpret_cast<float4*>(partial) + (group_slot + p) * 32 * 128 + thread; };
    float4* mine = part_sums(unit.part);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      mine[i * 128] = make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
    }
    __threadfence();
    consumer_group_sync(consumer);
    if (thread == 0) {
      int* counter = &counters[unit.split * kConsumers + consumer];
      const bool last = atomicAdd(counter, 1) == sched.parts - 1;
      if (last) *counter = 0;  // left zero for the next kernel
      last_part[consumer] = last;
    }
    consumer_group_sync(consumer);
    if (!last_part[consumer]) continue;
    __threadfence();
    // Every part's loads before any store: the stores might alias them for all the compiler knows.
    float sum[128];
#pragma unroll
    for (float& v : sum) v = 0.0f;
    for (int p = 0; p < sched.parts; ++p) {
      const float4* sums = part_sums(p);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const float4 v = __ldcg(sums + i * 128);
        sum[4 * i] += v.x;
        sum[4 * i + 1] += v.y;
        sum[4 * i + 2] += v.z;
        sum[4 * i + 3] += v.w;
      }
    }
    write_tile(out, M, out_cols, row, col, [&](int i) { return sum[i]; });
  }
#else
  __trap();  // hopper_gemm_available() is false without the sm_90a code
#endif
}

// Writes 1 when the code the driver picked for this device is the sm_90a one.
__global__ void sm90a_probe_kernel(int* has_wgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *has_wgmma = 1;
#else
  *has_wgmma = 0;
#endif
}

bool probe_hopper_gemm() {
  const char* env = std::getenv("JET_HOPPER_GEMM");
  if (env && std::strcmp(env, "0") == 0) return false;
  int device = 0, major = 0, minor = 0;
  JET_CUDA_CHECK(cudaGetDevice(&device));
  JET_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  JET_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) return false;
  int* flag = nullptr;
  int has_wgmma = 0;
  JET_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  sm90a_probe_kernel<<<1, 1>>>(flag);
  const cudaError_t launched = cudaGetLastError();
  if (launched == cudaSuccess) JET_CUDA_CHECK(cudaMemcpy(&has_wgmma, flag, sizeof(int), cudaMemcpyDeviceToHost));
  JET_CUDA_CHECK(cudaFree(flag));
  return launched == cudaSuccess && has_wgmma == 1;
}

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    JET_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    JET_CHECK(found == cudaDriverEntryPointSuccess && fn, "hopper_gemm: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// The TMA view of a row-major bf16 [rows, K] matrix in boxes of [box_rows, kBlockK]; reads past
// the edges give zeros.
CUtensorMap tile_map(const void* data, int64_t rows, int64_t K, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(K) * sizeof(bf16)};
  const cuuint32_t box[2] = {kBlockK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(data), dims, strides, box,
                           element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  JET_CHECK(r == CUDA_SUCCESS, "hopper_gemm: cuTensorMapEncodeTiled failed (", static_cast<int>(r), ") for [", rows,
            ", ", K, "]");
  return map;
}

// Whole tiles fill whole waves of the grid; the tiles of a last partial wave are split into the
// most parts (up to 4, each at least 4 K steps) whose units still fit one wave and whose partial
// sums fit the scratch space.
Schedule make_schedule(int64_t M, int64_t N, int64_t K, int64_t grid, const GemmScratch& scratch) {
  Schedule s{};
  s.tiles_m = static_cast<int>((M + kBlockM - 1) / kBlockM);
  s.tiles = static_cast<int>(s.tiles_m * (N / kBlockN));
  s.k_steps = static_cast<int>((K + kBlockK - 1) / kBlockK);
  s.parts = 1;
  const int64_t tail = s.tiles % grid;
  constexpr int64_t kMaxParts = 4, kMinStepsPerPart = 4;
  constexpr int64_t kTileBytes = int64_t{kBlockM} * kBlockN * sizeof(float);
  for (int64_t parts = std::min({kMaxParts, tail > 0 ? grid / tail : 1, s.k_steps / kMinStepsPerPart}); parts > 1;
       --parts) {
    if (tail * parts * kTileBytes <= static_cast<int64_t>(scratch.partial_bytes) &&
        tail * kConsumers <= scratch.num_counters) {
      s.parts = static_cast<int>(parts);
      s.split_tiles = static_cast<int>(tail);
      break;
    }
  }
  return s;
}

}  // namespace

bool hopper_gemm_available() {
  static const bool available = probe_hopper_gemm();
  return available;
}

bool hopper_gemm_fits(const Tensor& x, const Tensor& w) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  constexpr int64_t kMaxDim = int64_t{1} << 30;
  return M >= kHopperGemmMinRows && M < kMaxDim && N < kMaxDim && K < kMaxDim && K % 8 == 0 && N % kBlockN == 0 &&
         aligned_16({x.data, w.data}) && hopper_gemm_available();
}

void hopper_gemm_swiglu(const Tensor& x, const Tensor& w, Tensor& out, const GemmScratch& scratch,
                        cudaStream_t stream) {
  static const bool configured = [] {
    JET_CUDA_CHECK(cudaFuncSetAttribute(hopper_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmemBytes)));
    return true;
  }();
  (void)configured;
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  const int64_t tiles = (M + kBlockM - 1) / kBlockM * (N / kBlockN);
  const int64_t grid = std::min<int64_t>(tiles, multiprocessor_count());
  const Schedule sched = make_schedule(M, N, K, grid, scratch);
  launch_kernel("hopper_gemm_kernel", hopper_gemm_kernel, static_cast<unsigned>(grid), kThreads, kSmemBytes, stream,
                tile_map(x.data, M, K, kBlockM), tile_map(w.data, N, K, kHalfN), out.ptr<bf16>(), static_cast<int>(M),
                static_cast<int>(N), sched, scratch.partial, scratch.counters);
}

}  // namespace jet::cuda
