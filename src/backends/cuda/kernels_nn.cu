// Kiln's kernels for the N-D layers beside cuDNN's convolutions (kernels_nn.h). Grid-stride
// elementwise kernels, except the axis-set normalization: one block per group.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "backends/cuda/kernels_nn.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

struct Dims3 {
  int64_t v[3];
};

__global__ void window_copy_kernel(const void* src, void* dst, StorageType t, int64_t planes, int64_t channels,
                                   Dims3 sd, Dims3 dd, Dims3 off, const void* bias) {
  const int64_t dsz = dd.v[0] * dd.v[1] * dd.v[2], ssz = sd.v[0] * sd.v[1] * sd.v[2];
  const int64_t total = planes * dsz;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = i / dsz;
    int64_t r = i - p * dsz;
    const int64_t i2 = r % dd.v[2];
    r /= dd.v[2];
    const int64_t i1 = r % dd.v[1], i0 = r / dd.v[1];
    const int64_t j0 = i0 - off.v[0], j1 = i1 - off.v[1], j2 = i2 - off.v[2];
    float v = 0.f;
    if (j0 >= 0 && j0 < sd.v[0] && j1 >= 0 && j1 < sd.v[1] && j2 >= 0 && j2 < sd.v[2])
      v = load(src, p * ssz + (j0 * sd.v[1] + j1) * sd.v[2] + j2, t);
    if (bias) v += load(bias, p % channels, t);
    store(dst, i, v, t);
  }
}

__global__ void pool_nd_kernel(const void* x, void* y, int64_t* indices, StorageType t, int64_t planes, WindowGeom g,
                               bool max, bool count_pad, bool col_major) {
  const int64_t osz = g.out[0] * g.out[1] * g.out[2], isz = g.in[0] * g.in[1] * g.in[2];
  const int64_t total = planes * osz;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = i / osz;
    int64_t r = i - p * osz;
    int64_t o[3];
    o[2] = r % g.out[2];
    r /= g.out[2];
    o[1] = r % g.out[1];
    o[0] = r / g.out[1];
    // Per dim: how many window positions lie inside the padded extent (count_include_pad).
    int64_t padded = 1;
    for (int d = 0; d < 3; ++d) {
      int64_t c = 0;
      for (int64_t k = 0; k < g.kernel[d]; ++k) {
        const int64_t at = o[d] * g.stride[d] - g.pad_begin[d] + k * g.dilation[d];
        if (at >= -g.pad_begin[d] && at < g.in[d] + g.pad_end[d]) ++c;
      }
      padded *= c;
    }
    float acc = max ? -INFINITY : 0.f;
    int64_t arg = -1, count = 0;
    for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
      const int64_t a0 = o[0] * g.stride[0] - g.pad_begin[0] + k0 * g.dilation[0];
      if (a0 < 0 || a0 >= g.in[0]) continue;
      for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
        const int64_t a1 = o[1] * g.stride[1] - g.pad_begin[1] + k1 * g.dilation[1];
        if (a1 < 0 || a1 >= g.in[1]) continue;
        for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
          const int64_t a2 = o[2] * g.stride[2] - g.pad_begin[2] + k2 * g.dilation[2];
          if (a2 < 0 || a2 >= g.in[2]) continue;
          const int64_t off = (a0 * g.in[1] + a1) * g.in[2] + a2;
          const float v = load(x, p * isz + off, t);
          ++count;
          if (max) {
            // As the CPU reference: the first in-bounds position unless a later one is greater
            // (NaN never is). Unused leading dims are 1 (coordinate 0): the column-major offset
            // of the op's own spatial dims.
            if (arg < 0 || v > acc) arg = col_major ? a2 * g.in[1] * g.in[0] + a1 * g.in[0] + a0 : off;
            if (v > acc) acc = v;
          } else {
            acc += v;
          }
        }
      }
    }
    if (!max) {
      const int64_t div = count_pad ? padded : count;
      acc = div > 0 ? acc / static_cast<float>(div) : 0.f;
    }
    store(y, i, acc, t);
    if (indices) indices[i] = p * isz + (arg < 0 ? 0 : arg);
  }
}

__global__ void batch_norm_kernel(const void* x, const void* scale, const void* b, const void* mean, const void* var,
                                  void* y, StorageType t, int64_t count, int64_t channels, int64_t inner, float eps) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    const float inv = rsqrtf(load(var, c, t) + eps);
    store(y, i, (load(x, i, t) - load(mean, c, t)) * inv * load(scale, c, t) + load(b, c, t), t);
  }
}

constexpr int kNormThreads = 256;

__device__ int64_t norm_offset(const NormAxesDesc& d, int64_t g, int64_t j) {
  int64_t off = 0;
  for (int k = d.keep_rank - 1; k >= 0; --k) {
    off += (g % d.keep_dims[k]) * d.keep_strides[k];
    g /= d.keep_dims[k];
  }
  for (int k = d.red_rank - 1; k >= 0; --k) {
    off += (j % d.red_dims[k]) * d.red_strides[k];
    j /= d.red_dims[k];
  }
  return off;
}

