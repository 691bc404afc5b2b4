// CPU kernels for Einsum and Det. Einsum ("Operator Einsum, since version 12") handles implicit
// and explicit outputs, repeated labels (diagonals), broadcasting ellipses, and contracts the
// operands pairwise left to right, each pair as a batched GEMM after summing out the labels
// nothing later needs. Det ("Operator Det, since version 11") is LU with partial pivoting.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "backends/cpu/ops_nn_common.h"

namespace kiln::cpu::nn {
namespace {

// Labels: 'A'-'Z' -> 0..25, 'a'-'z' -> 26..51 (so id order is ASCII order, numpy's implicit
// output order); ellipsis dims -> kEllipsis + position (right-aligned across operands).
constexpr int kEllipsis = 52;

template <typename T>
struct Operand {
  std::vector<int> labels;
  Shape shape;
  std::vector<T> data;
};

// Parses one term into labels; `erank` = the operand's rank covered by "..." (-1: no ellipsis
// allowed / present), `emax` = the widest ellipsis over all operands.
Status parse_term(const KernelContext& ctx, const std::string& term, int rank, int emax, std::vector<int>* labels,
                  int* erank) {
  labels->clear();
  int letters = 0;
  bool ell = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (ch == '.') {
      if (ell || term.compare(i, 3, "...") != 0) return ctx.fail("malformed ellipsis in '" + term + "'");
      ell = true;
      i += 2;
      labels->push_back(-1);  // placeholder, expanded below
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      labels->push_back(ch <= 'Z' ? ch - 'A' : ch - 'a' + 26);
      ++letters;
    } else {
      return ctx.fail(std::string("invalid character '") + ch + "' in equation");
    }
  }
  *erank = ell ? (rank >= 0 ? rank - letters : emax) : 0;
  if (*erank < 0 || (!ell && rank >= 0 && letters != rank))
    return ctx.fail("term '" + term + "' does not match operand rank " + std::to_string(rank));
  std::vector<int> out;
  for (int l : *labels) {
    if (l >= 0) {
      out.push_back(l);
      continue;
    }
    for (int t = 0; t < *erank; ++t) out.push_back(kEllipsis + (emax - *erank) + t);
  }
  *labels = std::move(out);
  return Status::Ok();
}

// Copies `src` into a contiguous array with dims `order` of sizes `sizes`; a label absent from
// src or of extent 1 there is broadcast. Repeated labels in src must have been removed.
template <typename T>
std::vector<T> gather(const Operand<T>& src, const std::vector<int>& order, const std::vector<int64_t>& sizes) {
  const int nd = static_cast<int>(order.size());
  const std::vector<int64_t> ss = shape_strides(src.shape);
  std::vector<int64_t> strides(nd, 0);
  for (int d = 0; d < nd; ++d)
    for (size_t j = 0; j < src.labels.size(); ++j)
      if (src.labels[j] == order[d] && src.shape[j] != 1) strides[d] = ss[j];
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  std::vector<T> out(total);
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    out[i] = src.data[off];
    for (int d = nd - 1; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < sizes[d]) break;
      off -= strides[d] * idx[d];
      idx[d] = 0;
    }
  }
  return out;
}

// Replaces repeated labels by their diagonal.
template <typename T>
Status take_diagonals(const KernelContext& ctx, Operand<T>* op) {
  std::vector<int> labels;
  Shape shape;
  std::vector<int64_t> strides;
  const std::vector<int64_t> ss = shape_strides(op->shape);
  for (size_t j = 0; j < op->labels.size(); ++j) {
    auto it = std::find(labels.begin(), labels.end(), op->labels[j]);
    if (it == labels.end()) {
      labels.push_back(op->labels[j]);
      shape.push_back(op->shape[j]);
      strides.push_back(ss[j]);
    } else {
      const size_t k = it - labels.begin();
      if (shape[k] != op->shape[j]) return ctx.fail("repeated label with different extents");
      strides[k] += ss[j];
    }
  }
  if (labels.size() == op->labels.size()) return Status::Ok();
  std::vector<T> out(shape_numel(shape));
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    out[i] = op->data[off];
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  op->labels = std::move(labels);
  op->shape = std::move(shape);
  op->data = std::move(out);
  return Status::Ok();
}

