// TopK, OneHot, Compress (kernels_select.h): grid-stride kernels, one thread per input element
// (TopK), output element (OneHot) or [outer, inner] position (Compress).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/cuda/kernels_select.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
__device__ __forceinline__ auto key_of(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}

template <typename K>
__device__ __forceinline__ bool is_nan_key(K v) {
  if constexpr (std::is_floating_point_v<K>) return v != v;
  else return false;
}

// Whether (a, ia) comes before (b, ib): the CPU reference's `before`.
template <typename K>
__device__ __forceinline__ bool before(K a, int64_t ia, K b, int64_t ib, bool largest) {
  const bool an = is_nan_key(a), bn = is_nan_key(b);
  if (an || bn) return an && bn ? ia < ib : bn;
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

template <typename T>
__global__ void topk_kernel(const T* __restrict__ x, T* __restrict__ values, int64_t* __restrict__ indices,
                            int64_t n, int64_t inner, int64_t k, bool largest, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, r = e / inner, j = r % n, o = r / n;
    const T* row = x + o * n * inner + i;
    const auto kj = key_of(row[j * inner]);
    int64_t rank = 0;
    for (int64_t q = 0; q < n && rank < k; ++q)
      if (q != j && before(key_of(row[q * inner]), q, kj, j, largest)) ++rank;
    if (rank < k) {
      const int64_t dst = (o * k + rank) * inner + i;
      values[dst] = row[j * inner];
      indices[dst] = j;
    }
  }
}

template <typename T, typename I>
__global__ void one_hot_kernel(const I* __restrict__ idx, const T* __restrict__ vals, T* __restrict__ y,
                               int64_t depth, int64_t inner, int64_t total) {
  const T off = vals[0], on = vals[1];
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in = e % inner, r = e / inner, d = r % depth, o = r / depth;
    int64_t v = static_cast<int64_t>(idx[o * inner + in]);
    if (v < 0) v += depth;
    y[e] = v == d ? on : off;
  }
}

template <typename T>
__global__ void compress_kernel(const T* __restrict__ x, const uint8_t* __restrict__ cond, int64_t len,
                                T* __restrict__ y, int64_t n, int64_t inner, int64_t kept, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, o = e / inner;
    int64_t c = 0;
    for (int64_t j = 0; j < len && c < kept; ++j)
      if (cond[j]) y[(o * kept + c++) * inner + i] = x[(o * n + j) * inner + i];
  }
}

template <typename F>
cudaError_t by_size(int elem_bytes, F f) {
  switch (elem_bytes) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_topk(const void* x, void* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                        int64_t k, bool largest, StorageType t, cudaStream_t stream) {
  const int64_t total = outer * n * inner;
  if (total == 0 || k == 0) return cudaSuccess;
  auto go = [&](auto e) {
    using T = decltype(e);
    topk_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(values),
                                                               indices, n, inner, k, largest, total);
    return cudaGetLastError();
  };
  return with_storage_type(t, false, go);
}

cudaError_t launch_one_hot(const void* indices, StorageType idx_type, const void* values, void* y, int elem_bytes,
                           int64_t outer, int64_t depth, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * depth * inner;
  if (total == 0) return cudaSuccess;
  return by_size(elem_bytes, [&](auto e) {
    using T = decltype(e);
    auto go = [&](auto ie) {
      using I = decltype(ie);
      one_hot_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(
          static_cast<const I*>(indices), static_cast<const T*>(values), static_cast<T*>(y), depth, inner, total);
      return cudaGetLastError();
    };
    switch (idx_type) {
      case StorageType::kF32: return go(float{});
      case StorageType::kI32: return go(int32_t{});
      case StorageType::kI64: return go(int64_t{});
      default: return cudaErrorInvalidValue;
    }
  });
}

cudaError_t launch_compress(const void* x, const uint8_t* cond, int64_t len, void* y, int elem_bytes, int64_t outer,
                            int64_t n, int64_t inner, int64_t kept, cudaStream_t stream) {
  const int64_t total = outer * inner;
  if (total == 0 || kept == 0) return cudaSuccess;
  return by_size(elem_bytes, [&](auto e) {
    using T = decltype(e);
    compress_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), cond, len,
                                                                   static_cast<T*>(y), n, inner, kept, total);
    return cudaGetLastError();
  });
}

