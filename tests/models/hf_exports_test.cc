// Exports of current Hugging Face transformers (issue 11 item 1): test-size BERT, RoBERTa, GPT-2,
// Llama, Qwen2, T5 and ViT made on the GPU machine with transformers' own classes (seeded random
// init) by both exporters of torch 2.11 — the TorchScript-based torch.onnx.export(dynamo=False,
// opset 17) and the dynamo-based one (opset 18) — with `scripts/export_hf.py --tiny --export-only`,
// kept in tests/data/hf_tiny/<model>/ with their inputs and PyTorch's FP32 output.
//   * the CPU plan reproduces PyTorch's output (cosine >= 0.99999);
//   * the graph the CUDA builder lowers has every attention fused into Kiln's Attention layer
//     (fuse_attention recognises what both exporters emit) and passes check_gpu_support in FP16
//     (no GPU needed: every layer has a CUDA tactic); ViT's attention has no mask input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "builder/build_from_graph.h"
#include "io/npy.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

struct HfCase {
  std::string model;
  std::string exporter;
  int attention_layers;  // attention blocks in the model (T5: 2 encoder + 2 decoder self + 2 cross)
};

std::string data_dir() { return std::string(KILN_SOURCE_DIR) + "/tests/data/hf_tiny"; }

std::vector<HfCase> cases() {
  std::vector<HfCase> r;
  const std::map<std::string, int> models = {{"bert", 2},  {"roberta", 2}, {"gpt2", 2}, {"llama", 2},
                                             {"qwen2", 2}, {"t5", 6},      {"vit", 2}};
  for (const auto& [m, n] : models)
    for (const char* e : {"torchscript", "dynamo"}) r.push_back({m, e, n});
  return r;
}

// The model's inputs (every .npy but reference_out.npy), by name.
std::map<std::string, Tensor> inputs_of(const std::string& dir) {
  std::map<std::string, Tensor> r;
  for (const auto& f : fs::directory_iterator(dir)) {
    const std::string name = f.path().stem().string();
    if (f.path().extension() != ".npy" || name == "reference_out") continue;
    auto t = io::read_npy(f.path().string());
    if (t.ok()) r.emplace(name, *t);
  }
  return r;
}

class HfExports : public ::testing::TestWithParam<HfCase> {
 protected:
  void SetUp() override {
    dir_ = data_dir() + "/" + GetParam().model;
    path_ = dir_ + "/" + GetParam().model + "." + GetParam().exporter + ".onnx";
    ASSERT_TRUE(fs::exists(path_)) << path_;
    ins_ = inputs_of(dir_);
    ASSERT_FALSE(ins_.empty());
  }
  // The inputs' shapes; with dynamic_batch, a profile of batch 1 .. 2x the inputs' (opt: theirs).
  BuilderConfig config(TargetDevice target, bool dynamic_batch = false) const {
    BuilderConfig c;
    c.target = target;
    c.fp16 = target == TargetDevice::kCuda;
    OptimizationProfile p;
    for (const auto& [name, t] : ins_) {
      Shape lo = t.shape(), hi = t.shape();
      if (dynamic_batch) lo[0] = 1, hi[0] *= 2;
      EXPECT_TRUE(p.set_dimensions(name, lo, t.shape(), hi).ok());
    }
    c.profiles = {p};
    return c;
  }
  std::string dir_, path_;
  std::map<std::string, Tensor> ins_;
};

TEST_P(HfExports, CpuPlanMatchesPyTorch) {
  auto g = onnx_import::import_model_file(path_);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto bytes = build_from_graph(*g, config(TargetDevice::kCpu));
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto engine = Runtime::deserialize_engine(*bytes);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx);
  for (const auto& [name, t] : ins_) ASSERT_TRUE(ctx->set_input(name, t).ok()) << name;
  Status run = ctx->execute();
  ASSERT_TRUE(run.ok()) << run.to_string();
  auto ref = io::read_npy(dir_ + "/reference_out.npy");
  ASSERT_TRUE(ref.ok());
  const auto out_name = (*engine)->io_tensors().back().desc.name;
  auto out = ctx->output(out_name);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->numel(), ref->numel());
  const Tensor& got = *out;
  const Tensor& want = *ref;
  const float* a = got.data<float>();
  const float* b = want.data<float>();
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < ref->numel(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  EXPECT_GE(ab / std::sqrt(aa * bb), 0.99999);
}

TEST_P(HfExports, CudaGraphFusesAttentionAndHasEveryTactic) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  auto g = onnx_import::import_model_file(path_);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (bool dynamic_batch : {false, true}) {
    SCOPED_TRACE(dynamic_batch ? "dynamic batch" : "static shapes");
    std::vector<Shape> opt;
    auto laid = cuda_layer_graph(*g, config(TargetDevice::kCuda, dynamic_batch), &opt);
    ASSERT_TRUE(laid.ok()) << laid.status().to_string();
    int attention = 0, transposes = 0;
    for (const ir::Node& n : laid->nodes) {
      attention += !n.removed && n.op == ir::OpKind::kAttention;
      transposes += !n.removed && n.op == ir::OpKind::kTranspose;
    }
    EXPECT_EQ(attention, GetParam().attention_layers);
    // ViT has no padding: the all-true mask transformers builds for it (Where(Expand(arange(S) >= 0),
    // 0, -inf)) is dropped by fuse_attention, so its attention runs mask-free (0084).
    if (GetParam().model == "vit") {
      for (const ir::Node& n : laid->nodes) {
        if (!n.removed && n.op == ir::OpKind::kAttention) {
          EXPECT_FALSE(n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue) << n.name << " has a mask input";
        }
      }
    }
    // The head transposes are folded into the attention (fold_attention_transposes, 0065): ViT
    // keeps its patch embedding's, the dynamo Llama / Qwen2 exports one for run-time cos / sin.
    // (With a dynamic batch, the TorchScript Llama / Qwen2 exports' RoPE path keeps them: a known
    // gap of the fold, 0065.)
    if (!dynamic_batch) EXPECT_LE(transposes, 3);
    auto vs = cuda::infer_value_shapes_by_reference(*laid, opt);
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(*laid, *vs, true);
    EXPECT_TRUE(s.ok()) << s.to_string().substr(0, 3000);
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Tiny, HfExports, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<HfCase>& i) { return i.param.model + "_" + i.param.exporter; });

}  // namespace
}  // namespace kiln::testing
