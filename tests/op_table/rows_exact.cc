// Rows on int32 / int64 / bool tensors (issue 11, docs/decisions/0051): comparisons, And / Or /
// Xor / Not, IsNaN / IsInf, Where with a runtime condition, Cast to / from bool and between
// integer and float types, integer arithmetic, Range, CumSum, Trilu, ArgMax / ArgMin, integer
// reductions, and the movement ops on integer and bool tensors. Operands are graph inputs (run-time values, not folded), with
// broadcasting; integer and bool outputs must match the reference exactly. Float operands of
// comparisons and casts are multiples of 1/4 in [-8, 8], exact in fp16 and bf16, so a plan's
// float precision cannot flip a comparison or a truncation.
#include <cmath>
#include <limits>
#include <random>

#include "core/onnx_dtype.h"
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

// One operand of a case: a graph input (`value` is what the row feeds it) or a constant.
struct In {
  Tensor value;
  bool constant = false;
};

const char* dt_name(DataType dt) {
  switch (dt) {
    case DataType::kInt64: return "int64";
    case DataType::kInt32: return "int32";
    case DataType::kBool: return "bool";
    default: return "float";
  }
}

// Multiples of 1/4 in [-8, 8] (zero and repeats included, so Equal and Cast to bool see both
// answers).
Tensor quarters(const Shape& s, uint32_t seed) {
  Tensor t(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-32, 32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(d(rng)) / 4.f;
  return t;
}

Tensor bools(const Shape& s, uint32_t seed) {
  Tensor t(DataType::kBool, s);
  std::mt19937 rng(seed);
  std::bernoulli_distribution d(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<uint8_t*>(t.raw())[i] = d(rng) ? 1 : 0;
  return t;
}

// Values of `dt` for a row: quarters (float), small integers in [-9, 9] (int), or bools.
Tensor values(DataType dt, const Shape& s, uint32_t seed) {
  if (dt == DataType::kBool) return bools(s, seed);
  if (dt == DataType::kFloat32) return quarters(s, seed);
  return int_tensor(dt, s, -9, 9, seed);
}

// Nonzero integers in [-9, 9] (divisors).
Tensor divisors(DataType dt, const Shape& s, uint32_t seed) {
  Tensor t = int_tensor(dt, s, 1, 9, seed);
  std::mt19937 rng(seed + 1);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!neg(rng)) continue;
    if (dt == DataType::kInt64) t.data<int64_t>()[i] = -t.data<int64_t>()[i];
    else t.data<int32_t>()[i] = -t.data<int32_t>()[i];
  }
  return t;
}

// Floats with NaN, +inf and -inf among finite values.
Tensor specials(const Shape& s, uint32_t seed) {
  Tensor t = quarters(s, seed);
  const float sp[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()};
  for (int64_t i = 0; i < t.numel(); i += 3) t.data<float>()[i] = sp[(i / 3) % 3];
  return t;
}

// y = op(inputs...) with output `out` of dtype `out_dt`.
OpCase exact_case(OpKind op, std::vector<In> ins, const Shape& out, DataType out_dt,
                  std::map<std::string, Attribute> attrs = {}) {
  TinyGraph t;
  OpCase c;
  std::vector<ir::ValueId> ids;
  for (size_t k = 0; k < ins.size(); ++k) {
    const std::string name = "in" + std::to_string(k);
    if (ins[k].constant) {
      ids.push_back(t.constant(name, ins[k].value));
    } else {
      ids.push_back(int_input(t, name, ins[k].value.shape(), ins[k].value.dtype()));
      c.inputs.push_back(ins[k].value);
    }
  }
  auto y = t.node(op, "y", ids, out, std::move(attrs));
  t.g.value(y).dtype = out_dt;
  t.g.outputs = {y};
  c.graph = t.g;
  return c;
}

// Every row of this family is named Exact_*: `--gtest_filter='OpTable/*/*Exact_*'` runs them all.
Row row(const std::string& name, std::function<OpCase()> make, Tolerance tol = kMoveTol) {
  Row r;
  r.name = "Exact_" + name;
  r.tol = tol;
  r.make = std::move(make);
  return r;
}

