// Helpers shared by the CPU nn kernels (ops_nn_*.cc): compute-dtype promotion (fp16/bf16
// compute in float32), a row-major GEMM over OpenBLAS (plain loops for integer types), axis
// normalization, and the spatial geometry (kernel/strides/dilations/pads/auto_pad -> output
// extent) that Conv, ConvTranspose and the pooling ops share.
#pragma once

#include <cblas.h>
#include <cmath>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/dispatch.h"

namespace kiln::cpu::nn {

inline bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// float16/bfloat16 -> float32; float32/float64 pass through; any other dtype is unsupported.
StatusOr<Tensor> to_compute(const KernelContext& ctx, const Tensor& t);
// Casts a float32 result back to `to` when `to` is a half type (else returns `t`).
StatusOr<Tensor> from_compute(const Tensor& t, DataType to);

// The epilogue activation of Gemm / MatMulBias (attribute "activation", set only by
// passes/fuse_gemm_activation.cc; ops.def, docs/decisions/0058): "" (none), "Relu" or "GeluTanh"
// (ONNX Gelu with approximate = "tanh"); any other value is an InvalidArgument naming the node.
enum class GemmAct { kNone, kRelu, kGeluTanh };
inline StatusOr<GemmAct> gemm_activation(const KernelContext& ctx) {
  const std::string act = ctx.attr_string("activation", "");
  if (act.empty()) return GemmAct::kNone;
  if (act == "Relu") return GemmAct::kRelu;
  if (act == "GeluTanh") return GemmAct::kGeluTanh;
  return ctx.fail("activation '" + act + "', expected \"\", Relu or GeluTanh");
}
// ONNX Relu (Operators.md Relu: y = max(0, x)) over n values in place, as the standalone CPU Relu
// computes it (x > 0 ? x : 0, so NaN -> 0 and -0 -> +0 there too).
template <typename T>
void relu_in_place(T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] > T(0) ? p[i] : T(0);
}
// ONNX Gelu, approximate = "tanh" (Operators.md Gelu-20: 0.5 x (1 + tanh(sqrt(2 / pi) (x +
// 0.044715 x^3)))) over n values in place, in T as the standalone CPU Gelu computes it.
template <typename T>
void gelu_tanh_in_place(T* p, int64_t n) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    const T x = p[i];
    p[i] = T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
}
// The activation `a` over n values in place (kNone: nothing).
template <typename T>
void gemm_activation_in_place(GemmAct a, T* p, int64_t n) {
  if (a == GemmAct::kRelu) relu_in_place(p, n);
  else if (a == GemmAct::kGeluTanh) gelu_tanh_in_place(p, n);
}

// Row-major C = alpha * op(A) * op(B) + beta * C, with op(A) [M,K], op(B) [K,N].
// float/double go to OpenBLAS; other types (integers) use plain loops.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : T(beta * c[i * ldc + j]);
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    for (int64_t p = 0; p < k; ++p) {
      const T av = T(alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]));
      if (av == T(0)) continue;
      if (!trans_b) {
        const T* brow = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) crow[j] += av * b[j * ldb + p];
      }
    }
  }
}
template <>
inline void gemm<float>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS rejects lda < 1; the product is empty, leaving beta * C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? float(0) : beta * c[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}
template <>
inline void gemm<double>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                         int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS rejects lda < 1; the product is empty, leaving beta * C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? double(0) : beta * c[i * ldc + j];
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}

// Maps axis in [-rank, rank) to [0, rank); false when out of range.
inline bool normalize_axis(int64_t axis, int rank, int* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return true;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Sliding-window geometry over the spatial dims (everything after N and C).
struct SpatialGeom {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
  int nd() const { return static_cast<int>(in.size()); }
  int64_t in_size() const { return prod(in); }
  int64_t out_size() const { return prod(out); }
  int64_t kernel_size() const { return prod(kernel); }
  static int64_t prod(const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (int64_t x : v) p *= x;
    return p;
  }
};

// Reads strides, dilations, pads and auto_pad from the node and computes output extents, per
// the ONNX Conv / *Pool specs: NOTSET uses explicit pads (floor, or ceil with ceil_mode where
// a window may not start inside the right padding); SAME_* gives out = ceil(in / stride) with
// the odd pad at the end (UPPER) or the beginning (LOWER); VALID pads nothing.
Status make_geom(const KernelContext& ctx, const Shape& x_shape, std::vector<int64_t> kernel, bool ceil_mode,
                 bool has_dilations, SpatialGeom* g);

// Quantized-op helpers (ops_nn_gemm.cc). x - zero_point as int32, the zero point given per
// tensor (1 value) or per index along `axis` (axis < 0: per tensor only).
inline bool is_8bit(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }
Status shift_to_int32(const KernelContext& ctx, const Tensor& x, const Tensor* zp, int axis, const char* what,
                      Tensor* out);
// Scale values as float: 1 value (per tensor) or `extent` values (per axis).
Status scale_values(const KernelContext& ctx, const Tensor& s, int64_t extent, const char* what, std::vector<float>* v);

// Sub-family registration (each in its own ops_nn_*.cc).
void register_conv_kernels(KernelRegistry& r);
void register_conv_int_kernels(KernelRegistry& r);
void register_gemm_kernels(KernelRegistry& r);
void register_pool_kernels(KernelRegistry& r);
void register_norm_kernels(KernelRegistry& r);
void register_softmax_kernels(KernelRegistry& r);
void register_linalg_kernels(KernelRegistry& r);

}  // namespace kiln::cpu::nn
