// Det (kernels_linalg.h): thread 0 picks the pivot, swaps and accumulates the determinant; the
// block's threads eliminate the rows below the pivot in parallel (each row as the CPU does it).
#include "backends/cuda/kernels_linalg.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

__global__ void det_kernel(const float* __restrict__ x, void* y, int64_t m, StorageType t) {
  extern __shared__ double a[];
  __shared__ double d;
  __shared__ bool done;
  const float* xm = x + blockIdx.x * m * m;
  for (int64_t i = threadIdx.x; i < m * m; i += blockDim.x) a[i] = static_cast<double>(xm[i]);
  if (threadIdx.x == 0) {
    d = 1;
    done = false;
  }
  __syncthreads();
  for (int64_t c = 0; c < m; ++c) {
    if (threadIdx.x == 0) {
      if (d == 0) {
        done = true;
      } else {
        int64_t piv = c;
        for (int64_t r = c + 1; r < m; ++r)
          if (fabs(a[r * m + c]) > fabs(a[piv * m + c])) piv = r;
        if (a[piv * m + c] == 0) {
          d = 0;
          done = true;
        } else {
          if (piv != c) {
            for (int64_t j = 0; j < m; ++j) {
              const double s = a[c * m + j];
              a[c * m + j] = a[piv * m + j];
              a[piv * m + j] = s;
            }
            d = -d;
          }
          d = __dmul_rn(d, a[c * m + c]);
        }
      }
    }
    __syncthreads();
    if (done) break;
    for (int64_t r = c + 1 + threadIdx.x; r < m; r += blockDim.x) {
      const double f = __ddiv_rn(a[r * m + c], a[c * m + c]);
      for (int64_t j = c; j < m; ++j) a[r * m + j] = __dsub_rn(a[r * m + j], __dmul_rn(f, a[c * m + j]));
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) store(y, blockIdx.x, static_cast<float>(d), t);
}

}  // namespace

cudaError_t launch_det(const float* x, void* y, int64_t count, int64_t m, StorageType t, cudaStream_t stream) {
  if (m < 1 || m > kDetMaxDim) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(m * m) * sizeof(double);
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(det_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  det_kernel<<<static_cast<unsigned>(count), 128, smem, stream>>>(x, y, m, t);
  return cudaGetLastError();
}

// ---- DFT

namespace {

__global__ void dft_kernel(const float* __restrict__ x, void* y, int64_t n_in, int64_t inner, int comps, int64_t len,
                           int64_t out_len, bool inverse, StorageType t, int64_t total) {
  const double sign = inverse ? 1.0 : -1.0;
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, r = e / inner, k = r % out_len, o = r / out_len;
    double re = 0, im = 0;
    for (int64_t n = 0; n < n_in && n < len; ++n) {
      const float* p = x + ((o * n_in + n) * inner + i) * comps;
      const double xr = p[0], xi = comps == 2 ? p[1] : 0.0;
      const double ang = sign * two_pi * static_cast<double>((k * n) % len) / static_cast<double>(len);
      double s, c;
      sincos(ang, &s, &c);
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    if (inverse) {
      re /= static_cast<double>(len);
      im /= static_cast<double>(len);
    }
    store(y, 2 * e, static_cast<float>(re), t);
    store(y, 2 * e + 1, static_cast<float>(im), t);
  }
}

}  // namespace

cudaError_t launch_dft(const float* x, void* y, int64_t outer, int64_t n_in, int64_t inner, int comps, int64_t len,
                       int64_t out_len, bool inverse, StorageType t, cudaStream_t stream) {
  if (len < 1 || (comps != 1 && comps != 2)) return cudaErrorInvalidValue;
  const int64_t total = outer * out_len * inner;
  if (total == 0) return cudaSuccess;
  dft_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, n_in, inner, comps, len, out_len, inverse, t, total);
  return cudaGetLastError();
}

// ---- STFT

namespace {

__global__ void stft_kernel(const float* __restrict__ s, const float* __restrict__ win, void* y, int64_t length,
                            int comps, int64_t step, int64_t flen, int64_t frames, int64_t bins, StorageType t,
                            int64_t total) {
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = e % bins, f = (e / bins) % frames, b = e / (bins * frames);
    double re = 0, im = 0;
    for (int64_t n = 0; n < flen; ++n) {
      const float* p = s + (b * length + f * step + n) * comps;
      const double w = win ? static_cast<double>(win[n]) : 1.0;
      const double xr = static_cast<double>(p[0]) * w, xi = comps == 2 ? static_cast<double>(p[1]) * w : 0.0;
      const double ang = -two_pi * static_cast<double>((k * n) % flen) / static_cast<double>(flen);
      double sn, cs;
      sincos(ang, &sn, &cs);
      re += xr * cs - xi * sn;
      im += xr * sn + xi * cs;
    }
    store(y, 2 * e, static_cast<float>(re), t);
    store(y, 2 * e + 1, static_cast<float>(im), t);
  }
}

}  // namespace

cudaError_t launch_stft(const float* signal, const float* window, void* y, int64_t batch, int64_t length, int comps,
                        int64_t step, int64_t flen, int64_t frames, int64_t bins, StorageType t, cudaStream_t stream) {
  if (flen < 1 || step < 1 || (comps != 1 && comps != 2)) return cudaErrorInvalidValue;
  const int64_t total = batch * frames * bins;
  if (total == 0) return cudaSuccess;
  stft_kernel<<<blocks_for(total), kThreads, 0, stream>>>(signal, window, y, length, comps, step, flen, frames, bins, t,
                                                          total);
  return cudaGetLastError();
}

