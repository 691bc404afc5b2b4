// N-D NN layer rows (issue 11 item 1, docs/decisions/0070): Conv / FusedConv through cuDNN's Nd
// path (1-D, 3-D, a runtime weight and bias, asymmetric pads), ConvTranspose (1-D to 3-D,
// output_padding, output_shape, SAME pads, groups, dilations), N-D MaxPool / AveragePool (SAME
// pads, dilations, ceil_mode with count_include_pad, MaxPool's Indices), BatchNormalization
// (inference and training mode),
// InstanceNormalization, LRN, MeanVarianceNormalization and Gemm with a runtime B / C.
// The cuDNN rows run fp32 and fp16 (cuDNN's legacy Nd kernels for bf16 are not relied on).
#include <tuple>

#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

// One operand of a single-node case: a graph input (is_input) or a constant; `name` empty =
// an omitted optional input.
struct Operand {
  std::string name;
  Tensor value;
  bool is_input = true;
};

OpCase node_case(OpKind op, const std::vector<Operand>& operands, const Shape& out,
                 std::map<std::string, Attribute> attrs, int opset = 17) {
  TinyGraph t;
  std::vector<ir::ValueId> ins;
  std::vector<Tensor> in;
  for (const Operand& o : operands) {
    if (o.name.empty()) {
      ins.push_back(ir::kNoValue);
    } else if (o.is_input) {
      ins.push_back(t.input(o.name, o.value.shape()));
      in.push_back(o.value);
    } else {
      ins.push_back(t.constant(o.name, o.value));
    }
  }
  t.g.outputs = {t.node(op, "y", ins, out, std::move(attrs))};
  t.g.nodes.back().opset = opset;
  if (opset > 17) t.g.opset_imports[""] = opset;
  return {t.g, in};
}

Attribute ints_attr(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

Row nd_row(const std::string& name, std::function<OpCase()> make, bool with_bf16 = false) {
  Row r;
  r.name = name;
  r.make = std::move(make);
  r.precisions = {Precision::kFp32, Precision::kFp16};
  if (with_bf16) r.precisions.push_back(Precision::kBf16);
  return r;
}

}  // namespace

