// RNN / GRU / LSTM (kernels_rnn.h): one block per (direction, batch entry), the CPU reference's
// loop (src/backends/cpu/ops_control_rnn.cc) with its inner loops spread over the block's threads.
#include "backends/cuda/kernels_rnn.h"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

__device__ __forceinline__ float activate(const RnnActivation& a, float x) {
  switch (a.kind) {
    case RnnActivation::kRelu: return fmaxf(0.f, x);
    case RnnActivation::kTanh: return tanhf(x);
    case RnnActivation::kSigmoid: return 1.f / (1.f + expf(-x));
    case RnnActivation::kAffine: return a.alpha * x + a.beta;
    case RnnActivation::kLeakyRelu: return x >= 0 ? x : a.alpha * x;
    case RnnActivation::kThresholdedRelu: return x > a.alpha ? x : 0.f;
    case RnnActivation::kScaledTanh: return a.alpha * tanhf(a.beta * x);
    case RnnActivation::kHardSigmoid: return fminf(fmaxf(a.alpha * x + a.beta, 0.f), 1.f);
    case RnnActivation::kElu: return x >= 0 ? x : a.alpha * (expf(x) - 1.f);
    case RnnActivation::kSoftsign: return x / (1.f + fabsf(x));
    case RnnActivation::kSoftplus: return log1pf(expf(x));
  }
  return x;
}

struct Index {
  const RnnDesc& d;
  __device__ int64_t x(int64_t s, int64_t b, int64_t i) const {
    return (d.batch_major ? b * d.seq + s : s * d.batch + b) * d.input + i;
  }
  __device__ int64_t state(int64_t dir, int64_t b, int64_t j) const {
    return (d.batch_major ? b * d.dirs + dir : dir * d.batch + b) * d.hidden + j;
  }
  __device__ int64_t y(int64_t s, int64_t dir, int64_t b, int64_t j) const {
    return (d.batch_major ? (b * d.seq + s) * d.dirs + dir : (s * d.dirs + dir) * d.batch + b) * d.hidden + j;
  }
};

__global__ void rnn_kernel(RnnDesc d, const float* __restrict__ x, const float* __restrict__ w,
                           const float* __restrict__ r, const float* __restrict__ bias, const int64_t* __restrict__ lens,
                           const float* __restrict__ h0, const float* __restrict__ c0, const float* __restrict__ peep,
                           void* y, void* yh, void* yc, StorageType t) {
  extern __shared__ float sm[];
  const int64_t H = d.hidden, G = d.gates, GH = G * H;
  float* xw = sm;
  float* hr = xw + GH;
  float* h = hr + GH;
  float* c = h + H;
  float* hn = c + H;
  float* rh = hn + H;
  const int64_t dir = blockIdx.x / d.batch, b = blockIdx.x % d.batch;
  const Index ix{d};
  const bool reverse = d.reverse_only || dir == 1;
  const float* wd = w + dir * GH * d.input;
  const float* rd = r + dir * GH * H;
  const float* wb = bias ? bias + dir * 2 * GH : nullptr;
  const float* rb = bias ? wb + GH : nullptr;
  const float* pd = peep ? peep + dir * 3 * H : nullptr;
  const RnnActivation* fa = d.acts + dir * d.acts_per_dir;
  auto clipped = [&](float v) { return d.has_clip ? fminf(fmaxf(v, -d.clip), d.clip) : v; };
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    h[j] = h0 ? h0[ix.state(dir, b, j)] : 0.f;
    c[j] = c0 ? c0[ix.state(dir, b, j)] : 0.f;
  }
  __syncthreads();
  const int64_t len = lens ? min(max(lens[b], int64_t{0}), d.seq) : d.seq;  // clamped: never out of bounds
  for (int64_t step = 0; step < len; ++step) {
    const int64_t s = reverse ? len - 1 - step : step;
    for (int64_t gj = threadIdx.x; gj < GH; gj += blockDim.x) {
      float a = wb ? wb[gj] : 0.f, e = rb ? rb[gj] : 0.f;
      for (int64_t i = 0; i < d.input; ++i) a += wd[gj * d.input + i] * x[ix.x(s, b, i)];
      for (int64_t k = 0; k < H; ++k) e += rd[gj * H + k] * h[k];
      xw[gj] = a;
      hr[gj] = e;
    }
    __syncthreads();
    if (d.cell == RnnCell::kRnn) {
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x) hn[j] = activate(fa[0], clipped(xw[j] + hr[j]));
    } else if (d.cell == RnnCell::kGru) {
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x)
        rh[j] = activate(fa[0], clipped(xw[H + j] + hr[H + j])) * h[j];
      __syncthreads();
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        const float z = activate(fa[0], clipped(xw[j] + hr[j]));
        float pre;
        if (d.linear_before_reset) {
          pre = xw[2 * H + j] + activate(fa[0], clipped(xw[H + j] + hr[H + j])) * hr[2 * H + j];
        } else {
          pre = xw[2 * H + j] + (rb ? rb[2 * H + j] : 0.f);
          for (int64_t k = 0; k < H; ++k) pre += rd[(2 * H + j) * H + k] * rh[k];
        }
        hn[j] = (1 - z) * activate(fa[1], clipped(pre)) + z * h[j];
      }
    } else {
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        const float pi = pd ? pd[j] : 0.f, po = pd ? pd[H + j] : 0.f, pf = pd ? pd[2 * H + j] : 0.f;
        const float ig = activate(fa[0], clipped(xw[j] + hr[j] + pi * c[j]));
        const float fg = d.input_forget ? 1 - ig : activate(fa[0], clipped(xw[2 * H + j] + hr[2 * H + j] + pf * c[j]));
        const float cc = activate(fa[1], clipped(xw[3 * H + j] + hr[3 * H + j]));
        c[j] = fg * c[j] + ig * cc;
        const float og = activate(fa[0], clipped(xw[H + j] + hr[H + j] + po * c[j]));
        hn[j] = og * activate(fa[2], c[j]);
      }
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
      h[j] = hn[j];
      if (y) store(y, ix.y(s, dir, b, j), hn[j], t);
    }
    __syncthreads();
  }
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    if (yh) store(yh, ix.state(dir, b, j), h[j], t);
    if (yc) store(yc, ix.state(dir, b, j), c[j], t);
  }
}

}  // namespace

cudaError_t launch_rnn(const RnnDesc& d, const float* x, const float* w, const float* r, const float* b, const int64_t* lens,
                       const float* h0, const float* c0, const float* p, void* y, void* yh, void* yc, StorageType t,
                       cudaStream_t stream) {
  const size_t smem = rnn_shared_bytes(d);
  if (smem > kRnnMaxSharedBytes || d.dirs < 1 || d.dirs > 2 || d.hidden < 1) return cudaErrorInvalidValue;
  if (y) {
    const size_t bytes = static_cast<size_t>(d.seq * d.dirs * d.batch * d.hidden) * storage_bytes(t);
    if (bytes > 0) {
      const cudaError_t e = cudaMemsetAsync(y, 0, bytes, stream);
      if (e != cudaSuccess) return e;
    }
  }
  const int64_t blocks = d.dirs * d.batch;
  if (blocks == 0) return cudaSuccess;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(rnn_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  rnn_kernel<<<static_cast<unsigned>(blocks), 256, smem, stream>>>(d, x, w, r, b, lens, h0, c0, p, y, yh, yc, t);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
