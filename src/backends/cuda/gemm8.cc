// The 8-bit "TN" cuBLASLt GEMM of the 8-bit layers (gemm8.h).
#include "backends/cuda/gemm8.h"

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {

std::vector<cublasLtMatmulAlgo_t> lt_algorithms(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t cd, size_t cap, int most) {
  std::vector<cublasLtMatmulAlgo_t> out;
  cublasLtMatmulPreference_t pref;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return out;
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(most));
  int returned = 0;
  if (cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, cd, cd, pref, most, res.data(), &returned) == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < returned; ++i) out.push_back(res[static_cast<size_t>(i)].algo);
  cublasLtMatmulPreferenceDestroy(pref);
  return out;
}

Gemm8::~Gemm8() {
  if (desc_) cublasLtMatmulDescDestroy(desc_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
}

Status Gemm8::init(int64_t m, int64_t n, int64_t k, bool fp8) {
  fp8_ = fp8;
  const cudaDataType_t in_t = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
  const cudaDataType_t acc_t = fp8 ? CUDA_R_32F : CUDA_R_32I;
  KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, fp8 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I, acc_t));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, in_t, k, n, k));
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, in_t, k, m, k));
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, acc_t, n, m, n));
  return Status::Ok();
}

std::vector<cublasLtMatmulAlgo_t> Gemm8::algorithms(cublasLtHandle_t lt, size_t cap, int most) const {
  return lt_algorithms(lt, desc_, a_, b_, c_, cap, most);
}

Status Gemm8::run(cublasLtHandle_t lt, const int8_t* w, const int8_t* qx, void* acc, const cublasLtMatmulAlgo_t& algo,
                  void* ws, size_t cap, cudaStream_t stream) const {
  const int32_t ia = 1, ib = 0;
  const float fa = 1.f, fb = 0.f;
  const void* alpha = fp8_ ? static_cast<const void*>(&fa) : static_cast<const void*>(&ia);
  const void* beta = fp8_ ? static_cast<const void*>(&fb) : static_cast<const void*>(&ib);
  KILN_CUBLAS_CHECK(cublasLtMatmul(lt, desc_, alpha, w, a_, qx, b_, beta, acc, c_, acc, c_, &algo, ws, cap, stream));
  return Status::Ok();
}

}  // namespace kiln::cuda