void comparison_rows(std::vector<Row>& r) {
  const std::pair<OpKind, const char*> ops[] = {{OpKind::kEqual, "Equal"},
                                                {OpKind::kLess, "Less"},
                                                {OpKind::kLessOrEqual, "LessOrEqual"},
                                                {OpKind::kGreater, "Greater"},
                                                {OpKind::kGreaterOrEqual, "GreaterOrEqual"}};
  uint32_t seed = 100;
  for (const auto& [op_b, name] : ops)
    for (DataType dt : {DataType::kFloat32, DataType::kInt32, DataType::kInt64}) {
      ++seed;
      const OpKind op = op_b;  // a structured binding cannot be captured before C++20 P1091 (clang 14)
      r.push_back(row(std::string("Cmp_") + name + "_" + dt_name(dt), [=] {
        return exact_case(op, {{values(dt, {2, 3, 4}, seed)}, {values(dt, {3, 1}, seed + 50)}}, {2, 3, 4},
                          DataType::kBool);
      }));
    }
  r.push_back(row("Cmp_Equal_bool", [] {
    return exact_case(OpKind::kEqual, {{bools({2, 3, 4}, 1)}, {bools({4}, 2)}}, {2, 3, 4}, DataType::kBool);
  }));
  // Against a constant: a padding test (ids == pad id) and a float threshold.
  r.push_back(row("Cmp_Equal_int64_const", [] {
    return exact_case(OpKind::kEqual, {{int_tensor(DataType::kInt64, {2, 7}, 0, 3, 3)}, {scalar_index(1, DataType::kInt64), true}},
                      {2, 7}, DataType::kBool);
  }));
  r.push_back(row("Cmp_Greater_float_const", [] {
    return exact_case(OpKind::kGreater, {{quarters({2, 7}, 4)}, {scalar_f(0.5f), true}}, {2, 7}, DataType::kBool);
  }));
}

void logical_rows(std::vector<Row>& r) {
  const std::pair<OpKind, const char*> ops[] = {{OpKind::kAnd, "And"}, {OpKind::kOr, "Or"}, {OpKind::kXor, "Xor"}};
  uint32_t seed = 200;
  for (const auto& [op_b, name] : ops) {
    ++seed;
    const OpKind op = op_b;
    r.push_back(row(std::string("Logic_") + name + "_bool", [=] {
      return exact_case(op, {{bools({2, 3, 4}, seed)}, {bools({1, 3, 1}, seed + 7)}}, {2, 3, 4}, DataType::kBool);
    }));
  }
  r.push_back(row("Logic_Not_bool",
                  [] { return exact_case(OpKind::kNot, {{bools({2, 3, 5}, 210)}}, {2, 3, 5}, DataType::kBool); }));
  r.push_back(row("IsNaN_float",
                  [] { return exact_case(OpKind::kIsNaN, {{specials({4, 9}, 211)}}, {4, 9}, DataType::kBool); }));
  r.push_back(row("IsInf_float",
                  [] { return exact_case(OpKind::kIsInf, {{specials({4, 9}, 212)}}, {4, 9}, DataType::kBool); }));
  r.push_back(row("IsInf_float_positive_only", [] {
    return exact_case(OpKind::kIsInf, {{specials({4, 9}, 213)}}, {4, 9}, DataType::kBool,
                      {{"detect_negative", Attribute::of_int(0)}});
  }));
  r.push_back(row("IsInf_float_negative_only", [] {
    return exact_case(OpKind::kIsInf, {{specials({4, 9}, 214)}}, {4, 9}, DataType::kBool,
                      {{"detect_positive", Attribute::of_int(0)}});
  }));
}