std::vector<Row> nn_nd_rows() {
  std::vector<Row> rows;
  // ---- Conv (cuDNN Nd)
  // 1-D, groups 2, stride 2, asymmetric pads (1, 2): out = (10 + 3 - 3) / 2 + 1 = 6.
  rows.push_back(nd_row("ConvNd_1d_groups2_asym_pads", [] {
    return node_case(OpKind::kConv,
                     {{"x", random_tensor({2, 4, 10}, 501)},
                      {"w", random_tensor({6, 2, 3}, 502, -0.5f, 0.5f), false},
                      {"b", random_tensor({6}, 503), false}},
                     {2, 6, 6}, {{"group", Attribute::of_int(2)}, {"strides", ints_attr({2})}, {"pads", ints_attr({1, 2})}});
  }));
  // 3-D, pads 1, bias: out = 5, 6, 5.
  rows.push_back(nd_row("ConvNd_3d_pad1", [] {
    return node_case(OpKind::kConv,
                     {{"x", random_tensor({1, 4, 5, 6, 5}, 511)},
                      {"w", random_tensor({8, 4, 3, 3, 3}, 512, -0.3f, 0.3f), false},
                      {"b", random_tensor({8}, 513), false}},
                     {1, 8, 5, 6, 5}, {{"pads", ints_attr({1, 1, 1, 1, 1, 1})}});
  }));
  // 3-D with dilation 2 and stride 2, no bias: out = (7 - 5) / 2 + 1 = 2 per dim.
  rows.push_back(nd_row("ConvNd_3d_dilated_strided_nobias", [] {
    return node_case(OpKind::kConv,
                     {{"x", random_tensor({2, 3, 7, 7, 7}, 521)}, {"w", random_tensor({4, 3, 3, 3, 3}, 522, -0.3f, 0.3f), false}},
                     {2, 4, 2, 2, 2}, {{"dilations", ints_attr({2, 2, 2})}, {"strides", ints_attr({2, 2, 2})}});
  }));
  // 2-D with the weight and bias as graph inputs, SAME_UPPER, stride 2: out = ceil(7 / 2) = 4.
  rows.push_back(nd_row("ConvNd_2d_runtime_weight_same_upper", [] {
    return node_case(OpKind::kConv,
                     {{"x", random_tensor({2, 3, 7, 7}, 531)},
                      {"w", random_tensor({4, 3, 3, 3}, 532, -0.5f, 0.5f)},
                      {"b", random_tensor({4}, 533)}},
                     {2, 4, 4, 4}, {{"auto_pad", Attribute::of_string("SAME_UPPER")}, {"strides", ints_attr({2, 2})}});
  }));
  // 2-D constant weight, asymmetric pads [0, 1, 2, 0], dilation 2: out H = (6 + 2 - 5) + 1 = 4,
  // W = (6 + 1 - 5) + 1 = 3.
  rows.push_back(nd_row("ConvNd_2d_asym_pads_dilated", [] {
    return node_case(OpKind::kConv,
                     {{"x", random_tensor({1, 4, 6, 6}, 541)}, {"w", random_tensor({5, 4, 3, 3}, 542, -0.3f, 0.3f), false}},
                     {1, 5, 4, 3}, {{"pads", ints_attr({0, 1, 2, 0})}, {"dilations", ints_attr({2, 2})}});
  }));
  // 3-D conv + bias + Relu: fuse_conv_epilogue makes one FusedConv the Nd path runs.
  {
    Row r = nd_row("FusedConvNd_3d_relu", [] {
      TinyGraph t;
      auto x = t.input("x", {1, 4, 4, 5, 6});
      auto c = t.node(OpKind::kConv, "conv",
                      {x, t.constant("w", random_tensor({6, 4, 3, 3, 3}, 551, -0.3f, 0.3f)), t.constant("b", random_tensor({6}, 552))},
                      {1, 6, 4, 5, 6}, {{"pads", ints_attr({1, 1, 1, 1, 1, 1})}});
      t.g.outputs = {t.node(OpKind::kRelu, "relu", {c}, {1, 6, 4, 5, 6})};
      return OpCase{t.g, {random_tensor({1, 4, 4, 5, 6}, 553)}};
    });
    r.expect_ops = {"FusedConv"};
    rows.push_back(r);
  }
  // ---- ConvTranspose
  // 2-D, stride 2, pads [1, 0, 0, 1], output_padding 1, bias: out = 2*4 + 1 + 3 - 1 = 11 (H: pads 1+0),
  // W: 2*4 + 1 + 3 - 1 = 11 (pads 0+1).
  rows.push_back(nd_row("ConvTranspose_2d_stride2_pads_output_padding", [] {
    return node_case(OpKind::kConvTranspose,
                     {{"x", random_tensor({1, 4, 5, 5}, 561)},
                      {"w", random_tensor({4, 3, 3, 3}, 562, -0.5f, 0.5f), false},
                      {"b", random_tensor({3}, 563), false}},
                     {1, 3, 11, 11},
                     {{"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 0, 0, 1})}, {"output_padding", ints_attr({1, 1})}});
  }));
  // 1-D, groups 2, stride 3, dilation 2: K = 3 * 2 = 6, out = 3*5 + (3-1)*2 + 1 = 20.
  rows.push_back(nd_row("ConvTranspose_1d_groups2_dilated", [] {
    return node_case(OpKind::kConvTranspose,
                     {{"x", random_tensor({2, 4, 6}, 571)}, {"w", random_tensor({4, 3, 3}, 572, -0.5f, 0.5f), false}},
                     {2, 6, 20}, {{"group", Attribute::of_int(2)}, {"strides", ints_attr({3})}, {"dilations", ints_attr({2})}});
  }));
  // 3-D, runtime weight, SAME_LOWER, stride 2: out = in * stride.
  rows.push_back(nd_row("ConvTranspose_3d_runtime_weight_same_lower", [] {
    return node_case(OpKind::kConvTranspose,
                     {{"x", random_tensor({1, 2, 3, 4, 3}, 581)}, {"w", random_tensor({2, 3, 3, 3, 3}, 582, -0.5f, 0.5f)}},
                     {1, 3, 6, 8, 6}, {{"strides", ints_attr({2, 2, 2})}, {"auto_pad", Attribute::of_string("SAME_LOWER")}});
  }));
  // 2-D output_shape larger than the natural one (negative padding at the end): natural
  // 2*(4-1) + 3 = 9, asked 10.
  rows.push_back(nd_row("ConvTranspose_2d_output_shape", [] {
    return node_case(OpKind::kConvTranspose,
                     {{"x", random_tensor({1, 2, 4, 4}, 591)}, {"w", random_tensor({2, 2, 3, 3}, 592, -0.5f, 0.5f), false}},
                     {1, 2, 10, 10}, {{"strides", ints_attr({2, 2})}, {"output_shape", ints_attr({10, 10})}});
  }));
  // ---- pooling (Kiln's N-D kernel)
  // 1-D MaxPool, kernel 3, dilation 2, pads (2, 1), stride 2: span 5, out = (12 + 3 - 5) / 2 + 1 = 6.
  rows.push_back(nd_row("MaxPool_1d_dilated_asym_pads", [] {
    return node_case(OpKind::kMaxPool, {{"x", random_tensor({2, 3, 12}, 601)}}, {2, 3, 6},
                     {{"kernel_shape", ints_attr({3})}, {"dilations", ints_attr({2})}, {"pads", ints_attr({2, 1})},
                      {"strides", ints_attr({2})}});
  }, true));
  // 3-D MaxPool 2x2x2 stride 2.
  rows.push_back(nd_row("MaxPool_3d", [] {
    return node_case(OpKind::kMaxPool, {{"x", random_tensor({1, 3, 4, 6, 5}, 611)}}, {1, 3, 2, 3, 2},
                     {{"kernel_shape", ints_attr({2, 2, 2})}, {"strides", ints_attr({2, 2, 2})}});
  }, true));
  // 2-D AveragePool 3x3 SAME_LOWER stride 2: out ceil(7/2) = 4 (pads 2 before... split low-first).
  rows.push_back(nd_row("AveragePool_2d_same_lower", [] {
    return node_case(OpKind::kAveragePool, {{"x", random_tensor({2, 3, 7, 8}, 621)}}, {2, 3, 4, 4},
                     {{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})},
                      {"auto_pad", Attribute::of_string("SAME_LOWER")}});
  }, true));
  // 2-D AveragePool ceil_mode with count_include_pad: in 6, k 3, s 2, pads 1: padded 8,
  // ceil((8 - 3) / 2) + 1 = 4 (the last window starts at 6 - 1 = 5 < 6 + 1: kept).
  rows.push_back(nd_row("AveragePool_2d_ceil_count_include_pad", [] {
    return node_case(OpKind::kAveragePool, {{"x", random_tensor({1, 4, 6, 6}, 631)}}, {1, 4, 4, 4},
                     {{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 1, 1, 1})},
                      {"ceil_mode", Attribute::of_int(1)}, {"count_include_pad", Attribute::of_int(1)}});
  }, true));
  // 3-D AveragePool with pads, count_include_pad off.
  rows.push_back(nd_row("AveragePool_3d_pads", [] {
    return node_case(OpKind::kAveragePool, {{"x", random_tensor({1, 2, 5, 5, 4}, 641)}}, {1, 2, 3, 3, 2},
                     {{"kernel_shape", ints_attr({3, 3, 3})}, {"strides", ints_attr({2, 2, 2})},
                      {"pads", ints_attr({1, 1, 0, 1, 1, 1})}});
  }, true));
  // MaxPool 2x2 stride 2 with its int64 Indices (row-major flat index into x).
  {
    Row r = nd_row("MaxPool_2d_indices", [] {
      TinyGraph t;
      auto x = t.input("x", {2, 3, 4, 6});
      auto y = t.node(OpKind::kMaxPool, "y", {x}, {2, 3, 2, 3},
                      {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
      ir::ValueId idx = t.g.add_value("indices", DataType::kInt64);
      t.g.value(idx).shape = sym({2, 3, 2, 3});
      t.g.nodes.back().outputs.push_back(idx);
      t.g.outputs = {y, idx};
      return OpCase{t.g, {random_tensor({2, 3, 4, 6}, 651)}};
    }, true);
    // Indices compare exactly: 16-bit rounding of X may tie two window values the float32
    // reference tells apart.
    r.precisions = {Precision::kFp32};
    rows.push_back(r);
  }
  // MaxPool 3x3 stride 2 pads 1 with column-major Indices (storage_order = 1).
  {
    Row r = nd_row("MaxPool_2d_indices_col_major", [] {
      TinyGraph t;
      auto x = t.input("x", {1, 2, 5, 6});
      auto y = t.node(OpKind::kMaxPool, "y", {x}, {1, 2, 3, 3},
                      {{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 1, 1, 1})},
                       {"storage_order", Attribute::of_int(1)}});
      ir::ValueId idx = t.g.add_value("indices", DataType::kInt64);
      t.g.value(idx).shape = sym({1, 2, 3, 3});
      t.g.nodes.back().outputs.push_back(idx);
      t.g.outputs = {y, idx};
      return OpCase{t.g, {random_tensor({1, 2, 5, 6}, 655)}};
    }, true);
    // Indices compare exactly: 16-bit rounding of X may tie two window values the float32
    // reference tells apart.
    r.precisions = {Precision::kFp32};
    rows.push_back(r);
  }
  // ---- GridSample (Kiln's kernel): each mode with a padding mode; the grid reaches past [-1, 1].
  for (const auto& [mode, pad, align] : std::vector<std::tuple<std::string, std::string, int>>{
           {"bilinear", "zeros", 0}, {"nearest", "border", 1}, {"bicubic", "reflection", 0}}) {
    const std::string m = mode, p = pad;
    const int a = align;
    Row r = nd_row("GridSample_" + m + "_" + p + (a ? "_align_corners" : ""), [m, p, a] {
      OpCase c = node_case(OpKind::kGridSample,
                           {{"x", random_tensor({2, 3, 5, 6}, 741)}, {"grid", random_tensor({2, 4, 7, 2}, 742, -1.3f, 1.3f)}},
                           {2, 3, 4, 7},
                           {{"mode", Attribute::of_string(m)}, {"padding_mode", Attribute::of_string(p)},
                            {"align_corners", Attribute::of_int(a)}},
                           16);
      return c;
    }, true);
    // nearest picks a whole pixel: a grid coordinate rounded to 16 bits near a pixel boundary
    // picks the neighbour (measured on the H200: fp16 / bf16 differ by whole values), so its
    // rows compare in fp32 only; the interpolating modes change smoothly and keep all three.
    if (m == "nearest") r.precisions = {Precision::kFp32};
    rows.push_back(r);
  }
  // ---- normalizations (Kiln's kernels)
  // BatchNormalization (inference) of a rank-3 input, constant parameters (var > 0).
  rows.push_back(nd_row("BatchNormalization_3d_const", [] {
    return node_case(OpKind::kBatchNormalization,
                     {{"x", random_tensor({2, 5, 7}, 661)},
                      {"scale", random_tensor({5}, 662), false},
                      {"b", random_tensor({5}, 663), false},
                      {"mean", random_tensor({5}, 664), false},
                      {"var", random_tensor({5}, 665, 0.5f, 1.5f), false}},
                     {2, 5, 7}, {{"epsilon", Attribute::of_float(1e-3f)}});
  }, true));
  // BatchNormalization with every parameter a graph input (ONNX's node tests), rank 4.
  rows.push_back(nd_row("BatchNormalization_runtime_params", [] {
    return node_case(OpKind::kBatchNormalization,
                     {{"x", random_tensor({2, 3, 4, 5}, 671)},
                      {"scale", random_tensor({3}, 672)},
                      {"b", random_tensor({3}, 673)},
                      {"mean", random_tensor({3}, 674)},
                      {"var", random_tensor({3}, 675, 0.5f, 1.5f)}},
                     {2, 3, 4, 5}, {});
  }, true));
  // Training mode (opset 15): batch statistics, and the running mean / variance as outputs 1, 2.
  rows.push_back(nd_row("BatchNormalization_training_mode", [] {
    OpCase c = node_case(OpKind::kBatchNormalization,
                         {{"x", random_tensor({3, 4, 2, 5}, 676, -1.f, 2.f)},
                          {"scale", random_tensor({4}, 677)},
                          {"b", random_tensor({4}, 678)},
                          {"mean", random_tensor({4}, 679)},
                          {"var", random_tensor({4}, 680, 0.5f, 1.5f)}},
                         {3, 4, 2, 5},
                         {{"training_mode", Attribute::of_int(1)}, {"momentum", Attribute::of_float(0.8f)},
                          {"epsilon", Attribute::of_float(1e-2f)}},
                         15);
    for (const char* name : {"running_mean", "running_var"}) {
      ir::ValueId v = c.graph.add_value(name, DataType::kFloat32);
      c.graph.value(v).shape = sym({4});
      c.graph.nodes.back().outputs.push_back(v);
      c.graph.outputs.push_back(v);
    }
    return c;
  }, true));
  rows.push_back(nd_row("InstanceNormalization", [] {
    return node_case(OpKind::kInstanceNormalization,
                     {{"x", random_tensor({2, 3, 5, 7}, 681, -2.f, 3.f)},
                      {"scale", random_tensor({3}, 682)},
                      {"b", random_tensor({3}, 683)}},
                     {2, 3, 5, 7}, {{"epsilon", Attribute::of_float(1e-2f)}});
  }, true));
  rows.push_back(nd_row("LRN_size3", [] {
    return node_case(OpKind::kLRN, {{"x", random_tensor({2, 6, 3, 4}, 691)}}, {2, 6, 3, 4},
                     {{"size", Attribute::of_int(3)}, {"alpha", Attribute::of_float(2e-2f)},
                      {"beta", Attribute::of_float(0.75f)}, {"bias", Attribute::of_float(2.f)}});
  }, true));
  // Default axes [0, 2, 3]: non-contiguous groups (one per channel).
  rows.push_back(nd_row("MeanVarianceNormalization_default_axes", [] {
    return node_case(OpKind::kMeanVarianceNormalization, {{"x", random_tensor({3, 4, 5, 2}, 701, -1.f, 2.f)}},
                     {3, 4, 5, 2}, {});
  }, true));
  // ---- Gemm with operands as stored (cuBLASLt, runtime B, transA / transB, alpha / beta, C broadcast)
  rows.push_back(nd_row("Gemm_runtime_b_transA_transB_alpha_beta", [] {
    return node_case(OpKind::kGemm,
                     {{"a", random_tensor({6, 4}, 711)}, {"b", random_tensor({5, 6}, 712)}, {"c", random_tensor({4, 1}, 713)}},
                     {4, 5},
                     {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)},
                      {"alpha", Attribute::of_float(0.5f)}, {"beta", Attribute::of_float(-2.f)}});
  }, true));
  rows.push_back(nd_row("Gemm_runtime_b_no_c", [] {
    return node_case(OpKind::kGemm, {{"a", random_tensor({3, 7}, 721)}, {"b", random_tensor({7, 5}, 722)}}, {3, 5}, {});
  }, true));
  // Constant B with a matrix C (the constant path takes only a vector of N).
  rows.push_back(nd_row("Gemm_const_b_matrix_c", [] {
    return node_case(OpKind::kGemm,
                     {{"a", random_tensor({3, 7}, 731)}, {"b", random_tensor({7, 5}, 732), false},
                      {"c", random_tensor({3, 5}, 733), false}},
                     {3, 5}, {{"beta", Attribute::of_float(0.25f)}});
  }, true));
  // The 2-D convs and pools of the N-D path get NCHW in 16-bit plans too (ir::
  // tensor_core_layout_preference): no Reformat layer around them.
  for (Row& r : rows)
    if (r.name == "ConvNd_2d_runtime_weight_same_upper" || r.name == "ConvNd_2d_asym_pads_dilated" ||
        r.name == "MaxPool_2d_indices")
      r.absent_ops = {"Reformat"};
  return rows;
}

}  // namespace kiln::testing::op_table
