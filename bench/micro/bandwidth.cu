// Microbenchmark: Kiln's bandwidth-bound CUDA kernels (docs/decisions/0082) against the copy
// bandwidth the same GPU measures. For each kernel on the transformer shapes of
// bench/results/2026-11-26-h200-session10 (batch 32, fp16), the median of 50 launches (CUDA
// events, 5 warm-ups) gives us, the bytes it must move (every input read once, the output
// written once) give GB/s, and a cudaMemcpy device-to-device of the same traffic (half the bytes
// copied: a copy reads and writes each) gives copy_gbps and pct_of_copy = gbps / copy_gbps. A
// 256 MiB copy gives the card's peak copy figure. Also measured: the device error of the fast
// erf-GELU (fast_math.cuh) against erff over [-10, 10]. One JSON object per line.
//   cmake --build build --target kiln_bandwidth_bench && build/kiln_bandwidth_bench
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/fast_math.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/kernels_more.h"
#include "ir/pointwise_opcode.h"
#include "micro_timing.cuh"

using kiln::bench::median_ms;


namespace {

using kiln::cuda::StorageType;


// Device buffers of random fp16 in [-3, 3] (or given bytes), freed at exit.
std::vector<void*> g_buffers;
void* dev_half(int64_t n, uint32_t seed) {
  std::vector<__half> h(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  for (auto& v : h) v = __float2half(u(rng));
  void* d = nullptr;
  CK(cudaMalloc(&d, n * 2));
  CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
  g_buffers.push_back(d);
  return d;
}
void* dev_bytes(int64_t bytes) {
  void* d = nullptr;
  CK(cudaMalloc(&d, bytes));
  CK(cudaMemset(d, 0, bytes));
  g_buffers.push_back(d);
  return d;
}

cudaStream_t g_s;
void* g_copy_src = nullptr;
void* g_copy_dst = nullptr;
constexpr int64_t kCopyMax = int64_t{256} << 20;

// GB/s of a device-to-device copy moving `traffic` bytes (traffic / 2 copied).
double copy_gbps(int64_t traffic) {
  const int64_t n = std::min<int64_t>(traffic / 2, kCopyMax);
  const float ms = median_ms(g_s, [&] { CK(cudaMemcpyAsync(g_copy_dst, g_copy_src, n, cudaMemcpyDeviceToDevice, g_s)); });
  return 2.0 * n / (ms * 1e-3) / 1e9;
}

void report(const std::string& kernel, const std::string& shape, int64_t traffic, const std::function<void()>& launch) {
  launch();
  CK(cudaStreamSynchronize(g_s));
  CK(cudaGetLastError());
  const float ms = median_ms(g_s, launch);
  const double gbps = traffic / (ms * 1e-3) / 1e9, ref = copy_gbps(traffic);
  std::printf(
      "{\"kernel\": \"%s\", \"shape\": \"%s\", \"dtype\": \"fp16\", \"bytes\": %lld, \"us\": %.2f, \"gbps\": %.0f, "
      "\"copy_gbps\": %.0f, \"pct_of_copy\": %.1f}\n",
      kernel.c_str(), shape.c_str(), static_cast<long long>(traffic), ms * 1e3, gbps, ref, 100.0 * gbps / ref);
  std::fflush(stdout);
}

#define LK(x) CK(x)

__global__ void gelu_err_kernel(float* out, int n) {
  // out[0]: max |erf_as - erff|; out[1]: max |fast_gelu_erf - erff GELU| / max(1, |x|).
  __shared__ float m0[256], m1[256];
  float e0 = 0.f, e1 = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float x = -10.f + 20.f * static_cast<float>(i) / static_cast<float>(n - 1);
    e0 = fmaxf(e0, fabsf(kiln::cuda::erf_as(x) - erff(x)));
    const float ref = 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    e1 = fmaxf(e1, fabsf(kiln::cuda::fast_gelu_erf(x) - ref) / fmaxf(1.f, fabsf(x)));
  }
  m0[threadIdx.x] = e0;
  m1[threadIdx.x] = e1;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < 256; ++k) {
      e0 = fmaxf(e0, m0[k]);
      e1 = fmaxf(e1, m1[k]);
    }
    atomicMax(reinterpret_cast<int*>(out), __float_as_int(e0));  // non-negative floats order as ints
    atomicMax(reinterpret_cast<int*>(out + 1), __float_as_int(e1));
  }
}

}  // namespace

