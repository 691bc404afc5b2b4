// GatherND / GatherElements planning and layers (gather_indexed.h). The shape rules follow ONNX
// Operators.md ("GatherND", "GatherElements") and the CPU reference
// (src/backends/cpu/ops_movement_gather.cc), whose checks and messages they mirror.
#include "backends/cuda/gather_indexed.h"

#include <algorithm>
#include <string>

#include "backends/cuda/gpu_ops.h"

namespace kiln::cuda {
namespace {

Status bad(const ir::Node& n, const std::string& what) { return invalid_argument(n.describe() + ": " + what); }

Status out_of_range(const ir::Node& n, int64_t v, int64_t dim) {
  return bad(n, "index " + std::to_string(v) + " is out of range for a dim of " + std::to_string(dim));
}

StatusOr<ScatterReduce> scatter_reduction(const ir::Node& n) {
  const std::string r = n.attr_string("reduction", "none");
  if (r == "none") return ScatterReduce::kNone;
  if (r == "add") return ScatterReduce::kAdd;
  if (r == "mul") return ScatterReduce::kMul;
  if (r == "max") return ScatterReduce::kMax;
  if (r == "min") return ScatterReduce::kMin;
  return bad(n, "unknown reduction '" + r + "'");
}

}  // namespace

StatusOr<GatherNDDesc> plan_gather_nd(const ir::Node& n, const Shape& data, const Shape& indices) {
  const int64_t rd = static_cast<int64_t>(data.size()), ri = static_cast<int64_t>(indices.size());
  if (rd < 1 || ri < 1) return bad(n, "data and indices must have rank >= 1");
  const int64_t b = n.attr_int("batch_dims", 0);
  if (b < 0 || b >= std::min(rd, ri))
    return bad(n, "batch_dims " + std::to_string(b) + " is out of range for data rank " + std::to_string(rd) +
                      " and indices rank " + std::to_string(ri));
  const int64_t m = indices.back();
  if (m < 1 || b + m > rd)
    return bad(n, "indices' last dim " + std::to_string(m) + " must be in [1, rank(data) - batch_dims = " +
                      std::to_string(rd - b) + "]");
  if (m > kMaxRank) return unsupported(n.describe() + ": index tuples longer than 6");
  for (int64_t k = 0; k < b; ++k)
    if (indices[k] != data[k])
      return bad(n, "batch dim " + std::to_string(k) + " of data (" + shape_str(data) + ") and indices (" +
                        shape_str(indices) + ") differ");
  const std::vector<int64_t> xs = row_strides(data);
  GatherNDDesc d;
  d.batches = dims_product(data, 0, static_cast<size_t>(b));
  d.tuples = dims_product(indices, static_cast<size_t>(b), static_cast<size_t>(ri - 1));
  d.slice = dims_product(data, static_cast<size_t>(b + m), data.size());
  d.batch_stride = dims_product(data, static_cast<size_t>(b), data.size());
  d.m = static_cast<int>(m);
  for (int j = 0; j < d.m; ++j) {
    d.dims[j] = data[b + j];
    d.strides[j] = xs[b + j];
  }
  return d;
}

StatusOr<GatherElementsDesc> plan_gather_elements(const ir::Node& n, const Shape& data, const Shape& indices) {
  const int64_t r = static_cast<int64_t>(data.size());
  if (static_cast<int64_t>(indices.size()) != r)
    return bad(n, "indices " + shape_str(indices) + " must have the rank of data " + shape_str(data));
  if (r < 1 || r > kMaxRank) return unsupported(n.describe() + ": rank " + std::to_string(r) + " (1 to " + std::to_string(kMaxRank) + " supported)");
  int64_t axis = n.attr_int("axis", 0);
  if (axis < -r || axis >= r) return bad(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  for (int64_t k = 0; k < r; ++k)
    if (k != axis && indices[k] > data[k])
      return bad(n, "indices shape " + shape_str(indices) + " exceeds data shape " + shape_str(data));
  const std::vector<int64_t> xs = row_strides(data);
  GatherElementsDesc d;
  d.rank = static_cast<int>(r);
  d.axis = static_cast<int>(axis);
  d.axis_dim = data[axis];
  for (int k = 0; k < d.rank; ++k) {
    d.dims[k] = indices[k];
    d.x_strides[k] = xs[k];
  }
  return d;
}

StatusOr<GatherElementsDesc> plan_scatter_elements(const ir::Node& n, const Shape& data, const Shape& indices,
                                                   const Shape& updates, ScatterReduce* reduce) {
  KILN_ASSIGN_OR_RETURN(*reduce, scatter_reduction(n));
  if (updates != indices)
    return bad(n, "updates " + shape_str(updates) + " and indices " + shape_str(indices) + " must have the same shape");
  return plan_gather_elements(n, data, indices);
}

StatusOr<GatherNDDesc> plan_scatter_nd(const ir::Node& n, const Shape& data, const Shape& indices,
                                       const Shape& updates, ScatterReduce* reduce) {
  KILN_ASSIGN_OR_RETURN(*reduce, scatter_reduction(n));
  KILN_ASSIGN_OR_RETURN(GatherNDDesc d, plan_gather_nd(n, data, indices));
  Shape expect(indices.begin(), indices.end() - 1);
  expect.insert(expect.end(), data.begin() + d.m, data.end());
  if (updates != expect)
    return bad(n, "updates shape " + shape_str(updates) + ", expected " + shape_str(expect));
  return d;
}

Status normalize_gather_nd_indices(const ir::Node& n, const GatherNDDesc& d, std::vector<int64_t>* idx) {
  for (size_t p = 0; p < idx->size(); ++p) {
    const int64_t dim = d.dims[p % static_cast<size_t>(d.m)];
    const int64_t k = gather_wrap_index((*idx)[p], dim);
    if (k < 0) return out_of_range(n, (*idx)[p], dim);
    (*idx)[p] = k;
  }
  return Status::Ok();
}

Status normalize_gather_elements_indices(const ir::Node& n, const GatherElementsDesc& d, std::vector<int64_t>* idx) {
  for (int64_t& v : *idx) {
    const int64_t k = gather_wrap_index(v, d.axis_dim);
    if (k < 0) return out_of_range(n, v, d.axis_dim);
    v = k;
  }
  return Status::Ok();
}

std::unique_ptr<Layer> make_gather_nd_layer(const GatherNDDesc& d, int elem_bytes, bool idx_64) {
  return make_kernel_layer("GatherND", std::string("kiln.gather_nd indices=") + (idx_64 ? "int64" : "int32"),
                           [=](ExecState& s, const Layer& l) {
                             return launch_gather_nd(s.ptr(l.ins[0]), s.ptr(l.ins[1]), idx_64, s.ptr(l.outs[0]),
                                                     elem_bytes, d, s.stream);
                           });
}

std::unique_ptr<Layer> make_gather_elements_layer(const GatherElementsDesc& d, int elem_bytes, bool idx_64) {
  return make_kernel_layer("GatherElements",
                           std::string("kiln.gather_elements indices=") + (idx_64 ? "int64" : "int32"),
                           [=](ExecState& s, const Layer& l) {
                             return launch_gather_elements(s.ptr(l.ins[0]), s.ptr(l.ins[1]), idx_64, s.ptr(l.outs[0]),
                                                           elem_bytes, d, s.stream);
                           });
}

std::unique_ptr<Layer> make_scatter_elements_layer(const GatherElementsDesc& d, int64_t count, StorageType t,
                                                   ScatterReduce r, bool idx_64) {
  return make_kernel_layer("ScatterElements",
                           std::string("kiln.scatter_elements indices=") + (idx_64 ? "int64" : "int32"),
                           [=](ExecState& s, const Layer& l) {
                             return launch_scatter_elements(s.ptr(l.ins[0]), s.ptr(l.ins[1]), idx_64, s.ptr(l.ins[2]),
                                                            s.ptr(l.outs[0]), count, t, r, d, s.stream);
                           });
}

std::unique_ptr<Layer> make_scatter_nd_layer(const GatherNDDesc& d, int64_t count, StorageType t, ScatterReduce r,
                                             bool idx_64) {
  return make_kernel_layer("ScatterND", std::string("kiln.scatter_nd indices=") + (idx_64 ? "int64" : "int32"),
                           [=](ExecState& s, const Layer& l) {
                             return launch_scatter_nd(s.ptr(l.ins[0]), s.ptr(l.ins[1]), idx_64, s.ptr(l.ins[2]),
                                                      s.ptr(l.outs[0]), count, t, r, d, s.stream);
                           });
}

}  // namespace kiln::cuda
