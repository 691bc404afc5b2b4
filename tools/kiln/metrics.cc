// `kiln compare` metrics (see metrics.h). The tolerance test is numpy.allclose's:
// |a - r| <= atol + rtol * |r|, NaN equal to NaN, infinities equal only to themselves.
#include "tools/kiln/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kiln::cli {
namespace {

// Indices of the k largest values of row [begin, begin + n), as a sorted set.
std::vector<int64_t> top_indices(const std::vector<double>& v, int64_t begin, int64_t n, int k) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  // NaN ranks lowest so the order stays a strict weak ordering.
  auto key = [&](int64_t i) { return std::isnan(v[begin + i]) ? -INFINITY : v[begin + i]; };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
    const double x = key(a), y = key(b);
    return x > y || (x == y && a < b);
  });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace

OutputMetrics compare_outputs(const Tensor& actual, const Tensor& reference, int top_k, double atol, double rtol) {
  OutputMetrics m;
  if (actual.dtype() != reference.dtype()) {
    m.mismatch = std::string("dtype ") + dtype_name(actual.dtype()) + ", reference " + dtype_name(reference.dtype());
    return m;
  }
  if (actual.shape() != reference.shape()) {
    m.mismatch = "shape " + shape_str(actual.shape()) + ", reference " + shape_str(reference.shape());
    return m;
  }
  const std::vector<double> a = tensor_to_doubles(actual), r = tensor_to_doubles(reference);
  double max_ref = 0, dot = 0, na = 0, nr = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = r[i];
    const bool same_special = (std::isnan(x) && std::isnan(y)) || (std::isinf(y) && x == y);
    const double d = std::fabs(x - y);
    if (!same_special) {
      if (std::isnan(d) || d > atol + rtol * std::fabs(y)) ++m.violations;
      m.max_abs = std::max(m.max_abs, std::isnan(d) ? INFINITY : d);
      if (y != 0) m.max_rel = std::max(m.max_rel, std::isnan(d) ? INFINITY : d / std::fabs(y));
    }
    if (std::isfinite(y)) max_ref = std::max(max_ref, std::fabs(y));
    if (std::isfinite(x) && std::isfinite(y)) {
      dot += x * y;
      na += x * x;
      nr += y * y;
    }
  }
  m.normalized = max_ref > 0 ? m.max_abs / max_ref : (m.max_abs > 0 ? INFINITY : 0);
  if (na > 0 && nr > 0) m.cosine = dot / (std::sqrt(na) * std::sqrt(nr));
  else m.cosine = (na == 0 && nr == 0) ? 1 : 0;
  if (actual.rank() >= 1 && actual.dim(-1) > 0 && top_k > 0) {
    const int64_t n = actual.dim(-1);
    const int64_t rows = static_cast<int64_t>(a.size()) / n;
    m.top_k = static_cast<int>(std::min<int64_t>(top_k, n));
    int64_t agree = 0;
    for (int64_t row = 0; row < rows; ++row)
      agree += top_indices(a, row * n, n, m.top_k) == top_indices(r, row * n, n, m.top_k);
    m.topk_agreement = rows ? static_cast<double>(agree) / static_cast<double>(rows) : 1;
  }
  return m;
}

}  // namespace kiln::cli
