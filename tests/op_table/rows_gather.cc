// Rows for GatherND and GatherElements (issue 11 item 1: the bool mask indexing of dynamo exports,
// RoBERTa's int64 position gather): float data (fp32 / fp16 / bf16 plans), int32, int64 (values
// past 2^40: copied exactly) and bool data; GatherND with batch_dims 0, 1 and 2, slices and full
// tuples; GatherElements along first, middle, last and negative axes, with indices smaller than
// the data on other dims. Indices are int64 or int32, negative ones included, from a graph input
// (read on the device) or a constant (normalized at build). All rows are named Gather{ND,
// Elements}_*: `--gtest_filter='OpTable*/*Gather*'` runs them with Gather's.
#include <random>

#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

// Data of `dt`: nonzero floats, int64 around 2^40 (not exact in float), int32 anywhere, bools.
Tensor data_of(DataType dt, const Shape& s, uint32_t seed) {
  if (dt == DataType::kFloat32) return nonzero(s, seed);
  if (dt == DataType::kInt64) return int_tensor(dt, s, (int64_t{1} << 40) - 5000, (int64_t{1} << 40) + 5000, seed);
  if (dt == DataType::kInt32) return int_tensor(dt, s, -2000000000, 2000000000, seed);
  Tensor t(DataType::kBool, s);
  std::mt19937 rng(seed);
  std::bernoulli_distribution d(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<uint8_t*>(t.raw())[i] = d(rng) ? 1 : 0;
  return t;
}

// GatherND indices of shape `lead` + [dims.size()]: component j uniform in [-dims[j], dims[j] - 1]
// (every in-range index, negative ones included).
Tensor nd_indices(DataType dt, Shape lead, const std::vector<int64_t>& dims, uint32_t seed) {
  lead.push_back(static_cast<int64_t>(dims.size()));
  Tensor t(dt, lead);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t d = dims[i % static_cast<int64_t>(dims.size())];
    const int64_t v = std::uniform_int_distribution<int64_t>(-d, d - 1)(rng);
    if (dt == DataType::kInt64) t.data<int64_t>()[i] = v;
    else t.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return t;
}

// y = op(data, indices): data a graph input, indices a graph input or (`const_idx`) a constant.
OpCase gather_case(OpKind op, Tensor data, Tensor idx, bool const_idx, const Shape& out,
                   std::map<std::string, Attribute> attrs) {
  TinyGraph t;
  OpCase c;
  const DataType dt = data.dtype();
  const ir::ValueId x = int_input(t, "data", data.shape(), dt);
  c.inputs.push_back(std::move(data));
  ir::ValueId i;
  if (const_idx) {
    i = t.constant("indices", std::move(idx));
  } else {
    i = int_input(t, "indices", idx.shape(), idx.dtype());
    c.inputs.push_back(std::move(idx));
  }
  auto y = t.node(op, "y", {x, i}, out, std::move(attrs));
  t.g.value(y).dtype = dt;
  t.g.outputs = {y};
  c.graph = t.g;
  return c;
}

Row row(const std::string& name, std::function<OpCase()> make) {
  Row r;
  r.name = name;
  r.tol = kMoveTol;  // bits copied: exact in fp32, the input's rounding only in fp16 / bf16
  r.make = std::move(make);
  return r;
}

struct NDArgs {
  const char* name;
  DataType dt, idx_dt;
  Shape data;
  int64_t batch_dims;
  Shape idx_lead;  // indices' dims between the batch dims and the tuple dim
  int64_t m;
  Shape out;
  bool const_idx;
};

void gather_nd_rows(std::vector<Row>& r) {
  const NDArgs args[] = {
      // slices of data[b.., i, j, :] and full tuples (one element each)
      {"float_b0_slices", DataType::kFloat32, DataType::kInt64, {3, 4, 5}, 0, {2, 2}, 2, {2, 2, 5}, false},
      {"float_b0_full_tuple_const", DataType::kFloat32, DataType::kInt64, {3, 4, 5}, 0, {2, 3}, 3, {2, 3}, true},
      {"float_b0_m1_int32", DataType::kFloat32, DataType::kInt32, {6, 2, 3}, 0, {4}, 1, {4, 2, 3}, false},
      {"float_b1", DataType::kFloat32, DataType::kInt32, {2, 3, 4}, 1, {2}, 1, {2, 2, 4}, false},
      {"float_b2", DataType::kFloat32, DataType::kInt64, {2, 3, 4, 5}, 2, {2}, 1, {2, 3, 2, 5}, false},
      {"float_b1_const", DataType::kFloat32, DataType::kInt64, {2, 3, 4, 5}, 1, {3}, 2, {2, 3, 5}, true},
      // the dynamo exports' mask indexing: mask[B, S] by [B, 1, 1, S, 2] -> [B, 1, 1, S]
      {"bool_mask_b0", DataType::kBool, DataType::kInt64, {2, 7}, 0, {2, 1, 1, 7}, 2, {2, 1, 1, 7}, false},
      {"bool_b1_const", DataType::kBool, DataType::kInt64, {2, 5, 3}, 1, {4}, 1, {2, 4, 3}, true},
      {"int64_b0", DataType::kInt64, DataType::kInt64, {4, 6}, 0, {3}, 2, {3}, false},
      {"int64_b1_slices", DataType::kInt64, DataType::kInt32, {2, 4, 3}, 1, {5}, 1, {2, 5, 3}, false},
      {"int32_b0", DataType::kInt32, DataType::kInt64, {5, 3, 2}, 0, {2, 2}, 2, {2, 2, 2}, false},
      {"int32_b2_const", DataType::kInt32, DataType::kInt32, {2, 2, 6}, 2, {3}, 1, {2, 2, 3}, true},
  };
  uint32_t seed = 1000;
  for (const NDArgs& a : args) {
    seed += 2;
    r.push_back(row(std::string("GatherND_") + a.name, [a, seed] {
      std::vector<int64_t> dims(a.data.begin() + a.batch_dims, a.data.begin() + a.batch_dims + a.m);
      Shape lead = a.idx_lead;
      if (a.batch_dims > 0) lead.insert(lead.begin(), a.data.begin(), a.data.begin() + a.batch_dims);
      return gather_case(OpKind::kGatherND, data_of(a.dt, a.data, seed), nd_indices(a.idx_dt, lead, dims, seed + 1),
                         a.const_idx, a.out, {{"batch_dims", Attribute::of_int(a.batch_dims)}});
    }));
  }
}

struct ElementsArgs {
  const char* name;
  DataType dt, idx_dt;
  Shape data;
  int64_t axis;
  Shape idx;  // = the output's shape
  bool const_idx;
};

void gather_elements_rows(std::vector<Row>& r) {
  const ElementsArgs args[] = {
      {"float_axis0", DataType::kFloat32, DataType::kInt64, {4, 3}, 0, {2, 3}, false},
      {"float_axis_last_int32", DataType::kFloat32, DataType::kInt32, {2, 3, 5}, 2, {2, 3, 4}, false},
      {"float_axis1_smaller_dims_const", DataType::kFloat32, DataType::kInt64, {3, 5, 4}, 1, {2, 6, 3}, true},
      {"float_axis_neg2_rank4", DataType::kFloat32, DataType::kInt64, {2, 3, 4, 5}, -2, {2, 2, 6, 5}, false},
      // RoBERTa's token-type buffer gathered at the position ids: int64 [B, 512] -> [B, S]
      {"int64_axis1_positions", DataType::kInt64, DataType::kInt64, {2, 16}, 1, {2, 7}, false},
      {"int32_axis0_const", DataType::kInt32, DataType::kInt32, {5, 4}, 0, {3, 4}, true},
      {"bool_axis_neg1", DataType::kBool, DataType::kInt64, {3, 6}, -1, {3, 8}, false},
  };
  uint32_t seed = 1100;
  for (const ElementsArgs& a : args) {
    seed += 2;
    r.push_back(row(std::string("GatherElements_") + a.name, [a, seed] {
      const int64_t axis = a.axis < 0 ? a.axis + static_cast<int64_t>(a.data.size()) : a.axis;
      const int64_t d = a.data[axis];
      return gather_case(OpKind::kGatherElements, data_of(a.dt, a.data, seed), int_tensor(a.idx_dt, a.idx, -d, d - 1, seed + 1),
                         a.const_idx, a.idx, {{"axis", Attribute::of_int(a.axis)}});
    }));
  }
}

// y = op(data, indices, updates): data and updates graph inputs of data's dtype, indices a graph
// input or (`const_idx`) a constant.
OpCase scatter_case(OpKind op, Tensor data, Tensor idx, Tensor upd, bool const_idx, std::map<std::string, Attribute> attrs) {
  TinyGraph t;
  OpCase c;
  const DataType dt = data.dtype();
  const Shape out = data.shape();
  const ir::ValueId x = int_input(t, "data", data.shape(), dt);
  c.inputs.push_back(std::move(data));
  ir::ValueId i;
  if (const_idx) {
    i = t.constant("indices", std::move(idx));
  } else {
    i = int_input(t, "indices", idx.shape(), idx.dtype());
    c.inputs.push_back(std::move(idx));
  }
  const ir::ValueId u = int_input(t, "updates", upd.shape(), dt);
  c.inputs.push_back(std::move(upd));
  auto y = t.node(op, "y", {x, i, u}, out, std::move(attrs));
  t.g.value(y).dtype = dt;
  t.g.outputs = {y};
  c.graph = t.g;
  return c;
}

struct ScatterArgs {
  const char* name;
  OpKind op;
  DataType dt, idx_dt;
  Shape data;
  int64_t axis;          // ScatterElements / Scatter
  Shape idx;             // ScatterElements: = updates' shape; ScatterND: lead dims + [m]
  const char* reduction;
  bool const_idx;
};

void scatter_rows(std::vector<Row>& r) {
  const ScatterArgs args[] = {
      // ScatterElements: indices drawn with repeats (duplicates: the CPU's update order decides)
      {"Elements_float_axis0", OpKind::kScatterElements, DataType::kFloat32, DataType::kInt64, {4, 3}, 0, {3, 3}, "none", false},
      {"Elements_float_axis_last_add_int32", OpKind::kScatterElements, DataType::kFloat32, DataType::kInt32, {2, 3, 5}, -1, {2, 3, 7}, "add", false},
      {"Elements_float_axis1_mul_const", OpKind::kScatterElements, DataType::kFloat32, DataType::kInt64, {3, 4, 2}, 1, {2, 5, 2}, "mul", true},
      {"Elements_float_axis0_max", OpKind::kScatterElements, DataType::kFloat32, DataType::kInt64, {5, 4}, 0, {6, 3}, "max", false},
      {"Elements_float_axis1_min", OpKind::kScatterElements, DataType::kFloat32, DataType::kInt64, {3, 5}, 1, {3, 5}, "min", false},
      {"Elements_int64_axis1_add", OpKind::kScatterElements, DataType::kInt64, DataType::kInt64, {2, 6}, 1, {2, 4}, "add", false},
      {"Elements_int32_axis0_max_const", OpKind::kScatterElements, DataType::kInt32, DataType::kInt32, {4, 3}, 0, {4, 2}, "max", true},
      {"Elements_bool_axis_neg1", OpKind::kScatterElements, DataType::kBool, DataType::kInt64, {3, 6}, -1, {3, 4}, "none", false},
      {"Deprecated_float_axis1", OpKind::kScatter, DataType::kFloat32, DataType::kInt64, {3, 4}, 1, {3, 2}, "none", false},
      // ScatterND: slices and full tuples
      {"ND_float_slices", OpKind::kScatterND, DataType::kFloat32, DataType::kInt64, {4, 3, 5}, 0, {2, 1}, "none", false},
      {"ND_float_m2_add", OpKind::kScatterND, DataType::kFloat32, DataType::kInt64, {3, 4, 2}, 0, {5, 2}, "add", false},
      {"ND_float_full_tuples_mul_const", OpKind::kScatterND, DataType::kFloat32, DataType::kInt32, {3, 4}, 0, {2, 3, 2}, "mul", true},
      {"ND_float_max", OpKind::kScatterND, DataType::kFloat32, DataType::kInt64, {4, 6}, 0, {5, 1}, "max", false},
      {"ND_float_min_int32", OpKind::kScatterND, DataType::kFloat32, DataType::kInt32, {4, 6}, 0, {3, 1}, "min", false},
      {"ND_int64_full_tuples", OpKind::kScatterND, DataType::kInt64, DataType::kInt64, {5, 3}, 0, {4, 2}, "none", false},
      {"ND_int32_add", OpKind::kScatterND, DataType::kInt32, DataType::kInt64, {6, 2}, 0, {4, 1}, "add", false},
      {"ND_bool_slices_const", OpKind::kScatterND, DataType::kBool, DataType::kInt64, {3, 4}, 0, {2, 1}, "none", true},
  };
  uint32_t seed = 1200;
  for (const ScatterArgs& a : args) {
    seed += 3;
    Row row_ = row(std::string("Scatter") + a.name, [a, seed] {
      Tensor idx;
      Shape upd_shape;
      if (a.op == OpKind::kScatterND) {
        const int64_t m = a.idx.back();
        std::vector<int64_t> dims(a.data.begin(), a.data.begin() + m);
        idx = nd_indices(a.idx_dt, Shape(a.idx.begin(), a.idx.end() - 1), dims, seed + 1);
        upd_shape.assign(a.idx.begin(), a.idx.end() - 1);
        upd_shape.insert(upd_shape.end(), a.data.begin() + m, a.data.end());
      } else {
        const int64_t axis = a.axis < 0 ? a.axis + static_cast<int64_t>(a.data.size()) : a.axis;
        const int64_t d = a.data[axis];
        idx = int_tensor(a.idx_dt, a.idx, -d, d - 1, seed + 1);
        upd_shape = a.idx;
      }
      std::map<std::string, Attribute> attrs;
      if (a.op != OpKind::kScatterND) attrs["axis"] = Attribute::of_int(a.axis);
      if (std::string(a.reduction) != "none") attrs["reduction"] = Attribute::of_string(a.reduction);
      OpCase c = scatter_case(a.op, data_of(a.dt, a.data, seed), std::move(idx), data_of(a.dt, upd_shape, seed + 2),
                              a.const_idx, std::move(attrs));
      if (a.op == OpKind::kScatter) {
        c.graph.opset_imports[""] = 10;
        c.graph.nodes[0].opset = 10;
      }
      return c;
    });
    // Reductions compute in the storage's precision on the GPU (the CPU in float / double).
    if (std::string(a.reduction) != "none") row_.tol = kArithTol;
    r.push_back(std::move(row_));
  }
}

struct ReverseArgs {
  const char* name;
  DataType dt, lens_dt;
  Shape x;
  int64_t batch_axis;
  bool const_lens;
};

void reverse_sequence_rows(std::vector<Row>& r) {
  const ReverseArgs args[] = {
      {"float_time_major", DataType::kFloat32, DataType::kInt64, {4, 3, 2}, 1, false},
      {"float_batch_major_int32_rank4", DataType::kFloat32, DataType::kInt32, {3, 5, 2, 2}, 0, false},
      {"int64_batch_major_const", DataType::kInt64, DataType::kInt64, {3, 5}, 0, true},
      {"bool_time_major", DataType::kBool, DataType::kInt64, {6, 2, 3}, 1, false},
  };
  uint32_t seed = 1250;
  for (const ReverseArgs& a : args) {
    seed += 2;
    r.push_back(row(std::string("ReverseSequence_") + a.name, [a, seed] {
      const int64_t nb = a.x[a.batch_axis], nt = a.x[1 - a.batch_axis];
      TinyGraph t;
      OpCase c;
      const ir::ValueId x = int_input(t, "x", a.x, a.dt);
      c.inputs.push_back(data_of(a.dt, a.x, seed));
      Tensor lens = int_tensor(a.lens_dt, {nb}, 0, nt, seed + 1);
      ir::ValueId l;
      if (a.const_lens) {
        l = t.constant("sequence_lens", std::move(lens));
      } else {
        l = int_input(t, "sequence_lens", {nb}, a.lens_dt);
        c.inputs.push_back(std::move(lens));
      }
      auto y = t.node(OpKind::kReverseSequence, "y", {x, l}, a.x,
                      {{"batch_axis", Attribute::of_int(a.batch_axis)}, {"time_axis", Attribute::of_int(1 - a.batch_axis)}});
      t.g.value(y).dtype = a.dt;
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    }));
  }
}

}  // namespace

