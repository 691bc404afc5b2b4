// Convolution cores shared by Conv / ConvTranspose (float, double) and ConvInteger /
// QLinearConv (int32): im2col in bounded column chunks + one GEMM per group, a 1x1 fast path
// that feeds the input straight to GEMM, a direct path for depthwise convolutions (one input
// channel per group, where GEMM would have K = kernel size), and GEMM + col2im for transposed
// convolution. Layouts are ONNX's: X [N, C, spatial...], W [M, C/group, kernel...] (Conv) or
// [C, M/group, kernel...] (ConvTranspose).
#pragma once

#include <algorithm>
#include <vector>

#include "backends/cpu/ops_nn_common.h"

namespace kiln::cpu::nn {

// Column-buffer budget in elements (1 MiB of float, about one core's L2): im2col/col2im work in
// chunks of spatial rows below it, so GEMM reads the columns from cache (measured ~1.5x faster
// than one full-size column matrix on ResNet's 3x3 convs) and huge 3-D convs never allocate
// their whole column matrix.
constexpr int64_t kColBudget = int64_t{1} << 18;

// Validates X / W ranks and channel counts (Conv layout, or ConvTranspose's when `transpose`)
// and returns the kernel's spatial extent (W's trailing dims; kernel_shape must agree).
Status check_conv_inputs(const KernelContext& ctx, const Tensor& x, const Tensor& w, bool transpose, int64_t group,
                         std::vector<int64_t>* kernel);

// Row-major multi-index of flat index i over dims[0..n).
inline void unravel(int64_t i, const int64_t* dims, int n, int64_t* idx) {
  for (int d = n - 1; d >= 0; --d) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
}

// The range [lo, hi) of o in [0, n_o) with 0 <= o * s + off < n_i.
inline void valid_range(int64_t off, int64_t s, int64_t n_i, int64_t n_o, int64_t* lo, int64_t* hi) {
  *lo = std::min(n_o, off >= 0 ? 0 : ceil_div(-off, s));
  *hi = n_i - off <= 0 ? 0 : std::min(n_o, ceil_div(n_i - off, s));
  if (*hi < *lo) *hi = *lo;
}

// Flat offset (over all but the last dim of `to`) of position idx mapped through
// idx * stride + k * dilation - pad_begin, or -1 if it falls in the padding. Used both ways:
// output row -> input row (im2col) and input row -> output row (col2im).
inline int64_t map_row(const SpatialGeom& g, const int64_t* idx, const int64_t* kidx, const std::vector<int64_t>& to) {
  int64_t base = 0;
  for (int d = 0; d + 1 < g.nd(); ++d) {
    const int64_t p = idx[d] * g.stride[d] + kidx[d] * g.dilation[d] - g.pad_begin[d];
    if (p < 0 || p >= to[d]) return -1;
    base = base * to[d] + p;
  }
  return base;
}

// Column matrix of channels [0, c) of x ([c, in...]): row (ch, kernel offset), columns the
// output positions of output rows [r0, r1) (a row spans the last spatial dim).
template <typename T>
void im2col(const SpatialGeom& g, const T* x, int64_t c, int64_t r0, int64_t r1, T* col) {
  const int nd = g.nd(), last = nd - 1;
  const int64_t kn = g.kernel_size(), in_sz = g.in_size(), out_last = g.out[last], in_last = g.in[last];
  const int64_t s = g.stride[last], cols = (r1 - r0) * out_last;
  std::vector<int64_t> kidx(nd), oidx(nd), bases(r1 - r0);
  for (int64_t kk = 0; kk < kn; ++kk) {
    // The input row each output row reads for this kernel offset is the same for every channel.
    unravel(kk, g.kernel.data(), nd, kidx.data());
    for (int64_t r = r0; r < r1; ++r) {
      unravel(r, g.out.data(), last, oidx.data());
      bases[r - r0] = map_row(g, oidx.data(), kidx.data(), g.in);
    }
    const int64_t off = kidx[last] * g.dilation[last] - g.pad_begin[last];
    int64_t lo, hi;
    valid_range(off, s, in_last, out_last, &lo, &hi);
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* xc = x + ch * in_sz;
      T* row = col + (ch * kn + kk) * cols;
      for (int64_t r = r0; r < r1; ++r) {
        T* dst = row + (r - r0) * out_last;
        const int64_t base = bases[r - r0];
        if (base < 0) {
          std::fill(dst, dst + out_last, T(0));
          continue;
        }
        std::fill(dst, dst + lo, T(0));
        const int64_t start = base * in_last + lo * s + off;
        if (s == 1) {
          std::copy(xc + start, xc + start + (hi - lo), dst + lo);
        } else {
          for (int64_t o = lo; o < hi; ++o) dst[o] = xc[start + (o - lo) * s];
        }
        std::fill(dst + hi, dst + out_last, T(0));
      }
    }
  }
}

