// Data-movement rows: Transpose, Slice, Expand, Split, Concat, Gather, Pad, Resize, Where, Cast.
// Exact in fp32, rounding-only in fp16 / bf16 (kMoveTol). Cases from the former
// tests/gpu/gpu_ops_test.cc, one row each.
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

Row transpose(const std::string& name, const Shape& in, const std::vector<int64_t>& perm, const Shape& out) {
  Row r;
  r.name = "Transpose_" + name;
  r.tol = kMoveTol;
  r.make = [=] {
    std::map<std::string, Attribute> a;
    if (!perm.empty()) a["perm"] = Attribute::of_ints(perm);
    return one_op(OpKind::kTranspose, in, out, nullptr, a, nonzero(in, 6));
  };
  return r;
}

struct SliceArgs {
  Shape in;
  std::vector<int64_t> starts, ends, axes, steps;
  Shape out;
};

Row slice(const std::string& name, const SliceArgs& k) {
  Row r;
  r.name = "Slice_" + name;
  r.tol = kMoveTol;
  r.make = [=] {
    auto extra = [&](TinyGraph& t) {
      std::vector<ir::ValueId> v = {t.constant("starts", ints(k.starts)), t.constant("ends", ints(k.ends)),
                                    t.constant("axes", ints(k.axes))};
      if (!k.steps.empty()) v.push_back(t.constant("steps", ints(k.steps)));
      return v;
    };
    return one_op(OpKind::kSlice, k.in, k.out, extra, {}, nonzero(k.in, 7));
  };
  return r;
}

Row gather(const std::string& name, const Shape& in, Tensor idx, int64_t axis, const Shape& out, uint32_t seed) {
  Row r;
  r.name = "Gather_" + name;
  r.tol = kMoveTol;
  r.make = [=] {
    return one_op(OpKind::kGather, in, out, [&](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("idx", idx)}; },
                  {{"axis", Attribute::of_int(axis)}}, nonzero(in, seed));
  };
  return r;
}

Row pad(const std::string& mode) {
  Row r;
  r.name = "Pad_" + mode;
  r.tol = kMoveTol;
  r.make = [=] {
    auto extra = [](TinyGraph& t) {
      return std::vector<ir::ValueId>{t.constant("pads", ints({0, 0, 1, 2, 0, 0, 2, 1})), t.constant("value", nonzero({}, 11))};
    };
    return one_op(OpKind::kPad, {2, 3, 5, 6}, {2, 3, 8, 9}, extra, {{"mode", Attribute::of_string(mode)}},
                  nonzero({2, 3, 5, 6}, 12));
  };
  return r;
}

struct ResizeArgs {
  const char* mode;
  const char* coord;
  const char* nearest;
  Shape in, out;
  bool by_scales;
};

Row resize(const std::string& name, const ResizeArgs& k) {
  Row r;
  r.name = "Resize_" + name;
  const bool linear = std::string(k.mode) == "linear";
  r.tol = {linear ? 1e-5 : 0, kMoveTol.fp16, kMoveTol.bf16};
  r.make = [=] {
    auto extra = [&](TinyGraph& t) {
      std::vector<ir::ValueId> ins = {ir::kNoValue};
      if (k.by_scales) {
        Tensor sc(DataType::kFloat32, {4});
        for (int i = 0; i < 4; ++i) sc.data<float>()[i] = static_cast<float>(k.out[i]) / static_cast<float>(k.in[i]);
        ins.push_back(t.constant("scales", sc));
      } else {
        ins.push_back(ir::kNoValue);
        ins.push_back(t.constant("sizes", ints(std::vector<int64_t>(k.out.begin(), k.out.end()))));
      }
      return ins;
    };
    return one_op(OpKind::kResize, k.in, k.out, extra,
                  {{"mode", Attribute::of_string(k.mode)},
                   {"coordinate_transformation_mode", Attribute::of_string(k.coord)},
                   {"nearest_mode", Attribute::of_string(k.nearest)}},
                  nonzero(k.in, 14));
  };
  return r;
}

