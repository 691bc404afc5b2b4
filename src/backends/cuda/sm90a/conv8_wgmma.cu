// Kiln's 8-bit implicit-GEMM convolution for Hopper (sm_90a): the same convolution and fused
// epilogue as kernels_conv8.cu (kernels_conv8.h, docs/decisions/0080), with the warpgroup MMA
// `wgmma.mma_async` (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate") instead of
// mma.sync — the instruction Hopper's INT8 / FP8 tensor-core rate needs (mma.sync runs at a fraction
// of it, and its E4M3 form is emulated on sm_90).
//
// A 128 x kBN tile per block of two warpgroups; each warpgroup owns 64 rows (pixels) and all kBN
// columns (output channels): per 32-byte step of the reduction, one m64nNk32 wgmma reads both
// operands from shared memory through matrix descriptors. Tiles of the reduction are 128 bytes, one
// 128-byte row per pixel / output channel, stored in the "128B swizzle" canonical K-major layout
// (16-byte chunk c of row r at c ^ (r % 8) inside 1024-byte atoms: PTX ISA, "Shared Memory Matrix
// Layout" / "Matrix Descriptor Format": stride byte offset 1024 between 8-row core-matrix groups, the
// leading byte offset unused for swizzled K-major operands, swizzle mode 1). The k-th 32-byte step
// inside a row is addressed by advancing the descriptor's start address by 32 * k bytes. cp.async
// fills the stages (4 in flight) exactly as in the mma.sync kernel: 16-byte chunks of 16 channels
// of one tap, zeros in the padding; `fence.proxy.async` makes them visible to the wgmma (async
// proxy) reads. Accumulator fragment of m64nNk32 (PTX ISA, "Register Fragments" for wgmma D):
// warp w of the warpgroup holds rows 16w + lane/4 (+8), columns 8j + 2(lane%4) + {0, 1} in
// d[4j + {0,1}] (+8 rows: d[4j + {2,3}]). Built only for sm_90a (cmake/KilnModules.cmake).
#include <cuda_runtime.h>

#include <type_traits>

#include "backends/cuda/conv8_common.cuh"
#include "backends/cuda/kernels_conv8.h"