// ---- NonMaxSuppression

namespace {

struct NmsBox {
  double y1, x1, y2, x2;
};

__device__ NmsBox nms_box(const float* boxes, int64_t b, int64_t n, int64_t i, bool center) {
  const float* p = boxes + (b * n + i) * 4;
  const double p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
  if (center) return NmsBox{p1 - p3 / 2, p0 - p2 / 2, p1 + p3 / 2, p0 + p2 / 2};
  return NmsBox{fmin(p0, p2), fmin(p1, p3), fmax(p0, p2), fmax(p1, p3)};
}

__device__ bool nms_suppresses(const NmsBox& a, const NmsBox& c, double iou) {
  const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_c = (c.y2 - c.y1) * (c.x2 - c.x1);
  if (area_a <= 0 || area_c <= 0) return false;
  const double ih = fmax(0.0, fmin(a.y2, c.y2) - fmax(a.y1, c.y1));
  const double iw = fmax(0.0, fmin(a.x2, c.x2) - fmax(a.x1, c.x1));
  const double inter = ih * iw;
  return inter / (area_a + area_c - inter) > iou;
}

__global__ void nms_kernel(const float* __restrict__ boxes, const float* __restrict__ scores,
                           const int64_t* __restrict__ max_out_p, const float* __restrict__ iou_p,
                           const float* __restrict__ thr_p, bool has_thr, bool center, int64_t batches, int64_t classes,
                           int64_t n, int64_t* __restrict__ y, int64_t count) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const int64_t max_out = max_out_p ? max_out_p[0] : 0;
  const double iou = iou_p ? static_cast<double>(iou_p[0]) : 0.0;
  const double thr = thr_p ? static_cast<double>(thr_p[0]) : 0.0;
  int64_t w = 0;
  for (int64_t b = 0; b < batches && max_out > 0; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = scores + (b * classes + c) * n;
      const int64_t start = w;
      double cur_s = 0;
      int64_t cur = -1;  // the candidate last visited: the next one sorts after (score desc, index asc)
      while (w - start < max_out) {
        int64_t best = -1;
        double best_s = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double s = sc[i];
          if (has_thr && !(s > thr)) continue;
          if (cur >= 0 && !(s < cur_s || (s == cur_s && i > cur))) continue;  // not after cur
          if (best < 0 || s > best_s || (s == best_s && i < best)) {
            best = i;
            best_s = s;
          }
        }
        if (best < 0) break;
        cur = best;
        cur_s = best_s;
        const NmsBox bi = nms_box(boxes, b, n, best, center);
        bool drop = false;
        for (int64_t k = start; k < w && !drop; ++k) drop = nms_suppresses(nms_box(boxes, b, n, y[k * 3 + 2], center), bi, iou);
        if (drop) continue;
        if (w >= count) return;  // the output's extent: nothing past it
        y[w * 3] = b;
        y[w * 3 + 1] = c;
        y[w * 3 + 2] = best;
        ++w;
      }
    }
  }
}

}  // namespace

cudaError_t launch_nms(const float* boxes, const float* scores, const int64_t* max_out, const float* iou,
                       const float* score_threshold, bool has_score_threshold, bool center_point_box, int64_t batches,
                       int64_t classes, int64_t n, int64_t* y, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  nms_kernel<<<1, 1, 0, stream>>>(boxes, scores, max_out, iou, score_threshold, has_score_threshold, center_point_box,
                                  batches, classes, n, y, count);
  return cudaGetLastError();
}

// ---- Unique