std::vector<Row> scatter_rows() {
  std::vector<Row> r;
  scatter_rows(r);
  reverse_sequence_rows(r);
  // MaxUnpool: random flat indices (duplicates: the CPU's last one wins), an output_shape larger
  // than the default (indices re-raveled), constant indices.
  struct UnpoolArgs {
    const char* name;
    Shape x, y;
    std::vector<int64_t> kernel, strides, output_shape;
    bool const_idx;
  };
  const UnpoolArgs unpools[] = {
      {"2d_duplicates", {1, 2, 2, 2}, {1, 2, 4, 4}, {2, 2}, {2, 2}, {}, false},
      {"2d_output_shape", {2, 1, 2, 3}, {2, 1, 5, 7}, {2, 2}, {2, 2}, {2, 1, 5, 7}, false},
      {"1d_const_indices", {2, 3, 3}, {2, 3, 7}, {3}, {2}, {}, true},
  };
  uint32_t useed = 1290;
  for (const UnpoolArgs& a : unpools) {
    useed += 2;
    r.push_back(row(std::string("MaxUnpool_") + a.name, [a, useed] {
      TinyGraph t;
      OpCase c;
      const ir::ValueId x = t.input("x", a.x);
      c.inputs.push_back(nonzero(a.x, useed));
      Shape dflt = {a.x[0], a.x[1]};
      for (size_t k = 0; k < a.kernel.size(); ++k) dflt.push_back((a.x[k + 2] - 1) * a.strides[k] + a.kernel[k]);
      Tensor idx = int_tensor(DataType::kInt64, a.x, 0, shape_numel(dflt) - 1, useed + 1);
      std::vector<ir::ValueId> ins = {x};
      if (a.const_idx) {
        ins.push_back(t.constant("I", std::move(idx)));
      } else {
        ins.push_back(int_input(t, "I", a.x, DataType::kInt64));
        c.inputs.push_back(std::move(idx));
      }
      if (!a.output_shape.empty()) ins.push_back(t.constant("output_shape", ints(a.output_shape)));
      auto y = t.node(OpKind::kMaxUnpool, "y", ins, a.y,
                      {{"kernel_shape", Attribute::of_ints(a.kernel)}, {"strides", Attribute::of_ints(a.strides)}});
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    }));
  }
  // Pad of exact tensors (elements as bits): int32 edge / reflect, int64 constant past 2^40, bool.
  struct PadArgs {
    const char* name;
    DataType dt;
    Shape x, y;
    std::vector<int64_t> pads;
    const char* mode;
    int64_t value;  // constant mode's constant_value (an input of x's dtype)
  };
  const PadArgs pads[] = {
      {"int32_edge", DataType::kInt32, {3, 4}, {5, 7}, {1, 2, 1, 1}, "edge", 0},
      {"int32_reflect_crop", DataType::kInt32, {2, 5, 4}, {2, 7, 3}, {0, 1, 0, 0, 1, -1}, "reflect", 0},
      {"int64_constant", DataType::kInt64, {2, 3}, {4, 6}, {1, 0, 1, 3}, "constant", (int64_t{1} << 41) + 7},
      {"bool_constant_true", DataType::kBool, {3, 2}, {3, 5}, {0, 2, 0, 1}, "constant", 1},
  };
  uint32_t seed = 1270;
  for (const PadArgs& a : pads) {
    seed += 2;
    r.push_back(row(std::string("PadExact_") + a.name, [a, seed] {
      TinyGraph t;
      OpCase c;
      const ir::ValueId x = int_input(t, "x", a.x, a.dt);
      c.inputs.push_back(data_of(a.dt, a.x, seed));
      std::vector<ir::ValueId> ins = {x, t.constant("pads", ints(a.pads))};
      if (std::string(a.mode) == "constant") {
        Tensor v(a.dt, Shape{});
        if (a.dt == DataType::kInt64) v.data<int64_t>()[0] = a.value;
        else if (a.dt == DataType::kInt32) v.data<int32_t>()[0] = static_cast<int32_t>(a.value);
        else static_cast<uint8_t*>(v.raw())[0] = a.value != 0;
        ins.push_back(t.constant("value", std::move(v)));
      }
      auto y = t.node(OpKind::kPad, "y", ins, a.y, {{"mode", Attribute::of_string(a.mode)}});
      t.g.value(y).dtype = a.dt;
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    }));
  }
  return r;
}

std::vector<Row> gather_indexed_rows() {
  std::vector<Row> r;
  gather_nd_rows(r);
  gather_elements_rows(r);
  return r;
}

}  // namespace kiln::testing::op_table