namespace kiln::cuda {
namespace {

using namespace conv8;

constexpr int kBK = 128;    // bytes of the reduction per tile: one swizzled 128-byte row
constexpr int kStages = 4;  // stages: 2 tiles loading ahead, 1 being multiplied, 1 still read by the previous group
constexpr int kBM = 128;    // two warpgroups x 64 rows
constexpr int kThreads = 256;

__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}
__device__ __forceinline__ int sw128(int row, int chunk) { return row * kBK + ((chunk ^ (row & 7)) << 4); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Pins the accumulators in registers across the asynchronous MMAs (an empty asm that "reads and
// writes" each one), so the compiler schedules no other instruction on them mid-pipeline.
template <int kN>
__device__ __forceinline__ void fence_operands(int32_t (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+r"(d[i])::"memory");
}
template <int kN>
__device__ __forceinline__ void fence_operands(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int kN, bool kFp8>
struct Wgmma;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <>
struct Wgmma<128, false> {
  static __device__ __forceinline__ void run(int32_t (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
        "}, %64, %65, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
          "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
          "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
          "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
          "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
          "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
          "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
          "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
};

template <>
struct Wgmma<128, true> {
  static __device__ __forceinline__ void run(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
        "}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
};

template <>
struct Wgmma<256, false> {
  static __device__ __forceinline__ void run(int32_t (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
        "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
        "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
        "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
        "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
        "}, %128, %129, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
          "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
          "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
          "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
          "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
          "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
          "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
          "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]),
          "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]),
          "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]),
          "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]),
          "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]),
          "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]),
          "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]),
          "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]),
          "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
};

template <>
struct Wgmma<256, true> {
  static __device__ __forceinline__ void run(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
        "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
        "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
        "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
        "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
        "}, %128, %129, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
};
#endif

template <bool kFp8, int kBN>
__global__ void __launch_bounds__(kThreads, 1)
    conv8_wgmma_kernel(const int8_t* __restrict__ x, const int8_t* __restrict__ w, Conv8Geometry g, Conv8Epilogue e) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Acc = typename std::conditional<kFp8, float, int32_t>::type;
  constexpr int kAcc = kBN / 2;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);  // 1024-byte aligned atoms
  uint8_t* sa = smem;                        // [kStages][kBM][kBK]
  uint8_t* sb = smem + kStages * kBM * kBK;  // [kStages][kBN][kBK]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, wi = warp & 3;
  const int64_t m_total = g.n * g.oh * g.ow;
  const int64_t k_red = g.r * g.s * g.c;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int n0 = blockIdx.y * kBN;
  const TileLoader<kBM, kBN, kThreads, kBK / 16> loader(g, m0, tid);
  const int64_t k_tiles = (k_red + kBK - 1) / kBK;
  auto load_tile = [&](int64_t kt, int stage) {
    loader.load(x, w, g, n0, k_red, kt, sa + stage * kBM * kBK, sb + stage * kBN * kBK, [](int r, int c) { return sw128(r, c); });
  };

  Acc d[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) d[i] = Acc(0);

  for (int st = 0; st < kStages - 2; ++st) {
    if (st < k_tiles) load_tile(st, st);
    cp_async_commit();
  }
  // Tile kt's wgmma group stays in flight while tile kt + 1's starts (wgmma.wait_group 1), so the
  // load issued at iteration kt goes kStages - 2 tiles ahead, into the stage of tile kt - 2, whose
  // group completed at the end of iteration kt - 1.
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 3>();
    fence_proxy_async();  // this thread's cp.async writes, visible to the wgmma reads (async proxy)
    __syncthreads();      // every thread's; and tile kt - 2's stage is free
    {
      const int64_t next = kt + kStages - 2;
      if (next < k_tiles) load_tile(next, static_cast<int>(next % kStages));
      cp_async_commit();
    }
    const int stage = static_cast<int>(kt % kStages);
    const uint32_t a_base = smem_addr(sa + stage * kBM * kBK + wg * 64 * kBK);
    const uint32_t b_base = smem_addr(sb + stage * kBN * kBK);
    fence_operands(d);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 32; ++ks) Wgmma<kBN, kFp8>::run(d, desc_sw128(a_base + ks * 32), desc_sw128(b_base + ks * 32), 1);
    wgmma_commit();
    fence_operands(d);
    wgmma_wait1();
  }
  wgmma_wait0();
  fence_operands(d);
  cp_async_wait<0>();
  __syncthreads();

  // Epilogue: the accumulators through the shared staging tile (conv8_common.cuh).
  static_assert(kBM * kBN * 4 <= kStages * (kBM + kBN) * kBK, "the float tile must fit the stages' shared memory");
  float* tile = reinterpret_cast<float*>(smem);
  const int group = lane >> 2, pair = (lane & 3) * 2;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int lc = j * 8 + pair;
    const int col = n0 + lc;
    if (col >= g.k) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      stage_pair<kBN>(tile, e, wg * 64 + wi * 16 + group + h * 8, lc, col, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
  }
  __syncthreads();
  store_tile<kBM, kBN, kThreads>(tile, e, m0, n0, m_total, g.k, tid);
#else
  __trap();  // built for sm_90a only; conv8_wgmma_variants offers it on compute capability 9.0 only
#endif
}

constexpr int kWgmmaBn[] = {128, 256};

template <bool kFp8, int kBN>
cudaError_t launch_bn(const int8_t* x, const int8_t* w, const Conv8Geometry& g, const Conv8Epilogue& e,
                      cudaStream_t stream) {
  auto* kernel = conv8_wgmma_kernel<kFp8, kBN>;
  constexpr int kSmem = kStages * (kBM + kBN) * kBK + 1024;
  const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr != cudaSuccess) return attr;
  const int64_t m = g.n * g.oh * g.ow;
  const dim3 grid(static_cast<unsigned>((m + kBM - 1) / kBM), static_cast<unsigned>((g.k + kBN - 1) / kBN));
  kernel<<<grid, kThreads, kSmem, stream>>>(x, w, g, e);
  return cudaGetLastError();
}

}  // namespace

int conv8_wgmma_variants(const Conv8Geometry& g, bool /*fp8*/, int sm_version) {
  if (sm_version != 90) return 0;  // an sm_90a binary: compute capability 9.0 only
  if (g.c <= 0 || g.c % 16 != 0 || g.k <= 0 || g.k % 8 != 0) return 0;
  if (g.h * g.w * g.c >= (int64_t{1} << 31) || g.oh * g.stride_h + g.r * g.dil_h >= (int64_t{1} << 30) ||
      g.ow * g.stride_w + g.s * g.dil_w >= (int64_t{1} << 30))
    return 0;
  return static_cast<int>(sizeof kWgmmaBn / sizeof kWgmmaBn[0]);
}

cudaError_t launch_conv8_wgmma(const int8_t* x, const int8_t* w, const Conv8Geometry& g, bool fp8,
                               const Conv8Epilogue& e, int variant, cudaStream_t stream) {
  switch (variant) {
    case 0: return fp8 ? launch_bn<true, 128>(x, w, g, e, stream) : launch_bn<false, 128>(x, w, g, e, stream);
    case 1: return fp8 ? launch_bn<true, 256>(x, w, g, e, stream) : launch_bn<false, 256>(x, w, g, e, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