// Sums out the labels of `op` not in `keep`.
template <typename T>
void reduce_to(Operand<T>* op, const std::set<int>& keep) {
  std::vector<int> kept, gone;
  std::vector<int64_t> sizes;
  Shape kept_shape;
  int64_t block = 1;
  for (size_t j = 0; j < op->labels.size(); ++j)
    if (keep.count(op->labels[j])) {
      kept.push_back(op->labels[j]);
      kept_shape.push_back(op->shape[j]);
    }
  if (kept.size() == op->labels.size()) return;
  std::vector<int64_t> gone_sizes;
  for (size_t j = 0; j < op->labels.size(); ++j)
    if (!keep.count(op->labels[j])) {
      gone.push_back(op->labels[j]);
      gone_sizes.push_back(op->shape[j]);
      block *= op->shape[j];
    }
  std::vector<int> order = kept;
  order.insert(order.end(), gone.begin(), gone.end());
  sizes = kept_shape;
  sizes.insert(sizes.end(), gone_sizes.begin(), gone_sizes.end());
  const std::vector<T> g = gather(*op, order, sizes);
  std::vector<T> out(shape_numel(kept_shape), T(0));
  for (size_t i = 0; i < out.size(); ++i) {
    T acc = 0;
    for (int64_t k = 0; k < block; ++k) acc += g[i * block + k];
    out[i] = acc;
  }
  op->labels = std::move(kept);
  op->shape = std::move(kept_shape);
  op->data = std::move(out);
}

// Contracts a and b over their shared labels not in `keep` (a batched GEMM).
template <typename T>
Operand<T> contract(const Operand<T>& a, const Operand<T>& b, const std::set<int>& keep,
                    const std::vector<int64_t>& extent) {
  auto has = [](const Operand<T>& o, int l) { return std::find(o.labels.begin(), o.labels.end(), l) != o.labels.end(); };
  std::vector<int> batch, a_only, b_only, summed;
  for (int l : a.labels) {
    if (!has(b, l)) a_only.push_back(l);
    else if (keep.count(l)) batch.push_back(l);
    else summed.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a, l)) b_only.push_back(l);
  auto sizes_of = [&](const std::vector<int>& ls) {
    std::vector<int64_t> s;
    for (int l : ls) s.push_back(extent[l]);
    return s;
  };
  auto cat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  const std::vector<int> ao = cat(batch, a_only, summed), bo = cat(batch, summed, b_only);
  const std::vector<T> ad = gather(a, ao, sizes_of(ao)), bd = gather(b, bo, sizes_of(bo));
  int64_t nb = 1, m = 1, n = 1, k = 1;
  for (int64_t s : sizes_of(batch)) nb *= s;
  for (int64_t s : sizes_of(a_only)) m *= s;
  for (int64_t s : sizes_of(b_only)) n *= s;
  for (int64_t s : sizes_of(summed)) k *= s;
  Operand<T> r;
  r.labels = cat(batch, a_only, b_only);
  r.shape = sizes_of(r.labels);
  r.data.assign(nb * m * n, T(0));
  for (int64_t t = 0; t < nb && m * n > 0; ++t)
    gemm<T>(false, false, m, n, k, T(1), ad.data() + t * m * k, k, bd.data() + t * k * n, n, T(0),
            r.data.data() + t * m * n, n);
  return r;
}

template <typename T>
Status run_einsum(const KernelContext& ctx, const std::vector<Tensor>& ins, const std::vector<std::vector<int>>& labels,
                  const std::vector<int>& out_labels, Tensor* result) {
  std::vector<int64_t> extent(kEllipsis + 64, 1);
  std::vector<bool> seen(extent.size(), false);
  std::vector<Operand<T>> ops(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    ops[i].labels = labels[i];
    ops[i].shape = ins[i].shape();
    ops[i].data.assign(ins[i].data<T>(), ins[i].data<T>() + ins[i].numel());
    for (size_t j = 0; j < labels[i].size(); ++j) {
      const int l = labels[i][j];
      const int64_t d = ins[i].dim(static_cast<int>(j));
      if (seen[l] && extent[l] != d) {
        // Only ellipsis dims broadcast (extent 1 against n).
        if (l < kEllipsis || (extent[l] != 1 && d != 1)) return ctx.fail("operands disagree on a label's extent");
      }
      if (!seen[l] || extent[l] == 1) extent[l] = d;
      seen[l] = true;
    }
    KILN_RETURN_IF_ERROR(take_diagonals(ctx, &ops[i]));
  }
  const std::set<int> out_set(out_labels.begin(), out_labels.end());
  auto keep_for = [&](size_t first_other) {
    std::set<int> keep = out_set;
    for (size_t j = first_other; j < ops.size(); ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    return keep;
  };
  Operand<T> cur = std::move(ops[0]);
  reduce_to(&cur, keep_for(1));
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<int> keep_b = keep_for(i + 1);
    keep_b.insert(cur.labels.begin(), cur.labels.end());
    reduce_to(&ops[i], keep_b);
    cur = contract(cur, ops[i], keep_for(i + 1), extent);
  }
  reduce_to(&cur, out_set);
  Shape out_shape;
  for (int l : out_labels) out_shape.push_back(extent[l]);
  const std::vector<T> data = gather(cur, out_labels, out_shape);
  *result = Tensor(dtype_of<T>(), out_shape);
  std::copy(data.begin(), data.end(), result->data<T>());
  return Status::Ok();
}

