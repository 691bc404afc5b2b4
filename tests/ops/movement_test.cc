// Tests of the CPU movement kernels for what the ONNX conformance data covers thinly: odd
// dtypes moved by byte size, negative-step slices, multi-period reflect padding, opset-18
// forms (uneven Split), reductions on ints, Resize on uint8, and clean errors on bad input.
// Each kernel is called directly through the registry on a one-node IR.
#include <gtest/gtest.h>

#include <random>

#include "backends/cpu/cpu_kernel.h"
#include "core/numerics.h"

namespace kiln::cpu {
namespace {

struct NodeRun {
  ir::Node node;
  std::vector<Tensor> outputs;
  Status status;
};

// Runs op `op` at `opset` on `inputs` (undefined tensors = omitted inputs).
NodeRun run(ir::OpKind op, int opset, const std::vector<Tensor>& inputs, int num_outputs,
            std::map<std::string, ir::Attribute> attrs = {}) {
  NodeRun r;
  r.node.name = "n0";
  r.node.op = op;
  r.node.opset = opset;
  r.node.attrs = std::move(attrs);
  std::vector<const Tensor*> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    r.node.inputs.push_back(inputs[i].defined() ? static_cast<ir::ValueId>(i) : ir::kNoValue);
    in.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }
  for (int i = 0; i < num_outputs; ++i) r.node.outputs.push_back(static_cast<ir::ValueId>(100 + i));
  r.outputs.resize(num_outputs);
  KernelFn fn = KernelRegistry::get().find(op);
  if (!fn) {
    r.status = unsupported("no kernel");
    return r;
  }
  KernelContext ctx(r.node, in, &r.outputs, nullptr);
  r.status = fn(ctx);
  return r;
}


Tensor i64(std::vector<int64_t> v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// Random, never-zero float32 values in [1, 2) with random signs.
Tensor random_f32(Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(1.f, 2.f);
  Tensor t(DataType::kFloat32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (rng() & 1 ? -1.f : 1.f) * u(rng);
  return t;
}

TEST(MovementKernels, TransposeMatchesNaiveIndexing) {
  const Tensor x = random_f32({2, 3, 4, 5}, 1);
  NodeRun r = run(ir::OpKind::kTranspose, 13, {x}, 1, {{"perm", ir::Attribute::of_ints({2, 0, 3, 1})}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const Tensor& y = r.outputs[0];
  ASSERT_EQ(y.shape(), (Shape{4, 2, 5, 3}));
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        for (int d = 0; d < 5; ++d)
          EXPECT_EQ(y.data<float>()[((c * 2 + a) * 5 + d) * 3 + b], x.data<float>()[((a * 3 + b) * 4 + c) * 5 + d]);
}

TEST(MovementKernels, TransposeMovesFp16BitsUnchanged) {
  Tensor x(DataType::kFloat16, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<uint16_t>()[i] = static_cast<uint16_t>(0x3c00 + i * 7);  // 1.0 + small steps
  NodeRun r = run(ir::OpKind::kTranspose, 13, {x}, 1);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(r.outputs[0].data<uint16_t>()[j * 2 + i], x.data<uint16_t>()[i * 3 + j]);
}

TEST(MovementKernels, SliceNegativeStepsAndClamping) {
  const Tensor x = random_f32({4, 7}, 2);
  // axis 1: start 100 clamps to 6, end -100 clamps to -1, step -3 -> columns 6, 3, 0.
  // axis 0: start -1 -> 3, end 0, step -2 -> rows 3, 1.
  NodeRun r = run(ir::OpKind::kSlice, 13, {x, i64({100, -1}), i64({-100, 0}), i64({1, 0}), i64({-3, -2})}, 1);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].shape(), (Shape{2, 3}));
  const int rows[] = {3, 1}, cols[] = {6, 3, 0};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(r.outputs[0].data<float>()[i * 3 + j], x.data<float>()[rows[i] * 7 + cols[j]]);
}

TEST(MovementKernels, PadReflectWrapsSeveralPeriods) {
  Tensor x(DataType::kInt32, {3});
  for (int i = 0; i < 3; ++i) x.data<int32_t>()[i] = i + 1;
  NodeRun r = run(ir::OpKind::kPad, 13, {x, i64({5, 1})}, 1, {{"mode", ir::Attribute::of_string("reflect")}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const std::vector<int32_t> want = {2, 1, 2, 3, 2, 1, 2, 3, 2};  // numpy.pad(..., 'reflect')
  ASSERT_EQ(r.outputs[0].numel(), 9);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(r.outputs[0].data<int32_t>()[i], want[i]) << i;
}

TEST(MovementKernels, SplitNumOutputsGivesSmallerLastChunk) {
  const Tensor x = random_f32({2, 7}, 3);
  NodeRun r = run(ir::OpKind::kSplit, 18, {x}, 3, {{"axis", ir::Attribute::of_int(1)}, {"num_outputs", ir::Attribute::of_int(3)}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(r.outputs[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(r.outputs[2].shape(), (Shape{2, 1}));
  EXPECT_EQ(r.outputs[2].data<float>()[1], x.data<float>()[13]);
  EXPECT_EQ(r.outputs[1].data<float>()[3], x.data<float>()[10]);
}

TEST(MovementKernels, ScatterNDReducesIntsInIndexOrder) {
  Tensor data(DataType::kInt32, {4});
  for (int i = 0; i < 4; ++i) data.data<int32_t>()[i] = 10 + i;
  Tensor idx(DataType::kInt64, {3, 1});
  idx.data<int64_t>()[0] = 1;
  idx.data<int64_t>()[1] = -1;  // counts from the end: 3
  idx.data<int64_t>()[2] = 1;
  Tensor upd(DataType::kInt32, {3});
  upd.data<int32_t>()[0] = 5;
  upd.data<int32_t>()[1] = 7;
  upd.data<int32_t>()[2] = -2;
  NodeRun r = run(ir::OpKind::kScatterND, 16, {data, idx, upd}, 1, {{"reduction", ir::Attribute::of_string("mul")}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const std::vector<int32_t> want = {10, 11 * 5 * -2, 12, 13 * 7};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.outputs[0].data<int32_t>()[i], want[i]);
}

TEST(MovementKernels, ResizeNearestAsymmetricFloorOnUint8) {
  // The PaddleOCR form: opset 11, empty roi, scales 2x.
  Tensor x(DataType::kUInt8, {1, 1, 2, 3});
  for (int i = 0; i < 6; ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(200 + i);
  Tensor roi(DataType::kFloat32, {0});
  Tensor scales(DataType::kFloat32, {4});
  const float s[] = {1, 1, 2, 2};
  std::copy(s, s + 4, scales.data<float>());
  NodeRun r = run(ir::OpKind::kResize, 11, {x, roi, scales}, 1,
                  {{"coordinate_transformation_mode", ir::Attribute::of_string("asymmetric")}, {"nearest_mode", ir::Attribute::of_string("floor")}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].shape(), (Shape{1, 1, 4, 6}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      EXPECT_EQ(r.outputs[0].data<uint8_t>()[i * 6 + j], x.data<uint8_t>()[(i / 2) * 3 + j / 2]);
}

TEST(MovementKernels, UniqueSortedGivesAllFourOutputs) {
  Tensor x(DataType::kFloat32, {6});
  const float v[] = {2, 1, 1, 3, 4, 3};
  std::copy(v, v + 6, x.data<float>());
  NodeRun r = run(ir::OpKind::kUnique, 11, {x}, 4);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  auto as_vec = [](const Tensor& t) { return std::vector<double>(tensor_to_doubles(t)); };
  EXPECT_EQ(as_vec(r.outputs[0]), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(as_vec(r.outputs[1]), (std::vector<double>{1, 0, 3, 4}));
  EXPECT_EQ(as_vec(r.outputs[2]), (std::vector<double>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(as_vec(r.outputs[3]), (std::vector<double>{2, 1, 2, 1}));
}

TEST(MovementKernels, GatherNDWithBatchDims) {
  const Tensor x = random_f32({2, 3, 4}, 4);
  Tensor idx(DataType::kInt64, {2, 2, 1});
  const int64_t iv[] = {2, 0, 1, 2};
  std::copy(iv, iv + 4, idx.data<int64_t>());
  NodeRun r = run(ir::OpKind::kGatherND, 13, {x, idx}, 1, {{"batch_dims", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].shape(), (Shape{2, 2, 4}));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 2; ++t)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(r.outputs[0].data<float>()[(b * 2 + t) * 4 + k], x.data<float>()[(b * 3 + iv[b * 2 + t]) * 4 + k]);
}

TEST(MovementKernels, BadInputsFailCleanly) {
  const Tensor x = random_f32({2, 3}, 5);
  Tensor idx(DataType::kInt64, {1});
  idx.data<int64_t>()[0] = 3;  // axis 1 has 3 entries: out of range
  NodeRun g = run(ir::OpKind::kGather, 13, {x, idx}, 1, {{"axis", ir::Attribute::of_int(1)}});
  EXPECT_EQ(g.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status.message().find("node 'n0' (Gather)"), std::string::npos) << g.status.message();

  EXPECT_EQ(run(ir::OpKind::kReshape, 13, {x, i64({4, -1})}, 1).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run(ir::OpKind::kTranspose, 13, {x}, 1, {{"perm", ir::Attribute::of_ints({0, 0})}}).status.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(run(ir::OpKind::kSlice, 13, {x, i64({0}), i64({2}), i64({0}), i64({0})}, 1).status.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(run(ir::OpKind::kConcat, 13, {x, random_f32({2}, 6)}, 1, {{"axis", ir::Attribute::of_int(0)}}).status.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(run(ir::OpKind::kSplit, 13, {x, i64({1, 1})}, 2, {{"axis", ir::Attribute::of_int(1)}}).status.code(),
            StatusCode::kInvalidArgument);
  // A missing required input and a hostile output shape are errors, not crashes.
  EXPECT_EQ(run(ir::OpKind::kGather, 13, {x}, 1).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run(ir::OpKind::kExpand, 13, {x, i64({int64_t{1} << 40, 1 << 20, 3})}, 1).status.code(),
            StatusCode::kInvalidArgument);
  // Hostile sizes: blocksize^2 wrapping to 0 (a division by zero), a depth of 1e30 (an undefined cast).
  EXPECT_EQ(run(ir::OpKind::kDepthToSpace, 13, {random_f32({1, 4, 2, 2}, 7)}, 1, {{"blocksize", ir::Attribute::of_int(int64_t{1} << 32)}})
                .status.code(), StatusCode::kInvalidArgument);
  Tensor depth(DataType::kFloat32, {});
  depth.data<float>()[0] = 1e30f;
  EXPECT_EQ(run(ir::OpKind::kOneHot, 11, {i64({0, 1}), depth, random_f32({2}, 8)}, 1).status.code(), StatusCode::kInvalidArgument);
  // Packed 4-bit data cannot be moved by byte size: a clean "unsupported", not a crash.
  Tensor q(DataType::kInt4, {2, 2});
  EXPECT_EQ(run(ir::OpKind::kTranspose, 13, {q}, 1).status.code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace kiln::cpu
