// Tests for the control family's CPU kernels on hand-built graphs: Loop/Scan plumbing (bodies
// that only route values, so no other op family is needed), a bidirectional batch-major GRU
// against PyTorch, DFT/MaxRoiPool against hand/numpy values, and clean errors on bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/interpreter.h"

namespace kiln {
namespace {


// Runs one node of kind `op`; an undefined Tensor in `inputs` is an omitted optional input.
StatusOr<std::vector<Tensor>> run_node(ir::OpKind op, int opset, const std::vector<Tensor>& inputs, int n_out,
                                       std::map<std::string, ir::Attribute> attrs, ir::Graph* g_out = nullptr) {
  ir::Graph g;
  g.name = "test";
  ir::Node n;
  n.name = "n0";
  n.op = op;
  n.opset = opset;
  std::vector<Tensor> fed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) { n.inputs.push_back(ir::kNoValue); continue; }
    ir::ValueId v = g.add_value("in" + std::to_string(i), inputs[i].dtype());
    g.inputs.push_back(v);
    fed.push_back(inputs[i]);
    n.inputs.push_back(v);
  }
  for (int k = 0; k < n_out; ++k) n.outputs.push_back(g.add_value("out" + std::to_string(k)));
  n.attrs = std::move(attrs);
  g.outputs = n.outputs;
  g.add_node(std::move(n));
  if (g_out) *g_out = g;
  return interpret(g, fed);
}

Tensor floats(Shape s, std::vector<float> v) {
  Tensor t(DataType::kFloat32, std::move(s));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}
