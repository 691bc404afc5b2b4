// The layers of exact_layers.h: each one launcher call of kernels_exact.cu, named with its op,
// kernel and types (the timing-cache signature is op + tactic).
#include "backends/cuda/exact_layers.h"

#include "backends/cuda/gpu_ops.h"

namespace kiln::cuda {

StatusOr<std::vector<int64_t>> broadcast_strides(const Shape& in, const Shape& out) {
  if (out.size() > static_cast<size_t>(kMaxRank)) return unsupported("rank above " + std::to_string(kMaxRank));
  if (in.size() > out.size()) return invalid_argument("cannot broadcast " + shape_str(in) + " to " + shape_str(out));
  std::vector<int64_t> st(std::max<size_t>(out.size(), 1), 0);
  const size_t lead = out.size() - in.size();
  int64_t stride = 1;
  for (size_t i = out.size(); i-- > lead;) {
    const int64_t dim = in[i - lead];
    if (dim != out[i] && dim != 1) return invalid_argument("cannot broadcast " + shape_str(in) + " to " + shape_str(out));
    st[i] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return st;
}

StatusOr<BroadcastDesc> broadcast_desc(const Shape& a, const Shape& b, const Shape& out) {
  BroadcastDesc d;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sa, broadcast_strides(a, out));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sb, broadcast_strides(b, out));
  d.rank = static_cast<int>(std::max<size_t>(out.size(), 1));
  for (int i = 0; i < d.rank; ++i) {
    d.out_dims[i] = out.empty() ? 1 : out[i];
    d.a_strides[i] = sa[i];
    d.b_strides[i] = sb[i];
  }
  return d;
}

std::unique_ptr<Layer> make_exact_elementwise_layer(const std::string& op, ExactOp e, StorageType in_t,
                                                    const BroadcastDesc& d) {
  return make_kernel_layer(op, std::string("kiln.exact ") + exact_op_name(e) + " " + storage_name(in_t),
                           [=](ExecState& s, const Layer& l) {
                             const void* b = l.ins.size() > 1 ? s.ptr(l.ins[1]) : nullptr;
                             return launch_exact_elementwise(e, in_t, s.ptr(l.ins[0]), b, s.ptr(l.outs[0]), d, s.stream);
                           });
}

std::unique_ptr<Layer> make_select_layer(const SelectDesc& sd, StorageType t) {
  const int eb = storage_bytes(t);
  return make_kernel_layer("Where", std::string("kiln.select ") + storage_name(t), [=](ExecState& s, const Layer& l) {
    return launch_select(s.ptr(l.ins[0]), s.ptr(l.ins[1]), s.ptr(l.ins[2]), s.ptr(l.outs[0]), eb, sd, s.stream);
  });
}

std::unique_ptr<Layer> make_cast_layer(int64_t count, StorageType from, StorageType to) {
  return make_kernel_layer("Cast", std::string("kiln.cast ") + storage_name(from) + "->" + storage_name(to),
                           [=](ExecState& s, const Layer& l) {
                             return launch_cast(s.ptr(l.ins[0]), from, s.ptr(l.outs[0]), to, count, s.stream);
                           });
}

std::unique_ptr<Layer> make_saturating_cast_layer(int64_t count, StorageType to) {
  return make_kernel_layer("Cast", std::string("kiln.saturating_cast f64->") + storage_name(to),
                           [=](ExecState& s, const Layer& l) {
                             return launch_saturating_cast(static_cast<const double*>(s.ptr(l.ins[0])), s.ptr(l.outs[0]),
                                                           to, count, s.stream);
                           });
}

std::unique_ptr<Layer> make_range_layer(int64_t count, StorageType t) {
  return make_kernel_layer("Range", std::string("kiln.range ") + storage_name(t), [=](ExecState& s, const Layer& l) {
    return launch_range(s.ptr(l.ins[0]), s.ptr(l.ins[1]), s.ptr(l.outs[0]), t, count, s.stream);
  });
}

std::unique_ptr<Layer> make_cumsum_layer(int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                                         StorageType t) {
  return make_kernel_layer("CumSum",
                           std::string("kiln.cumsum ") + storage_name(t) + (exclusive ? " exclusive" : "") +
                               (reverse ? " reverse" : ""),
                           [=](ExecState& s, const Layer& l) {
                             return launch_cumsum(s.ptr(l.ins[0]), s.ptr(l.outs[0]), t, outer, n, inner, exclusive,
                                                  reverse, s.stream);
                           });
}

std::unique_ptr<Layer> make_trilu_layer(int64_t batch, int64_t rows, int64_t cols, int64_t k, bool k_runtime, bool upper,
                                        StorageType t) {
  const int eb = storage_bytes(t);
  return make_kernel_layer("Trilu", std::string("kiln.trilu ") + (upper ? "upper " : "lower ") + storage_name(t),
                           [=](ExecState& s, const Layer& l) {
                             const auto* kd = k_runtime ? static_cast<const int64_t*>(s.ptr(l.ins[1])) : nullptr;
                             return launch_trilu(s.ptr(l.ins[0]), s.ptr(l.outs[0]), eb, batch, rows, cols, k, kd, upper,
                                                 s.stream);
                           });
}

}  // namespace kiln::cuda
