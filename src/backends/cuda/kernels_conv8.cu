// Kiln's 8-bit implicit-GEMM convolution (kernels_conv8.h; docs/decisions/0080).
//
// One thread block computes a BM x BN tile of Y[M, K] (M output pixels, K output channels). The
// reduction runs over R*S*C in tiles of 64 bytes (64 int8 / E4M3 values): each 16-byte chunk of a
// tile holds 16 consecutive channels of one tap (C % 16 == 0), so the A tile (im2col rows of X) and
// the B tile (KRSC weight rows) are both "k contiguous" and reach shared memory with cp.async,
// zero-filled in the padding and past the ends. STAGES tiles are in flight (the next ones load while
// this one is multiplied). Fragments come from ldmatrix: an 8x8 b16 matrix is 8 rows of 16 bytes,
// i.e. 16 8-bit k values per row — exactly the A (row-major) and B (column-major) operand layouts of
// mma.m16n8k32 (PTX ISA, "Matrix fragments for mma.m16n8k32" with .s8 / .e4m3 operands), so no
// transposes are needed. Shared-memory rows are 64 bytes (4 chunks); chunk c of row r is stored at
// c ^ ((r >> 1) & 3), which puts the 8 rows one ldmatrix reads in 8 different 16-byte bank groups.
// The epilogue (scale, zero point, bias, residual, ReLU, float or 8-bit store) stages the tile in
// shared memory so that the residual is read and Y written in whole 16-byte runs of channels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backends/cuda/conv8_common.cuh"
#include "backends/cuda/kernels_conv8.h"

namespace kiln::cuda {
namespace {

using namespace conv8;

constexpr int kBK = 64;      // bytes (8-bit values) of the reduction per tile
constexpr int kStages = 4;   // tiles in flight

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a * b over one m16n8k32 tile.
template <bool kFp8>
__device__ __forceinline__ void mma_16832(typename std::conditional<kFp8, float, int32_t>::type (&c)[4],
                                          const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (kFp8) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    return;
  }
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (!kFp8) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    return;
  }
#endif
  __trap();  // conv8_igemm_variants offers no variant below sm_80 (INT8) / sm_89 (FP8)
}

__device__ __forceinline__ int swz(int row, int chunk) { return row * kBK + ((chunk ^ ((row >> 1) & 3)) << 4); }

