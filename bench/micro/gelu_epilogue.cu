// Which GELU does cuBLASLt's CUBLASLT_EPILOGUE_GELU_BIAS compute? (docs/decisions/0058: cublasLt.h
// does not say.) Y = GELU(X·I + bias) with X = identity-sized values in fp32, so Y = GELU(v) for
// v = x + bias over a sweep of v in [-6, 6]; compared with the erf form (ONNX Gelu, approximate
// "none": 0.5 v (1 + erf(v / sqrt 2))) and the tanh form (approximate "tanh": 0.5 v (1 + tanh(
// sqrt(2/pi) (v + 0.044715 v^3)))), computed in double on the host. Prints the max abs difference
// against each, for fp32 and fp16 storage.
//   nvcc -O2 -arch=sm_90 bench/micro/gelu_epilogue.cu -lcublasLt -o /tmp/gelu_epi && /tmp/gelu_epi
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

static int run(bool half) {
  const int n = 1024, m = 8, k = 8;  // Y[m, n] = X[m, k] · W[k, n] + bias[n]; X = 0 so Y = GELU(bias)
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  const cudaDataType_t dt = half ? CUDA_R_16F : CUDA_R_32F;
  const size_t es = half ? 2 : 4;
  std::vector<double> v(n);
  std::vector<float> bias_f(n);
  std::vector<__half> bias_h(n);
  for (int i = 0; i < n; ++i) {
    float x = -6.f + 12.f * i / (n - 1);
    if (half) {
      bias_h[i] = __float2half(x);
      v[i] = __half2float(bias_h[i]);
    } else {
      bias_f[i] = x;
      v[i] = x;
    }
  }
  void *w, *x, *y, *b;
  cudaMalloc(&w, k * n * es);
  cudaMalloc(&x, m * k * es);
  cudaMalloc(&y, m * n * es);
  cudaMalloc(&b, n * es);
  cudaMemset(w, 0, k * n * es);
  cudaMemset(x, 0, m * k * es);
  cudaMemcpy(b, half ? (void*)bias_h.data() : (void*)bias_f.data(), n * es, cudaMemcpyHostToDevice);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
  cublasLtMatrixLayout_t a_l, b_l, c_l;
  cublasLtMatrixLayoutCreate(&a_l, dt, n, k, n);
  cublasLtMatrixLayoutCreate(&b_l, dt, k, m, k);
  cublasLtMatrixLayoutCreate(&c_l, dt, n, m, n);
  const float alpha = 1.f, beta = 0.f;
  cublasStatus_t st = cublasLtMatmul(lt, desc, &alpha, w, a_l, x, b_l, &beta, y, c_l, y, c_l, nullptr, nullptr, 0, 0);
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::printf("{\"storage\": \"%s\", \"error\": %d}\n", half ? "fp16" : "fp32", (int)st);
    return 1;
  }
  cudaDeviceSynchronize();
  std::vector<double> got(n);
  if (half) {
    std::vector<__half> h(m * n);
    cudaMemcpy(h.data(), y, m * n * 2, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) got[i] = __half2float(h[i]);
  } else {
    std::vector<float> f(m * n);
    cudaMemcpy(f.data(), y, m * n * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) got[i] = f[i];
  }
  double d_erf = 0, d_tanh = 0, d_sig = 0;
  for (int i = 0; i < n; ++i) {
    const double t = v[i];
    const double g_erf = 0.5 * t * (1 + std::erf(t / std::sqrt(2.0)));
    const double g_tanh = 0.5 * t * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (t + 0.044715 * t * t * t)));
    const double g_sig = t / (1 + std::exp(-1.702 * t));
    d_erf = std::fmax(d_erf, std::fabs(got[i] - g_erf));
    d_tanh = std::fmax(d_tanh, std::fabs(got[i] - g_tanh));
    d_sig = std::fmax(d_sig, std::fabs(got[i] - g_sig));
  }
  std::printf("{\"storage\": \"%s\", \"max_abs_vs_erf\": %.3g, \"max_abs_vs_tanh\": %.3g, \"max_abs_vs_sigmoid1702\": %.3g}\n",
              half ? "fp16" : "fp32", d_erf, d_tanh, d_sig);
  return 0;
}

int main() {
  int rc = run(false);
  rc |= run(true);
  return rc;
}