void where_rows(std::vector<Row>& r) {
  for (DataType dt : {DataType::kFloat32, DataType::kInt32, DataType::kInt64, DataType::kBool}) {
    r.push_back(row(std::string("Where_runtime_cond_") + dt_name(dt), [=] {
      return exact_case(OpKind::kWhere, {{bools({2, 1, 4}, 300)}, {values(dt, {2, 3, 4}, 301)}, {values(dt, {3, 4}, 302)}},
                        {2, 3, 4}, dt);
    }));
  }
  // The mask form of current exporters: Where(mask, -inf, 0) from constant scalars, and the
  // softmax NaN guard Where(IsNaN(p), 0, p).
  r.push_back(row("Where_runtime_cond_neg_inf_mask", [] {
    return exact_case(OpKind::kWhere,
                      {{bools({2, 1, 1, 6}, 303)},
                       {scalar_f(-std::numeric_limits<float>::infinity()), true},
                       {scalar_f(0.f), true}},
                      {2, 1, 1, 6}, DataType::kFloat32);
  }));
  r.push_back(row("Where_IsNaN_guard", [] {
    TinyGraph t;
    auto p = t.input("p", {3, 8});
    auto nan = t.node(OpKind::kIsNaN, "nan", {p}, {3, 8});
    t.g.value(nan).dtype = DataType::kBool;
    auto y = t.node(OpKind::kWhere, "guard", {nan, t.constant("zero", scalar_f(0.f)), p}, {3, 8});
    t.g.outputs = {y};
    return OpCase{t.g, {specials({3, 8}, 304)}};
  }));
}

void cast_rows(std::vector<Row>& r) {
  const DataType types[] = {DataType::kFloat32, DataType::kInt32, DataType::kInt64, DataType::kBool};
  uint32_t seed = 400;
  for (DataType from : types)
    for (DataType to : types) {
      if (from == to || (from == DataType::kFloat32 && to == DataType::kFloat32)) continue;
      ++seed;
      r.push_back(row(std::string("Cast_") + dt_name(from) + "_to_" + dt_name(to), [=] {
        return exact_case(OpKind::kCast, {{values(from, {3, 5, 2}, seed)}}, {3, 5, 2}, to,
                          {{"to", Attribute::of_int(static_cast<int64_t>(dtype_to_onnx(to)))}});
      }));
    }
  // int64 values past 2^31 (sequence offsets, hashes) narrowed to int32 keep their low bits.
  r.push_back(row("Cast_int64_large_to_int32", [] {
    return exact_case(OpKind::kCast, {{int_tensor(DataType::kInt64, {16}, -(int64_t{1} << 40), int64_t{1} << 40, 405)}},
                      {16}, DataType::kInt32, {{"to", Attribute::of_int(static_cast<int64_t>(dtype_to_onnx(DataType::kInt32)))}});
  }));
}