// Depthwise (one input channel per group): y[j] += w[j, k] * shifted x, per kernel offset.
template <typename T>
void conv_depthwise(const SpatialGeom& g, const T* xc, const T* w, int64_t mg, T* y) {
  const int nd = g.nd(), last = nd - 1;
  const int64_t kn = g.kernel_size(), out_sz = g.out_size(), out_last = g.out[last], in_last = g.in[last];
  const int64_t s = g.stride[last], rows = out_sz / out_last;
  std::vector<int64_t> kidx(nd), oidx(nd);
  for (int64_t j = 0; j < mg; ++j) {
    T* yc = y + j * out_sz;
    std::fill(yc, yc + out_sz, T(0));
    for (int64_t kk = 0; kk < kn; ++kk) {
      const T wk = w[j * kn + kk];
      unravel(kk, g.kernel.data(), nd, kidx.data());
      const int64_t off = kidx[last] * g.dilation[last] - g.pad_begin[last];
      int64_t lo, hi;
      valid_range(off, s, in_last, out_last, &lo, &hi);
      for (int64_t r = 0; r < rows; ++r) {
        unravel(r, g.out.data(), last, oidx.data());
        const int64_t base = map_row(g, oidx.data(), kidx.data(), g.in);
        if (base < 0) continue;
        T* yr = yc + r * out_last;
        const int64_t start = base * in_last + off;
        for (int64_t o = lo; o < hi; ++o) yr[o] += wk * xc[start + o * s];
      }
    }
  }
}

// y [n, m, out...] = conv(x [n, c, in...], w [m, c/groups, kernel...]); no bias.
template <typename T>
void conv_forward(const SpatialGeom& g, int64_t n, int64_t c, int64_t m, int64_t groups, const T* x, const T* w, T* y) {
  const int nd = g.nd();
  const int64_t cg = c / groups, mg = m / groups, kn = g.kernel_size(), kdim = cg * kn;
  const int64_t in_sz = g.in_size(), out_sz = g.out_size(), out_last = g.out[nd - 1], rows = out_sz / out_last;
  bool pointwise = true;
  for (int d = 0; d < nd; ++d)
    pointwise = pointwise && g.kernel[d] == 1 && g.stride[d] == 1 && g.pad_begin[d] == 0 && g.pad_end[d] == 0;
  const bool depthwise = cg == 1 && !pointwise;
  const int64_t chunk = std::clamp<int64_t>(kColBudget / std::max<int64_t>(1, kdim * out_last), 1, rows);
  std::vector<T> col(pointwise || depthwise ? 0 : kdim * chunk * out_last);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const T* xg = x + (b * c + gi * cg) * in_sz;
      const T* wg = w + gi * mg * kdim;
      T* yg = y + (b * m + gi * mg) * out_sz;
      if (pointwise) {
        gemm<T>(false, false, mg, out_sz, cg, T(1), wg, kdim, xg, in_sz, T(0), yg, out_sz);
      } else if (depthwise) {
        conv_depthwise(g, xg, wg, mg, yg);
      } else {
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          const int64_t r1 = std::min(rows, r0 + chunk), cols = (r1 - r0) * out_last;
          im2col(g, xg, cg, r0, r1, col.data());
          gemm<T>(false, false, mg, cols, kdim, T(1), wg, kdim, col.data(), cols, T(0), yg + r0 * out_last, out_sz);
        }
      }
    }
  }
}

// Adds column matrix rows (ch, kernel offset) x input positions of input rows [r0, r1) into
// y [c, out...]: the scatter half of a transposed convolution (g.in: its input, g.out: output).
template <typename T>
void col2im_add(const SpatialGeom& g, const T* col, int64_t c, int64_t r0, int64_t r1, T* y) {
  const int nd = g.nd(), last = nd - 1;
  const int64_t kn = g.kernel_size(), out_sz = g.out_size(), out_last = g.out[last], in_last = g.in[last];
  const int64_t s = g.stride[last], cols = (r1 - r0) * in_last;
  std::vector<int64_t> kidx(nd), iidx(nd);
  for (int64_t ch = 0; ch < c; ++ch) {
    T* yc = y + ch * out_sz;
    for (int64_t kk = 0; kk < kn; ++kk) {
      unravel(kk, g.kernel.data(), nd, kidx.data());
      const T* row = col + (ch * kn + kk) * cols;
      const int64_t off = kidx[last] * g.dilation[last] - g.pad_begin[last];
      int64_t lo, hi;
      valid_range(off, s, out_last, in_last, &lo, &hi);
      for (int64_t r = r0; r < r1; ++r) {
        unravel(r, g.in.data(), last, iidx.data());
        const int64_t base = map_row(g, iidx.data(), kidx.data(), g.out);
        if (base < 0) continue;
        const T* src = row + (r - r0) * in_last;
        const int64_t start = base * out_last + lo * s + off;
        for (int64_t i = lo; i < hi; ++i) yc[start + (i - lo) * s] += src[i];
      }
    }
  }
}

// y [n, m, out...] += conv_transpose(x [n, c, in...], w [c, m/groups, kernel...]); y must
// be zero (or hold the bias) on entry.
template <typename T>
void conv_transpose_forward(const SpatialGeom& g, int64_t n, int64_t c, int64_t m, int64_t groups, const T* x,
                            const T* w, T* y) {
  const int nd = g.nd();
  const int64_t cg = c / groups, mg = m / groups, mk = mg * g.kernel_size();
  const int64_t in_sz = g.in_size(), out_sz = g.out_size(), in_last = g.in[nd - 1], rows = in_sz / in_last;
  const int64_t chunk = std::clamp<int64_t>(kColBudget / std::max<int64_t>(1, mk * in_last), 1, rows);
  std::vector<T> col(mk * chunk * in_last);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const T* xg = x + (b * c + gi * cg) * in_sz;
      const T* wg = w + gi * cg * mk;
      T* yg = y + (b * m + gi * mg) * out_sz;
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r1 = std::min(rows, r0 + chunk), cols = (r1 - r0) * in_last;
        gemm<T>(true, false, mk, cols, cg, T(1), wg, mk, xg + r0 * in_last, in_sz, T(0), col.data(), cols);
        col2im_add(g, col.data(), mg, r0, r1, yg);
      }
    }
  }
}

}  // namespace kiln::cpu::nn
