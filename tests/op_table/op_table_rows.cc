// The table's helpers and all_rows(): the row families concatenated, names checked unique.
#include <random>
#include <set>
#include <stdexcept>

#include "op_table/op_table.h"

namespace kiln::testing::op_table {

const char* precision_name(Precision p) {
  return p == Precision::kFp32 ? "fp32" : (p == Precision::kFp16 ? "fp16" : "bf16");
}

Tensor nonzero(const Shape& s, uint32_t seed, float scale, float offset) {
  Tensor t(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.1f, 1.f);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (neg(rng) ? -mag(rng) : mag(rng)) * scale + offset;
  return t;
}

Tensor ints(const std::vector<int64_t>& v, DataType dt, Shape shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t(dt, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DataType::kInt64) t.data<int64_t>()[i] = v[i];
    else t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  }
  return t;
}

Tensor scalar_index(int64_t v, DataType dt) {
  Tensor t(dt, Shape{});
  if (dt == DataType::kInt64) t.data<int64_t>()[0] = v;
  else t.data<int32_t>()[0] = static_cast<int32_t>(v);
  return t;
}

Tensor scalar_f(float v) { return Tensor::scalar(DataType::kFloat32, v); }

Tensor int_tensor(DataType dt, const Shape& s, int64_t lo, int64_t hi, uint32_t seed) {
  Tensor t(dt, s);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = d(rng);
    if (dt == DataType::kInt64) t.data<int64_t>()[i] = v;
    else t.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return t;
}

ir::ValueId int_input(TinyGraph& t, const std::string& name, const Shape& s, DataType dt) {
  ir::ValueId v = t.g.add_value(name, dt);
  t.g.value(v).shape = sym(s);
  t.g.inputs.push_back(v);
  return v;
}

OpCase one_op(ir::OpKind op, const Shape& in, const Shape& out,
              const std::function<std::vector<ir::ValueId>(TinyGraph&)>& extra,
              std::map<std::string, ir::Attribute> attrs, Tensor x) {
  TinyGraph t;
  std::vector<ir::ValueId> ins = {t.input("x", in)};
  if (extra) {
    auto more = extra(t);
    ins.insert(ins.end(), more.begin(), more.end());
  }
  auto y = t.node(op, "y", ins, out, std::move(attrs));
  t.g.outputs = {y};
  return {t.g, {std::move(x)}};
}

const std::vector<Row>& all_rows() {
  static const std::vector<Row> rows = [] {
    std::vector<Row> r;
    for (auto family : {movement_rows, nn_rows, transformer_rows, exact_rows, gather_indexed_rows, scatter_rows, rnn_rows,
                        det_rows, dft_rows, roi_align_rows, select_rows, nn_nd_rows, f64_rows, narrow_rows, bandwidth_rows}) {
      auto f = family();
      r.insert(r.end(), f.begin(), f.end());
    }
    std::set<std::string> names;
    for (const Row& row : r)
      if (!names.insert(row.name).second) throw std::logic_error("op table: duplicate row name " + row.name);
    return r;
  }();
  return rows;
}

}  // namespace kiln::testing::op_table