void int_arith_rows(std::vector<Row>& r) {
  const std::pair<OpKind, const char*> binary[] = {{OpKind::kAdd, "Add"}, {OpKind::kSub, "Sub"}, {OpKind::kMul, "Mul"},
                                                   {OpKind::kDiv, "Div"}, {OpKind::kMod, "Mod"}, {OpKind::kMin, "Min"},
                                                   {OpKind::kMax, "Max"}};
  uint32_t seed = 500;
  for (const auto& [op_b, name] : binary)
    for (DataType dt : {DataType::kInt32, DataType::kInt64}) {
      ++seed;
      const OpKind op = op_b;
      const bool divides = op == OpKind::kDiv || op == OpKind::kMod;
      r.push_back(row(std::string("Int_") + name + "_" + dt_name(dt), [=] {
        return exact_case(op, {{int_tensor(dt, {2, 3, 4}, -50, 50, seed)}, {divides ? divisors(dt, {3, 1}, seed + 9) : values(dt, {3, 1}, seed + 9)}},
                          {2, 3, 4}, dt);
      }));
    }
  for (DataType dt : {DataType::kInt32, DataType::kInt64})
    r.push_back(row(std::string("Int_Mod_fmod_") + dt_name(dt), [=] {
      return exact_case(OpKind::kMod, {{int_tensor(dt, {2, 3, 4}, -50, 50, 520)}, {divisors(dt, {4}, 521)}}, {2, 3, 4}, dt,
                        {{"fmod", Attribute::of_int(1)}});
    }));
  // EyeLike: int32 input (its shape only) -> int32 output (k = 1), and -> float output (dtype
  // attribute, k = -2; the float table reading an int32 activation for its shape).
  r.push_back(row("EyeLike_int32_k1", [] {
    return exact_case(OpKind::kEyeLike, {{int_tensor(DataType::kInt32, {4, 6}, -9, 9, 545)}}, {4, 6}, DataType::kInt32,
                      {{"k", Attribute::of_int(1)}});
  }));
  r.push_back(row("EyeLike_int32_to_float_k_neg2", [] {
    return exact_case(OpKind::kEyeLike, {{int_tensor(DataType::kInt32, {5, 3}, -9, 9, 546)}}, {5, 3}, DataType::kFloat32,
                      {{"k", Attribute::of_int(-2)},
                       {"dtype", Attribute::of_int(static_cast<int64_t>(dtype_to_onnx(DataType::kFloat32)))}});
  }));
  // ConstantOfShape from an int64 shape graph input ({3, 4}): an int32 fill (exact table) and a
  // float one (float table; the shape an int activation read for its values by shape discovery).
  for (DataType dt : {DataType::kInt32, DataType::kFloat32})
    r.push_back(row(std::string("ConstantOfShape_") + (dt == DataType::kInt32 ? "int32" : "float"), [dt] {
      ir::Attribute value;
      value.kind = ir::Attribute::Kind::kTensor;
      value.t = std::make_shared<Tensor>(dt == DataType::kInt32 ? Tensor::scalar<int32_t>(DataType::kInt32, -7)
                                                                 : Tensor::scalar<float>(DataType::kFloat32, 2.5f));
      return exact_case(OpKind::kConstantOfShape, {{ints({3, 4})}}, {3, 4}, dt, {{"value", value}});
    }));
  // Integer Pow: bases in [-5, 5], exponents in [-2, 14] (negative ones: 1, +-1 or 0; 5^14 wraps
  // int32), the exponent broadcast.
  for (DataType dt : {DataType::kInt32, DataType::kInt64})
    r.push_back(row(std::string("Int_Pow_") + dt_name(dt), [=] {
      return exact_case(OpKind::kPow, {{int_tensor(dt, {2, 3, 4}, -5, 5, 540)}, {int_tensor(dt, {3, 4}, -2, 14, 541)}},
                        {2, 3, 4}, dt);
    }));
  for (DataType dt : {DataType::kInt32, DataType::kInt64}) {
    r.push_back(row(std::string("Int_Neg_") + dt_name(dt),
                    [=] { return exact_case(OpKind::kNeg, {{values(dt, {4, 6}, 530)}}, {4, 6}, dt); }));
    r.push_back(row(std::string("Int_Abs_") + dt_name(dt),
                    [=] { return exact_case(OpKind::kAbs, {{values(dt, {4, 6}, 531)}}, {4, 6}, dt); }));
  }
  // int64 beyond float's 2^24: positions computed exactly, a constant operand included.
  r.push_back(row("Int_Add_int64_large_const", [] {
    return exact_case(OpKind::kAdd,
                      {{int_tensor(DataType::kInt64, {2, 8}, int64_t{1} << 40, (int64_t{1} << 40) + 1000, 540)},
                       {ints({(int64_t{1} << 33) + 1}, DataType::kInt64, {1}), true}},
                      {2, 8}, DataType::kInt64);
  }));
}

// Range whose start is a run-time value and whose length is not (limit = start + 7 by the graph):
// Range(s, s + 7, d) has 7 / d elements whatever s is.
OpCase range_case(DataType dt) {
  TinyGraph t;
  Tensor start = dt == DataType::kFloat32 ? scalar_f(1.5f) : scalar_index(-3, dt);
  auto s = int_input(t, "start", {}, dt);
  Tensor seven = dt == DataType::kFloat32 ? scalar_f(7.f) : scalar_index(7, dt);
  auto limit = t.node(OpKind::kAdd, "limit", {s, t.constant("seven", seven)}, {});
  t.g.value(limit).dtype = dt;
  Tensor delta = dt == DataType::kFloat32 ? scalar_f(0.5f) : scalar_index(1, dt);
  const int64_t n = dt == DataType::kFloat32 ? 14 : 7;
  auto y = t.node(OpKind::kRange, "range", {s, limit, t.constant("delta", delta)}, {n});
  t.g.value(y).dtype = dt;
  t.g.outputs = {y};
  return OpCase{t.g, {start}};
}

