// Micro benchmark of Kiln's 8-bit implicit-GEMM convolution (kernels_conv8.h, decision 0080) on the
// convolutions of ResNet-50 (NHWC, batch from argv[1], default 256): every tile variant, INT8 and
// FP8, CUDA-event median of 20 runs after 3 warm-ups (micro_timing.cuh); prints one JSON object per line
// {"shape", "fmt", "variant", "us", "tops"} and a last line with the ResNet-50 sum of each shape's
// fastest variant times its count in the network. Inputs are random 8-bit codes; the epilogue
// writes fp16 with a per-channel scale, bias and ReLU (QuantConv's usual form).
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -DKILN_HAVE_SM90A -Isrc -Iinclude bench/micro/conv8.cu src/backends/cuda/kernels_conv8.cu src/backends/cuda/sm90a/conv8_wgmma.cu -o conv8_bench
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cuda/kernels_conv8.h"
#include "micro_timing.cuh"

using kiln::cuda::Conv8Epilogue;
using kiln::cuda::Conv8Geometry;

namespace {

struct Shape {
  const char* name;
  int64_t c, hw, k, rs, stride, count;  // count: how many convs of this shape ResNet-50 has
};

// torchvision ResNet-50 (stride on the 3x3 conv), input 224: per stage the 1x1 reduce, 3x3, 1x1
// expand, and the projection shortcut.
const Shape kShapes[] = {
    {"s1_1x1_64_64", 64, 56, 64, 1, 1, 1},      {"s1_1x1_256_64", 256, 56, 64, 1, 1, 2},
    {"s1_3x3_64", 64, 56, 64, 3, 1, 3},         {"s1_1x1_64_256", 64, 56, 256, 1, 1, 4},
    {"s2_1x1_256_128", 256, 56, 128, 1, 1, 1},  {"s2_3x3_128_s2", 128, 56, 128, 3, 2, 1},
    {"s2_1x1_512_128", 512, 28, 128, 1, 1, 3},  {"s2_3x3_128", 128, 28, 128, 3, 1, 3},
    {"s2_1x1_128_512", 128, 28, 512, 1, 1, 4},  {"s2_proj_256_512_s2", 256, 56, 512, 1, 2, 1},
    {"s3_1x1_512_256", 512, 28, 256, 1, 1, 1},  {"s3_3x3_256_s2", 256, 28, 256, 3, 2, 1},
    {"s3_1x1_1024_256", 1024, 14, 256, 1, 1, 5}, {"s3_3x3_256", 256, 14, 256, 3, 1, 5},
    {"s3_1x1_256_1024", 256, 14, 1024, 1, 1, 6}, {"s3_proj_512_1024_s2", 512, 28, 1024, 1, 2, 1},
    {"s4_1x1_1024_512", 1024, 14, 512, 1, 1, 1}, {"s4_3x3_512_s2", 512, 14, 512, 3, 2, 1},
    {"s4_1x1_2048_512", 2048, 7, 512, 1, 1, 2},  {"s4_3x3_512", 512, 7, 512, 3, 1, 2},
    {"s4_1x1_512_2048", 512, 7, 2048, 1, 1, 3},  {"s4_proj_1024_2048_s2", 1024, 14, 2048, 1, 2, 1},
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 256;
  int dev = 0, major = 0, minor = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const int sm = major * 10 + minor;
  for (bool fp8 : {false, true}) {
    double total_us = 0;
    for (const Shape& s : kShapes) {
      Conv8Geometry g{};
      g.n = batch; g.c = s.c; g.h = g.w = s.hw; g.k = s.k; g.r = g.s = s.rs;
      g.pad_h = g.pad_w = s.rs / 2; g.stride_h = g.stride_w = s.stride; g.dil_h = g.dil_w = 1;
      g.oh = (g.h + 2 * g.pad_h - g.r) / g.stride_h + 1;
      g.ow = (g.w + 2 * g.pad_w - g.s) / g.stride_w + 1;
      const int variants = kiln::cuda::conv8_igemm_variants(g, fp8, sm);
      if (variants == 0) continue;
      const size_t xn = g.n * g.h * g.w * g.c, wn = g.k * g.r * g.s * g.c, yn = g.n * g.oh * g.ow * g.k;
      int8_t *x, *w;
      void* y;
      float *scale, *bias;
      CK(cudaMalloc(&x, xn));
      CK(cudaMalloc(&w, wn));
      CK(cudaMalloc(&y, yn * 2));
      CK(cudaMalloc(&scale, g.k * 4));
      CK(cudaMalloc(&bias, g.k * 4));
      CK(cudaMemset(x, 0x11, xn));
      CK(cudaMemset(w, 0x13, wn));
      std::vector<float> ones(g.k, 0.001f);
      CK(cudaMemcpy(scale, ones.data(), g.k * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(bias, ones.data(), g.k * 4, cudaMemcpyHostToDevice));
      Conv8Epilogue e;
      e.scale = scale;
      e.bias = bias;
      e.relu = true;
      e.y = y;
      e.y_type = kiln::cuda::StorageType::kF16;
      const double ops = 2.0 * g.n * g.oh * g.ow * g.k * g.r * g.s * g.c;
      double best = 1e30;
      for (int v = 0; v < variants; ++v) {
        const double us =
            1000.0 * kiln::bench::median_ms(nullptr, [&] { CK(kiln::cuda::launch_conv8_igemm(x, w, g, fp8, e, v, nullptr)); }, 20, 1, 3);
        best = std::min(best, us);
        std::printf("{\"shape\": \"%s\", \"batch\": %lld, \"fmt\": \"%s\", \"variant\": %d, \"us\": %.2f, \"tops\": %.1f}\n",
                    s.name, static_cast<long long>(batch), fp8 ? "fp8" : "int8", v, us, ops / us / 1e6);
      }
      total_us += best * s.count;
      CK(cudaFree(x));
      CK(cudaFree(w));
      CK(cudaFree(y));
      CK(cudaFree(scale));
      CK(cudaFree(bias));
    }
    std::printf("{\"resnet50_convs_sum_best_us\": %.1f, \"fmt\": \"%s\", \"batch\": %lld, \"sm\": %d}\n", total_us,
                fp8 ? "fp8" : "int8", static_cast<long long>(batch), sm);
  }
  return 0;
}
