// Kiln's own CUDA kernels: broadcast pointwise ops, layout/dtype reformat, softmax, concat.
// Formulas follow the ONNX operator definitions of the corresponding ops.
#include <cuda_fp16.h>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {
namespace {

__device__ __forceinline__ float load(const void* p, int64_t i, bool half) {
  return half ? __half2float(static_cast<const __half*>(p)[i]) : static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void store(void* p, int64_t i, float v, bool half) {
  if (half) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<float*>(p)[i] = v;
}

__device__ __forceinline__ float apply(PointwiseOp op, float a, float b, float alpha, float beta) {
  switch (op) {
    case PointwiseOp::kAdd: return a + b;
    case PointwiseOp::kSub: return a - b;
    case PointwiseOp::kMul: return a * b;
    case PointwiseOp::kDiv: return a / b;
    case PointwiseOp::kMax: return fmaxf(a, b);
    case PointwiseOp::kMin: return fminf(a, b);
    case PointwiseOp::kPow: return powf(a, b);
    case PointwiseOp::kRelu: return fmaxf(a, 0.f);
    case PointwiseOp::kSigmoid: return 1.f / (1.f + __expf(-a));
    case PointwiseOp::kTanh: return tanhf(a);
    case PointwiseOp::kLeakyRelu: return a < 0.f ? alpha * a : a;
    case PointwiseOp::kClip: return fminf(fmaxf(a, alpha), beta);
    case PointwiseOp::kHardSigmoid: return fminf(fmaxf(alpha * a + beta, 0.f), 1.f);
    case PointwiseOp::kHardSwish: return a * fminf(fmaxf(a / 6.f + 0.5f, 0.f), 1.f);
    case PointwiseOp::kErf: return erff(a);
    case PointwiseOp::kExp: return __expf(a);
    case PointwiseOp::kSqrt: return sqrtf(a);
    case PointwiseOp::kNeg: return -a;
    case PointwiseOp::kAbs: return fabsf(a);
    case PointwiseOp::kGeluErf: return 0.5f * a * (1.f + erff(a * 0.70710678118654752f));
    case PointwiseOp::kGeluTanh: return 0.5f * a * (1.f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)));
    case PointwiseOp::kIdentity: return a;
    case PointwiseOp::kSilu: return a / (1.f + __expf(-a));
    case PointwiseOp::kReciprocal: return 1.f / a;
    case PointwiseOp::kLog: return logf(a);
    case PointwiseOp::kElu: return a < 0.f ? alpha * (__expf(a) - 1.f) : a;
  }
  return a;
}

__global__ void pointwise_kernel(PointwiseOp op, bool half, const void* a, const void* b, void* y, BroadcastDesc d,
                                 int64_t total, float alpha, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t idx = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      ia += idx * d.a_strides[k];
      ib += idx * d.b_strides[k];
    }
    const float va = load(a, ia, half);
    const float vb = b ? load(b, ib, half) : 0.f;
    store(y, i, apply(op, va, vb, alpha, beta), half);
  }
}

__global__ void reformat_kernel(const void* src, bool sh, bool snhwc, void* dst, bool dh, bool dnhwc, int64_t n,
                                int64_t c, int64_t h, int64_t w) {
  const int64_t total = n * c * h * w;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // i indexes the destination.
    int64_t nn, cc, hh, ww, r = i;
    if (dnhwc) { cc = r % c; r /= c; ww = r % w; r /= w; hh = r % h; nn = r / h; }
    else { ww = r % w; r /= w; hh = r % h; r /= h; cc = r % c; nn = r / c; }
    const int64_t s = snhwc ? ((nn * h + hh) * w + ww) * c + cc : ((nn * c + cc) * h + hh) * w + ww;
    store(dst, i, load(src, s, sh), dh);
  }
}

__global__ void convert_kernel(const void* src, bool sh, void* dst, bool dh, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(dst, i, load(src, i, sh), dh);
}

// One block per row; the row is reduced in shared memory (max, then sum of exp).
__global__ void softmax_kernel(const void* x, void* y, bool half, int64_t cols, bool log) {
  extern __shared__ float red[];
  const int64_t row = blockIdx.x;
  const int64_t base = row * cols;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, load(x, base + j, half));
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += __expf(load(x, base + j, half) - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = load(x, base + j, half) - m;
    store(y, base + j, log ? v - logf(sum) : __expf(v) / sum, half);
  }
}

__global__ void concat_kernel(const char* src, char* dst, int eb, int64_t outer, int64_t inner_in, int64_t inner_out,
                              int64_t offset) {
  const int64_t total = outer * inner_in;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner_in, k = i % inner_in;
    const char* s = src + i * eb;
    char* d = dst + (o * inner_out + offset + k) * eb;
    for (int b = 0; b < eb; ++b) d[b] = s[b];
  }
}

int grid_for(int64_t total, int block) {
  int64_t g = (total + block - 1) / block;
  return static_cast<int>(g < 1 ? 1 : (g > 65535 * 8 ? 65535 * 8 : g));
}

}  // namespace

cudaError_t launch_pointwise(PointwiseOp op, bool half, const void* a, const void* b, void* y, const BroadcastDesc& d,
                             float alpha, float beta, cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  if (total == 0) return cudaSuccess;
  pointwise_kernel<<<grid_for(total, 256), 256, 0, stream>>>(op, half, a, b, y, d, total, alpha, beta);
  return cudaGetLastError();
}

cudaError_t launch_reformat(const void* src, bool src_half, bool src_nhwc, void* dst, bool dst_half, bool dst_nhwc,
                            int64_t n, int64_t c, int64_t h, int64_t w, cudaStream_t stream) {
  const int64_t total = n * c * h * w;
  if (total == 0) return cudaSuccess;
  reformat_kernel<<<grid_for(total, 256), 256, 0, stream>>>(src, src_half, src_nhwc, dst, dst_half, dst_nhwc, n, c, h, w);
  return cudaGetLastError();
}

cudaError_t launch_convert(const void* src, bool src_half, void* dst, bool dst_half, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  convert_kernel<<<grid_for(count, 256), 256, 0, stream>>>(src, src_half, dst, dst_half, count);
  return cudaGetLastError();
}

cudaError_t launch_softmax(const void* x, void* y, bool half, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const int block = 256;
  softmax_kernel<<<static_cast<unsigned>(rows), block, block * sizeof(float), stream>>>(x, y, half, cols, log);
  return cudaGetLastError();
}

cudaError_t launch_concat_part(const void* src, void* dst, int elem_bytes, int64_t outer, int64_t inner_in,
                               int64_t inner_out, int64_t offset, cudaStream_t stream) {
  const int64_t total = outer * inner_in;
  if (total == 0) return cudaSuccess;
  concat_kernel<<<grid_for(total, 256), 256, 0, stream>>>(static_cast<const char*>(src), static_cast<char*>(dst),
                                                          elem_bytes, outer, inner_in, inner_out, offset);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
