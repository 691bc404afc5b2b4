// RMSNormalization's CUDA kernels at decode shapes (kernels_transformer.h launch_rms_norm; docs/
// decisions/0067's RMSNorm section): a few rows of 2048..8192 fp16 values through the 16-byte
// path and 8200 through the element-by-element one, against the formula in double on the same
// fp16 inputs; GpuRmsNormBench.DecodeRowsMicroseconds only prints the time per launch. The op
// table's RMSNormalization rows check the layer through plans.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/numerics.h"
#include "gpu/gpu_test_util.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/kernels_transformer.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
struct DeviceHalfs {
  void* p = nullptr;
  explicit DeviceHalfs(const std::vector<uint16_t>& h) {
    EXPECT_EQ(cudaMalloc(&p, h.size() * 2), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceHalfs() { cudaFree(p); }
};

std::vector<uint16_t> random_halfs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<uint16_t> h(n);
  for (auto& v : h) v = float_to_fp16(u(rng));
  return h;
}
#endif

TEST(GpuRmsNorm, DecodeRowsMatchTheFormula) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (int64_t cols : {2048, 3072, 4096, 8192, 8200}) {
    for (int64_t rows : {1, 8}) {
      const auto x = random_halfs(static_cast<size_t>(rows * cols), static_cast<uint32_t>(cols + rows));
      const auto w = random_halfs(static_cast<size_t>(cols), static_cast<uint32_t>(cols + 100));
      DeviceHalfs dx(x), dw(w), dy(std::vector<uint16_t>(x.size(), 0));
      ASSERT_EQ(cuda::launch_rms_norm(dx.p, dw.p, cols, dy.p, cuda::StorageType::kF16, rows, cols, 1e-5f, nullptr),
                cudaSuccess);
      std::vector<uint16_t> y(x.size());
      ASSERT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      double worst = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t c = 0; c < cols; ++c) ss += std::pow(fp16_to_float(x[r * cols + c]), 2);
        const double inv = 1.0 / std::sqrt(ss / cols + 1e-5);
        for (int64_t c = 0; c < cols; ++c) {
          const double want = fp16_to_float(x[r * cols + c]) * inv * fp16_to_float(w[c]);
          worst = std::max(worst, std::fabs(fp16_to_float(y[r * cols + c]) - want) / std::max(1.0, std::fabs(want)));
        }
      }
      EXPECT_LT(worst, 2e-3) << rows << " x " << cols;  // fp16 output rounding is 2^-11 relative
    }
  }
#endif
}

TEST(GpuRmsNormBench, DecodeRowsMicroseconds) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (int64_t cols : {2048, 4096}) {
    for (int64_t rows : {1, 8, 64}) {
      DeviceHalfs dx(random_halfs(static_cast<size_t>(rows * cols), 1)), dw(random_halfs(static_cast<size_t>(cols), 2)),
          dy(std::vector<uint16_t>(static_cast<size_t>(rows * cols), 0));
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      constexpr int kReps = 200;
      ASSERT_EQ(cuda::launch_rms_norm(dx.p, dw.p, cols, dy.p, cuda::StorageType::kF16, rows, cols, 1e-5f, nullptr),
                cudaSuccess);
      cudaEventRecord(a);
      for (int i = 0; i < kReps; ++i)
        cuda::launch_rms_norm(dx.p, dw.p, cols, dy.p, cuda::StorageType::kF16, rows, cols, 1e-5f, nullptr);
      cudaEventRecord(b);
      ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      std::printf("rms_norm fp16 %lld x %lld: %.2f us per launch (back to back)\n", static_cast<long long>(rows),
                  static_cast<long long>(cols), 1000.0 * ms / kReps);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