// Split axis 1 of [2, 6, 3] into 2 + 4 (two graph outputs).
OpCase split_case() {
  TinyGraph t;
  auto x = t.input("x", {2, 6, 3});
  auto split = t.constant("split", ints({2, 4}));
  ir::ValueId y0 = t.g.add_value("y0", DataType::kFloat32), y1 = t.g.add_value("y1", DataType::kFloat32);
  t.g.value(y0).shape = sym({2, 2, 3});
  t.g.value(y1).shape = sym({2, 4, 3});
  ir::Node n;
  n.name = "split";
  n.op = OpKind::kSplit;
  n.opset = 17;
  n.inputs = {x, split};
  n.outputs = {y0, y1};
  n.attrs["axis"] = Attribute::of_int(1);
  t.g.add_node(std::move(n));
  t.g.outputs = {y0, y1};
  return {t.g, {nonzero({2, 6, 3}, 19)}};
}

// Two activations and a constant joined on `axis`.
OpCase concat_case(const Shape& a, const Shape& b, const Shape& c, int64_t axis, const Shape& out) {
  TinyGraph t;
  auto x = t.input("x", a);
  auto y = t.input("y", b);
  auto cat = t.node(OpKind::kConcat, "cat", {x, t.constant("c", nonzero(c, 42)), y}, out, {{"axis", Attribute::of_int(axis)}});
  t.g.outputs = {cat};
  return {t.g, {nonzero(a, 40), nonzero(b, 41)}};
}

}  // namespace