void sequence_rows(std::vector<Row>& r) {
  for (DataType dt : {DataType::kInt64, DataType::kInt32, DataType::kFloat32}) {
    Row rr = row(std::string("Range_runtime_start_") + dt_name(dt), [=] { return range_case(dt); });
    rr.expect_ops = {"Range"};
    r.push_back(rr);
  }
  struct CumSumArgs {
    const char* name;
    DataType dt;
    int64_t axis;
    int exclusive, reverse;
  };
  const CumSumArgs cs[] = {{"int64_axis1", DataType::kInt64, 1, 0, 0},
                           {"int64_exclusive_reverse", DataType::kInt64, 1, 1, 1},
                           {"int32_exclusive", DataType::kInt32, -1, 1, 0},
                           {"float_axis2_reverse", DataType::kFloat32, 2, 0, 1}};
  for (const CumSumArgs& a : cs)
    r.push_back(row(std::string("CumSum_") + a.name, [=] {
      return exact_case(OpKind::kCumSum, {{values(a.dt, {2, 5, 3}, 600)}, {scalar_index(a.axis, DataType::kInt64), true}},
                        {2, 5, 3}, a.dt,
                        {{"exclusive", Attribute::of_int(a.exclusive)}, {"reverse", Attribute::of_int(a.reverse)}});
    }, kArithTol));
  struct TriluArgs {
    const char* name;
    DataType dt;
    int upper;
    int64_t k;
  };
  const TriluArgs tr[] = {{"bool_upper_k1", DataType::kBool, 1, 1},  // a causal mask's masked part
                          {"bool_lower_k0", DataType::kBool, 0, 0},
                          {"int64_upper_km1", DataType::kInt64, 1, -1},
                          {"float_lower_k2", DataType::kFloat32, 0, 2}};
  for (const TriluArgs& a : tr)
    r.push_back(row(std::string("Trilu_") + a.name, [=] {
      return exact_case(OpKind::kTrilu, {{values(a.dt, {2, 5, 6}, 610)}, {scalar_index(a.k, DataType::kInt64), true}},
                        {2, 5, 6}, a.dt, {{"upper", Attribute::of_int(a.upper)}});
    }));
}

// Trilu with k computed at run time (a graph input), and a graph output the build folds to a
// constant (the Shape of an input): returned as int64 through a copy layer.
void runtime_k_and_constant_output_rows(std::vector<Row>& r) {
  r.push_back(row("Trilu_float_upper_runtime_k", [] {
    return exact_case(OpKind::kTrilu, {{quarters({2, 4, 6}, 620)}, {scalar_index(-1, DataType::kInt64)}}, {2, 4, 6},
                      DataType::kFloat32, {{"upper", Attribute::of_int(1)}});
  }));
  Row shape = row("Shape_graph_output_int64", [] {
    TinyGraph t;
    auto x = t.input("x", {3, 5, 2});
    auto y = t.node(OpKind::kShape, "shape", {x}, {3});
    t.g.value(y).dtype = DataType::kInt64;
    auto z = t.node(OpKind::kRelu, "relu", {x}, {3, 5, 2});
    t.g.outputs = {y, z};
    return OpCase{t.g, {nonzero({3, 5, 2}, 621)}};
  });
  shape.expect_ops = {"Relu"};
  r.push_back(shape);
}

