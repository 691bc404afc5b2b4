// Microbenchmark: cuBLASLt FP16 GEMM Y[M,N] = X[M,K] W when N is not a multiple of 8 (GPT-2's LM
// head: M = 32 x 128 tokens, K = 768, N = 50,257), for the layouts a plan could give it. For each
// variant every entry of cuBLASLt's heuristic list (up to 8) is timed (CUDA events, median of 20
// after 3 warm-ups) and the fastest is printed, as Kiln's builder picks. One JSON line per variant.
//   nvcc -O2 -arch=sm_90 bench/micro/gemm_align.cu -lcublasLt -o /tmp/gemm_align && /tmp/gemm_align [M K N]
// Variants (row-major view; cuBLASLt sees the column-major transpose, A = W, B = X^T, D = Y^T):
//   kn        W stored [K, N] (the export's MatMul weight), ld N; D ld N            (today)
//   nk        W stored [N, K] (transposed at build), ld K;      D ld N
//   kn_pad    W stored [K, Np], Np = N rounded up to 64;        D ld Np (padded output)
//   nk_pad    W stored [Np, K];                                 D ld Np
//   nk_f32    W [N, K] fp16, D float32 ld N (the logits as the ONNX output declares them)
//   nk_pad_f32  W [Np, K], D float32 ld Np
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
#define CB(x)                                                                   \
  do {                                                                          \
    cublasStatus_t s_ = (x);                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                          \
      std::fprintf(stderr, "%s:%d cublas status %d\n", __FILE__, __LINE__, (int)s_); \
      return -1.0;                                                              \
    }                                                                           \
  } while (0)

static double run_variant(cublasLtHandle_t lt, int64_t m, int64_t k, int64_t n, bool nk, int64_t ldn, bool f32_out,
                          void* w, void* x, void* y, void* ws, size_t ws_bytes, int* algos_tried) {
  cublasLtMatmulDesc_t desc;
  CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = nk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t a, b, c;
  // A: the weight; rows of the op(A) are the N outputs. ldn = leading dim of the padded N.
  if (nk) CB(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, k, ldn == n ? n : ldn, k));
  else CB(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, ldn == n ? n : ldn, k, ldn));
  CB(cublasLtMatrixLayoutCreate(&b, CUDA_R_16F, k, m, k));
  CB(cublasLtMatrixLayoutCreate(&c, f32_out ? CUDA_R_32F : CUDA_R_16F, ldn == n ? n : ldn, m, ldn));
  cublasLtMatmulPreference_t pref;
  CB(cublasLtMatmulPreferenceCreate(&pref));
  CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t res[8];
  int returned = 0;
  CB(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref, 8, res, &returned));
  *algos_tried = returned;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  double best = 1e30;
  const float alpha = 1.f, beta = 0.f;
  for (int i = 0; i < returned; ++i) {
    std::vector<float> t;
    bool ok = true;
    for (int r = 0; r < 23 && ok; ++r) {
      CK(cudaEventRecord(e0));
      if (cublasLtMatmul(lt, desc, &alpha, w, a, x, b, &beta, y, c, y, c, &res[i].algo, ws, ws_bytes, 0) !=
          CUBLAS_STATUS_SUCCESS)
        ok = false;
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 3) t.push_back(ms);
    }
    if (!ok) continue;
    std::sort(t.begin(), t.end());
    best = std::min(best, (double)t[t.size() / 2]);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatmulDescDestroy(desc);
  return best;
}

int main(int argc, char** argv) {
  int64_t m = 4096, k = 768, n = 50257;
  if (argc == 4) {
    m = std::atoll(argv[1]);
    k = std::atoll(argv[2]);
    n = std::atoll(argv[3]);
  }
  const int64_t np = (n + 63) / 64 * 64;
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
  void *w, *x, *y, *ws;
  const size_t ws_bytes = 32u << 20;
  CK(cudaMalloc(&w, (size_t)np * k * 2));
  CK(cudaMalloc(&x, (size_t)m * k * 2));
  CK(cudaMalloc(&y, (size_t)m * np * 4));
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMemset(w, 0, (size_t)np * k * 2));
  CK(cudaMemset(x, 0, (size_t)m * k * 2));
  struct V {
    const char* name;
    bool nk;
    bool pad;
    bool f32;
  } vs[] = {{"kn", false, false, false},  {"nk", true, false, false},     {"kn_pad", false, true, false},
            {"nk_pad", true, true, false}, {"kn_f32", false, false, true}, {"nk_f32", true, false, true},
            {"nk_pad_f32", true, true, true}};
  const double flop = 2.0 * m * n * k;
  for (const V& v : vs) {
    int tried = 0;
    const double ms = run_variant(lt, m, k, n, v.nk, v.pad ? np : n, v.f32, w, x, y, ws, ws_bytes, &tried);
    std::printf("{\"variant\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"ld_n\": %lld, \"algos\": %d, \"ms\": %.4f, "
                "\"tflops\": %.1f}\n",
                v.name, (long long)m, (long long)k, (long long)n, (long long)(v.pad ? np : n), tried, ms,
                ms > 0 ? flop / ms / 1e9 : 0.0);
  }
  return 0;
}