// kBM x kBN tile, kWM x kWN warps (each a (kBM / kWM) x (kBN / kWN) warp tile). Two INT8 blocks per
// SM (at most 128 registers a thread); FP8 one: on sm_90 ptxas emulates the E4M3 mma.sync (an sm_89
// instruction) by converting to fp16 and using the fp16 tensor-core mma, which needs more registers.
template <bool kFp8, int kBM, int kBN, int kWM, int kWN>
__global__ void __launch_bounds__(kWM * kWN * 32, kFp8 ? 1 : 2)
    conv8_igemm_kernel(const int8_t* __restrict__ x, const int8_t* __restrict__ w, Conv8Geometry g, Conv8Epilogue e) {
  using Acc = typename std::conditional<kFp8, float, int32_t>::type;
  constexpr int kThreadsPerBlock = kWM * kWN * 32;
  constexpr int kTM = kBM / kWM, kTN = kBN / kWN;  // warp tile
  constexpr int kMI = kTM / 16, kNI = kTN / 8;      // mma tiles per warp
  static_assert(kNI % 2 == 0, "B fragments are loaded two n8 tiles at a time");

  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* sa = smem;                             // [kStages][kBM][kBK]
  uint8_t* sb = smem + kStages * kBM * kBK;       // [kStages][kBN][kBK]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kWN, wn = warp % kWN;
  const int64_t m_total = g.n * g.oh * g.ow;
  const int64_t k_red = g.r * g.s * g.c;  // reduction length, a multiple of 16
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int n0 = blockIdx.y * kBN;
  const TileLoader<kBM, kBN, kThreadsPerBlock, kBK / 16> loader(g, m0, tid);
  const int64_t k_tiles = (k_red + kBK - 1) / kBK;
  auto load_tile = [&](int64_t kt, int stage) {
    loader.load(x, w, g, n0, k_red, kt, sa + stage * kBM * kBK, sb + stage * kBN * kBK, [](int r, int c) { return swz(r, c); });
  };

  Acc acc[kMI][kNI][4];
  for (int i = 0; i < kMI; ++i)
    for (int j = 0; j < kNI; ++j)
      for (int q = 0; q < 4; ++q) acc[i][j][q] = Acc(0);

  for (int st = 0; st < kStages - 1; ++st) {
    if (st < k_tiles) load_tile(st, st);
    cp_async_commit();
  }

  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt is in shared memory; every warp is done with tile kt - 1's stage
    {
      const int64_t next = kt + kStages - 1;
      if (next < k_tiles) load_tile(next, static_cast<int>(next % kStages));
      cp_async_commit();
    }
    const int stage = static_cast<int>(kt % kStages);
    const uint8_t* sa_s = sa + stage * kBM * kBK;
    const uint8_t* sb_s = sb + stage * kBN * kBK;
#pragma unroll
    for (int ks = 0; ks < kBK / 32; ++ks) {
      uint32_t af[kMI][4], bf[kNI][2];
#pragma unroll
      for (int i = 0; i < kMI; ++i) {
        const int row = wm * kTM + i * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
        ldmatrix_x4(af[i], smem_addr(sa_s + swz(row, ks * 2 + (lane >> 4))));
      }
#pragma unroll
      for (int j = 0; j < kNI; j += 2) {
        const int row = wn * kTN + j * 8 + (lane >> 4) * 8 + (lane & 7);
        uint32_t r4[4];
        ldmatrix_x4(r4, smem_addr(sb_s + swz(row, ks * 2 + ((lane >> 3) & 1))));
        bf[j][0] = r4[0];
        bf[j][1] = r4[1];
        bf[j + 1][0] = r4[2];
        bf[j + 1][1] = r4[3];
      }
#pragma unroll
      for (int i = 0; i < kMI; ++i)
#pragma unroll
        for (int j = 0; j < kNI; ++j) mma_16832<kFp8>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  cp_async_wait<0>();

  // Epilogue, in two phases through shared memory (free now: every cp.async group has landed and
  // every warp is past its last ldmatrix after the barrier). 1: each thread applies the per-channel
  // scale, zero point and bias to its accumulators (acc[i][j][0..1]: row `group`, columns
  // 2*(lane%4) + {0, 1}; [2..3]: row group + 8) and writes the float values into a [kBM][kBN] tile
  // whose 16-byte chunks are XOR-swizzled by the row (chunk c of row r at c ^ (r & 7): the 8 rows a
  // warp writes at once fall in different banks). 2: the block walks the tile in row-major runs of
  // 8 channels, adds the residual, applies ReLU and stores each run with one 16-byte (fp16 / bf16),
  // 8-byte (8-bit) or two 16-byte (fp32) accesses — whole sectors, coalesced along the channels.
  static_assert(kBM * kBN * 4 <= kStages * (kBM + kBN) * kBK, "the float tile must fit the stages' shared memory");
  __syncthreads();
  float* tile = reinterpret_cast<float*>(smem);
  const int group = lane >> 2, pair = (lane & 3) * 2;
#pragma unroll
  for (int j = 0; j < kNI; ++j) {
    const int lc = wn * kTN + j * 8 + pair;  // column in the tile
    const int col = n0 + lc;
    if (col >= g.k) continue;  // K % 8 == 0: a run of 8 columns is wholly in or out
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        stage_pair<kBN>(tile, e, wm * kTM + i * 16 + group + h * 8, lc, col, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
  }
  __syncthreads();
  store_tile<kBM, kBN, kThreadsPerBlock>(tile, e, m0, n0, m_total, g.k, tid);
}

struct Variant {
  int bm, bn;
};
constexpr Variant kVariants[] = {{128, 128}, {128, 64}, {64, 64}};

template <bool kFp8, int kBM, int kBN, int kWM, int kWN>
cudaError_t launch_tile(const int8_t* x, const int8_t* w, const Conv8Geometry& g, const Conv8Epilogue& e,
                        cudaStream_t stream) {
  auto* kernel = conv8_igemm_kernel<kFp8, kBM, kBN, kWM, kWN>;
  constexpr int kSmem = kStages * (kBM + kBN) * kBK;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr != cudaSuccess) return attr;
  const int64_t m = g.n * g.oh * g.ow;
  const dim3 grid(static_cast<unsigned>((m + kBM - 1) / kBM), static_cast<unsigned>((g.k + kBN - 1) / kBN));
  kernel<<<grid, kWM * kWN * 32, kSmem, stream>>>(x, w, g, e);
  return cudaGetLastError();
}

template <bool kFp8>
cudaError_t launch_variant(const int8_t* x, const int8_t* w, const Conv8Geometry& g, const Conv8Epilogue& e,
                           int variant, cudaStream_t stream) {
  switch (variant) {
    case 0: return launch_tile<kFp8, 128, 128, 2, 4>(x, w, g, e, stream);
    case 1: return launch_tile<kFp8, 128, 64, 2, 2>(x, w, g, e, stream);
    case 2: return launch_tile<kFp8, 64, 64, 2, 2>(x, w, g, e, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

int conv8_igemm_variants(const Conv8Geometry& g, bool fp8, int sm_version) {
  if (g.c <= 0 || g.c % 16 != 0 || g.k <= 0 || g.k % 8 != 0) return 0;
  if (sm_version < (fp8 ? 89 : 80)) return 0;
  // Offsets inside one image and the window coordinates are 32-bit in the kernel.
  if (g.h * g.w * g.c >= (int64_t{1} << 31) || g.oh * g.stride_h + g.r * g.dil_h >= (int64_t{1} << 30) ||
      g.ow * g.stride_w + g.s * g.dil_w >= (int64_t{1} << 30))
    return 0;
  const int mma_sync = static_cast<int>(sizeof kVariants / sizeof kVariants[0]);
#ifdef KILN_HAVE_SM90A
  return mma_sync + conv8_wgmma_variants(g, fp8, sm_version);
#else
  return mma_sync;
#endif
}

cudaError_t launch_conv8_igemm(const int8_t* x, const int8_t* w, const Conv8Geometry& g, bool fp8,
                               const Conv8Epilogue& e, int variant, cudaStream_t stream) {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (variant < 0 || variant >= conv8_igemm_variants(g, fp8, major * 10 + minor) || !e.scale || !e.y)
    return cudaErrorInvalidValue;
  if (g.n * g.oh * g.ow == 0) return cudaSuccess;
  constexpr int kMmaSync = static_cast<int>(sizeof kVariants / sizeof kVariants[0]);
#ifdef KILN_HAVE_SM90A
  if (variant >= kMmaSync) return launch_conv8_wgmma(x, w, g, fp8, e, variant - kMmaSync, stream);
#endif
  return fp8 ? launch_variant<true>(x, w, g, e, variant, stream) : launch_variant<false>(x, w, g, e, variant, stream);
}

}  // namespace kiln::cuda
