// Tests of the reduce family's CPU kernels for what ONNX 1.12's conformance data covers thinly:
// opset-18 axes inputs, noop_with_empty_axes, empty reduced sets, fp16/int/bool dtypes, stable
// LogSumExp, tie-breaking in ArgMax/TopK, CumSum flags, loss options, and clean errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "core/numerics.h"

namespace kiln::cpu {
namespace {

// One node run through its registered CPU kernel.
struct NodeRun {
  ir::Node node;
  std::vector<Tensor> outs;

  NodeRun(ir::OpKind op, int opset, int num_outputs = 1) {
    node.name = std::string(1, 'n');  // not = "n": GCC 12 warns falsely (-Wrestrict) on that
    node.op = op;
    node.opset = opset;
    for (int i = 0; i < num_outputs; ++i) node.outputs.push_back(i);
  }
  NodeRun& ints(const std::string& k, std::vector<int64_t> v) {
    ir::Attribute a;
    a.kind = ir::Attribute::Kind::kInts;
    a.ints = std::move(v);
    node.attrs[k] = a;
    return *this;
  }
  NodeRun& i(const std::string& k, int64_t v) {
    ir::Attribute a;
    a.kind = ir::Attribute::Kind::kInt;
    a.i = v;
    node.attrs[k] = a;
    return *this;
  }
  NodeRun& s(const std::string& k, std::string v) {
    ir::Attribute a;
    a.kind = ir::Attribute::Kind::kString;
    a.s = std::move(v);
    node.attrs[k] = a;
    return *this;
  }
  Status run(std::vector<const Tensor*> ins) {
    outs.assign(node.outputs.size(), Tensor());
    KernelFn fn = KernelRegistry::get().find(node.op);
    if (!fn) return unsupported("no kernel");
    KernelContext ctx(node, std::move(ins), &outs, nullptr);
    return fn(ctx);
  }
};

Tensor floats(Shape shape, std::vector<float> v) {
  Tensor t(DataType::kFloat32, std::move(shape));
  for (size_t k = 0; k < v.size(); ++k) t.data<float>()[k] = v[k];
  return t;
}

Tensor int64s(Shape shape, std::vector<int64_t> v) {
  Tensor t(DataType::kInt64, std::move(shape));
  for (size_t k = 0; k < v.size(); ++k) t.data<int64_t>()[k] = v[k];
  return t;
}

std::vector<double> values(const Tensor& t) { return tensor_to_doubles(t); }

// Naive reference: loops over every input index and maps it to its output index.
std::vector<double> naive_reduce(const std::string& op, const Tensor& x, const std::vector<bool>& mask) {
  const Shape& s = x.shape();
  int64_t out_n = 1;
  for (size_t d = 0; d < s.size(); ++d)
    if (!mask[d]) out_n *= s[d];
  std::vector<std::vector<double>> groups(static_cast<size_t>(out_n));
  const std::vector<double> xv = values(x);
  for (int64_t flat = 0; flat < x.numel(); ++flat) {
    int64_t rem = flat, out = 0, mul = 1;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      const int64_t idx = rem % s[d];
      rem /= s[d];
      if (!mask[d]) {
        out += idx * mul;
        mul *= s[d];
      }
    }
    groups[out].push_back(xv[flat]);
  }
  std::vector<double> r;
  for (const auto& g : groups) {
    double sum = 0, prod = 1, mx = -INFINITY, mn = INFINITY, l1 = 0, sq = 0, se = 0;
    for (double v : g) {
      sum += v;
      prod *= v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      l1 += std::fabs(v);
      sq += v * v;
      se += std::exp(v);
    }
    if (op == "sum") r.push_back(sum);
    if (op == "mean") r.push_back(sum / g.size());
    if (op == "max") r.push_back(mx);
    if (op == "min") r.push_back(mn);
    if (op == "prod") r.push_back(prod);
    if (op == "l1") r.push_back(l1);
    if (op == "l2") r.push_back(std::sqrt(sq));
    if (op == "logsum") r.push_back(std::log(sum));
    if (op == "logsumexp") r.push_back(std::log(se));
    if (op == "sumsquare") r.push_back(sq);
  }
  return r;
}

TEST(ReduceKernels, AllOpsMatchNaiveOnRandomData) {
  const std::vector<std::pair<std::string, ir::OpKind>> ops = {
      {"sum", ir::OpKind::kReduceSum},       {"mean", ir::OpKind::kReduceMean},
      {"max", ir::OpKind::kReduceMax},       {"min", ir::OpKind::kReduceMin},
      {"prod", ir::OpKind::kReduceProd},     {"l1", ir::OpKind::kReduceL1},
      {"l2", ir::OpKind::kReduceL2},         {"logsum", ir::OpKind::kReduceLogSum},
      {"logsumexp", ir::OpKind::kReduceLogSumExp}, {"sumsquare", ir::OpKind::kReduceSumSquare}};
  const std::vector<std::vector<int64_t>> axes_sets = {{0}, {1}, {2}, {3}, {0, 2}, {1, 3}, {-1, 0}, {0, 1, 2, 3}, {1, 2}};
  std::mt19937 rng(7);
  // Positive values keep LogSum defined; the range keeps Prod in float range.
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  Tensor x(DataType::kFloat32, {3, 4, 2, 5});
  for (int64_t k = 0; k < x.numel(); ++k) x.data<float>()[k] = dist(rng);
  for (const auto& [name, op] : ops) {
    for (const auto& axes : axes_sets) {
      for (int keep = 0; keep <= 1; ++keep) {
        std::vector<bool> mask(4, false);
        for (int64_t a : axes) mask[a < 0 ? a + 4 : a] = true;
        const std::vector<double> want = naive_reduce(name, x, mask);
        // Opset 13 takes axes as an attribute (input for ReduceSum); opset 18 as an input.
        for (int opset : {13, 18}) {
          NodeRun r(op, opset);
          r.i("keepdims", keep);
          Tensor axes_t = int64s({static_cast<int64_t>(axes.size())}, axes);
          const bool as_input = opset == 18 || op == ir::OpKind::kReduceSum;
          if (!as_input) r.ints("axes", axes);
          ASSERT_TRUE(r.run({&x, as_input ? &axes_t : nullptr}).ok()) << name;
          Shape want_shape;
          for (int d = 0; d < 4; ++d)
            if (!mask[d]) want_shape.push_back(x.dim(d));
            else if (keep) want_shape.push_back(1);
          EXPECT_EQ(r.outs[0].shape(), want_shape) << name;
          const std::vector<double> got = values(r.outs[0]);
          ASSERT_EQ(got.size(), want.size());
          for (size_t k = 0; k < got.size(); ++k)
            EXPECT_NEAR(got[k], want[k], 1e-4 * std::max(1.0, std::fabs(want[k]))) << name << " opset " << opset;
        }
      }
    }
  }
}

TEST(ReduceKernels, EmptyReducedSetGivesIdentity) {
  Tensor x(DataType::kFloat32, {2, 0, 3});
  Tensor axes = int64s({1}, {1});
  auto run = [&](ir::OpKind op) {
    NodeRun r(op, 18);
    r.i("keepdims", 0);
    EXPECT_TRUE(r.run({&x, &axes}).ok());
    EXPECT_EQ(r.outs[0].shape(), (Shape{2, 3}));
    return values(r.outs[0])[0];
  };
  EXPECT_EQ(run(ir::OpKind::kReduceSum), 0);
  EXPECT_EQ(run(ir::OpKind::kReduceProd), 1);
  EXPECT_EQ(run(ir::OpKind::kReduceMax), -INFINITY);
  EXPECT_EQ(run(ir::OpKind::kReduceMin), INFINITY);
  EXPECT_EQ(run(ir::OpKind::kReduceLogSum), -INFINITY);
  EXPECT_EQ(run(ir::OpKind::kReduceLogSumExp), -INFINITY);
  EXPECT_EQ(run(ir::OpKind::kReduceL2), 0);
  EXPECT_TRUE(std::isnan(run(ir::OpKind::kReduceMean)));

  Tensor xi(DataType::kInt32, {0, 2});
  Tensor axes0 = int64s({1}, {0});
  NodeRun r(ir::OpKind::kReduceMax, 18);
  ASSERT_TRUE(r.run({&xi, &axes0}).ok());
  EXPECT_EQ(r.outs[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(r.outs[0].data<int32_t>()[1], std::numeric_limits<int32_t>::min());
}

TEST(ReduceKernels, NoopWithEmptyAxesKeepsShapeAndAppliesElementwiseSteps) {
  Tensor x = floats({2, 2}, {1, -2, 3, -4});
  Tensor empty(DataType::kInt64, {0});
  NodeRun sum(ir::OpKind::kReduceSum, 13);
  sum.i("noop_with_empty_axes", 1);
  ASSERT_TRUE(sum.run({&x, &empty}).ok());
  EXPECT_EQ(values(sum.outs[0]), (std::vector<double>{1, -2, 3, -4}));
  NodeRun sq(ir::OpKind::kReduceSumSquare, 18);
  sq.i("noop_with_empty_axes", 1);
  ASSERT_TRUE(sq.run({&x, nullptr}).ok());
  EXPECT_EQ(values(sq.outs[0]), (std::vector<double>{1, 4, 9, 16}));
  // Without noop, empty axes reduce everything.
  NodeRun all(ir::OpKind::kReduceSum, 13);
  ASSERT_TRUE(all.run({&x, &empty}).ok());
  EXPECT_EQ(all.outs[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(values(all.outs[0])[0], -2);
}

TEST(ReduceKernels, Float16AccumulatesInFloat) {
  // 4096 ones: an fp16 accumulator would stall at 2048 (2048 + 1 rounds back to 2048).
  Tensor x(DataType::kFloat16, {4096});
  for (int64_t k = 0; k < x.numel(); ++k) x.data<Float16>()[k] = Float16{float_to_fp16(1.0f)};
  NodeRun r(ir::OpKind::kReduceSum, 13);
  r.i("keepdims", 0);
  ASSERT_TRUE(r.run({&x, nullptr}).ok());
  EXPECT_EQ(values(r.outs[0])[0], 4096);
}

TEST(ReduceKernels, IntegerAndBoolExtremes) {
  Tensor x(DataType::kInt8, {2, 3});
  const int8_t v[] = {5, -128, 7, 127, 0, -3};
  for (int k = 0; k < 6; ++k) x.data<int8_t>()[k] = v[k];
  NodeRun mx(ir::OpKind::kReduceMax, 13), mn(ir::OpKind::kReduceMin, 13);
  mx.ints("axes", {1});
  mn.ints("axes", {0}).i("keepdims", 0);
  ASSERT_TRUE(mx.run({&x}).ok());
  ASSERT_TRUE(mn.run({&x}).ok());
  EXPECT_EQ(values(mx.outs[0]), (std::vector<double>{7, 127}));
  EXPECT_EQ(values(mn.outs[0]), (std::vector<double>{5, -128, -3}));

  Tensor b(DataType::kBool, {2, 2});
  b.data<uint8_t>()[1] = 1;
  NodeRun bmax(ir::OpKind::kReduceMax, 20), bmin(ir::OpKind::kReduceMin, 20);
  Tensor axes = int64s({1}, {1});
  ASSERT_TRUE(bmax.run({&b, &axes}).ok());
  ASSERT_TRUE(bmin.run({&b, &axes}).ok());
  EXPECT_EQ(bmax.outs[0].dtype(), DataType::kBool);
  EXPECT_EQ(values(bmax.outs[0]), (std::vector<double>{1, 0}));
  EXPECT_EQ(values(bmin.outs[0]), (std::vector<double>{0, 0}));
}

TEST(ReduceKernels, LogSumExpIsStableForLargeInputs) {
  Tensor x = floats({3}, {1000, 1000, -INFINITY});
  NodeRun r(ir::OpKind::kReduceLogSumExp, 13);
  ASSERT_TRUE(r.run({&x}).ok());
  EXPECT_NEAR(values(r.outs[0])[0], 1000 + std::log(2.0), 1e-3);
}

TEST(ReduceKernels, BadAxesFailCleanly) {
  Tensor x = floats({2, 2}, {1, 2, 3, 4});
  NodeRun out_of_range(ir::OpKind::kReduceMean, 13);
  out_of_range.ints("axes", {2});
  Status s = out_of_range.run({&x});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("node 'n'"), std::string::npos);
  NodeRun repeated(ir::OpKind::kReduceMean, 18);
  Tensor axes = int64s({2}, {1, -1});
  EXPECT_EQ(repeated.run({&x, &axes}).code(), StatusCode::kInvalidArgument);
  Tensor float_axes = floats({1}, {0});
  EXPECT_EQ(repeated.run({&x, &float_axes}).code(), StatusCode::kInvalidArgument);
}

TEST(ArgTopKKernels, TiesAndSelectLastIndex) {
  Tensor x = floats({2, 4}, {3, 1, 3, 2, 0, 0, -1, 0});
  NodeRun first(ir::OpKind::kArgMax, 13), last(ir::OpKind::kArgMax, 13), lo(ir::OpKind::kArgMin, 13);
  first.i("axis", 1).i("keepdims", 0);
  last.i("axis", -1).i("select_last_index", 1);
  lo.i("axis", 0);
  ASSERT_TRUE(first.run({&x}).ok());
  ASSERT_TRUE(last.run({&x}).ok());
  ASSERT_TRUE(lo.run({&x}).ok());
  EXPECT_EQ(values(first.outs[0]), (std::vector<double>{0, 0}));
  EXPECT_EQ(last.outs[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(values(last.outs[0]), (std::vector<double>{2, 3}));
  EXPECT_EQ(values(lo.outs[0]), (std::vector<double>{1, 1, 1, 1}));

  Tensor k = int64s({1}, {3});
  NodeRun top(ir::OpKind::kTopK, 11, 2);
  ASSERT_TRUE(top.run({&x, &k}).ok());
  EXPECT_EQ(values(top.outs[0]), (std::vector<double>{3, 3, 2, 0, 0, 0}));
  EXPECT_EQ(values(top.outs[1]), (std::vector<double>{0, 2, 3, 0, 1, 3}));
  NodeRun small(ir::OpKind::kTopK, 1, 2);
  small.i("k", 2).i("axis", 0).i("largest", 0);
  ASSERT_TRUE(small.run({&x}).ok());  // opset 1: k as an attribute
  EXPECT_EQ(values(small.outs[0]), (std::vector<double>{0, 0, -1, 0, 3, 1, 3, 2}));
  EXPECT_EQ(values(small.outs[1]), (std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0}));
  Tensor big_k = int64s({1}, {5});
  EXPECT_EQ(top.run({&x, &big_k}).code(), StatusCode::kInvalidArgument);
}

TEST(ArgTopKKernels, CumSumExclusiveReverse) {
  Tensor x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor axis = int64s({}, {1});
  NodeRun r(ir::OpKind::kCumSum, 14);
  r.i("exclusive", 1).i("reverse", 1);
  ASSERT_TRUE(r.run({&x, &axis}).ok());
  EXPECT_EQ(values(r.outs[0]), (std::vector<double>{5, 3, 0, 11, 6, 0}));
  Tensor axis0(DataType::kInt32, {1});
  NodeRun down(ir::OpKind::kCumSum, 14);
  ASSERT_TRUE(down.run({&x, &axis0}).ok());
  EXPECT_EQ(values(down.outs[0]), (std::vector<double>{1, 2, 3, 5, 7, 9}));
}

TEST(LossKernels, NllMeanWithWeightAndIgnoreIndex) {
  // input [N=3, C=2], targets {1, 0, 1}; ignore_index 0 drops row 1.
  Tensor x = floats({3, 2}, {-0.5f, -1.0f, -2.0f, -3.0f, -0.25f, -4.0f});
  Tensor t = int64s({3}, {1, 0, 1});
  Tensor w = floats({2}, {0.5f, 2.0f});
  NodeRun r(ir::OpKind::kNegativeLogLikelihoodLoss, 13);
  r.i("ignore_index", 0);
  ASSERT_TRUE(r.run({&x, &t, &w}).ok());
  // (1.0*2 + 4.0*2) / (2 + 2): the mean divides by the kept rows' total weight.
  EXPECT_EQ(r.outs[0].shape(), Shape{});
  EXPECT_NEAR(values(r.outs[0])[0], 2.5, 1e-6);

  Tensor bad = int64s({3}, {1, 2, 0});
  NodeRun b(ir::OpKind::kNegativeLogLikelihoodLoss, 13);
  Status s = b.run({&x, &bad});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  Tensor wrong_shape = int64s({2}, {0, 1});
  EXPECT_EQ(b.run({&x, &wrong_shape}).code(), StatusCode::kInvalidArgument);
}

TEST(LossKernels, SoftmaxCrossEntropyMatchesLogSoftmax) {
  Tensor x = floats({2, 3}, {1, 2, 3, 0.5f, -1, 2});
  Tensor t = int64s({2}, {2, 0});
  NodeRun r(ir::OpKind::kSoftmaxCrossEntropyLoss, 13, 2);
  r.s("reduction", "none");
  ASSERT_TRUE(r.run({&x, &t}).ok());
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double lse1 = std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0));
  const std::vector<double> loss = values(r.outs[0]), lp = values(r.outs[1]);
  EXPECT_NEAR(loss[0], lse0 - 3, 1e-5);
  EXPECT_NEAR(loss[1], lse1 - 0.5, 1e-5);
  EXPECT_NEAR(lp[4], -1 - lse1, 1e-5);
}

}  // namespace
}  // namespace kiln::cpu