// ---- RoiAlign

namespace {

__global__ void roi_align_kernel(const void* x, const float* __restrict__ rois, const int64_t* __restrict__ bidx,
                                 void* y, StorageType t, RoiAlignDesc d, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pw = e % d.out_w, ph = (e / d.out_w) % d.out_h, c = (e / (d.out_w * d.out_h)) % d.c;
    const int64_t r = e / (d.out_w * d.out_h * d.c);
    const int64_t b = bidx[r];
    if (b < 0 || b >= d.n) {
      store(y, e, 0.f, t);
      continue;
    }
    const double off = d.half_pixel ? 0.5 : 0.0;
    const double x1 = static_cast<double>(rois[r * 4]) * d.scale - off;
    const double y1 = static_cast<double>(rois[r * 4 + 1]) * d.scale - off;
    double rw = static_cast<double>(rois[r * 4 + 2]) * d.scale - off - x1;
    double rh = static_cast<double>(rois[r * 4 + 3]) * d.scale - off - y1;
    if (!d.half_pixel) {
      rw = fmax(rw, 1.0);
      rh = fmax(rh, 1.0);
    }
    const double bin_h = rh / static_cast<double>(d.out_h), bin_w = rw / static_cast<double>(d.out_w);
    int64_t gh = d.ratio > 0 ? d.ratio : static_cast<int64_t>(ceil(rh / static_cast<double>(d.out_h)));
    int64_t gw = d.ratio > 0 ? d.ratio : static_cast<int64_t>(ceil(rw / static_cast<double>(d.out_w)));
    gh = min(gh, int64_t{4096});
    gw = min(gw, int64_t{4096});
    const double count = static_cast<double>(max(gh * gw, int64_t{1}));
    const int64_t base = (b * d.c + c) * d.h * d.w;
    double acc = 0;
    bool first = true;
    for (int64_t iy = 0; iy < gh; ++iy) {
      for (int64_t ix = 0; ix < gw; ++ix) {
        double sy = y1 + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(gh);
        double sx = x1 + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(gw);
        double wt[4] = {0, 0, 0, 0};
        int64_t at[4] = {0, 0, 0, 0};
        if (!(sy < -1.0 || sy > static_cast<double>(d.h) || sx < -1.0 || sx > static_cast<double>(d.w))) {
          sy = fmax(sy, 0.0);
          sx = fmax(sx, 0.0);
          int64_t y_lo = static_cast<int64_t>(sy), x_lo = static_cast<int64_t>(sx), y_hi, x_hi;
          if (y_lo >= d.h - 1) {
            y_hi = y_lo = d.h - 1;
            sy = static_cast<double>(y_lo);
          } else {
            y_hi = y_lo + 1;
          }
          if (x_lo >= d.w - 1) {
            x_hi = x_lo = d.w - 1;
            sx = static_cast<double>(x_lo);
          } else {
            x_hi = x_lo + 1;
          }
          const double ly = sy - static_cast<double>(y_lo), lx = sx - static_cast<double>(x_lo);
          wt[0] = (1 - ly) * (1 - lx);
          wt[1] = (1 - ly) * lx;
          wt[2] = ly * (1 - lx);
          wt[3] = ly * lx;
          at[0] = y_lo * d.w + x_lo;
          at[1] = y_lo * d.w + x_hi;
          at[2] = y_hi * d.w + x_lo;
          at[3] = y_hi * d.w + x_hi;
        }
        if (!d.max_mode) {
          for (int k = 0; k < 4; ++k) acc += wt[k] * static_cast<double>(load(x, base + at[k], t));
        } else {
          double m = wt[0] * static_cast<double>(load(x, base + at[0], t));
          for (int k = 1; k < 4; ++k) m = fmax(m, wt[k] * static_cast<double>(load(x, base + at[k], t)));
          acc = first ? m : fmax(acc, m);
          first = false;
        }
      }
    }
    store(y, e, static_cast<float>(d.max_mode ? acc : acc / count), t);
  }
}

}  // namespace

cudaError_t launch_roi_align(const void* x, const float* rois, const int64_t* batch_indices, void* y, StorageType t,
                             const RoiAlignDesc& d, cudaStream_t stream) {
  const int64_t total = d.rois * d.c * d.out_h * d.out_w;
  if (total == 0) return cudaSuccess;
  if (d.h <= 0 || d.w <= 0) return cudaErrorInvalidValue;
  roi_align_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, rois, batch_indices, y, t, d, total);
  return cudaGetLastError();
}

// ---------------------------------------------------------------- Einsum (float64)
namespace {

__global__ void einsum_f64_kernel(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ y,
                                  EinsumDesc d, int64_t total, int64_t sum_total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = einsum_f64_element(a, b, d, i, sum_total);
}

}  // namespace

cudaError_t launch_einsum_f64(const double* a, const double* b, double* y, const EinsumDesc& d, cudaStream_t stream) {
  int64_t total = 1, sum_total = 1;
  for (int k = 0; k < d.n_out; ++k) total *= d.out_ext[k];
  for (int k = 0; k < d.n_sum; ++k) sum_total *= d.sum_ext[k];
  if (total == 0) return cudaSuccess;
  einsum_f64_kernel<<<blocks_for(total), kThreads, 0, stream>>>(a, d.inputs == 2 ? b : nullptr, y, d, total, sum_total);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
