// requantize_quant_conv (docs/decisions/0081): a QuantConv whose output only QuantConvs read as
// their X, all with one (x_scale, x_zero_point, 8-bit type), writes that 8-bit tensor. Each tiny
// Q/DQ conv graph is fused (fuse_qdq_conv), then run on the CPU reference with and without the
// pass: the outputs must be equal bit for bit (the producer's QuantizeLinear is the one the reader
// applied before), and the 8-bit values and attributes are asserted. Each blocking case (a float
// reader, a residual read, a graph output, two scales, a conv left unfused) keeps float.
// At plan level, residual_cnn_model quantized by kiln::quantize_onnx gives the same CPU output
// with the pass on and off (INT8 and FP8).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/numerics.h"
#include "io/npz.h"
#include "kiln/quantize.h"
#include "pass_test_util.h"
#include "plan/onnx_test_models.h"
#include "plan/quant_test_util.h"

namespace kiln {
namespace {

using testing::count_op;
using testing::qdq_scalar;
using testing::random_tensor;
using testing::TinyGraph;

struct Net : TinyGraph {
  DataType type = DataType::kInt8;
  int id = 0;
  std::string next(const std::string& what) { return what + std::to_string(id++); }
  // x -> Q(s, z) -> DQ(s, z).
  ir::ValueId fq(ir::ValueId x, const Shape& shape, float s, int z) {
    const ir::ValueId sv = constant(next("act_s"), qdq_scalar(DataType::kFloat32, s));
    const ir::ValueId zv = constant(next("act_z"), qdq_scalar(type, static_cast<float>(z)));
    const ir::ValueId q = node(ir::OpKind::kQuantizeLinear, next("act_q"), {x, sv, zv}, shape);
    g.value(q).dtype = type;
    return node(ir::OpKind::kDequantizeLinear, next("act_dq"), {q, sv, zv}, shape);
  }
  // DQ(8-bit weight [K, C, R, S] from a formula, one scale per K on axis 0).
  ir::ValueId weight(const Shape& shape) {
    Tensor w(type, shape);
    const int salt = id;
    for (int64_t i = 0; i < w.numel(); ++i)
      w.data<int8_t>()[i] = type == DataType::kInt8
                                ? static_cast<int8_t>((i * 37 + salt * 11) % 201 - 100)
                                : static_cast<int8_t>(((i * 29 + salt) % 0x38) | ((i % 3) ? 0 : 0x80));
    const int64_t k = shape[0];
    Tensor s(DataType::kFloat32, {k});
    for (int64_t i = 0; i < k; ++i) s.data<float>()[i] = (type == DataType::kInt8 ? 0.004f : 0.02f) * static_cast<float>(i % 5 + 1);
    Tensor z(type, {k});
    return node(ir::OpKind::kDequantizeLinear, next("w_dq"),
                {constant(next("w"), std::move(w)), constant(next("w_s"), s), constant(next("w_z"), z)}, shape,
                {{"axis", ir::Attribute::of_int(0)}});
  }
  // Conv(DQ(Q(x)), DQ(W), b) with K output channels, kernel r (pad r / 2), Relu when asked.
  ir::ValueId conv(ir::ValueId x, const Shape& xs, int64_t k, int64_t r, float s, int z, bool relu,
                   const std::string& name) {
    const ir::ValueId d = fq(x, xs, s, z);
    Tensor b = random_tensor({k}, static_cast<uint32_t>(id), -0.5f, 0.5f);
    const int64_t p = r / 2;
    const Shape ys = {xs[0], k, xs[2], xs[3]};
    ir::ValueId c = node(ir::OpKind::kConv, name, {d, weight({k, xs[1], r, r}), constant(next("b"), std::move(b))}, ys,
                         {{"pads", ir::Attribute::of_ints({p, p, p, p})}});
    return relu ? node(ir::OpKind::kRelu, name + "_relu", {c}, ys) : c;
  }
};

const ir::Node* named(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.name == name) return &n;
  return nullptr;
}

// fuse_qdq_conv, then a copy with requantize_quant_conv; both run on the CPU reference and must
// agree bit for bit. Returns the requantized graph.
ir::Graph fuse_and_requantize(const ir::Graph& g, const std::vector<Tensor>& in, int quant_convs) {
  ir::Graph fused = g;
  const passes::PassOptions o = testing::reference_pass_options();
  EXPECT_TRUE(passes::fuse_qdq_conv(fused, o).ok());
  EXPECT_EQ(count_op(fused, ir::OpKind::kQuantConv), quant_convs);
  ir::Graph re = fused;
  EXPECT_TRUE(passes::requantize_quant_conv(re, o).ok());
  EXPECT_TRUE(re.topo_sort().ok());
  auto a = interpret(fused, in);
  auto b = interpret(re, in);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (a.ok() && b.ok()) {
    EXPECT_EQ(a->size(), b->size());
    for (size_t k = 0; k < a->size() && k < b->size(); ++k) {
      EXPECT_EQ((*a)[k].dtype(), DataType::kFloat32);
      EXPECT_EQ((*b)[k].dtype(), DataType::kFloat32);
      if ((*a)[k].shape() != (*b)[k].shape() || (*a)[k].nbytes() != (*b)[k].nbytes()) {
        ADD_FAILURE() << "output " << k << ": shapes differ";
        continue;
      }
      EXPECT_EQ(std::memcmp((*a)[k].raw(), (*b)[k].raw(), (*a)[k].nbytes()), 0) << "output " << k << " differs";
    }
  }
  return re;
}

bool eight_bit_out(const ir::Graph& g, const std::string& name, DataType t) {
  const ir::Node* n = named(g, name);
  EXPECT_NE(n, nullptr) << name;
  if (!n) return false;
  const bool attrs = n->has_attr("y_scale");
  const bool typed = g.value(n->outputs[0]).dtype == t;
  EXPECT_EQ(attrs, typed) << name << ": attributes and output dtype disagree";
  return attrs && typed;
}

// conv1 (Relu) -> conv2 (3x3) -> conv3 (1x1, zero point -5 for INT8) -> graph output: conv1 and
// conv2 write 8 bits with their reader's scale and zero point; conv3 (a graph output) keeps float.
TEST(RequantizeQuantConv, ChainWritesEightBitsBetweenLayers) {
  for (DataType t : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    SCOPED_TRACE(dtype_name(t));
    const bool fp8 = t == DataType::kFloat8E4M3FN;
    Net n;
    n.type = t;
    const Shape s16 = {2, 16, 5, 5}, s32 = {2, 32, 5, 5};
    const ir::ValueId x = n.input("x", s16);
    const ir::ValueId a = n.conv(x, s16, 32, 1, 0.02f, 3 * !fp8, true, "conv1");
    const ir::ValueId b = n.conv(a, s32, 16, 3, 0.05f, 0, false, "conv2");
    n.g.outputs = {n.conv(b, s16, 32, 1, 0.03f, fp8 ? 0 : -5, true, "conv3")};
    const ir::Graph re = fuse_and_requantize(n.g, {random_tensor(s16, 7, -2.f, 2.f)}, 3);
    EXPECT_TRUE(eight_bit_out(re, "conv1", t));
    EXPECT_TRUE(eight_bit_out(re, "conv2", t));
    EXPECT_FALSE(eight_bit_out(re, "conv3", t));
    EXPECT_EQ(named(re, "conv3")->has_attr("y_type"), false);
    EXPECT_FLOAT_EQ(named(re, "conv1")->attr_float("y_scale", 0), 0.05f);
    EXPECT_FLOAT_EQ(named(re, "conv2")->attr_float("y_scale", 0), 0.03f);
    EXPECT_EQ(named(re, "conv2")->attr_int("y_zero_point", 99), fp8 ? 0 : -5);
    EXPECT_EQ(named(re, "conv1")->attr_string("y_type", ""), dtype_name(t));
    // The readers take the 8-bit values as their X.
    EXPECT_EQ(re.value(named(re, "conv2")->inputs[0]).dtype, t);
    EXPECT_EQ(re.value(named(re, "conv3")->inputs[0]).dtype, t);
    EXPECT_EQ(re.value(named(re, "conv3")->outputs[0]).dtype, DataType::kFloat32);
  }
}

// A ResNet bottleneck after a stem QuantConv: h = stem(x) feeds conv1 (X) and the block's residual
// Add (fused into conv3 as its residual input), so h keeps float; conv1 -> conv2 -> conv3 carry 8
// bits; the block output feeds the next QuantConv only, so conv3 writes 8 bits too.
TEST(RequantizeQuantConv, ResidualBlockKeepsTheBlockInputFloat) {
  for (DataType t : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    SCOPED_TRACE(dtype_name(t));
    Net n;
    n.type = t;
    const Shape s16 = {1, 16, 6, 6}, s32 = {1, 32, 6, 6};
    const ir::ValueId x = n.input("x", s16);
    const ir::ValueId h = n.conv(x, s16, 32, 1, 0.02f, 0, true, "stem");
    const ir::ValueId a = n.conv(h, s32, 16, 1, 0.04f, 0, true, "conv1");
    const ir::ValueId b = n.conv(a, s16, 16, 3, 0.05f, 0, true, "conv2");
    const ir::ValueId c = n.conv(b, s16, 32, 1, 0.06f, 0, false, "conv3");
    const ir::ValueId sum = n.node(ir::OpKind::kAdd, "add", {c, h}, s32);
    const ir::ValueId out = n.node(ir::OpKind::kRelu, "relu", {sum}, s32);
    n.g.outputs = {n.conv(out, s32, 16, 1, 0.07f, 0, false, "head")};
    const ir::Graph re = fuse_and_requantize(n.g, {random_tensor(s16, 9, -2.f, 2.f)}, 5);
    ASSERT_EQ(named(re, "conv3")->inputs.size(), 5u);  // the residual was fused
    EXPECT_FALSE(eight_bit_out(re, "stem", t));
    EXPECT_TRUE(eight_bit_out(re, "conv1", t));
    EXPECT_TRUE(eight_bit_out(re, "conv2", t));
    EXPECT_TRUE(eight_bit_out(re, "conv3", t));
    EXPECT_FALSE(eight_bit_out(re, "head", t));
    EXPECT_EQ(re.value(named(re, "conv3")->inputs[4]).dtype, DataType::kFloat32);
  }
}

// Each blocking case, one by one: the producer keeps float and the outputs are unchanged.
TEST(RequantizeQuantConv, EachBlockedCaseKeepsFloat) {
  enum Case { kTwoScales, kFloatReader, kGraphOutput, kUnfusedReader, kResidualOfReader, kOneFusedOneNot };
  for (Case cs : {kTwoScales, kFloatReader, kGraphOutput, kUnfusedReader, kResidualOfReader, kOneFusedOneNot}) {
    SCOPED_TRACE(static_cast<int>(cs));
    Net n;
    const Shape s16 = {1, 16, 4, 4}, s32 = {1, 32, 4, 4};
    const ir::ValueId x = n.input("x", s16);
    const ir::ValueId y = n.conv(x, s16, 32, 1, 0.02f, 0, true, "producer");
    int fused = 2;
    switch (cs) {
      case kTwoScales:  // two QuantConv readers with different scales
        n.g.outputs = {n.conv(y, s32, 16, 1, 0.04f, 0, false, "r1"), n.conv(y, s32, 16, 1, 0.05f, 0, false, "r2")};
        fused = 3;
        break;
      case kFloatReader:  // a QuantConv and a MaxPool read y
        n.g.outputs = {n.conv(y, s32, 16, 1, 0.04f, 0, false, "r1"),
                       n.node(ir::OpKind::kMaxPool, "pool", {y}, {1, 32, 2, 2},
                              {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"strides", ir::Attribute::of_ints({2, 2})}})};
        break;
      case kGraphOutput:  // y is also a graph output
        n.g.outputs = {n.conv(y, s32, 16, 1, 0.04f, 0, false, "r1"), y};
        break;
      case kUnfusedReader:  // the reader's conv does not fuse (K = 6, not a multiple of 4)
        n.g.outputs = {n.conv(y, s32, 6, 1, 0.04f, 0, false, "r1")};
        fused = 1;
        break;
      case kResidualOfReader: {  // the reader reads y as X and as its residual
        const ir::ValueId c = n.conv(y, s32, 32, 1, 0.04f, 0, false, "r1");
        n.g.outputs = {n.node(ir::OpKind::kAdd, "add", {c, y}, s32)};
        break;
      }
      case kOneFusedOneNot:  // two readers with one scale, one of them left unfused (K = 6)
        n.g.outputs = {n.conv(y, s32, 16, 1, 0.04f, 0, false, "r1"), n.conv(y, s32, 6, 1, 0.04f, 0, false, "r2")};
        break;
    }
    const ir::Graph re = fuse_and_requantize(n.g, {random_tensor(s16, 11, -2.f, 2.f)}, fused);
    EXPECT_FALSE(eight_bit_out(re, "producer", DataType::kInt8));
    EXPECT_EQ(re.value(named(re, "producer")->outputs[0]).dtype, DataType::kFloat32);
  }
}