namespace {

template <typename K>
__device__ __forceinline__ bool key_less(K a, K b) {
  if (is_nan_key(a)) return false;
  if (is_nan_key(b)) return true;
  return a < b;
}
template <typename K>
__device__ __forceinline__ bool key_equal(K a, K b) {
  if (is_nan_key(a) || is_nan_key(b)) return is_nan_key(a) && is_nan_key(b);
  return a == b;
}

// Slice s's key e (e = o * inner + i).
template <typename T>
__device__ __forceinline__ auto slice_key(const T* x, int64_t n, int64_t inner, int64_t s, int64_t e) {
  return key_of(x[((e / inner) * n + s) * inner + e % inner]);
}

template <typename T>
__device__ bool slices_equal(const T* x, int64_t n, int64_t inner, int64_t len, int64_t a, int64_t b) {
  for (int64_t e = 0; e < len; ++e)
    if (!key_equal(slice_key(x, n, inner, a, e), slice_key(x, n, inner, b, e))) return false;
  return true;
}

template <typename T>
__device__ bool slices_less(const T* x, int64_t n, int64_t inner, int64_t len, int64_t a, int64_t b) {
  for (int64_t e = 0; e < len; ++e) {
    const auto ka = slice_key(x, n, inner, a, e), kb = slice_key(x, n, inner, b, e);
    if (key_less(ka, kb)) return true;
    if (key_less(kb, ka)) return false;
  }
  return false;
}

template <typename T>
__global__ void unique_rep_kernel(const T* __restrict__ x, int64_t n, int64_t inner, int64_t len, int64_t* rep) {
  for (int64_t s = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; s < n;
       s += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = s;
    for (int64_t t = 0; t < s; ++t)
      if (slices_equal(x, n, inner, len, t, s)) {
        r = t;
        break;
      }
    rep[s] = r;
  }
}

template <typename T>
__global__ void unique_write_kernel(const T* __restrict__ x, int64_t outer, int64_t n, int64_t inner, bool sorted,
                                    int64_t groups, const int64_t* __restrict__ rep, T* __restrict__ y,
                                    int64_t* first, int64_t* inverse, int64_t* counts) {
  const int64_t len = outer * inner;
  for (int64_t s = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; s < n;
       s += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = rep[s];
    int64_t rank = 0;
    for (int64_t t = 0; t < n; ++t) {
      if (rep[t] != t || t == r) continue;
      if (sorted ? slices_less(x, n, inner, len, t, r) : t < r) ++rank;
    }
    if (inverse) inverse[s] = rank;
    if (r != s || rank >= groups) continue;
    if (first) first[rank] = s;
    if (counts) {
      int64_t c = 0;
      for (int64_t t = 0; t < n; ++t) c += rep[t] == s;
      counts[rank] = c;
    }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) y[(o * groups + rank) * inner + i] = x[(o * n + s) * inner + i];
  }
}

}  // namespace

cudaError_t launch_unique(const void* x, StorageType t, int64_t outer, int64_t n, int64_t inner, bool sorted,
                          int64_t groups, int64_t* rep, void* y, int64_t* first, int64_t* inverse, int64_t* counts,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  auto go = [&](auto e) {
    using T = decltype(e);
    const T* xt = static_cast<const T*>(x);
    unique_rep_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(xt, n, inner, outer * inner, rep);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    unique_write_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(xt, outer, n, inner, sorted, groups, rep,
                                                                   static_cast<T*>(y), first, inverse, counts);
    return cudaGetLastError();
  };
  return with_storage_type(t, false, go);
}

}  // namespace kiln::cuda

// ---- NonZero

namespace kiln::cuda {
namespace {

template <typename T>
__device__ __forceinline__ bool is_nonzero(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v) != 0.f;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v) != 0.f;
  else return v != T(0);
}

template <typename T>
__global__ void nonzero_kernel(const T* x, int64_t numel, NonZeroDesc d, int64_t* y, int64_t count) {
  int64_t w = 0;
  for (int64_t i = 0; i < numel && w < count; ++i) {
    if (!is_nonzero(x[i])) continue;
    int64_t rem = i;
    for (int k = d.rank - 1; k >= 0; --k) {
      y[k * count + w] = rem % d.dims[k];
      rem /= d.dims[k];
    }
    ++w;
  }
}

}  // namespace

cudaError_t launch_nonzero(const void* x, StorageType t, const NonZeroDesc& d, int64_t* y, int64_t count,
                           cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  int64_t numel = 1;
  for (int k = 0; k < d.rank; ++k) numel *= d.dims[k];
  return with_storage_type(t, true, [&](auto e) {
    using T = decltype(e);
    nonzero_kernel<<<1, 1, 0, stream>>>(static_cast<const T*>(x), numel, d, y, count);
    return cudaGetLastError();
  });
}

}  // namespace kiln::cuda
