// The CUDA lowering's refusals (no GPU needed; CUDA builds): unsupported layers are listed all
// at once with the node named, and the storage-type overloads of check_gpu_support keep their
// meaning. The ops' values against the CPU reference are rows of the op table (tests/op_table/:
// OpTable/OpTableCuda.* on a GPU, OpTable/OpTableCudaLowering.* without one).
#include <gtest/gtest.h>

#include "op_table/op_table.h"
#include "op_table/transformer_graphs.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

using ir::Attribute;
using ir::OpKind;
using op_table::ints;
using op_table::nonzero;

// Every op of the block is supported; unsupported cases are listed all at once, each node named.
TEST(GpuSupportCheck, TransformerBlockLowersAndErrorsNameNodes) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const ir::Graph g = op_table::transformer_block(2, 8, 32, 4);
  auto vs = cuda::infer_value_shapes_by_reference(g, {{2, 8, 32}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  Status s = cuda::check_gpu_support(g, *vs);
  EXPECT_TRUE(s.ok()) << s.to_string();

  TinyGraph t;
  auto x = t.input("x", {2, 3, 4, 5});
  // An integer reduction over non-contiguous axes (float ones move the axes with a copy first).
  auto xi = t.node(OpKind::kCast, "to_int", {x}, {2, 3, 4, 5}, {{"to", ir::Attribute::of_int(6)}});
  t.g.value(xi).dtype = DataType::kInt32;
  auto ri = t.node(OpKind::kReduceSum, "bad_reduce", {xi, t.constant("axes", ints({0, 2}))}, {1, 3, 1, 5});
  t.g.value(ri).dtype = DataType::kInt32;
  auto r = t.node(OpKind::kCast, "to_float", {ri}, {1, 3, 1, 5}, {{"to", ir::Attribute::of_int(1)}});
  auto m = t.node(OpKind::kMatMul, "bad_matmul", {r, t.constant("b", nonzero({2, 1, 5, 3}, 40))}, {2, 3, 1, 3});
  t.g.outputs = {m};
  auto bvs = cuda::infer_value_shapes_by_reference(t.g, {{2, 3, 4, 5}});
  ASSERT_TRUE(bvs.ok()) << bvs.status().to_string();
  Status e = cuda::check_gpu_support(t.g, *bvs);
  EXPECT_EQ(e.code(), StatusCode::kUnsupported);
  EXPECT_NE(e.message().find("bad_reduce"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("non-contiguous"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("bad_matmul"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("batch broadcasting"), std::string::npos) << e.message();
#endif
}

// Dropout lowers as the identity (its mask filled with true) only in inference: a constant
// training_mode of true with a nonzero ratio is refused, naming the node, not run as the identity.
TEST(GpuSupportCheck, TrainingModeDropoutIsRefused) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  for (bool training : {false, true}) {
    TinyGraph t;
    auto x = t.input("x", {2, 6});
    Tensor tm(DataType::kBool, {});
    tm.data<uint8_t>()[0] = training ? 1 : 0;
    t.g.outputs = {t.node(OpKind::kDropout, "drop", {x, t.constant("ratio", op_table::scalar_f(0.3f)), t.constant("tm", tm)},
                          {2, 6})};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{2, 6}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(t.g, *vs);
    if (!training) {
      EXPECT_TRUE(s.ok()) << s.to_string();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_NE(s.message().find("'drop'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("training-mode Dropout"), std::string::npos) << s.message();
  }
#endif
}

// bf16 storage lowers the kernels_more.cu ops (LayerNorm, Reduce, Pad, batched MatMul, Cast)
// like fp32 and fp16 do; the bool overload keeps its fp32/fp16 meaning and an integer storage
// type is not a set of lowering rules.
TEST(GpuSupportCheck, Bf16LowersNormReducePad) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  TinyGraph t;
  auto x = t.input("x", {2, 3, 5, 6});
  auto ln = t.node(OpKind::kLayerNormalization, "ln",
                   {x, t.constant("scale", nonzero({6}, 60)), t.constant("bias", nonzero({6}, 61))}, {2, 3, 5, 6},
                   {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-5f)}});
  auto pad = t.node(OpKind::kPad, "pad", {ln, t.constant("pads", ints({0, 0, 1, 2, 0, 0, 2, 1}))}, {2, 3, 8, 9},
                    {{"mode", Attribute::of_string("reflect")}});
  auto red = t.node(OpKind::kReduceMean, "reduce", {pad}, {2, 3, 8, 1},
                    {{"axes", Attribute::of_ints({-1})}, {"keepdims", Attribute::of_int(1)}});
  t.g.outputs = {red};
  auto vs = cuda::infer_value_shapes_by_reference(t.g, {{2, 3, 5, 6}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  for (cuda::StorageType st : {cuda::StorageType::kF32, cuda::StorageType::kF16, cuda::StorageType::kBF16}) {
    Status s = cuda::check_gpu_support(t.g, *vs, st);
    EXPECT_TRUE(s.ok()) << cuda::storage_name(st) << ": " << s.to_string();
  }
  for (bool fp16 : {false, true}) {
    Status s = cuda::check_gpu_support(t.g, *vs, fp16);
    EXPECT_TRUE(s.ok()) << (fp16 ? "[fp16] " : "[fp32] ") << s.to_string();
  }
  EXPECT_EQ(cuda::check_gpu_support(t.g, *vs, cuda::StorageType::kI32).code(), StatusCode::kInvalidArgument);

  const ir::Graph block = op_table::transformer_block(2, 8, 32, 4);  // LayerNorm, batched MatMul, Softmax, ...
  auto bvs = cuda::infer_value_shapes_by_reference(block, {{2, 8, 32}});
  ASSERT_TRUE(bvs.ok()) << bvs.status().to_string();
  Status s = cuda::check_gpu_support(block, *bvs, cuda::StorageType::kBF16);
  EXPECT_TRUE(s.ok()) << "[bf16] " << s.to_string();
#endif
}

}  // namespace
}  // namespace kiln::testing