// Two readers with the same scale and zero point: the producer writes their 8-bit input once.
TEST(RequantizeQuantConv, TwoReadersOfOneScaleShareTheEightBitTensor) {
  Net n;
  const Shape s16 = {1, 16, 4, 4}, s32 = {1, 32, 4, 4};
  const ir::ValueId x = n.input("x", s16);
  const ir::ValueId y = n.conv(x, s16, 32, 1, 0.02f, 0, true, "producer");
  n.g.outputs = {n.conv(y, s32, 16, 1, 0.04f, 2, false, "r1"), n.conv(y, s32, 16, 1, 0.04f, 2, true, "r2")};
  const ir::Graph re = fuse_and_requantize(n.g, {random_tensor(s16, 12, -2.f, 2.f)}, 3);
  EXPECT_TRUE(eight_bit_out(re, "producer", DataType::kInt8));
  EXPECT_EQ(named(re, "producer")->attr_int("y_zero_point", 0), 2);
}

// The CPU kernel's requantization saturates and rounds half to even like QuantizeLinear: a
// QuantConv with y_scale equal to its readers' writes the codes Q(y) computed separately.
TEST(RequantizeQuantConv, CpuOutputCodesAreQuantizeLinearOfTheFloatOutput) {
  for (DataType t : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    SCOPED_TRACE(dtype_name(t));
    Net n;
    n.type = t;
    const Shape s16 = {1, 16, 4, 4}, s32 = {1, 32, 4, 4};
    const ir::ValueId x = n.input("x", s16);
    // A scale so small that many outputs saturate (int8 beyond +-127, fp8 beyond 448).
    const float ys = t == DataType::kInt8 ? 0.002f : 0.0005f;
    const ir::ValueId y = n.conv(x, s16, 32, 1, 0.02f, 0, false, "producer");
    n.g.outputs = {n.conv(y, s32, 16, 1, ys, t == DataType::kInt8 ? 1 : 0, false, "r1")};
    ir::Graph fused = n.g;
    const passes::PassOptions o = testing::reference_pass_options();
    ASSERT_TRUE(passes::fuse_qdq_conv(fused, o).ok());
    ir::Graph re = fused;
    ASSERT_TRUE(passes::requantize_quant_conv(re, o).ok());
    ASSERT_TRUE(eight_bit_out(re, "producer", t));
    // Expose the producer's output in both graphs.
    const ir::ValueId pf = named(fused, "producer")->outputs[0], pq = named(re, "producer")->outputs[0];
    fused.outputs = {pf};
    re.outputs = {pq};
    const Tensor in = random_tensor(s16, 13, -3.f, 3.f);
    auto f = interpret(fused, {in});
    auto q = interpret(re, {in});
    ASSERT_TRUE(f.ok() && q.ok());
    ASSERT_EQ((*q)[0].dtype(), t);
    int saturated = 0;
    for (int64_t i = 0; i < (*f)[0].numel(); ++i) {
      const float v = (*f)[0].data<float>()[i] / ys;
      if (t == DataType::kInt8) {
        const float r = std::min(127.f, std::max(-128.f, std::nearbyint(v) + 1.f));
        saturated += std::fabs(std::nearbyint(v) + 1.f) > 127.f;
        ASSERT_EQ((*q)[0].data<int8_t>()[i], static_cast<int8_t>(r)) << i;
      } else {
        saturated += std::fabs(v) > 448.f;
        ASSERT_EQ((*q)[0].data<uint8_t>()[i], float_to_fp8e4m3fn(v, true)) << i;
      }
    }
    EXPECT_GT(saturated, 0);
  }
}

