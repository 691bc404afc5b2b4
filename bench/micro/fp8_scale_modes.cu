// Probe: which cuBLASLt FP8 (E4M3) GEMM forms with a per-output-channel scale, a bias and an fp16
// output does this GPU / cuBLASLt list, and do they compute the right thing? (QuantLinear's fused
// form, factory_quant_linear.cc, decision 0080.) For each form: the heuristic count, then one run of
// the first algorithm checked against a float reference of the same FP8 codes, and its time at
// M = 4096, N = 768, K = 768 (BERT-base's attention output projection at batch 32 x 128).
// Forms: "outer_vec" A scale mode CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F (per-row of op(A) =
// per output channel) + B scalar; "alpha_vec" pointer mode ALPHA_DEVICE_VECTOR_BETA_ZERO (alpha per
// row of D); "scalar" A and B scalars (per-tensor only: the baseline that must work).
// Build: nvcc -O2 -std=c++17 -arch=sm_90 bench/micro/fp8_scale_modes.cu -lcublasLt -o fp8_scale_modes
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  const int M = 4096, N = 768, K = 768;  // Y[M, N] = X[M, K] W[N, K]^T
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  std::vector<__nv_fp8_e4m3> hx(static_cast<size_t>(M) * K), hw(static_cast<size_t>(N) * K);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = __nv_fp8_e4m3(static_cast<float>((i * 7) % 13) / 8.f - 0.75f);
  for (size_t i = 0; i < hw.size(); ++i) hw[i] = __nv_fp8_e4m3(static_cast<float>((i * 5) % 11) / 8.f - 0.6f);
  std::vector<float> wscale(N), bias(N);
  std::vector<__half> bias16(N);
  for (int n = 0; n < N; ++n) {
    wscale[n] = 0.01f * (1 + n % 7);
    bias[n] = 0.1f * (n % 5);
    bias16[n] = __float2half(bias[n]);
  }
  const float xscale = 0.05f, one = 1.f;
  void *dx, *dw, *dy, *dws, *dxs, *db, *done, *ws;
  cudaMalloc(&dx, hx.size());
  cudaMalloc(&dw, hw.size());
  cudaMalloc(&dy, static_cast<size_t>(M) * N * 2);
  cudaMalloc(&dws, N * 4);
  cudaMalloc(&dxs, 4);
  cudaMalloc(&done, 4);
  cudaMalloc(&db, N * 2);
  const size_t ws_bytes = 32u << 20;
  cudaMalloc(&ws, ws_bytes);
  cudaMemcpy(dx, hx.data(), hx.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, hw.data(), hw.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dws, wscale.data(), N * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dxs, &xscale, 4, cudaMemcpyHostToDevice);
  cudaMemcpy(done, &one, 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, bias16.data(), N * 2, cudaMemcpyHostToDevice);
  // Reference for a few rows.
  auto ref = [&](int m, int n) {
    double a = 0;
    for (int k = 0; k < K; ++k) a += static_cast<double>(float(hx[size_t(m) * K + k])) * float(hw[size_t(n) * K + k]);
    return a * xscale * wscale[n] + bias[n];
  };
  std::printf("{\"cublaslt_version\": %zu}\n", cublasLtGetVersion());
  for (const char* form : {"outer_vec", "alpha_vec", "scalar"}) {
    cublasLtMatmulDesc_t d;
    cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
    const cudaDataType_t bt = CUDA_R_16F;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db);
    const void* alpha = &one;
    std::string f = form;
    if (f == "outer_vec") {
      const int32_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, scalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof outer);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &scalar, sizeof scalar);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dws, sizeof dws);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dxs, sizeof dxs);
    } else if (f == "alpha_vec") {
      const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dxs, sizeof dxs);
      alpha = dws;  // device vector, one per row of D (= output channel)
    } else {
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dxs, sizeof dxs);
    }
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, K, N, K);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, K, M, K);
    cublasLtMatrixLayoutCreate(&c, CUDA_R_16F, N, M, N);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    cublasLtMatmulHeuristicResult_t res[8];
    int n = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, d, a, b, c, c, pref, 8, res, &n);
    double max_err = -1, us = -1;
    int run_status = -1;
    if (hs == CUBLAS_STATUS_SUCCESS && n > 0) {
      const float zero = 0.f;
      run_status = cublasLtMatmul(lt, d, alpha, dw, a, dx, b, &zero, dy, c, dy, c, &res[0].algo, ws, ws_bytes, 0);
      cudaDeviceSynchronize();
      std::vector<__half> hy(static_cast<size_t>(M) * N);
      cudaMemcpy(hy.data(), dy, hy.size() * 2, cudaMemcpyDeviceToHost);
      max_err = 0;
      for (int m : {0, 1, 777, M - 1})
        for (int j = 0; j < N; j += 37) max_err = std::fmax(max_err, std::fabs(__half2float(hy[size_t(m) * N + j]) - ref(m, j)));
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      cudaEventRecord(e0);
      for (int i = 0; i < 50; ++i)
        cublasLtMatmul(lt, d, alpha, dw, a, dx, b, &zero, dy, c, dy, c, &res[0].algo, ws, ws_bytes, 0);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      us = ms * 1000 / 50;
    }
    std::printf("{\"form\": \"%s\", \"heuristic_status\": %d, \"algos\": %d, \"run_status\": %d, \"max_abs_err\": %.4g, \"us\": %.2f}\n",
                form, static_cast<int>(hs), n, run_status, max_err, us);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(d);
  }
  return 0;
}
