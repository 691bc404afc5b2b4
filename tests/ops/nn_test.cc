// Tests of the CPU nn kernels against independent naive computations on random data, for the
// cases the ONNX conformance data covers thinly (groups + dilation + asymmetric pads, 3-D,
// transposed conv with groups, broadcast MatMul, Einsum ellipses/diagonals, legacy Softmax),
// plus clean errors on bad input. NnPerf.* (disabled) is a timing check, not a test.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <random>

#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {
namespace {

using Attrs = std::map<std::string, ir::Attribute>;


StatusOr<std::vector<Tensor>> run_op(ir::OpKind op, int opset, const std::vector<Tensor>& inputs, Attrs attrs = {},
                                     int n_out = 1) {
  ir::Node node;
  node.name = "t";
  node.op = op;
  node.opset = opset;
  node.attrs = std::move(attrs);
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? static_cast<ir::ValueId>(i) : ir::kNoValue);
    ptrs.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }
  for (int i = 0; i < n_out; ++i) node.outputs.push_back(100 + i);
  std::vector<Tensor> outs(n_out);
  KernelContext ctx(node, ptrs, &outs, nullptr);
  KernelFn fn = KernelRegistry::get().find(op);
  if (!fn) return unsupported("no kernel");
  Status s = fn(ctx);
  if (!s.ok()) return s;
  return outs;
}

Tensor random_tensor(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Tensor t(DataType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

void expect_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  const std::vector<double> g = tensor_to_doubles(got);
  double nonzero = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
    nonzero += std::fabs(want[i]);
  }
  EXPECT_GT(nonzero, 0);  // a reference of all zeros would prove nothing
}

// Naive 2-D convolution (NCHW), the spec's formula written directly.
std::vector<double> naive_conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group, int64_t sh,
                                 int64_t sw, int64_t dh, int64_t dw, int64_t pt, int64_t pl, int64_t oh, int64_t ow) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3), m = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t cg = c / group, mg = m / group;
  std::vector<double> y(n * m * oh * ow, 0);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b ? b->data<float>()[oc] : 0;
          const int64_t g = oc / mg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v) {
                const int64_t yy = i * sh + u * dh - pt, xx = j * sw + v * dw - pl;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                acc += static_cast<double>(xp[((bn * c + g * cg + ic) * h + yy) * wd + xx]) *
                       wp[((oc * cg + ic) * kh + u) * kw + v];
              }
          y[((bn * m + oc) * oh + i) * ow + j] = acc;
        }
  return y;
}