Status einsum(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  std::string eq;
  for (char ch : ctx.attr_string("equation", "")) if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs())
    return ctx.fail("equation has " + std::to_string(terms.size()) + " terms for " + std::to_string(ctx.num_inputs()) +
                    " inputs");
  std::vector<Tensor> ins;
  DataType dt = ctx.in(0).dtype();
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(ctx.require_inputs(i + 1));
    if (ctx.in(i).dtype() != dt) return ctx.fail("inputs must share one dtype");
    if (dtype_is_integer(dt)) {
      KILN_ASSIGN_OR_RETURN(Tensor t, cast_tensor(ctx.in(i), DataType::kFloat64));
      ins.push_back(t);
    } else {
      KILN_ASSIGN_OR_RETURN(Tensor t, to_compute(ctx, ctx.in(i)));
      ins.push_back(t);
    }
  }
  // Ellipsis width: the widest "..." over the operands.
  int emax = 0;
  std::vector<std::vector<int>> labels(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    int er;
    KILN_RETURN_IF_ERROR(parse_term(ctx, terms[i], ins[i].rank(), 0, &labels[i], &er));
    emax = std::max(emax, er);
  }
  if (emax > 64) return ctx.unsupported_here("more than 64 ellipsis dims");
  std::vector<int> counts(kEllipsis + 64, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    int er;
    KILN_RETURN_IF_ERROR(parse_term(ctx, terms[i], ins[i].rank(), emax, &labels[i], &er));
    for (int l : labels[i]) ++counts[l];
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    int er;
    KILN_RETURN_IF_ERROR(parse_term(ctx, eq.substr(arrow + 2), -1, emax, &out_labels, &er));
    std::set<int> uniq(out_labels.begin(), out_labels.end());
    if (uniq.size() != out_labels.size()) return ctx.fail("output repeats a label");
    for (int l : out_labels)
      if (!counts[l]) return ctx.fail("output label not present in any input");
  } else {
    for (int t = 0; t < emax; ++t) out_labels.push_back(kEllipsis + t);
    for (int l = 0; l < kEllipsis; ++l)
      if (counts[l] == 1) out_labels.push_back(l);
  }
  Tensor y;
  if (ins[0].dtype() == DataType::kFloat32) {
    KILN_RETURN_IF_ERROR(run_einsum<float>(ctx, ins, labels, out_labels, &y));
  } else {
    KILN_RETURN_IF_ERROR(run_einsum<double>(ctx, ins, labels, out_labels, &y));
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, from_compute(y, dt));
  ctx.set_output(0, out);
  return Status::Ok();
}

// Determinant of each trailing [M, M] matrix, by Gaussian elimination with partial pivoting.
Status det(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x0 = ctx.in(0);
  if (x0.rank() < 2 || x0.dim(-1) != x0.dim(-2)) return ctx.fail("input must be [..., M, M], got " + shape_str(x0.shape()));
  if (!dtype_is_float(x0.dtype())) return ctx.unsupported_here("Det needs a float input");
  const int64_t m = x0.dim(-1), nb = m ? x0.numel() / (m * m) : 0;
  const std::vector<double> x = tensor_to_doubles(x0);
  Tensor y(DataType::kFloat64, Shape(x0.shape().begin(), x0.shape().end() - 2));
  std::vector<double> a(m * m);
  for (int64_t b = 0; b < nb; ++b) {
    std::copy(x.begin() + b * m * m, x.begin() + (b + 1) * m * m, a.begin());
    double d = 1;
    for (int64_t c = 0; c < m && d != 0; ++c) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < m; ++r)
        if (std::fabs(a[r * m + c]) > std::fabs(a[piv * m + c])) piv = r;
      if (a[piv * m + c] == 0) {
        d = 0;
        break;
      }
      if (piv != c) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[c * m + j], a[piv * m + j]);
        d = -d;
      }
      d *= a[c * m + c];
      for (int64_t r = c + 1; r < m; ++r) {
        const double f = a[r * m + c] / a[c * m + c];
        for (int64_t j = c; j < m; ++j) a[r * m + j] -= f * a[c * m + j];
      }
    }
    y.data<double>()[b] = d;
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, cast_tensor(y, x0.dtype()));
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace

void register_linalg_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kEinsum, einsum);
  r.add(ir::OpKind::kDet, det);
}

}  // namespace kiln::cpu::nn
