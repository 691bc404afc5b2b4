// Kiln's 8-bit implicit-GEMM convolution (kernels_conv8.h, decision 0080) against the reference 8-bit
// convolution + the reference epilogue (kernels_quant.h) on the same quantized operands, for every
// tile variant, INT8 and FP8 (sm_89+), on geometries that cover padding, strides, dilation, taps that
// straddle a 64-byte reduction tile (C = 16, 48), M and K not multiples of the tile, and every kind of
// output (fp32, fp16 with a residual, bf16, INT8 / FP8 codes requantized in the epilogue).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backends/cuda/kernels_conv8.h"
#include "backends/cuda/kernels_quant.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
template <typename T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess); }
  DeviceBuffer(const std::vector<T>& v) : DeviceBuffer(v.size()) {
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  static std::vector<T> host_of(const void* d, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  std::vector<T> host(size_t n) const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// 8-bit codes: INT8 in [-20, 20]; FP8 E4M3FN codes of moderate magnitude with either sign (exponent
// field 4..9, no NaN) so float32 sums stay exact-ish and comparable.
std::vector<int8_t> codes(size_t n, bool fp8, std::mt19937& rng) {
  std::vector<int8_t> v(n);
  std::uniform_int_distribution<int> d(-20, 20), e(4, 9), m(0, 7), s(0, 1);
  for (auto& c : v)
    c = fp8 ? static_cast<int8_t>((s(rng) << 7) | (e(rng) << 3) | m(rng)) : static_cast<int8_t>(d(rng));
  return v;
}

int sm_version() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor;
}

struct Case {
  int64_t n, c, h, w, k, r, s, pad, stride, dil;
};

cuda::Conv8Geometry geometry(const Case& t) {
  cuda::Conv8Geometry g{};
  g.n = t.n; g.c = t.c; g.h = t.h; g.w = t.w; g.k = t.k; g.r = t.r; g.s = t.s;
  g.pad_h = g.pad_w = t.pad; g.stride_h = g.stride_w = t.stride; g.dil_h = g.dil_w = t.dil;
  g.oh = (t.h + 2 * t.pad - t.dil * (t.r - 1) - 1) / t.stride + 1;
  g.ow = (t.w + 2 * t.pad - t.dil * (t.s - 1) - 1) / t.stride + 1;
  return g;
}

enum class Out { kF32Relu, kF16Residual, kBF16, kInt8Codes };

TEST(GpuConv8Igemm, EveryVariantMatchesTheReferenceConv) {
  REQUIRE_GPU();
  const int sm = sm_version();
  const std::vector<Case> cases = {
      {2, 64, 14, 14, 64, 3, 3, 1, 1, 1},    // ResNet 3x3
      {1, 32, 15, 15, 48, 3, 3, 1, 2, 1},    // stride 2, odd sizes, K % 64 != 0
      {3, 16, 9, 7, 8, 1, 1, 0, 2, 1},       // 1x1 stride 2, C = 16 (4 taps per tile)
      {3, 256, 7, 7, 136, 1, 1, 0, 1, 1},    // 1x1, M = 147, K not a multiple of 64
      {1, 48, 11, 13, 24, 5, 5, 4, 1, 2},    // dilation 2, C = 48 (taps straddle tiles)
      {2, 16, 20, 20, 72, 7, 7, 3, 2, 1},    // 7x7 stride 2
  };
  std::mt19937 rng(7);
  int ran = 0;
  for (bool fp8 : {false, true}) {
    for (const Case& t : cases) {
      const cuda::Conv8Geometry g = geometry(t);
      const int variants = cuda::conv8_igemm_variants(g, fp8, sm);
      if (fp8 && sm < 89) {
        EXPECT_EQ(variants, 0);
        continue;
      }
      ASSERT_GT(variants, 0);
      const int64_t m = g.n * g.oh * g.ow, xn = g.n * g.h * g.w * g.c, wn = g.k * g.r * g.s * g.c;
      SCOPED_TRACE("fp8=" + std::to_string(fp8) + " c=" + std::to_string(g.c) + " k=" + std::to_string(g.k) +
                   " r=" + std::to_string(g.r));
      const DeviceBuffer<int8_t> x(codes(static_cast<size_t>(xn), fp8, rng)), w(codes(static_cast<size_t>(wn), fp8, rng));
      std::vector<float> scale(static_cast<size_t>(g.k)), bias(static_cast<size_t>(g.k)), res(static_cast<size_t>(m * g.k));
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      const float x_scale = 0.03f;
      std::vector<float> w_scale(static_cast<size_t>(g.k));
      for (int64_t k = 0; k < g.k; ++k) {
        w_scale[k] = fp8 ? 0.002f * (1.f + 0.01f * k) : 0.01f * (1.f + 0.02f * k);
        scale[k] = x_scale * w_scale[k];
        bias[k] = u(rng);
      }
      for (auto& v : res) v = u(rng);
      const DeviceBuffer<float> d_scale(scale), d_wscale(w_scale), d_bias(bias), d_res(res);
      // Reference: the accumulator, then the epilogue into fp32 (with the same residual / ReLU).
      DeviceBuffer<int32_t> acc(static_cast<size_t>(m * g.k));
      ASSERT_EQ(cuda::launch_conv_8bit_reference(x.p, w.p, acc.p, g, fp8, nullptr), cudaSuccess);
      for (Out o : {Out::kF32Relu, Out::kF16Residual, Out::kBF16, Out::kInt8Codes}) {
        const bool residual = o == Out::kF16Residual;
        const bool relu = o != Out::kBF16;
        DeviceBuffer<float> ref(static_cast<size_t>(m * g.k));
        // The reference residual is read as float32; the kernel's as fp16 (rounded the same way).
        std::vector<float> res16 = res;
        std::vector<uint16_t> res_h(res.size());
        for (size_t i = 0; i < res.size(); ++i) {
          const __half h = __float2half_rn(res[i]);
          res16[i] = __half2float(h);
          res_h[i] = *reinterpret_cast<const uint16_t*>(&h);
        }
        const DeviceBuffer<float> d_res16(res16);
        const DeviceBuffer<uint16_t> d_res_h(res_h);
        ASSERT_EQ(cuda::launch_dequant_epilogue(acc.p, !fp8, ref.p, cuda::StorageType::kF32, m, g.k, x_scale,
                                                d_wscale.p, nullptr, 0, d_bias.p, relu, nullptr,
                                                residual ? d_res16.p : nullptr),
                  cudaSuccess);
        std::vector<float> want = ref.host(static_cast<size_t>(m * g.k));
        DeviceBuffer<int8_t> ref_q(static_cast<size_t>(m * g.k));
        const float y_scale = 0.05f;
        if (o == Out::kInt8Codes) {
          ASSERT_EQ(cuda::launch_quantize_8bit(cuda::StorageType::kF32, ref.p, ref_q.p, m * g.k, y_scale, 0, fp8, nullptr),
                    cudaSuccess);
        }
        const std::vector<int8_t> want_q = ref_q.host(static_cast<size_t>(m * g.k));
        double max_ref = 0;
        for (float v : want) max_ref = std::max(max_ref, std::fabs(double{v}));
        ASSERT_GT(max_ref, 0.1);
        for (int v = 0; v < variants; ++v) {
          SCOPED_TRACE("variant " + std::to_string(v) + " out " + std::to_string(static_cast<int>(o)));
          DeviceBuffer<float> y(static_cast<size_t>(m * g.k));  // big enough for every output type
          ASSERT_EQ(cudaMemset(y.p, 0x7f, static_cast<size_t>(m * g.k) * 4), cudaSuccess);
          cuda::Conv8Epilogue e;
          e.scale = d_scale.p;
          e.bias = d_bias.p;
          e.relu = relu;
          e.y = y.p;
          if (residual) {
            e.residual = d_res_h.p;
            e.res_type = cuda::StorageType::kF16;
          }
          e.y_type = o == Out::kF16Residual ? cuda::StorageType::kF16
                                            : (o == Out::kBF16 ? cuda::StorageType::kBF16 : cuda::StorageType::kF32);
          e.y_8bit = o == Out::kInt8Codes;
          e.y_fp8 = fp8;
          e.y_scale = y_scale;
          ASSERT_EQ(cuda::launch_conv8_igemm(x.p, w.p, g, fp8, e, v, nullptr), cudaSuccess);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          ++ran;
          if (o == Out::kInt8Codes) {
            const std::vector<int8_t> got = DeviceBuffer<int8_t>::host_of(y.p, static_cast<size_t>(m * g.k));
            int64_t off_by_one = 0;
            for (size_t i = 0; i < got.size(); ++i) {
              const int d = fp8 ? (static_cast<uint8_t>(got[i]) & 0x7f) - (static_cast<uint8_t>(want_q[i]) & 0x7f)
                                : got[i] - want_q[i];
              ASSERT_LE(std::abs(d), 1) << "element " << i;
              off_by_one += d != 0;
            }
            // A one-step difference only at a rounding boundary (float sums in another order).
            EXPECT_LE(off_by_one, static_cast<int64_t>(got.size() / 200 + 2));
            continue;
          }
          std::vector<float> got(static_cast<size_t>(m * g.k));
          if (e.y_type == cuda::StorageType::kF32) {
            got = y.host(got.size());
          } else {
            std::vector<uint16_t> raw = DeviceBuffer<uint16_t>::host_of(y.p, got.size());
            for (size_t i = 0; i < got.size(); ++i) {
              if (e.y_type == cuda::StorageType::kF16) {
                __half h;
                *reinterpret_cast<uint16_t*>(&h) = raw[i];
                got[i] = __half2float(h);
              } else {
                const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
                std::memcpy(&got[i], &bits, 4);
              }
            }
          }
          // FP8: Hopper's wgmma keeps fewer accumulator bits than float32 (DeepSeek-V3 report, sec. 3.3.2),
          // so its sums differ from the reference's float32 sums by more than reordering alone.
          const double tol = (e.y_type == cuda::StorageType::kF32 ? (fp8 ? 2e-4 : 1e-6) : 1e-2) * max_ref;
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], want[i], tol) << "element " << i << " of " << got.size();
        }
      }
    }
  }
  EXPECT_GT(ran, 0);
}

TEST(GpuConv8Igemm, RefusesUnsupportedGeometries) {
  REQUIRE_GPU();
  cuda::Conv8Geometry g = geometry({1, 24, 8, 8, 16, 3, 3, 1, 1, 1});  // C % 16 != 0
  EXPECT_EQ(cuda::conv8_igemm_variants(g, false, 90), 0);
  g = geometry({1, 32, 8, 8, 12, 3, 3, 1, 1, 1});  // K % 8 != 0
  EXPECT_EQ(cuda::conv8_igemm_variants(g, false, 90), 0);
  g = geometry({1, 32, 8, 8, 16, 3, 3, 1, 1, 1});
  EXPECT_EQ(cuda::conv8_igemm_variants(g, true, 80), 0);  // FP8 mma needs sm_89
  EXPECT_EQ(cuda::conv8_igemm_variants(g, false, 75), 0);
  EXPECT_GT(cuda::conv8_igemm_variants(g, false, 80), 0);
  cuda::Conv8Epilogue e;
  EXPECT_EQ(cuda::launch_conv8_igemm(nullptr, nullptr, g, false, e, 0, nullptr), cudaErrorInvalidValue);  // no scale / y
}
#endif

}  // namespace
}  // namespace kiln::testing
