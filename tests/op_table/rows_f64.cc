// Rows on float64 and uint64 tensors and the float-op gaps of the ONNX node cases
// (docs/decisions/0075): float64 Cast / CastLike, elementwise arithmetic (Max / Min with NaN, Mod
// of mixed signs), CumSum, Reduce* (LogSumExp), Einsum, EyeLike; uint64 Max / Min / Div / Mod /
// BitShift past 2^63 (unsigned order); Pow of an integer base with a float exponent and of a
// float base with a uint64 exponent; Resize cubic / exclude_outside / tf_crop_and_resize,
// Resize-10 and Upsample-9 (the tap-list kernel); Tile past 6 dims; rank-7 tensors; Cast from
// bfloat16. Operands are graph inputs. float64 outputs are compared with the tolerance (the GPU
// sums in another order than the CPU); integer outputs exactly. Every row here is named F64_*:
// `--gtest_filter='OpTable/*/*F64_*'` runs them all.
#include <cmath>
#include <limits>
#include <random>

#include "core/numerics.h"
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

// float64 data: magnitudes in [0.1, 3] with random signs and 50 significant bits (float32
// rounding would show at 1e-8).
Tensor doubles(const Shape& s, uint32_t seed) {
  Tensor t(DataType::kFloat64, s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(0.1, 3.0);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = (neg(rng) ? -1 : 1) * (mag(rng) + 1e-9 / 3);
  return t;
}

Tensor uint64s(const std::vector<uint64_t>& v) {
  Tensor t(DataType::kUInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<uint64_t>()[i] = v[i];
  return t;
}

// y = op(inputs...) of output dtype `out_dt`; every operand a graph input of its tensor's dtype.
OpCase case_of(OpKind op, const std::vector<Tensor>& ins, const Shape& out, DataType out_dt,
               std::map<std::string, Attribute> attrs = {}, int opset = 17) {
  TinyGraph t;
  OpCase c;
  std::vector<ir::ValueId> ids;
  for (size_t k = 0; k < ins.size(); ++k) {
    ids.push_back(int_input(t, "in" + std::to_string(k), ins[k].shape(), ins[k].dtype()));
    c.inputs.push_back(ins[k]);
  }
  auto y = t.node(op, "y", ids, out, std::move(attrs));
  t.g.value(y).dtype = out_dt;
  t.g.nodes.back().opset = opset;
  t.g.outputs = {y};
  c.graph = t.g;
  return c;
}

constexpr Tolerance kF64Tol{1e-12, 1e-12, 1e-12};  // float64 is computed in double at every precision

Row row(const std::string& name, std::function<OpCase()> make, Tolerance tol = kF64Tol) {
  Row r;
  r.name = "F64_" + name;
  r.tol = tol;
  r.cpu_tol = 1e-12;
  r.make = std::move(make);
  return r;
}

// A row whose float32 / float16 operand or result is a float activation: in an fp16 / bf16 plan it
// is stored in that precision (the plan's choice, not the Cast's), so the exact comparison holds
// only in the precisions listed.
Row in_precisions(Row r, std::vector<Precision> p) {
  r.precisions = std::move(p);
  return r;
}

void float64_rows(std::vector<Row>& r) {
  const Tolerance cast_tol{0, 0, 0};  // one rounding on both backends
  // Casts from float64 round once (to float16 directly, not through float32). (Float layers do not
  // write bfloat16: a Cast to it is refused by node, as before.)
  for (auto [to, dt, name] : {std::tuple{int64_t{1}, DataType::kFloat32, "float32"},
                              std::tuple{int64_t{10}, DataType::kFloat16, "float16"},
                              std::tuple{int64_t{7}, DataType::kInt64, "int64"}}) {
    Row c = row(std::string("Cast_to_") + name, [=] {
      return case_of(OpKind::kCast, {doubles({3, 5}, 1)}, {3, 5}, dt, {{"to", Attribute::of_int(to)}});
    }, cast_tol);
    if (dt == DataType::kFloat32) c = in_precisions(std::move(c), {Precision::kFp32});
    if (dt == DataType::kFloat16) c = in_precisions(std::move(c), {Precision::kFp32, Precision::kFp16});
    r.push_back(std::move(c));
  }
  r.push_back(in_precisions(row("Cast_from_float32", [] {
    return case_of(OpKind::kCast, {nonzero({3, 5}, 2)}, {3, 5}, DataType::kFloat64, {{"to", Attribute::of_int(11)}});
  }, cast_tol), {Precision::kFp32}));
  r.push_back(row("Cast_from_int64", [] {
    return case_of(OpKind::kCast, {int_tensor(DataType::kInt64, {3, 5}, -1000, 1000, 3)}, {3, 5}, DataType::kFloat64,
                   {{"to", Attribute::of_int(11)}});
  }, cast_tol));
  r.push_back(in_precisions(row("CastLike_to_float16", [] {
    Tensor like(DataType::kFloat16, {1});
    like.data<uint16_t>()[0] = 0;
    return case_of(OpKind::kCastLike, {doubles({3, 5}, 4), like}, {3, 5}, DataType::kFloat16);
  }, cast_tol), {Precision::kFp32, Precision::kFp16}));
  // Elementwise: Max / Min propagate NaN; Mod with fmod = 1 keeps the dividend's sign.
  for (auto [op, name] : {std::pair{OpKind::kMax, "Max"}, std::pair{OpKind::kMin, "Min"}}) {
    r.push_back(row(std::string(name) + "_nan", [op = op] {
      Tensor a = doubles({2, 3, 4}, 5), b = doubles({3, 1}, 6);
      a.data<double>()[3] = std::numeric_limits<double>::quiet_NaN();
      return case_of(op, {a, b}, {2, 3, 4}, DataType::kFloat64);
    }));
  }
  r.push_back(row("Mod_fmod_mixed_sign", [] {
    return case_of(OpKind::kMod, {doubles({4, 6}, 7), doubles({6}, 8)}, {4, 6}, DataType::kFloat64,
                   {{"fmod", Attribute::of_int(1)}});
  }));
  for (auto [op, name] : {std::pair{OpKind::kAdd, "Add"}, std::pair{OpKind::kSub, "Sub"}, std::pair{OpKind::kMul, "Mul"},
                          std::pair{OpKind::kDiv, "Div"}}) {
    r.push_back(row(name, [op = op] { return case_of(op, {doubles({2, 3, 4}, 9), doubles({4}, 10)}, {2, 3, 4}, DataType::kFloat64); }));
  }
  r.push_back(row("Less_to_bool", [] {
    return case_of(OpKind::kLess, {doubles({3, 4}, 11), doubles({3, 4}, 12)}, {3, 4}, DataType::kBool);
  }));
  r.push_back(row("CumSum_axis1_exclusive_reverse", [] {
    TinyGraph t;
    auto x = int_input(t, "x", {3, 7, 2}, DataType::kFloat64);
    auto y = t.node(OpKind::kCumSum, "y", {x, t.constant("axis", scalar_index(1, DataType::kInt64))}, {3, 7, 2},
                    {{"exclusive", Attribute::of_int(1)}, {"reverse", Attribute::of_int(1)}});
    t.g.value(y).dtype = DataType::kFloat64;
    t.g.outputs = {y};
    return OpCase{t.g, {doubles({3, 7, 2}, 13)}};
  }));
  for (auto [op, name] : {std::pair{OpKind::kReduceLogSumExp, "ReduceLogSumExp"}, std::pair{OpKind::kReduceSum, "ReduceSum"},
                          std::pair{OpKind::kReduceMean, "ReduceMean"}, std::pair{OpKind::kReduceMax, "ReduceMax"},
                          std::pair{OpKind::kReduceL2, "ReduceL2"}}) {
    r.push_back(row(std::string(name) + "_axis1", [op = op] {
      TinyGraph t;
      auto x = int_input(t, "x", {3, 5, 4}, DataType::kFloat64);
      auto y = t.node(op, "y", {x, t.ints("axes", {1})}, {3, 1, 4}, {{"keepdims", Attribute::of_int(1)}});
      t.g.nodes.back().opset = 18;
      t.g.value(y).dtype = DataType::kFloat64;
      t.g.outputs = {y};
      return OpCase{t.g, {doubles({3, 5, 4}, 14)}};
    }));
  }
  struct Eq { const char* name; const char* eq; std::vector<Shape> in; Shape out; };
  for (const Eq& e : {Eq{"batch_matmul", "bij, bjk -> bik", {{5, 2, 3}, {5, 3, 4}}, {5, 2, 4}},
                      Eq{"batch_diagonal", "...ii ->...i", {{3, 5, 5}}, {3, 5}},
                      Eq{"inner_prod", "i,i", {{5}, {5}}, {}},
                      Eq{"sum", "ij->i", {{3, 4}}, {3}},
                      Eq{"transpose_implicit", "ji", {{3, 4}}, {4, 3}},
                      Eq{"broadcast_ellipsis", "...j,...j->...", {{2, 1, 4}, {3, 4}}, {2, 3}}}) {
    r.push_back(row(std::string("Einsum_") + e.name, [e] {
      std::vector<Tensor> ins;
      for (size_t k = 0; k < e.in.size(); ++k) ins.push_back(doubles(e.in[k], 20 + static_cast<uint32_t>(k)));
      return case_of(OpKind::kEinsum, ins, e.out, DataType::kFloat64, {{"equation", Attribute::of_string(e.eq)}});
    }));
  }
  r.push_back(row("EyeLike_dtype_double", [] {
    return case_of(OpKind::kEyeLike, {int_tensor(DataType::kInt32, {3, 4}, 0, 5, 30)}, {3, 4}, DataType::kFloat64,
                   {{"dtype", Attribute::of_int(11)}, {"k", Attribute::of_int(1)}});
  }, {0, 0, 0}));
}

void uint64_rows(std::vector<Row>& r) {
  const uint64_t big = 0xF000000000000001ull;  // above 2^63: negative as int64
  auto a = [=] { return uint64s({big, 7, 1ull << 63, 12, 0, 5}); };
  auto b = [=] { return uint64s({3, big, 9, 5, 4, 1ull << 62}); };
  for (auto [op, name] : {std::pair{OpKind::kMax, "Max"}, std::pair{OpKind::kMin, "Min"}, std::pair{OpKind::kDiv, "Div"},
                          std::pair{OpKind::kMod, "Mod"}, std::pair{OpKind::kAdd, "Add"}}) {
    r.push_back(row(std::string("UInt64_") + name, [=, op = op] { return case_of(op, {a(), b()}, {6}, DataType::kUInt64); }));
  }
  for (const char* dir : {"LEFT", "RIGHT"}) {
    r.push_back(row(std::string("UInt64_BitShift_") + dir, [=] {
      return case_of(OpKind::kBitShift, {a(), uint64s({1, 63, 64, 3, 0, 70})}, {6}, DataType::kUInt64,
                     {{"direction", Attribute::of_string(dir)}});
    }));
  }
  // Casts follow the CPU's: to float through double, from float through int64 (negative values
  // wrap, NaN and out-of-range values give 2^63).
  r.push_back(in_precisions(row("UInt64_Cast_to_float32", [=] {
    return case_of(OpKind::kCast, {uint64s({big, 7, (1ull << 63) + 1, 12345678901234567ull, 0, ~0ull})}, {6},
                   DataType::kFloat32, {{"to", Attribute::of_int(1)}});
  }, {0, 0, 0}), {Precision::kFp32}));
  r.push_back(row("UInt64_Cast_from_float64", [] {
    Tensor x(DataType::kFloat64, {6});
    const double v[] = {-1.5, 3.7, 1e19, -1e19, 9.2233720368547758e18, std::numeric_limits<double>::quiet_NaN()};
    for (int i = 0; i < 6; ++i) x.data<double>()[i] = v[i];
    return case_of(OpKind::kCast, {x}, {6}, DataType::kUInt64, {{"to", Attribute::of_int(13)}});
  }));
  r.push_back(row("Pow_float32_base_uint64_exponent", [] {
    return case_of(OpKind::kPow, {nonzero({6}, 31), uint64s({0, 1, 2, 3, 4, 5})}, {6}, DataType::kFloat32);
  }, kArithTol));
}

void pow_rows(std::vector<Row>& r) {
  for (DataType dt : {DataType::kInt32, DataType::kInt64}) {
    r.push_back(row(std::string("Pow_") + (dt == DataType::kInt32 ? "int32" : "int64") + "_base_float32_exponent", [=] {
      Tensor e(DataType::kFloat32, {8});
      const float ex[] = {0.f, 1.f, 2.f, 3.f, 0.5f, -1.f, 2.5f, 10.f};
      for (int i = 0; i < 8; ++i) e.data<float>()[i] = ex[i];
      return case_of(OpKind::kPow, {int_tensor(dt, {2, 8}, -6, 9, 32), e}, {2, 8}, dt);
    }));
  }
}

void resize_rows(std::vector<Row>& r) {
  // x [1, 2, 5, 6] (in fp32 the sums of products differ from the CPU's only by float32 rounding).
  struct Rz { const char* name; std::map<std::string, Attribute> attrs; Shape out; bool sizes; std::vector<float> roi; };
  const std::vector<Rz> cases = {
      {"cubic_up", {{"mode", Attribute::of_string("cubic")}}, {1, 2, 10, 9}, false, {}},
      {"cubic_down_sizes", {{"mode", Attribute::of_string("cubic")}}, {1, 2, 3, 4}, true, {}},
      {"cubic_A_n0p5_exclude_outside",
       {{"mode", Attribute::of_string("cubic")}, {"cubic_coeff_a", Attribute::of_float(-0.5f)},
        {"exclude_outside", Attribute::of_int(1)}},
       {1, 2, 8, 12}, false, {}},
      {"cubic_align_corners",
       {{"mode", Attribute::of_string("cubic")}, {"coordinate_transformation_mode", Attribute::of_string("align_corners")}},
       {1, 2, 8, 9}, false, {}},
      {"tf_crop_and_resize_linear",
       {{"mode", Attribute::of_string("linear")},
        {"coordinate_transformation_mode", Attribute::of_string("tf_crop_and_resize")},
        {"extrapolation_value", Attribute::of_float(10.f)}},
       {1, 2, 4, 5}, true, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}},
  };
  for (const Rz& c : cases) {
    Row rw = row(std::string("Resize_") + c.name, [c] {
      const Shape in = {1, 2, 5, 6};
      return one_op(OpKind::kResize, in, c.out,
                    [&](TinyGraph& t) {
                      std::vector<ir::ValueId> ins;
                      if (c.roi.empty()) {
                        ins.push_back(ir::kNoValue);
                      } else {
                        Tensor roi(DataType::kFloat32, {8});
                        for (int i = 0; i < 8; ++i) roi.data<float>()[i] = c.roi[i];
                        ins.push_back(t.constant("roi", roi));
                      }
                      if (c.sizes) {
                        ins.push_back(ir::kNoValue);
                        ins.push_back(t.constant("sizes", ints(std::vector<int64_t>(c.out.begin(), c.out.end()))));
                      } else {
                        Tensor sc(DataType::kFloat32, {4});
                        for (int i = 0; i < 4; ++i) sc.data<float>()[i] = static_cast<float>(c.out[i]) / static_cast<float>(in[i]);
                        ins.push_back(t.constant("scales", sc));
                      }
                      return ins;
                    },
                    c.attrs, nonzero(in, 40));
    }, {1e-5, kMoveTol.fp16 * 2, kMoveTol.bf16 * 2});
    rw.cpu_tol = 1e-5;
    rw.expect_ops = {"Resize"};
    r.push_back(std::move(rw));
  }
  Row up = row("Upsample_nearest_opset9", [] {
    OpCase c = one_op(OpKind::kUpsample, {1, 1, 2, 3}, {1, 1, 4, 9},
                      [](TinyGraph& t) {
                        Tensor sc(DataType::kFloat32, {4});
                        const float s[] = {1, 1, 2, 3};
                        for (int i = 0; i < 4; ++i) sc.data<float>()[i] = s[i];
                        return std::vector<ir::ValueId>{t.constant("scales", sc)};
                      },
                      {{"mode", Attribute::of_string("nearest")}}, nonzero({1, 1, 2, 3}, 41));
    c.graph.nodes.back().opset = 9;
    return c;
  }, kMoveTol);
  up.cpu_tol = 0;
  up.expect_ops = {"Upsample"};
  r.push_back(std::move(up));
}

void shape_rows(std::vector<Row>& r) {
  Row tile = row("Tile_4d_all_repeated", [] {
    return one_op(OpKind::kTile, {2, 3, 4, 5}, {4, 6, 12, 10},
                  [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("repeats", ints({2, 2, 3, 2}))}; }, {},
                  nonzero({2, 3, 4, 5}, 50));
  }, kMoveTol);
  tile.cpu_tol = 0;
  r.push_back(std::move(tile));
  Row neg = row("Neg_rank7", [] { return one_op(OpKind::kNeg, {2, 3, 1, 2, 3, 2, 2}, {2, 3, 1, 2, 3, 2, 2}, nullptr, {}, nonzero({2, 3, 1, 2, 3, 2, 2}, 51)); }, kMoveTol);
  neg.cpu_tol = 0;
  r.push_back(std::move(neg));
  Row ge = row("GatherElements_rank7", [] {
    TinyGraph t;
    const Shape s = {2, 3, 2, 2, 1, 3, 2};
    auto x = t.input("x", s);
    Shape is = s;
    is[1] = 1;
    auto idx = int_input(t, "idx", is, DataType::kInt64);
    auto y = t.node(OpKind::kGatherElements, "y", {x, idx}, is, {{"axis", Attribute::of_int(1)}});
    t.g.outputs = {y};
    return OpCase{t.g, {nonzero(s, 52), int_tensor(DataType::kInt64, is, -3, 2, 53)}};
  }, kMoveTol);
  ge.cpu_tol = 0;
  r.push_back(std::move(ge));
  Row cast = row("Cast_bfloat16_to_float32", [] {
    Tensor x(DataType::kBFloat16, {3, 4});
    std::mt19937 rng(54);
    std::uniform_real_distribution<float> d(-4.f, 4.f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint16_t>()[i] = float_to_bf16(d(rng));
    return case_of(OpKind::kCast, {x}, {3, 4}, DataType::kFloat32, {{"to", Attribute::of_int(1)}});
  }, {0, 0, 0});
  cast.cpu_tol = 0;
  r.push_back(std::move(cast));
}

}  // namespace

std::vector<Row> f64_rows() {
  std::vector<Row> r;
  float64_rows(r);
  uint64_rows(r);
  pow_rows(r);
  resize_rows(r);
  shape_rows(r);
  return r;
}

}  // namespace kiln::testing::op_table
