// An ONNX Runtime-style Q/DQ CNN + MLP (testing::ort_qdq_cnn_mlp_model: Q/DQ pairs around
// MaxPool and Reshape, a Flatten between the last pair and the Gemm) built into CPU plans: propagate_qdq and
// eliminate_redundant_qdq bring one Q/DQ pair to each linear layer's input, so both become
// QuantLinear layers, and the moves alone change no output (docs/decisions/0056).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "plan/onnx_test_models.h"
#include "plan/quant_test_util.h"

namespace kiln {
namespace {

// Builds `path` for the CPU at x's shape with `disabled` passes; the output y and the layer ops.
Tensor run_cpu_plan(const std::string& path, const std::set<std::string>& disabled, const Tensor& x,
                    std::vector<std::string>* ops) {
  BuilderConfig c;
  c.disabled_passes = disabled;
  return testing::run_cpu_plan(path, c, x, ops);
}

int64_t count(const std::vector<std::string>& ops, const std::string& op) {
  return std::count(ops.begin(), ops.end(), op);
}

TEST(QdqPropagation, OrtQdqCnnMlpFusesItsLinearLayersAndKeepsItsOutputs) {
  const std::string dir = testing::make_temp_dir("qdq_propagation");
  ASSERT_FALSE(dir.empty());
  const std::string path = testing::ort_qdq_cnn_mlp_model().save(dir + "/cnn_mlp.qdq.onnx");
  Tensor x(DataType::kFloat32, {2, 3, 8, 8});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);

  std::vector<std::string> full_ops, moved_ops, plain_ops;
  const Tensor full = run_cpu_plan(path, {}, x, &full_ops);
  const Tensor moved = run_cpu_plan(path, {"fuse_qdq_linear"}, x, &moved_ops);
  const Tensor plain = run_cpu_plan(path, {"propagate_qdq", "eliminate_redundant_qdq", "fuse_qdq_linear"}, x, &plain_ops);
  ASSERT_TRUE(full.defined() && moved.defined() && plain.defined());

  // The Gemm (after Flatten) and the MatMul are QuantLinear layers only with the moves.
  EXPECT_EQ(count(full_ops, "QuantLinear"), 2) << ::testing::PrintToString(full_ops);
  EXPECT_EQ(count(full_ops, "Gemm") + count(full_ops, "MatMul") + count(full_ops, "MatMulBias"), 0);
  EXPECT_EQ(count(full_ops, "QuantizeLinear") + count(full_ops, "DequantizeLinear"), 0);
  EXPECT_EQ(count(full_ops, "MaxPool"), 1);
  ASSERT_EQ(count(plain_ops, "QuantLinear"), 0) << ::testing::PrintToString(plain_ops);
  {
    // Without the moves only the MatMul (whose input is DQ(Q(.))) fuses; the Gemm stays.
    std::vector<std::string> fused_alone_ops;
    run_cpu_plan(path, {"propagate_qdq", "eliminate_redundant_qdq"}, x, &fused_alone_ops);
    EXPECT_EQ(count(fused_alone_ops, "QuantLinear"), 1) << ::testing::PrintToString(fused_alone_ops);
    EXPECT_EQ(count(fused_alone_ops, "Gemm") + count(fused_alone_ops, "MatMulBias"), 1);
  }
  // The plan has fewer Q/DQ pairs with the moves: the pairs around MaxPool/Reshape/Flatten
  // collapsed into one before the Gemm.
  EXPECT_LT(moved_ops.size(), plain_ops.size()) << ::testing::PrintToString(moved_ops);

  // The moves and the dropped pairs are exact: the same outputs up to float rounding.
  ASSERT_EQ(moved.shape(), plain.shape());
  double max_ref = 0;
  for (int64_t i = 0; i < plain.numel(); ++i) max_ref = std::max(max_ref, std::fabs(double{plain.data<float>()[i]}));
  ASSERT_GT(max_ref, 0.1);
  for (int64_t i = 0; i < plain.numel(); ++i)
    EXPECT_NEAR(moved.data<float>()[i], plain.data<float>()[i], 1e-6 * max_ref) << i;
  // QuantLinear sums in integers where the unfused graph summed floats (decision 0055): an
  // element whose Gemm output sits at a rounding boundary of the next quantization moves by a
  // step; nothing more.
  testing::expect_within_one_quantization_step(full, plain, max_ref);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
