// Rows for TopK, OneHot and Compress (docs/decisions/0074): the size operand (K, depth, the
// condition) is a constant here — the case the CUDA factories lower without a value-keyed engine.
// TopK over float rows with ties and NaN (multiples of 1/4: exact in fp16 / bf16, so every
// precision sees the same order), smallest-first along a middle axis, int64 and int32 data;
// OneHot with int64 / int32 / float indices (negative ones, out of range ones), float and int32
// outputs, axes first / middle / last; Compress along an axis, flattened, and with a condition
// shorter than the dim; float and int64 data; NonMaxSuppression with every operand a graph input
// (value-keyed); Unique (value-keyed) flattened and along an axis, sorted or not; NonZero
// (value-keyed). Names: TopK_*, OneHot_*, Compress_*, NonMaxSuppression_*, Unique_*, NonZero_*.
#include <cmath>
#include <cstring>
#include <set>

#include "core/numerics.h"
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

// Multiples of 1/4 in [-2, 2] (repeats certain on rows longer than 17), NaN at `nan_every`-th.
Tensor quarter_values(const Shape& s, uint32_t seed, int nan_every) {
  const Tensor q = int_tensor(DataType::kInt32, s, -8, 8, seed);
  Tensor t(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = nan_every > 0 && i % nan_every == 3 ? NAN : static_cast<float>(q.data<int32_t>()[i]) / 4.f;
  return t;
}

Row move_row(const std::string& name, std::function<OpCase()> make) {
  Row r;
  r.name = name;
  r.tol = kMoveTol;  // values copied
  r.make = std::move(make);
  return r;
}

// y, indices = TopK(x, K constant) with x a graph input of x's dtype.
OpCase topk_case(Tensor x, int64_t k, int64_t axis, bool largest) {
  TinyGraph t;
  const Shape xs = x.shape();
  const DataType dt = x.dtype();
  const ir::ValueId xv = int_input(t, "x", xs, dt);
  const ir::ValueId kv = t.constant("k", ints({k}));
  Shape ys = xs;
  ys[axis < 0 ? axis + static_cast<int64_t>(xs.size()) : axis] = k;
  const ir::ValueId y = t.node(OpKind::kTopK, "y", {xv, kv}, ys,
                               {{"axis", Attribute::of_int(axis)}, {"largest", Attribute::of_int(largest ? 1 : 0)}});
  t.g.value(y).dtype = dt;
  const ir::ValueId idx = t.g.add_value("indices", DataType::kInt64);
  t.g.value(idx).shape = sym(ys);
  t.g.nodes.back().outputs.push_back(idx);
  t.g.outputs = {y, idx};
  return {t.g, {std::move(x)}};
}

}  // namespace

