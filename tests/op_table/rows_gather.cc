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

}  // namespace

std::vector<Row> gather_indexed_rows() {
  std::vector<Row> r;
  gather_nd_rows(r);
  gather_elements_rows(r);
  return r;
}

}  // namespace kiln::testing::op_table