// ArgMax / ArgMin (ties among quarters; NaN counts as the extreme) and integer reductions.
void reduction_rows(std::vector<Row>& r) {
  struct ArgArgs {
    const char* name;
    OpKind op;
    DataType dt;
    int64_t axis;
    int keepdims, last;
    Shape out;
  };
  const ArgArgs args[] = {{"ArgMax_float_axis1", OpKind::kArgMax, DataType::kFloat32, 1, 1, 0, {2, 1, 4}},
                          {"ArgMax_float_last_index_nokeep", OpKind::kArgMax, DataType::kFloat32, -1, 0, 1, {2, 6}},
                          {"ArgMin_int64_axis0", OpKind::kArgMin, DataType::kInt64, 0, 1, 0, {1, 6, 4}},
                          {"ArgMin_int32_last_index", OpKind::kArgMin, DataType::kInt32, 2, 0, 1, {2, 6}}};
  for (const ArgArgs& a : args)
    r.push_back(row(a.name, [=] {
      const Shape in = {2, 6, 4};
      return exact_case(a.op, {{a.dt == DataType::kFloat32 ? quarters(in, 800) : int_tensor(a.dt, in, -3, 3, 801)}}, a.out,
                        DataType::kInt64,
                        {{"axis", Attribute::of_int(a.axis)},
                         {"keepdims", Attribute::of_int(a.keepdims)},
                         {"select_last_index", Attribute::of_int(a.last)}});
    }));
  // Rows of >= 1024 values (an LLM's logits: a block per row on CUDA), many ties and NaNs.
  const ArgArgs long_args[] = {{"ArgMax_float_long_rows", OpKind::kArgMax, DataType::kFloat32, 1, 0, 0, {3}},
                               {"ArgMax_float_long_rows_last", OpKind::kArgMax, DataType::kFloat32, -1, 0, 1, {3}},
                               {"ArgMin_int32_long_rows", OpKind::kArgMin, DataType::kInt32, 1, 1, 0, {3, 1}}};
  for (const ArgArgs& a : long_args)
    r.push_back(row(a.name, [=] {
      const Shape in = {3, 3001};
      return exact_case(a.op, {{a.dt == DataType::kFloat32 ? quarters(in, 803) : int_tensor(a.dt, in, -3, 3, 804)}}, a.out,
                        DataType::kInt64,
                        {{"axis", Attribute::of_int(a.axis)},
                         {"keepdims", Attribute::of_int(a.keepdims)},
                         {"select_last_index", Attribute::of_int(a.last)}});
    }));
  r.push_back(row("ArgMax_float_nan_long_rows", [] {
    return exact_case(OpKind::kArgMax, {{specials({4, 1500}, 805)}}, {4}, DataType::kInt64,
                      {{"axis", Attribute::of_int(1)}, {"keepdims", Attribute::of_int(0)}});
  }));
  r.push_back(row("ArgMax_float_nan", [] {
    return exact_case(OpKind::kArgMax, {{specials({3, 7}, 802)}}, {3}, DataType::kInt64,
                      {{"axis", Attribute::of_int(1)}, {"keepdims", Attribute::of_int(0)}});
  }));
  struct ReduceArgs {
    const char* name;
    OpKind op;
    DataType dt;
    std::vector<int64_t> axes;
    Shape out;
  };
  const ReduceArgs red[] = {{"ReduceSum_int64_last_axis", OpKind::kReduceSum, DataType::kInt64, {-1}, {2, 6, 1}},
                            {"ReduceSum_int32_all", OpKind::kReduceSum, DataType::kInt32, {}, {1, 1, 1}},
                            {"ReduceMax_int64_axis1", OpKind::kReduceMax, DataType::kInt64, {1}, {2, 1, 4}},
                            {"ReduceMin_int32_axes01", OpKind::kReduceMin, DataType::kInt32, {0, 1}, {1, 1, 4}}};
  for (const ReduceArgs& a : red)
    r.push_back(row(a.name, [=] {
      // Opset 17: ReduceSum takes axes as input 1, ReduceMax / ReduceMin as an attribute.
      std::vector<In> ins = {{int_tensor(a.dt, {2, 6, 4}, -1000, 1000, 810)}};
      std::map<std::string, Attribute> attrs = {{"keepdims", Attribute::of_int(1)}};
      if (!a.axes.empty() && a.op == OpKind::kReduceSum) ins.push_back({ints(a.axes), true});
      if (!a.axes.empty() && a.op != OpKind::kReduceSum) attrs["axes"] = Attribute::of_ints(a.axes);
      return exact_case(a.op, ins, a.out, a.dt, attrs);
    }));
}

