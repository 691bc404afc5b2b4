// The 8-bit GEMM both 8-bit layers run through cuBLASLt (QuantLinear, factory_quant_linear.cc;
// QuantConv's 1x1 tactic, factory_quant_conv.cc): row-major Acc[M, N] = Xq[M, K] W[N, K]^T is the
// column-major Acc^T[N, M] = op(A) op(B) with A = W as K x N (ld K, transposed) and B = Xq as K x M
// (ld K) — the "TN" form cuBLASLt's 8-bit GEMMs require. INT8: int8 x int8 -> int32
// (CUBLAS_COMPUTE_32I, IMMA); FP8: E4M3 x E4M3 -> float32 (CUBLAS_COMPUTE_32F, sm_89+).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <vector>

#include "kiln/status.h"

namespace kiln::cuda {

// cuBLASLt's candidate algorithms for one problem (descriptor, A, B and C = D layouts) within
// `cap` bytes of workspace, at most `most`: empty, not an error, where it lists none (shapes,
// types, GPU generation) or a query fails.
std::vector<cublasLtMatmulAlgo_t> lt_algorithms(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t cd, size_t cap, int most);

class Gemm8 {
 public:
  Gemm8() = default;
  Gemm8(const Gemm8&) = delete;
  Gemm8& operator=(const Gemm8&) = delete;
  ~Gemm8();

  // The descriptor and layouts for M x N x K; errors are cuBLASLt's, named.
  Status init(int64_t m, int64_t n, int64_t k, bool fp8);
  bool ready() const { return desc_ != nullptr; }
  // lt_algorithms for this problem.
  std::vector<cublasLtMatmulAlgo_t> algorithms(cublasLtHandle_t lt, size_t cap, int most) const;
  // acc (int32 / float32 [M, N], row-major) = Xq W^T with `algo` and `cap` bytes of workspace ws.
  Status run(cublasLtHandle_t lt, const int8_t* w, const int8_t* qx, void* acc, const cublasLtMatmulAlgo_t& algo,
             void* ws, size_t cap, cudaStream_t stream) const;
  // The operand layouts, for another descriptor over the same W and Xq (QuantLinear's fused form).
  cublasLtMatrixLayout_t a() const { return a_; }
  cublasLtMatrixLayout_t b() const { return b_; }

 private:
  bool fp8_ = false;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
};

}  // namespace kiln::cuda