// The block-wide sum of v (every thread gets it).
__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // shared is reused across calls
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float s = 0.f;
  for (int w = 0; w < kNormThreads / 32; ++w) s += shared[w];
  return s;
}

__global__ void norm_axes_kernel(const void* x, const void* scale, const void* bias, void* y, StorageType t,
                                 NormAxesDesc d, float eps, NormStats st) {
  __shared__ float shared[kNormThreads / 32];
  for (int64_t g = blockIdx.x; g < d.groups; g += gridDim.x) {
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < d.group_size; j += blockDim.x) s += load(x, norm_offset(d, g, j), t);
    const float mean = block_sum(s, shared) / static_cast<float>(d.group_size);
    float q = 0.f;
    for (int64_t j = threadIdx.x; j < d.group_size; j += blockDim.x) {
      const float v = load(x, norm_offset(d, g, j), t) - mean;
      q += v * v;
    }
    const float var = block_sum(q, shared) / static_cast<float>(d.group_size);
    if (threadIdx.x == 0) {
      if (st.running_mean) store(st.running_mean, g, load(st.mean_in, g, t) * st.momentum + mean * (1 - st.momentum), t);
      if (st.running_var) store(st.running_var, g, load(st.var_in, g, t) * st.momentum + var * (1 - st.momentum), t);
      if (st.batch_mean) store(st.batch_mean, g, mean, t);
      if (st.batch_var) store(st.batch_var, g, var, t);
    }
    float mul = d.eps_inside_sqrt ? rsqrtf(var + eps) : 1.f / (sqrtf(var) + eps), add = 0.f;
    if (scale) {
      const int64_t c = g % d.channels;
      add = bias ? load(bias, c, t) : 0.f;
      mul *= load(scale, c, t);
    }
    for (int64_t j = threadIdx.x; j < d.group_size; j += blockDim.x) {
      const int64_t off = norm_offset(d, g, j);
      store(y, off, (load(x, off, t) - mean) * mul + add, t);
    }
  }
}

__global__ void lrn_kernel(const void* x, void* y, StorageType t, int64_t n, int64_t c, int64_t inner, int64_t size,
                           float alpha, float beta, float bias) {
  const int64_t total = n * c * inner, before = (size - 1) / 2, after = size - 1 - before;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = i % inner, ch = (i / inner) % c, b = i / (inner * c);
    float sq = 0.f;
    const int64_t lo = ch - before < 0 ? 0 : ch - before, hi = ch + after > c - 1 ? c - 1 : ch + after;
    for (int64_t k = lo; k <= hi; ++k) {
      const float v = load(x, (b * c + k) * inner + s, t);
      sq += v * v;
    }
    store(y, i, load(x, i, t) / powf(bias + alpha / static_cast<float>(size) * sq, beta), t);
  }
}

// Reflects v into [lo, hi] (mirrors at both ends, repeatedly).
__device__ double reflect_into(double v, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (v >= lo && v <= hi) return v;
  const double d = v < lo ? lo - v : v - hi;
  const double flips = floor(d / range);
  const double rem = d - flips * range;
  const bool even = fmod(flips, 2.0) == 0.0;
  if (v < lo) return even ? lo + rem : hi - rem;
  return even ? hi - rem : lo + rem;
}

__device__ double grid_tap(const void* x, int64_t base, StorageType t, const GridSampleDesc& d, int64_t ix, int64_t iy) {
  if (d.padding == 0) return ix < 0 || ix >= d.w || iy < 0 || iy >= d.h ? 0.0 : load(x, base + iy * d.w + ix, t);
  double fx = static_cast<double>(ix), fy = static_cast<double>(iy);
  if (d.padding == 2) {
    fx = d.align_corners ? reflect_into(fx, 0, static_cast<double>(d.w - 1)) : reflect_into(fx, -0.5, d.w - 0.5);
    fy = d.align_corners ? reflect_into(fy, 0, static_cast<double>(d.h - 1)) : reflect_into(fy, -0.5, d.h - 0.5);
  }
  int64_t cx = static_cast<int64_t>(floor(fx + 0.5)), cy = static_cast<int64_t>(floor(fy + 0.5));
  cx = cx < 0 ? 0 : (cx > d.w - 1 ? d.w - 1 : cx);
  cy = cy < 0 ? 0 : (cy > d.h - 1 ? d.h - 1 : cy);
  return load(x, base + cy * d.w + cx, t);
}

__device__ void cubic_weights(double s, double w[4]) {
  const double A = -0.75;
  auto near_w = [&](double v) { return ((A + 2) * v - (A + 3)) * v * v + 1; };
  auto far_w = [&](double v) { return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A; };
  w[0] = far_w(s + 1);
  w[1] = near_w(s);
  w[2] = near_w(1 - s);
  w[3] = far_w(2 - s);
}