TEST(NnConv, GroupsDilationStridesAsymmetricPadsMatchNaive) {
  const Tensor x = random_tensor({2, 6, 9, 11}, 1), w = random_tensor({4, 3, 3, 2}, 2), b = random_tensor({4}, 3);
  auto r = run_op(ir::OpKind::kConv, 11, {x, w, b},
                  {{"group", ir::Attribute::of_int(2)}, {"strides", ir::Attribute::of_ints({2, 1})}, {"dilations", ir::Attribute::of_ints({1, 3})}, {"pads", ir::Attribute::of_ints({1, 0, 2, 2})}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int64_t oh = (9 + 3 - 3) / 2 + 1, ow = (11 + 2 - 4) / 1 + 1;
  ASSERT_EQ((*r)[0].shape(), (Shape{2, 4, oh, ow}));
  expect_close((*r)[0], naive_conv2d(x, w, &b, 2, 2, 1, 1, 3, 1, 0, oh, ow));
}

TEST(NnConv, DepthwiseAndPointwisePathsMatchNaive) {
  const Tensor x = random_tensor({1, 4, 7, 7}, 4);
  const Tensor wd = random_tensor({8, 1, 3, 3}, 5);  // depthwise, channel multiplier 2
  auto r = run_op(ir::OpKind::kConv, 11, {x, wd, Tensor()},
                  {{"group", ir::Attribute::of_int(4)}, {"auto_pad", ir::Attribute::of_string("SAME_UPPER")}, {"strides", ir::Attribute::of_ints({2, 2})}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // SAME_UPPER, stride 2 on 7: out 4, total pad 2 -> 1 before, 1 after.
  expect_close((*r)[0], naive_conv2d(x, wd, nullptr, 4, 2, 2, 1, 1, 1, 1, 4, 4));
  const Tensor wp = random_tensor({5, 4, 1, 1}, 6);
  auto p = run_op(ir::OpKind::kConv, 11, {x, wp});
  ASSERT_TRUE(p.ok());
  expect_close((*p)[0], naive_conv2d(x, wp, nullptr, 1, 1, 1, 1, 1, 0, 0, 7, 7));
}

TEST(NnConv, Float16ComputesInFloat32) {
  const Tensor x = random_tensor({1, 2, 5, 5}, 7), w = random_tensor({3, 2, 3, 3}, 8);
  auto xh = cast_tensor(x, DataType::kFloat16), wh = cast_tensor(w, DataType::kFloat16);
  ASSERT_TRUE(xh.ok() && wh.ok());
  auto r = run_op(ir::OpKind::kConv, 11, {*xh, *wh}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].dtype(), DataType::kFloat16);
  auto xr = cast_tensor(*xh, DataType::kFloat32), wr = cast_tensor(*wh, DataType::kFloat32);
  expect_close((*r)[0], naive_conv2d(*xr, *wr, nullptr, 1, 1, 1, 1, 1, 1, 1, 5, 5), 2e-3);
}

TEST(NnConvTranspose, GroupsStridesDilationOutputPaddingMatchNaive) {
  const Tensor x = random_tensor({1, 4, 3, 4}, 9), w = random_tensor({4, 3, 2, 3}, 10);  // C=4, M/g=3, g=2
  auto r = run_op(ir::OpKind::kConvTranspose, 11, {x, w},
                  {{"group", ir::Attribute::of_int(2)}, {"strides", ir::Attribute::of_ints({2, 3})}, {"dilations", ir::Attribute::of_ints({2, 1})},
                   {"pads", ir::Attribute::of_ints({1, 0, 0, 1})}, {"output_padding", ir::Attribute::of_ints({1, 0})}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int64_t oh = 2 * 2 + 1 + (2 - 1) * 2 + 1 - 1, ow = 3 * 3 + 0 + 3 - 1;
  ASSERT_EQ((*r)[0].shape(), (Shape{1, 6, oh, ow}));
  // Scatter form: every x[c, i, j] * w[c, m, u, v] lands on (i*s + u*d - pad).
  std::vector<double> y(6 * oh * ow, 0);
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t mm = 0; mm < 3; ++mm)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j)
          for (int64_t u = 0; u < 2; ++u)
            for (int64_t v = 0; v < 3; ++v) {
              const int64_t yy = i * 2 + u * 2 - 1, xx = j * 3 + v - 0;
              if (yy < 0 || yy >= oh || xx < 0 || xx >= ow) continue;
              const int64_t oc = (c / 2) * 3 + mm;
              y[(oc * oh + yy) * ow + xx] +=
                  static_cast<double>(x.data<float>()[(c * 3 + i) * 4 + j]) * w.data<float>()[((c * 3 + mm) * 2 + u) * 3 + v];
            }
  expect_close((*r)[0], y);
}

TEST(NnMatMul, BroadcastBatchesAndVectors) {
  const Tensor a = random_tensor({2, 1, 3, 4}, 11), b = random_tensor({3, 4, 5}, 12);
  auto r = run_op(ir::OpKind::kMatMul, 13, {a, b});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ((*r)[0].shape(), (Shape{2, 3, 3, 5}));
  std::vector<double> y;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 5; ++j) {
          double acc = 0;
          for (int k = 0; k < 4; ++k)
            acc += static_cast<double>(a.data<float>()[(p * 3 + i) * 4 + k]) * b.data<float>()[(q * 4 + k) * 5 + j];
          y.push_back(acc);
        }
  expect_close((*r)[0], y);
  // 1-D A is promoted to [1, K] against each batch of B, and the 1 dropped: [4] x [3,4,5] -> [3,5].
  const Tensor v = random_tensor({4}, 13);
  auto mv = run_op(ir::OpKind::kMatMul, 13, {v, b});
  ASSERT_TRUE(mv.ok());
  ASSERT_EQ((*mv)[0].shape(), (Shape{3, 5}));
  std::vector<double> z;
  for (int q = 0; q < 3; ++q)
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += static_cast<double>(v.data<float>()[k]) * b.data<float>()[(q * 4 + k) * 5 + j];
      z.push_back(acc);
    }
  expect_close((*mv)[0], z);
}

TEST(NnGemm, TransposesAlphaBetaAndRowBroadcastC) {
  const Tensor a = random_tensor({4, 3}, 14), b = random_tensor({5, 4}, 15), c = random_tensor({5}, 16);
  ir::Attribute alpha, beta;
  alpha.kind = beta.kind = ir::Attribute::Kind::kFloat;
  alpha.f = 0.5f;
  beta.f = 2.0f;
  auto r = run_op(ir::OpKind::kGemm, 13, {a, b, c},
                  {{"transA", ir::Attribute::of_int(1)}, {"transB", ir::Attribute::of_int(1)}, {"alpha", alpha}, {"beta", beta}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> y;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += static_cast<double>(a.data<float>()[k * 3 + i]) * b.data<float>()[j * 4 + k];
      y.push_back(0.5 * acc + 2.0 * c.data<float>()[j]);
    }
  expect_close((*r)[0], y);
}

TEST(NnSoftmax, LegacyOpsetCoercesTo2D) {
  const Tensor x = random_tensor({2, 3, 4}, 17);
  auto r = run_op(ir::OpKind::kSoftmax, 11, {x});  // axis 1: rows of 12
  ASSERT_TRUE(r.ok());
  std::vector<double> want;
  for (int row = 0; row < 2; ++row) {
    double s = 0;
    for (int i = 0; i < 12; ++i) s += std::exp(x.data<float>()[row * 12 + i]);
    for (int i = 0; i < 12; ++i) want.push_back(std::exp(x.data<float>()[row * 12 + i]) / s);
  }
  expect_close((*r)[0], want);
  auto r13 = run_op(ir::OpKind::kSoftmax, 13, {x}, {{"axis", ir::Attribute::of_int(1)}});  // along dim 1 only
  ASSERT_TRUE(r13.ok());
  const std::vector<double> g = tensor_to_doubles((*r13)[0]);
  EXPECT_NEAR(g[0] + g[4] + g[8], 1.0, 1e-5);
}

TEST(NnEinsum, EllipsisBroadcastDiagonalAndImplicitOutput) {
  const Tensor a = random_tensor({2, 3, 4}, 18), b = random_tensor({1, 4, 2}, 19);
  ir::Attribute eq = ir::Attribute::of_string("...ij,...jk->...ik");
  auto r = run_op(ir::OpKind::kEinsum, 12, {a, b}, {{"equation", eq}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ((*r)[0].shape(), (Shape{2, 3, 2}));
  std::vector<double> y;
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 2; ++k) {
        double acc = 0;
        for (int j = 0; j < 4; ++j) acc += static_cast<double>(a.data<float>()[(p * 3 + i) * 4 + j]) * b.data<float>()[j * 2 + k];
        y.push_back(acc);
      }
  expect_close((*r)[0], y);
  // Implicit output of "ii,ij" is "j": sum_i A[i,i] * B[i,j].
  const Tensor m = random_tensor({3, 3}, 20), n = random_tensor({3, 5}, 21);
  auto d = run_op(ir::OpKind::kEinsum, 12, {m, n}, {{"equation", ir::Attribute::of_string("ii,ij")}});
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ((*d)[0].shape(), (Shape{5}));
  std::vector<double> want(5, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) want[j] += static_cast<double>(m.data<float>()[i * 4]) * n.data<float>()[i * 5 + j];
  expect_close((*d)[0], want);
}

TEST(NnPool, MaxPoolIndicesAndAveragePoolCountIncludePad) {
  Tensor x(DataType::kFloat32, {1, 1, 3, 3});
  for (int i = 0; i < 9; ++i) x.data<float>()[i] = static_cast<float>((i * 5) % 9);  // 0 5 1 / 6 2 7 / 3 8 4
  auto mp = run_op(ir::OpKind::kMaxPool, 12, {x}, {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"storage_order", ir::Attribute::of_int(1)}}, 2);
  ASSERT_TRUE(mp.ok()) << mp.status().to_string();
  expect_close((*mp)[0], {6, 7, 8, 8});
  // Column-major indices: (1,0) -> 1, (1,2) -> 7, (2,1) -> 5.
  EXPECT_EQ(tensor_to_doubles((*mp)[1]), (std::vector<double>{1, 7, 5, 5}));
  auto ap = run_op(ir::OpKind::kAveragePool, 11, {x},
                   {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"pads", ir::Attribute::of_ints({1, 1, 0, 0})}, {"count_include_pad", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(ap.ok());
  expect_close((*ap)[0], {0 / 4.0, 5 / 4.0, 6 / 4.0, 6 / 4.0, 13 / 4.0, 15 / 4.0, 9 / 4.0, 19 / 4.0, 21 / 4.0});
}

TEST(NnErrors, BadInputsGiveCleanErrors) {
  const Tensor x = random_tensor({1, 3, 5, 5}, 22), w = random_tensor({4, 2, 3, 3}, 23);
  auto r = run_op(ir::OpKind::kConv, 11, {x, w});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("node 't'"), std::string::npos);
  auto m = run_op(ir::OpKind::kMatMul, 13, {random_tensor({2, 3}, 24), random_tensor({4, 2}, 25)});
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  auto e = run_op(ir::OpKind::kEinsum, 12, {random_tensor({2, 3}, 26)}, {{"equation", ir::Attribute::of_string("ijk->i")}});
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  auto p = run_op(ir::OpKind::kMaxPool, 12, {random_tensor({1, 1, 2, 2}, 27)}, {{"kernel_shape", ir::Attribute::of_ints({5, 5})}});
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  auto s = run_op(ir::OpKind::kSoftmax, 13, {random_tensor({2, 3}, 28)}, {{"axis", ir::Attribute::of_int(2)}});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

// Timing check (run with --gtest_also_run_disabled_tests): ResNet's 1x64x56x56 3x3 -> 64 conv.
TEST(NnPerf, DISABLED_Conv3x3Gflops) {
  const Tensor x = random_tensor({1, 64, 56, 56}, 29), w = random_tensor({64, 64, 3, 3}, 30);
  const Attrs attrs{{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}};
  ASSERT_TRUE(run_op(ir::OpKind::kConv, 11, {x, w}, attrs).ok());
  const int reps = 20;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) ASSERT_TRUE(run_op(ir::OpKind::kConv, 11, {x, w}, attrs).ok());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  const double flops = 2.0 * 64 * 64 * 9 * 56 * 56;
  std::printf("conv 1x64x56x56 3x3->64: %.3f ms, %.1f GFLOP/s\n", s * 1e3, flops / s / 1e9);
}

// Timing check: every convolution of ResNet-101 (torchvision v1.5, batch 1, 224x224).
TEST(NnPerf, DISABLED_ResNet101Convs) {
  struct Layer {
    int64_t c, m, k, s, hw, count;  // in/out channels, kernel, stride, input extent, repeats
  };
  std::vector<Layer> layers{{3, 64, 7, 2, 224, 1}};
  const int64_t blocks[4] = {3, 4, 23, 3}, widths[4] = {64, 128, 256, 512}, sizes[4] = {56, 28, 14, 7};
  int64_t in_c = 64;
  for (int st = 0; st < 4; ++st) {
    const int64_t w = widths[st], hw = sizes[st], in_hw = st == 0 ? 56 : hw * 2, s = st == 0 ? 1 : 2;
    layers.push_back({in_c, w, 1, 1, in_hw, 1});
    layers.push_back({w, w, 3, s, in_hw, 1});
    layers.push_back({w, 4 * w, 1, 1, hw, 1});
    layers.push_back({in_c, 4 * w, 1, s, in_hw, 1});  // downsample branch
    layers.push_back({4 * w, w, 1, 1, hw, blocks[st] - 1});
    layers.push_back({w, w, 3, 1, hw, blocks[st] - 1});
    layers.push_back({w, 4 * w, 1, 1, hw, blocks[st] - 1});
    in_c = 4 * w;
  }
  double seconds = 0, macs = 0;
  const std::clock_t c0 = std::clock();
  for (const Layer& l : layers) {
    const Tensor x = random_tensor({1, l.c, l.hw, l.hw}, 31), w = random_tensor({l.m, l.c, l.k, l.k}, 32);
    const int64_t p = l.k / 2;
    const Attrs attrs{{"pads", ir::Attribute::of_ints({p, p, p, p})}, {"strides", ir::Attribute::of_ints({l.s, l.s})}};
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < l.count; ++i) {
      auto r = run_op(ir::OpKind::kConv, 11, {x, w}, attrs);
      ASSERT_TRUE(r.ok());
      if (i == 0) macs += static_cast<double>((*r)[0].numel()) * l.c * l.k * l.k * l.count;
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // Process CPU time too: on a shared machine wall time includes other jobs' time slices.
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  std::printf("ResNet-101 convs: %.2f GMACs in %.3f s wall, %.3f s CPU (%.1f GFLOP/s wall)\n", macs / 1e9, seconds, cpu,
              2 * macs / seconds / 1e9);
}

}  // namespace
}  // namespace kiln::cpu