// Plan level: the residual CNN (conv1 -> Relu -> conv2 (+ conv3 residual) -> Relu) quantized by
// kiln::quantize_onnx builds with conv1 writing 8 bits, and the CPU output is bit for bit the one
// of the plan built without the pass.
TEST(RequantizeQuantConv, PlansWithAndWithoutThePassAgreeOnTheCpu) {
  const std::string dir = testing::make_temp_dir("requantize_quant_conv");
  ASSERT_FALSE(dir.empty());
  for (QuantFormat f : {QuantFormat::kInt8, QuantFormat::kFp8E4M3}) {
    SCOPED_TRACE(quant_format_name(f));
    const std::string src = testing::residual_cnn_model(f == QuantFormat::kFp8E4M3 ? 19 : 17).save(dir + "/cnn.onnx");
    ASSERT_TRUE(io::write_npz(dir + "/calib.npz", {{"x", random_tensor({12, 16, 8, 8}, 21, -2.f, 2.f)}}).ok());
    QuantizeConfig qc;
    qc.data = dir + "/calib.npz";
    qc.format = f;
    auto bytes = quantize_onnx(src, qc);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    const std::string qpath = dir + "/cnn.qdq.onnx";
    {
      std::ofstream o(qpath, std::ios::binary);
      o << *bytes;
    }
    const Tensor x = random_tensor({2, 16, 8, 8}, 22, -2.5f, 2.5f);
    BuilderConfig on;
    on.quant_conv = true;
    BuilderConfig off = on;
    off.disabled_passes = {"requantize_quant_conv"};
    std::vector<std::string> on_ops, off_ops;
    const Tensor a = testing::run_cpu_plan(qpath, on, x, &on_ops);
    const Tensor b = testing::run_cpu_plan(qpath, off, x, &off_ops);
    ASSERT_TRUE(a.defined() && b.defined());
    EXPECT_EQ(std::count(on_ops.begin(), on_ops.end(), "QuantConv"), 3);
    EXPECT_EQ(on_ops, off_ops);
    ASSERT_EQ(a.shape(), b.shape());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
    // The plan says which layer writes 8 bits (kiln inspect's quantization column).
    BuilderConfig c = on;
    c.target = TargetDevice::kCpu;
    OptimizationProfile p;
    ASSERT_TRUE(p.set_dimensions("x", x.shape(), x.shape(), x.shape()).ok());
    c.profiles = {p};
    auto plan = Builder::build(qpath, c);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    auto e = Runtime::deserialize_engine(*plan);
    ASSERT_TRUE(e.ok());
    int eight_out = 0, eight_in = 0;
    for (const LayerInfo& l : (*e)->layers()) {
      if (l.op != "QuantConv") continue;
      eight_out += l.quantization.find("; y ") != std::string::npos;
      eight_in += l.quantization.find("(8-bit input)") != std::string::npos;
    }
    EXPECT_EQ(eight_out, 1);
    EXPECT_EQ(eight_in, 1);
  }
}

}  // namespace
}  // namespace kiln