std::vector<Row> select_rows() {
  std::vector<Row> r;
  r.push_back(move_row("TopK_float_last_axis_ties_nan", [] {
    return topk_case(quarter_values({4, 23}, 1501, 7), 6, -1, true);
  }));
  r.push_back(move_row("TopK_float_middle_axis_smallest_ties", [] {
    return topk_case(quarter_values({2, 19, 3}, 1502, 0), 5, 1, false);
  }));
  r.push_back(move_row("TopK_float_k_equals_dim", [] { return topk_case(quarter_values({3, 5}, 1503, 4), 5, 1, true); }));
  r.push_back(move_row("TopK_int64_axis0", [] {
    return topk_case(int_tensor(DataType::kInt64, {9, 4}, (int64_t{1} << 40) - 3, (int64_t{1} << 40) + 3, 1504), 3, 0,
                     true);
  }));
  r.push_back(move_row("TopK_int32_smallest", [] {
    return topk_case(int_tensor(DataType::kInt32, {2, 11}, -5, 5, 1505), 4, -1, false);
  }));

  // OneHot(indices input, depth constant, values constant or input).
  struct OH {
    const char* name;
    DataType idx_dt, out_dt;
    Shape idx;
    int64_t depth, axis;
    bool values_input;
  };
  const OH ohs[] = {
      {"int64_last_axis", DataType::kInt64, DataType::kFloat32, {2, 3}, 5, -1, false},
      {"int32_axis0_values_input", DataType::kInt32, DataType::kFloat32, {4}, 6, 0, true},
      {"float_indices_middle_axis", DataType::kFloat32, DataType::kFloat32, {2, 3}, 4, 1, false},
      {"int64_int32_output_axis_neg2", DataType::kInt64, DataType::kInt32, {3, 2}, 4, -2, false},
  };
  uint32_t seed = 1510;
  for (const OH& a : ohs) {
    seed += 2;
    r.push_back(move_row(std::string("OneHot_") + a.name, [a, seed] {
      TinyGraph t;
      OpCase c;
      // indices in [-depth - 1, depth]: negative ones and one past each end (rows of off)
      Tensor iv = int_tensor(DataType::kInt64, a.idx, -a.depth - 1, a.depth, seed);
      Tensor idx(a.idx_dt, a.idx);
      for (int64_t i = 0; i < idx.numel(); ++i) {
        const int64_t v = iv.data<int64_t>()[i];
        if (a.idx_dt == DataType::kInt64) idx.data<int64_t>()[i] = v;
        else if (a.idx_dt == DataType::kInt32) idx.data<int32_t>()[i] = static_cast<int32_t>(v);
        else idx.data<float>()[i] = static_cast<float>(v) + (v < 0 ? -0.25f : 0.25f);  // truncated toward zero
      }
      const ir::ValueId iv_id = a.idx_dt == DataType::kFloat32 ? t.input("indices", a.idx)
                                                               : int_input(t, "indices", a.idx, a.idx_dt);
      c.inputs.push_back(std::move(idx));
      const ir::ValueId depth = t.constant("depth", ints({a.depth}));
      Tensor vals(a.out_dt, {2});
      if (a.out_dt == DataType::kInt32) {
        vals.data<int32_t>()[0] = -7;
        vals.data<int32_t>()[1] = 123456;
      } else {
        vals.data<float>()[0] = 0.5f;
        vals.data<float>()[1] = -2.25f;
      }
      ir::ValueId vv;
      if (a.values_input) {
        vv = int_input(t, "values", {2}, a.out_dt);
        c.inputs.push_back(std::move(vals));
      } else {
        vv = t.constant("values", std::move(vals));
      }
      Shape ys = a.idx;
      const int64_t r1 = static_cast<int64_t>(a.idx.size()) + 1;
      ys.insert(ys.begin() + (a.axis < 0 ? a.axis + r1 : a.axis), a.depth);
      const ir::ValueId y = t.node(OpKind::kOneHot, "y", {iv_id, depth, vv}, ys, {{"axis", Attribute::of_int(a.axis)}});
      t.g.value(y).dtype = a.out_dt;
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    }));
  }

  // NonMaxSuppression, every operand a graph input (a value-keyed engine, decision 0074): boxes
  // in quarter units and scores in eighths (exact in fp16 / bf16), IoUs 0.6 or 0 against 0.5,
  // two classes, max 3 per class, a score threshold; 5 boxes kept (declared; discovery recounts).
  r.push_back(move_row("NonMaxSuppression_two_classes_threshold", [] {
    TinyGraph t;
    OpCase c;
    Tensor boxes(DataType::kFloat32, {1, 6, 4});
    const float b[] = {0, 0, 1, 1, 0, 0.25f, 1, 1.25f, 0, -0.25f, 1, 0.75f, 0, 10, 1, 11, 0, 10.25f, 1, 11.25f, 0, 100, 1, 101};
    std::memcpy(boxes.raw(), b, sizeof(b));
    Tensor scores(DataType::kFloat32, {1, 2, 6});
    const float sc[] = {0.875f, 0.75f, 0.625f, 0.9375f, 0.5f, 0.25f, 0.125f, 0.25f, 0.375f, 0.5f, 0.625f, 0.75f};
    std::memcpy(scores.raw(), sc, sizeof(sc));
    Tensor iou(DataType::kFloat32, {1});
    iou.data<float>()[0] = 0.5f;
    Tensor thr(DataType::kFloat32, {1});
    thr.data<float>()[0] = 0.3f;
    const ir::ValueId bv = t.input("boxes", {1, 6, 4});
    const ir::ValueId sv = t.input("scores", {1, 2, 6});
    const ir::ValueId mv = int_input(t, "max_out", {1}, DataType::kInt64);
    const ir::ValueId iv = t.input("iou", {1});
    const ir::ValueId tv = t.input("score_threshold", {1});
    c.inputs = {std::move(boxes), std::move(scores), ints({3}), std::move(iou), std::move(thr)};
    auto y = t.node(OpKind::kNonMaxSuppression, "y", {bv, sv, mv, iv, tv}, {5, 3});
    t.g.value(y).dtype = DataType::kInt64;
    t.g.outputs = {y};
    c.graph = t.g;
    return c;
  }));

  // Unique (value-keyed): flattened sorted / unsorted floats (quarters with repeats: exact in
  // every precision), int64 slices along axis 1, every output; shapes declared from a host count.
  struct UQ {
    const char* name;
    DataType dt;
    Shape x;
    bool has_axis;
    int64_t axis;
    bool sorted;
  };
  const UQ uqs[] = {
      {"float_flat_sorted", DataType::kFloat32, {3, 7}, false, 0, true},
      {"float_flat_unsorted", DataType::kFloat32, {20}, false, 0, false},
      {"int64_axis1_sorted", DataType::kInt64, {2, 9, 2}, true, 1, true},
      {"int32_axis0_unsorted", DataType::kInt32, {8, 2}, true, 0, false},
  };
  seed = 1550;
  for (const UQ& a : uqs) {
    seed += 2;
    r.push_back(move_row(std::string("Unique_") + a.name, [a, seed] {
      TinyGraph t;
      OpCase c;
      Tensor x = a.dt == DataType::kFloat32 ? quarter_values(a.x, seed, 0) : int_tensor(a.dt, a.x, -1, 1, seed);
      if (a.dt == DataType::kFloat32)  // fewer distinct values: repeats certain
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i]);
      const int64_t r0 = static_cast<int64_t>(a.x.size());
      const int64_t axis = a.has_axis ? (a.axis < 0 ? a.axis + r0 : a.axis) : 0;
      int64_t outer = 1, n = x.numel(), inner = 1;
      if (a.has_axis) {
        n = a.x[axis];
        for (int64_t k = 0; k < axis; ++k) outer *= a.x[k];
        for (int64_t k = axis + 1; k < r0; ++k) inner *= a.x[k];
      }
      std::set<std::vector<double>> distinct;
      for (int64_t s = 0; s < n; ++s) {
        std::vector<double> key;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) key.push_back(load_as_double(x.dtype(), x.raw(), (o * n + s) * inner + i));
        distinct.insert(key);
      }
      const int64_t groups = static_cast<int64_t>(distinct.size());
      Shape ys = {groups};
      std::map<std::string, Attribute> attrs = {{"sorted", Attribute::of_int(a.sorted ? 1 : 0)}};
      if (a.has_axis) {
        ys = a.x;
        ys[axis] = groups;
        attrs["axis"] = Attribute::of_int(a.axis);
      }
      const ir::ValueId xv = int_input(t, "x", a.x, a.dt);
      c.inputs.push_back(std::move(x));
      const ir::ValueId y = t.node(OpKind::kUnique, "y", {xv}, ys, std::move(attrs));
      t.g.value(y).dtype = a.dt;
      std::vector<ir::ValueId> outs = {y};
      const char* names[] = {"indices", "inverse_indices", "counts"};
      for (int k = 0; k < 3; ++k) {
        const ir::ValueId v = t.g.add_value(names[k], DataType::kInt64);
        t.g.value(v).shape = sym(Shape{k == 1 ? n : groups});
        t.g.nodes.back().outputs.push_back(v);
        outs.push_back(v);
      }
      t.g.outputs = outs;
      c.graph = t.g;
      return c;
    }));
  }

  // Compress(x input, condition constant).
  struct CP {
    const char* name;
    DataType dt;
    Shape x;
    bool has_axis;
    int64_t axis;
    std::vector<int64_t> cond;
  };
  const CP cps[] = {
      {"float_axis1", DataType::kFloat32, {3, 5, 2}, true, 1, {1, 0, 1, 1, 0}},
      {"float_axis_neg1_short_condition", DataType::kFloat32, {2, 3, 6}, true, -1, {0, 1, 1, 0}},
      {"float_flattened", DataType::kFloat32, {2, 4}, false, 0, {1, 0, 0, 1, 1, 0, 1}},
      {"int64_axis0", DataType::kInt64, {4, 3}, true, 0, {0, 1, 0, 1}},
  };
  seed = 1530;
  for (const CP& a : cps) {
    seed += 2;
    r.push_back(move_row(std::string("Compress_") + a.name, [a, seed] {
      TinyGraph t;
      OpCase c;
      const ir::ValueId x = int_input(t, "x", a.x, a.dt);
      c.inputs.push_back(a.dt == DataType::kFloat32 ? nonzero(a.x, seed)
                                                    : int_tensor(a.dt, a.x, -(int64_t{1} << 40), int64_t{1} << 40, seed));
      Tensor cond(DataType::kBool, {static_cast<int64_t>(a.cond.size())});
      int64_t kept = 0;
      for (size_t i = 0; i < a.cond.size(); ++i) {
        static_cast<uint8_t*>(cond.raw())[i] = a.cond[i] != 0;
        kept += a.cond[i] != 0;
      }
      const ir::ValueId cv = t.constant("condition", std::move(cond));
      Shape ys = {kept};
      std::map<std::string, Attribute> attrs;
      if (a.has_axis) {
        ys = a.x;
        ys[a.axis < 0 ? a.axis + static_cast<int64_t>(a.x.size()) : a.axis] = kept;
        attrs["axis"] = Attribute::of_int(a.axis);
      }
      const ir::ValueId y = t.node(OpKind::kCompress, "y", {x, cv}, ys, std::move(attrs));
      t.g.value(y).dtype = a.dt;
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    }));
  }
  // NonZero (value-keyed, decision 0076): floats with zeros, -0.0 (zero) and NaN (nonzero) — float32
  // and float64 (0075) —, int64 and bool; the output extent declared from a host count (discovery
  // recounts).
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kInt64, DataType::kBool}) {
    r.push_back(move_row(std::string("NonZero_") + dtype_name(dt), [dt] {
      TinyGraph t;
      OpCase c;
      const Shape xs = {3, 2, 5};
      const bool fp = dt == DataType::kFloat32 || dt == DataType::kFloat64;
      Tensor x = fp ? quarter_values(xs, 1580, 0) : int_tensor(DataType::kInt64, xs, -1, 1, 1581);
      if (fp) {
        for (int64_t i = 0; i < x.numel(); ++i) {
          float& v = x.data<float>()[i];
          v = i % 4 == 0 ? 0.f : (i % 7 == 0 ? -0.f : v);
        }
        x.data<float>()[5] = NAN;
      }
      if (dt == DataType::kFloat64) {
        Tensor d(DataType::kFloat64, xs);
        for (int64_t i = 0; i < x.numel(); ++i) d.data<double>()[i] = x.data<float>()[i];
        x = std::move(d);
      }
      if (dt == DataType::kBool) {
        Tensor b(DataType::kBool, xs);
        for (int64_t i = 0; i < x.numel(); ++i) static_cast<uint8_t*>(b.raw())[i] = x.data<int64_t>()[i] != 0;
        x = std::move(b);
      }
      int64_t count = 0;
      for (int64_t i = 0; i < x.numel(); ++i) count += load_as_double(x.dtype(), x.raw(), i) != 0.0;
      const ir::ValueId xv = int_input(t, "x", xs, dt);
      c.inputs = {std::move(x)};
      auto y = t.node(OpKind::kNonZero, "y", {xv}, {3, count});
      t.g.value(y).dtype = DataType::kInt64;
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    }));
  }
  return r;
}

}  // namespace kiln::testing::op_table