__device__ double grid_unnormalize(double g, int64_t size, bool align) {
  const double p = align ? (g + 1) / 2 * static_cast<double>(size - 1) : ((g + 1) * static_cast<double>(size) - 1) / 2;
  return isnan(p) ? p : fmin(fmax(p, -1e15), 1e15);
}

__global__ void grid_sample_kernel(const void* x, const void* grid, void* y, StorageType t, GridSampleDesc d) {
  const int64_t total = d.n * d.c * d.ho * d.wo;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % d.wo, oh = (i / d.wo) % d.ho, ch = (i / (d.wo * d.ho)) % d.c, b = i / (d.wo * d.ho * d.c);
    const int64_t gi = ((b * d.ho + oh) * d.wo + ow) * 2;
    const double px = grid_unnormalize(load(grid, gi, d.grid_type), d.w, d.align_corners);
    const double py = grid_unnormalize(load(grid, gi + 1, d.grid_type), d.h, d.align_corners);
    const int64_t base = (b * d.c + ch) * d.h * d.w;
    double v = 0;
    if (isnan(px) || isnan(py)) {
      v = 0;
    } else if (d.mode == 1) {
      v = grid_tap(x, base, t, d, static_cast<int64_t>(rint(px)), static_cast<int64_t>(rint(py)));
    } else if (d.mode == 0) {
      const double fx = floor(px), fy = floor(py), lx = px - fx, ly = py - fy;
      const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
      v = grid_tap(x, base, t, d, x0, y0) * (1 - lx) * (1 - ly) + grid_tap(x, base, t, d, x0 + 1, y0) * lx * (1 - ly) +
          grid_tap(x, base, t, d, x0, y0 + 1) * (1 - lx) * ly + grid_tap(x, base, t, d, x0 + 1, y0 + 1) * lx * ly;
    } else {
      const double fx = floor(px), fy = floor(py);
      double wx[4], wy[4];
      cubic_weights(px - fx, wx);
      cubic_weights(py - fy, wy);
      const int64_t x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 4; ++k) v += grid_tap(x, base, t, d, x0 + k, y0 + j) * wx[k] * wy[j];
    }
    store(y, i, static_cast<float>(v), t);
  }
}

}  // namespace

cudaError_t launch_grid_sample(const void* x, const void* grid, void* y, StorageType t, const GridSampleDesc& d,
                               cudaStream_t stream) {
  const int64_t total = d.n * d.c * d.ho * d.wo;
  if (total == 0) return cudaSuccess;
  grid_sample_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, grid, y, t, d);
  return cudaGetLastError();
}

cudaError_t launch_window_copy(const void* src, void* dst, StorageType t, int64_t planes, int64_t channels,
                               const int64_t src_dims[3], const int64_t dst_dims[3], const int64_t off[3],
                               const void* bias, cudaStream_t stream) {
  const Dims3 sd{{src_dims[0], src_dims[1], src_dims[2]}}, dd{{dst_dims[0], dst_dims[1], dst_dims[2]}},
      of{{off[0], off[1], off[2]}};
  const int64_t total = planes * dd.v[0] * dd.v[1] * dd.v[2];
  if (total == 0) return cudaSuccess;
  window_copy_kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, dst, t, planes, channels < 1 ? 1 : channels, sd,
                                                                  dd, of, bias);
  return cudaGetLastError();
}

cudaError_t launch_pool_nd(const void* x, void* y, int64_t* indices, StorageType t, int64_t planes, const WindowGeom& g,
                           bool max, bool count_include_pad, bool col_major_indices, cudaStream_t stream) {
  const int64_t total = planes * g.out[0] * g.out[1] * g.out[2];
  if (total == 0) return cudaSuccess;
  pool_nd_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, indices, t, planes, g, max, count_include_pad,
                                                             col_major_indices);
  return cudaGetLastError();
}

cudaError_t launch_batch_norm(const void* x, const void* scale, const void* b, const void* mean, const void* var,
                              void* y, StorageType t, int64_t count, int64_t channels, int64_t inner, float eps,
                              cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  batch_norm_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, scale, b, mean, var, y, t, count,
                                                                 channels < 1 ? 1 : channels, inner < 1 ? 1 : inner, eps);
  return cudaGetLastError();
}

cudaError_t launch_norm_axes(const void* x, const void* scale, const void* bias, void* y, StorageType t,
                             const NormAxesDesc& d, float eps, cudaStream_t stream, const NormStats& stats) {
  if (d.groups == 0 || d.group_size == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(d.groups < 65535 * 32 ? d.groups : 65535 * 32);
  norm_axes_kernel<<<grid, kNormThreads, 0, stream>>>(x, scale, bias, y, t, d, eps, stats);
  return cudaGetLastError();
}

cudaError_t launch_lrn(const void* x, void* y, StorageType t, int64_t n, int64_t c, int64_t inner, int64_t size,
                       float alpha, float beta, float bias, cudaStream_t stream) {
  const int64_t total = n * c * inner;
  if (total == 0) return cudaSuccess;
  lrn_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, t, n, c, inner, size, alpha, beta, bias);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