// Kiln's Attention with a bool mask computed at run time (a graph input here; a padding / causal
// mask chain in an export): query row 1 of batch 0 sees no key (zeros, as the CPU reference).
void attention_rows(std::vector<Row>& r) {
  r.push_back(row("Attention_runtime_bool_mask", [] {
    TinyGraph t;
    const Shape qs = {2, 2, 5, 8}, ks = {2, 2, 6, 8}, ms = {2, 1, 5, 6};
    Tensor mask = bools(ms, 900);
    auto* p = static_cast<uint8_t*>(mask.raw());
    for (int64_t j = 0; j < 6; ++j) p[6 + j] = 0;
    auto y = t.node(OpKind::kAttention, "attn",
                    {t.input("q", qs), t.input("k", ks), t.input("v", ks), int_input(t, "mask", ms, DataType::kBool)}, qs);
    t.g.outputs = {y};
    return OpCase{t.g, {nonzero(qs, 901, 2.f), nonzero(ks, 902, 2.f), nonzero(ks, 903), mask}};
  }, kArithTol));
}

void movement_rows_exact(std::vector<Row>& r) {
  for (DataType dt : {DataType::kBool, DataType::kInt64, DataType::kInt32}) {
    const std::string s = dt_name(dt);
    // An attention mask [B, 1, 1, S] -> [B, 1, S, S].
    r.push_back(row("Expand_" + s, [=] {
      return exact_case(OpKind::kExpand, {{values(dt, {2, 1, 1, 5}, 700)}, {ints({2, 1, 5, 5}), true}}, {2, 1, 5, 5}, dt);
    }));
    r.push_back(row("Transpose_" + s, [=] {
      return exact_case(OpKind::kTranspose, {{values(dt, {2, 3, 4}, 701)}}, {4, 2, 3}, dt,
                        {{"perm", Attribute::of_ints({2, 0, 1})}});
    }));
    r.push_back(row("Slice_" + s, [=] {
      return exact_case(OpKind::kSlice,
                        {{values(dt, {3, 8}, 702)}, {ints({1}), true}, {ints({7}), true}, {ints({1}), true}, {ints({2}), true}},
                        {3, 3}, dt);
    }));
    r.push_back(row("Concat_" + s, [=] {
      return exact_case(OpKind::kConcat, {{values(dt, {2, 3}, 703)}, {values(dt, {2, 5}, 704)}, {values(dt, {2, 1}, 705), true}},
                        {2, 9}, dt, {{"axis", Attribute::of_int(1)}});
    }));
    r.push_back(row("Gather_runtime_idx_" + s, [=] {
      return exact_case(OpKind::kGather, {{values(dt, {6, 4}, 706)}, {int_tensor(DataType::kInt64, {2, 3}, -6, 5, 707)}},
                        {2, 3, 4}, dt, {{"axis", Attribute::of_int(0)}});
    }));
    Row un = row("Unsqueeze_Reshape_" + s, [=] {
      TinyGraph t;
      auto x = int_input(t, "x", {2, 6}, dt);
      auto u = t.node(OpKind::kUnsqueeze, "u", {x, t.constant("axes", ints({1, 2}))}, {2, 1, 1, 6});
      t.g.value(u).dtype = dt;
      auto y = t.node(OpKind::kReshape, "r", {u, t.constant("shape", ints({3, 4}))}, {3, 4});
      t.g.value(y).dtype = dt;
      auto z = t.node(OpKind::kSqueeze, "s", {u, t.constant("sq", ints({1}))}, {2, 1, 6});
      t.g.value(z).dtype = dt;
      t.g.outputs = {y, z};
      return OpCase{t.g, {values(dt, {2, 6}, 708)}};
    });
    un.expect_ops = {};
    r.push_back(un);
  }
}

}  // namespace

std::vector<Row> exact_rows() {
  std::vector<Row> r;
  comparison_rows(r);
  logical_rows(r);
  where_rows(r);
  cast_rows(r);
  int_arith_rows(r);
  sequence_rows(r);
  runtime_k_and_constant_output_rows(r);
  reduction_rows(r);
  attention_rows(r);
  movement_rows_exact(r);
  return r;
}

}  // namespace kiln::testing::op_table