std::vector<Row> movement_rows() {
  std::vector<Row> rows = {
      transpose("4d_0231", {2, 3, 4, 5}, {0, 2, 3, 1}, {2, 4, 5, 3}),
      transpose("5d_41032", {2, 3, 4, 5, 6}, {4, 1, 0, 3, 2}, {6, 3, 2, 5, 4}),
      transpose("2d_default", {6, 5}, {}, {5, 6}),
      transpose("6d_reverse", {2, 3, 2, 3, 2, 3}, {5, 4, 3, 2, 1, 0}, {3, 2, 3, 2, 3, 2}),
      transpose("4d_0213", {2, 8, 4, 16}, {0, 2, 1, 3}, {2, 4, 8, 16}),
      slice("negative_step_clamped_end", {{4, 10, 6}, {1, 8, 0}, {4, -100, 6}, {0, 1, 2}, {2, -3, 1}, {2, 3, 6}}),
      slice("negative_start_huge_end", {{5, 7}, {-3}, {1000}, {1}, {}, {5, 3}}),
      slice("4d_two_axes", {{2, 3, 8, 8}, {0, 0}, {1, 8}, {0, -1}, {1, 2}, {1, 3, 8, 4}}),
      slice("full_reversal", {{6}, {5}, {-7}, {0}, {-1}, {6}}),
      gather("axis1_int64_negative", {3, 5, 4}, ints({2, -1, 0}), 1, {3, 3, 4}, 8),
      gather("scalar_int32_index", {5, 4}, scalar_index(-2, DataType::kInt32), 0, {4}, 9),
      gather("2d_indices_last_axis", {2, 3, 4, 6}, ints({5, 0, 1, 3}, DataType::kInt64, {2, 2}), -1, {2, 3, 4, 2, 2}, 10),
      pad("constant"),
      pad("reflect"),
      pad("edge"),
      resize("nearest_asymmetric_floor_up2", {"nearest", "asymmetric", "floor", {1, 3, 4, 5}, {1, 3, 8, 10}, true}),
      resize("nearest_half_pixel_down_sizes", {"nearest", "half_pixel", "round_prefer_floor", {2, 2, 5, 7}, {2, 2, 3, 4}, false}),
      resize("nearest_pytorch_half_pixel_ceil", {"nearest", "pytorch_half_pixel", "round_prefer_ceil", {1, 2, 3, 3}, {1, 2, 7, 5}, false}),
      resize("linear_half_pixel", {"linear", "half_pixel", "round_prefer_floor", {1, 3, 4, 5}, {1, 3, 7, 9}, false}),
      resize("linear_align_corners", {"linear", "align_corners", "round_prefer_floor", {2, 1, 4, 4}, {2, 1, 8, 8}, true}),
      resize("linear_pytorch_half_pixel_down", {"linear", "pytorch_half_pixel", "round_prefer_floor", {1, 2, 6, 6}, {1, 2, 3, 3}, true}),
      resize("nearest_tf_half_pixel_for_nn", {"nearest", "tf_half_pixel_for_nn", "ceil", {1, 1, 5, 5}, {1, 1, 10, 10}, true}),
  };
  {  // negative pads crop; 2-D
    Row r;
    r.name = "Pad_negative_2d";
    r.tol = kMoveTol;
    r.make = [] {
      return one_op(OpKind::kPad, {4, 7}, {4, 6},
                    [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("pads", ints({-1, 2, 1, -3}))}; }, {},
                    nonzero({4, 7}, 13));
    };
    rows.push_back(r);
  }
  {  // constant bool condition broadcast over rows, scalar b
    Row r;
    r.name = "Where_bool_const_broadcast";
    r.tol = kMoveTol;
    r.make = [] {
      TinyGraph t;
      auto x = t.input("x", {3, 5});
      Tensor cond(DataType::kBool, {1, 5});
      for (int i = 0; i < 5; ++i) cond.data<bool>()[i] = (i % 2) == 0;
      auto y = t.node(OpKind::kWhere, "where", {t.constant("cond", cond), x, t.constant("b", nonzero({}, 15))}, {3, 5});
      t.g.outputs = {y};
      return OpCase{t.g, {nonzero({3, 5}, 16)}};
    };
    rows.push_back(r);
  }
  {  // Expand [3, 1] -> [2, 3, 4]
    Row r;
    r.name = "Expand_3x1_to_2x3x4";
    r.tol = kMoveTol;
    r.make = [] {
      return one_op(OpKind::kExpand, {3, 1}, {2, 3, 4},
                    [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("shape", ints({2, 3, 4}))}; }, {},
                    nonzero({3, 1}, 17));
    };
    rows.push_back(r);
  }
  {  // Cast float32 -> float16 -> float32: the fp16 rounding is visible in fp32 plans too
    Row r;
    r.name = "Cast_fp32_fp16_round_trip";
    r.tol = kMoveTol;
    r.make = [] {
      TinyGraph t;
      auto x = t.input("x", {4, 9});
      auto h = t.node(OpKind::kCast, "to_half", {x}, {4, 9}, {{"to", Attribute::of_int(10)}});
      t.g.value(h).dtype = DataType::kFloat16;
      auto y = t.node(OpKind::kCast, "to_float", {h}, {4, 9}, {{"to", Attribute::of_int(1)}});
      t.g.outputs = {y};
      return OpCase{t.g, {nonzero({4, 9}, 18, 1.f, 100.f)}};
    };
    rows.push_back(r);
  }
  {  // CastLike float32 -> float16 (a float16 "like") -> float32 (a float32 "like"): Cast's rounding
    Row r;
    r.name = "CastLike_fp32_fp16_round_trip";
    r.tol = kMoveTol;
    r.expect_ops = {"CastLike"};
    r.make = [] {
      TinyGraph t;
      auto x = t.input("x", {4, 9});
      auto h = t.node(OpKind::kCastLike, "to_half", {x, t.constant("like16", Tensor(DataType::kFloat16, {1}))}, {4, 9});
      t.g.value(h).dtype = DataType::kFloat16;
      auto y = t.node(OpKind::kCastLike, "to_float", {h, t.constant("like32", scalar_f(0.f))}, {4, 9});
      t.g.outputs = {y};
      return OpCase{t.g, {nonzero({4, 9}, 19, 1.f, 100.f)}};
    };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Split_axis1_2_4";
    r.tol = kMoveTol;
    r.make = split_case;
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Concat_axis1_3d";
    r.tol = kMoveTol;
    r.make = [] { return concat_case({2, 3, 5}, {2, 4, 5}, {2, 1, 5}, 1, {2, 8, 5}); };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Concat_last_axis_2d";
    r.tol = kMoveTol;
    r.make = [] { return concat_case({3, 7}, {3, 2}, {3, 5}, -1, {3, 14}); };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Concat_channels_4d";
    r.tol = kMoveTol;
    r.make = [] { return concat_case({2, 3, 4, 4}, {2, 5, 4, 4}, {2, 2, 4, 4}, 1, {2, 10, 4, 4}); };
    rows.push_back(r);
  }
  {  // the views the CUDA path lowers as aliases, kept by opt level 0 (eliminate_noops drops some)
    Row r;
    r.name = "Views_unsqueeze_squeeze_identity_dropout_flatten_reshape";
    r.tol = kMoveTol;
    r.opt_level = 0;
    r.expect_ops = {"Unsqueeze", "Squeeze", "Identity", "Dropout", "Flatten", "Reshape"};
    r.make = [] {
      TinyGraph t;
      auto x = t.input("x", {2, 3, 4});
      auto a = t.node(OpKind::kRelu, "relu", {x}, {2, 3, 4});
      auto u = t.node(OpKind::kUnsqueeze, "unsqueeze", {a, t.constant("ax", ints({1}))}, {2, 1, 3, 4});
      auto q = t.node(OpKind::kSqueeze, "squeeze", {u, t.constant("sq_ax", ints({1}))}, {2, 3, 4});
      auto i = t.node(OpKind::kIdentity, "identity", {q}, {2, 3, 4});
      auto d = t.node(OpKind::kDropout, "dropout", {i}, {2, 3, 4});
      auto f = t.node(OpKind::kFlatten, "flatten", {d}, {2, 12}, {{"axis", Attribute::of_int(1)}});
      auto rs = t.node(OpKind::kReshape, "reshape", {f, t.constant("shape", ints({4, 6}))}, {4, 6});
      t.g.outputs = {t.node(OpKind::kNeg, "neg", {rs}, {4, 6})};
      return OpCase{t.g, {nonzero({2, 3, 4}, 43)}};
    };
    rows.push_back(r);
  }
  // DepthToSpace (DCR, CRD), SpaceToDepth and Tile with constant repeats: one strided copy each.
  for (const char* mode : {"DCR", "CRD"}) {
    Row r;
    r.name = std::string("DepthToSpace_") + mode;
    r.tol = kMoveTol;
    r.make = [mode] {
      return one_op(OpKind::kDepthToSpace, {2, 8, 3, 4}, {2, 2, 6, 8}, nullptr,
                    {{"blocksize", Attribute::of_int(2)}, {"mode", Attribute::of_string(mode)}},
                    random_tensor({2, 8, 3, 4}, 131));
    };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "SpaceToDepth_b2";
    r.tol = kMoveTol;
    r.make = [] {
      return one_op(OpKind::kSpaceToDepth, {2, 3, 4, 6}, {2, 12, 2, 3}, nullptr, {{"blocksize", Attribute::of_int(2)}},
                    random_tensor({2, 3, 4, 6}, 132));
    };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Tile_const_repeats";
    r.tol = kMoveTol;
    r.make = [] {
      return one_op(OpKind::kTile, {2, 3, 4}, {4, 3, 12},
                    [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("repeats", ints({2, 1, 3}))}; }, {},
                    random_tensor({2, 3, 4}, 133));
    };
    rows.push_back(r);
  }
  {  // inference Dropout with its mask output (all true, bool)
    Row r;
    r.name = "Dropout_with_mask";
    r.tol = kMoveTol;
    r.expect_ops = {"Dropout"};
    r.make = [] {
      TinyGraph t;
      auto x = t.input("x", {3, 7});
      const ir::ValueId y = t.node(OpKind::kDropout, "drop", {x}, {3, 7});
      const ir::ValueId mask = t.g.add_value("mask", DataType::kBool);
      t.g.value(mask).shape = sym({3, 7});
      ir::Node& d = t.g.nodes.back();
      d.outputs.push_back(mask);
      t.g.value(mask).producer = d.id;
      t.g.outputs = {y, mask};
      return OpCase{t.g, {random_tensor({3, 7}, 141)}};
    };
    rows.push_back(r);
  }
  return rows;
}

}  // namespace kiln::testing::op_table