Tensor int64s(Shape s, std::vector<int64_t> v) {
  Tensor t(DataType::kInt64, std::move(s));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// A body graph whose outputs are its own inputs (by index) or outer-scope names.
std::shared_ptr<ir::Graph> routing_body(const std::vector<DataType>& in_types, const std::vector<int>& out_from_input,
                                        const std::vector<std::string>& outer_outputs = {}) {
  auto b = std::make_shared<ir::Graph>();
  b->name = "body";
  for (size_t i = 0; i < in_types.size(); ++i) b->inputs.push_back(b->add_value("b_in" + std::to_string(i), in_types[i]));
  for (int i : out_from_input) b->outputs.push_back(b->inputs[i]);
  for (const std::string& name : outer_outputs) {
    ir::ValueId v = b->add_value(name);
    b->outer_refs.push_back(v);
    b->outputs.push_back(v);
  }
  return b;
}

TEST(ControlLoop, CarriesStateAndStacksIterationNumbersAndOuterValues) {
  // body(iter, cond, v) -> (cond, v, iter, w) where w is an outer-scope value.
  auto body = routing_body({DataType::kInt64, DataType::kBool, DataType::kFloat32}, {1, 2, 0}, {"in0"});
  Tensor m = Tensor::scalar<int64_t>(DataType::kInt64, 4);
  Tensor v = floats({2}, {1.5f, -2.5f});
  // The outer value "in0" is the Loop's own M input (named in0 by run_node).
  auto r = run_node(ir::OpKind::kLoop, 13, {m, Tensor(), v}, 3, {{"body", ir::Attribute::of_graph(body)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& out = r.value();
  EXPECT_TRUE(out[0].bit_equal(v));
  ASSERT_EQ(out[1].shape(), (Shape{4}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[1].data<int64_t>()[i], i);
  ASSERT_EQ(out[2].shape(), (Shape{4}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[2].data<int64_t>()[i], 4);
}

TEST(ControlLoop, FalseConditionRunsZeroIterations) {
  auto body = routing_body({DataType::kInt64, DataType::kBool, DataType::kFloat32}, {1, 2, 0});
  body->value(body->inputs[0]).shape = ir::SymShape{};
  Tensor cond = Tensor::scalar<uint8_t>(DataType::kBool, 0);
  Tensor v = floats({2}, {1.f, 2.f});
  auto r = run_node(ir::OpKind::kLoop, 11, {Tensor::scalar<int64_t>(DataType::kInt64, 5), cond, v}, 2, {{"body", ir::Attribute::of_graph(body)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r.value()[0].bit_equal(v));
  EXPECT_EQ(r.value()[1].shape(), (Shape{0}));
  EXPECT_EQ(r.value()[1].dtype(), DataType::kInt64);
}

TEST(ControlScan, InputAndOutputAxesAndDirections) {
  // body(state, x) -> (state, x): the scan output re-stacks the scanned slices.
  auto body = routing_body({DataType::kFloat32, DataType::kFloat32}, {0, 1});
  body->value(body->inputs[1]).shape = ir::SymShape{ir::Dim::known(2)};
  Tensor st = floats({1}, {7.f});
  Tensor x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto attrs = [&](int64_t out_dir) {
    return std::map<std::string, ir::Attribute>{{"body", ir::Attribute::of_graph(body)},      {"num_scan_inputs", ir::Attribute::of_int(1)},
                                                {"scan_input_axes", ir::Attribute::of_ints({-1})}, {"scan_input_directions", ir::Attribute::of_ints({1})},
                                                {"scan_output_axes", ir::Attribute::of_ints({-1})}, {"scan_output_directions", ir::Attribute::of_ints({out_dir})}};
  };
  auto rev = run_node(ir::OpKind::kScan, 11, {st, x}, 2, attrs(0));
  ASSERT_TRUE(rev.ok()) << rev.status().message();
  EXPECT_TRUE(rev.value()[0].bit_equal(st));
  EXPECT_TRUE(rev.value()[1].bit_equal(floats({2, 3}, {3, 2, 1, 6, 5, 4})));
  auto same = run_node(ir::OpKind::kScan, 11, {st, x}, 2, attrs(1));
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_TRUE(same.value()[1].bit_equal(x));
}

TEST(ControlScan, Opset8BatchesAndPadsShortSequences) {
  auto body = routing_body({DataType::kFloat32, DataType::kFloat32}, {1, 1});
  Tensor lens = int64s({2}, {3, 1});
  Tensor st = floats({2, 2}, {0, 0, 0, 0});
  Tensor x = floats({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto r = run_node(ir::OpKind::kScan, 8, {lens, st, x}, 2,
                    {{"body", ir::Attribute::of_graph(body)}, {"num_scan_inputs", ir::Attribute::of_int(1)}, {"directions", ir::Attribute::of_ints({1})}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Reverse scan: the last state is the first row; batch 1 only sees its first row.
  EXPECT_TRUE(r.value()[0].bit_equal(floats({2, 2}, {1, 2, 7, 8})));
  EXPECT_TRUE(r.value()[1].bit_equal(floats({2, 3, 2}, {5, 6, 3, 4, 1, 2, 7, 8, 0, 0, 0, 0})));
}

// Inputs are sin(0.37 k + phase) * 0.8; expected values from torch.nn.GRU (which computes
// ONNX's linear_before_reset=1 form) in float64, gates permuted from ONNX z,r,h to r,z,n.
TEST(ControlRnn, BidirectionalBatchMajorGruMatchesTorch) {
  const int64_t S = 3, B = 2, I = 2, H = 3;
  auto wave = [](Shape s, double phase) {
    Tensor t(DataType::kFloat64, std::move(s));
    for (int64_t k = 0; k < t.numel(); ++k) t.data<double>()[k] = std::sin(0.37 * static_cast<double>(k) + phase) * 0.8;
    return t;
  };
  Tensor X = wave({B, S, I}, 0.1), W = wave({2, 3 * H, I}, 0.7), R = wave({2, 3 * H, H}, 1.3);
  Tensor Bias = wave({2, 6 * H}, 2.1), h0 = wave({B, 2, H}, 2.9);
  auto r = run_node(ir::OpKind::kGRU, 14, {X, W, R, Bias, Tensor(), h0}, 2,
                    {{"hidden_size", ir::Attribute::of_int(H)}, {"direction", ir::Attribute::of_string("bidirectional")},
                     {"linear_before_reset", ir::Attribute::of_int(1)}, {"layout", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<double> y = {
      -0.148030841, -0.208941521, -0.314278816, -0.610653846, -0.608156108, -0.597979517, -0.437768508, -0.310836286,
      -0.238847582, -0.638472924, -0.652329314, -0.347069536, -0.652196026, -0.402118478, -0.183922352, -0.625384012,
      -0.707802916, -0.478665705, -0.862452237, -0.569502763, -0.287271655, -0.268581369, -0.282714318, -0.081627467,
      -0.793607545, -0.443030694, -0.279978381, -0.134179355, -0.205723314, -0.157349068, -0.317602317, -0.198133062,
      -0.298824672, 0.077219444,  -0.026576341, 0.046872823};
  const std::vector<double> yh = {-0.652196026, -0.402118478, -0.183922352, -0.610653846, -0.608156108, -0.597979517,
                                  -0.317602317, -0.198133062, -0.298824672, -0.268581369, -0.282714318, -0.081627467};
  ASSERT_EQ(r.value()[0].shape(), (Shape{B, S, 2, H}));
  ASSERT_EQ(r.value()[1].shape(), (Shape{B, 2, H}));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(r.value()[0].data<double>()[i], y[i], 1e-8) << i;
  for (size_t i = 0; i < yh.size(); ++i) EXPECT_NEAR(r.value()[1].data<double>()[i], yh[i], 1e-8) << i;
}

TEST(ControlSignal, OnesidedDftWithPaddingMatchesNumpyRfft) {
  Tensor x = floats({1, 5, 1}, {1, 2, 3, 4, 5});
  auto r = run_node(ir::OpKind::kDFT, 17, {x, int64s({}, {8})}, 1, {{"onesided", ir::Attribute::of_int(1)}, {"axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // numpy.fft.rfft([1, 2, 3, 4, 5], 8)
  const std::vector<float> want = {15, 0, -5.41421356f, -7.24264069f, 3, 2, -2.58578644f, -1.24264069f, 3, 0};
  ASSERT_EQ(r.value()[0].shape(), (Shape{1, 5, 2}));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.value()[0].data<float>()[i], want[i], 1e-5) << i;
}

TEST(ControlVision, MaxRoiPoolQuadrants) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>((i * 7) % 16);  // a permutation of 0..15
  Tensor x = floats({1, 1, 4, 4}, v);
  // The second roi, scaled by 0.5, is the bottom-right 2x2 block pooled into 2x2 single pixels.
  Tensor rois = floats({2, 5}, {0, 0, 0, 6, 6, 0, 4, 4, 6, 6});
  auto r = run_node(ir::OpKind::kMaxRoiPool, 1, {x, rois}, 1, {{"pooled_shape", ir::Attribute::of_ints({2, 2})}, {"spatial_scale", [] {
                                                                   ir::Attribute a;
                                                                   a.kind = ir::Attribute::Kind::kFloat;
                                                                   a.f = 0.5f;
                                                                   return a;
                                                                 }()}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Rows of x: [0 7 14 5] [12 3 10 1] [8 15 6 13] [4 11 2 9].
  EXPECT_TRUE(r.value()[0].bit_equal(floats({2, 1, 2, 2}, {12, 14, 15, 13, 6, 13, 2, 9})));
}

TEST(ControlErrors, BadInputsGiveCleanErrors) {
  auto nms = run_node(ir::OpKind::kNonMaxSuppression, 11, {floats({2, 4}, std::vector<float>(8, 1.f)), floats({1, 1, 2}, {1, 1})}, 1, {});
  ASSERT_FALSE(nms.ok());
  EXPECT_NE(nms.status().message().find("boxes must be"), std::string::npos) << nms.status().message();

  Tensor x = floats({1, 1, 2}, {1, 2});
  auto lstm = run_node(ir::OpKind::kLSTM, 14, {x, floats({1, 8, 3}, std::vector<float>(24, 0.1f)), floats({1, 8, 2}, std::vector<float>(16, 0.1f))},
                       1, {{"hidden_size", ir::Attribute::of_int(2)}});
  ASSERT_FALSE(lstm.ok());
  EXPECT_NE(lstm.status().message().find("W has shape"), std::string::npos) << lstm.status().message();

  auto body = routing_body({DataType::kInt64, DataType::kBool}, {1});
  auto loop = run_node(ir::OpKind::kLoop, 13, {Tensor::scalar<int64_t>(DataType::kInt64, 2), Tensor(), x}, 1, {{"body", ir::Attribute::of_graph(body)}});
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.status().message().find("body takes 2 inputs"), std::string::npos) << loop.status().message();

  auto scan = run_node(ir::OpKind::kScan, 11, {x}, 1,
                       {{"body", ir::Attribute::of_graph(routing_body({DataType::kFloat32}, {0}))}, {"num_scan_inputs", ir::Attribute::of_int(1)},
                        {"scan_input_axes", ir::Attribute::of_ints({3})}});
  ASSERT_FALSE(scan.ok());
  EXPECT_NE(scan.status().message().find("out of range"), std::string::npos) << scan.status().message();
}

}  // namespace
}  // namespace kiln