int main() {
  using namespace kiln::cuda;
  CK(cudaStreamCreate(&g_s));
  CK(cudaMalloc(&g_copy_src, kCopyMax));
  CK(cudaMalloc(&g_copy_dst, kCopyMax));
  CK(cudaMemset(g_copy_src, 0, kCopyMax));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("{\"device\": \"%s\", \"sms\": %d}\n", prop.name, prop.multiProcessorCount);
  {
    const float ms = median_ms(g_s, [&] { CK(cudaMemcpyAsync(g_copy_dst, g_copy_src, kCopyMax, cudaMemcpyDeviceToDevice, g_s)); });
    std::printf("{\"kernel\": \"cudaMemcpy_d2d_peak\", \"bytes\": %lld, \"us\": %.2f, \"gbps\": %.0f}\n",
                static_cast<long long>(2 * kCopyMax), ms * 1e3, 2.0 * kCopyMax / (ms * 1e-3) / 1e9);
  }
  {  // fast GELU error on the device
    float* e = nullptr;
    CK(cudaMalloc(&e, 8));
    CK(cudaMemset(e, 0, 8));
    gelu_err_kernel<<<256, 256>>>(e, 1 << 24);
    float h[2];
    CK(cudaMemcpy(h, e, 8, cudaMemcpyDeviceToHost));
    std::printf("{\"check\": \"fast_erf_vs_erff\", \"max_abs_err\": %.3g, \"gelu_max_err_scaled\": %.3g}\n", h[0], h[1]);
    CK(cudaFree(e));
  }
  const StorageType h = StorageType::kF16;
  auto flat = [](int64_t n) {
    BroadcastDesc d;
    d.rank = 1;
    d.out_dims[0] = n;
    d.a_strides[0] = 1;
    d.b_strides[0] = 1;
    return d;
  };
  // ---- Gelu (erf: BERT, ViT; tanh: GPT-2's form)
  for (int64_t s : {128, 197}) {
    const int64_t n = 32 * s * 3072;
    void* x = dev_half(n, 1);
    void* y = dev_bytes(n * 2);
    const BroadcastDesc d = flat(n);
    const std::string shape = "32x" + std::to_string(s) + "x3072";
    report("Gelu_erf", shape, 4 * n, [&] { LK(launch_pointwise(PointwiseOp::kGeluErf, h, x, nullptr, y, d, 0, 0, g_s)); });
    if (s == 128)
      report("Gelu_tanh", shape, 4 * n, [&] { LK(launch_pointwise(PointwiseOp::kGeluTanh, h, x, nullptr, y, d, 0, 0, g_s)); });
  }
  // ---- Add with a row broadcast (GPT-2: token + position embeddings), [32,128,768] + [128,768]
  {
    const int64_t B = 32, S = 128, H = 768, n = B * S * H;
    void* a = dev_half(n, 2);
    void* b = dev_half(S * H, 3);
    void* y = dev_bytes(n * 2);
    BroadcastDesc d;
    d.rank = 3;
    d.out_dims[0] = B, d.out_dims[1] = S, d.out_dims[2] = H;
    d.a_strides[0] = S * H, d.a_strides[1] = H, d.a_strides[2] = 1;
    d.b_strides[0] = 0, d.b_strides[1] = H, d.b_strides[2] = 1;
    report("Add_row_broadcast", "32x128x768+128x768", 4 * n + 2 * S * H,
           [&] { LK(launch_pointwise(PointwiseOp::kAdd, h, a, b, y, d, 0, 0, g_s)); });
    // Channel broadcast: + [768]
    d.b_strides[1] = 0;
    report("Add_channel_broadcast", "32x128x768+768", 4 * n + 2 * H,
           [&] { LK(launch_pointwise(PointwiseOp::kAdd, h, a, b, y, d, 0, 0, g_s)); });
  }
  // ---- FusedPointwise: BERT's embeddings sum, word [32,128,768] + token type [32,128,768] +
  // position [1,128,768] (2 instructions, 3 inputs)
  {
    const int64_t B = 32, S = 128, H = 768, n = B * S * H;
    PwDeviceProgram p;
    p.rank = 3;
    p.out_dims[0] = B, p.out_dims[1] = S, p.out_dims[2] = H;
    p.num_inputs = 3;
    for (int k = 0; k < 3; ++k) {
      p.in_strides[k][0] = k == 2 ? 0 : S * H;
      p.in_strides[k][1] = H;
      p.in_strides[k][2] = 1;
    }
    p.num_instrs = 2;
    for (int j = 0; j < 2; ++j) {
      p.instrs[j].op = static_cast<int32_t>(kiln::ir::PwOpcode::kAdd);
      p.instrs[j].src[0] = j == 0 ? -1 : 0;  // in0, then r0
      p.instrs[j].src[1] = j == 0 ? -2 : -3;  // in1, then in2
      p.instrs[j].src[2] = kPwImmediate;
      for (float& v : p.instrs[j].imm) v = 0.f;
    }
    PwDevicePointers in;
    in.in[0] = dev_half(n, 4);
    in.in[1] = dev_half(n, 5);
    in.in[2] = dev_half(S * H, 6);
    void* y = dev_bytes(n * 2);
    report("FusedPointwise_embeddings_sum", "32x128x768+32x128x768+1x128x768", 6 * n + 2 * S * H,
           [&] { LK(launch_fused_pointwise(p, in, y, h, g_s)); });
  }
  // ---- LayerNormalization over 768 (BERT / GPT-2: 32*128 rows; ViT: 32*197 rows)
  for (int64_t s : {128, 197}) {
    const int64_t rows = 32 * s, cols = 768;
    void* x = dev_half(rows * cols, 7);
    void* g = dev_half(cols, 8);
    void* b = dev_half(cols, 9);
    void* y = dev_bytes(rows * cols * 2);
    report("LayerNormalization", "32x" + std::to_string(s) + "x768", 4 * rows * cols + 4 * cols,
           [&] { LK(launch_layernorm(x, g, b, y, h, rows, cols, 1e-5f, g_s)); });
  }
  // ---- Gather of embeddings with runtime int64 ids: BERT word embeddings [30522, 768], GPT-2 wte [50257, 768]
  for (int64_t vocab : {30522, 50257}) {
    const int64_t B = 32, S = 128, H = 768;
    void* table = dev_half(vocab * H, 10);
    std::vector<int64_t> ids(static_cast<size_t>(B * S));
    std::mt19937 rng(11);
    for (auto& v : ids) v = static_cast<int64_t>(rng() % vocab);
    void* di = dev_bytes(B * S * 8);
    CK(cudaMemcpy(di, ids.data(), B * S * 8, cudaMemcpyHostToDevice));
    void* y = dev_bytes(B * S * H * 2);
    report("Gather_runtime_int64", std::to_string(vocab) + "x768[32x128]", 4 * B * S * H + 8 * B * S,
           [&] { LK(launch_gather_runtime(table, di, true, y, 2, 1, vocab, B * S, H, g_s)); });
  }
  // ---- Transpose of attention heads [B,S,H,D] -> [B,H,S,D] (32x128x12x64)
  {
    const int64_t B = 32, S = 128, Hh = 12, D = 64, n = B * S * Hh * D;
    void* x = dev_half(n, 12);
    void* y = dev_bytes(n * 2);
    StridedDesc d;
    d.rank = 4;
    const int64_t od[4] = {B, Hh, S, D}, st[4] = {S * Hh * D, D, Hh * D, 1};
    for (int k = 0; k < 4; ++k) d.out_dims[k] = od[k], d.src_strides[k] = st[k];
    report("Transpose_bshd_to_bhsd", "32x128x12x64", 4 * n, [&] { LK(launch_strided_copy(x, y, 2, d, g_s)); });
  }
  // ---- Softmax over rows of 128 ([32*12*128, 128]: attention probabilities)
  {
    const int64_t rows = 32 * 12 * 128, cols = 128;
    void* x = dev_half(rows * cols, 13);
    void* y = dev_bytes(rows * cols * 2);
    report("Softmax", "49152x128", 4 * rows * cols, [&] { LK(launch_softmax(x, y, h, rows, cols, false, g_s)); });
  }
  for (void* p : g_buffers) CK(cudaFree(p));
  return 0;
}
