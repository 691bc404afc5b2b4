// The attention-mask subgraphs of current Hugging Face exports on the CUDA path (issue 11): a
// small ONNX model written as the TorchScript exporter of `transformers` writes BERT's masks —
// the legacy additive form (mask int64 -> Unsqueeze -> Cast float -> 1 - m -> * -10000 -> + scores)
// and the SDPA bool form (Cast bool -> Expand -> And with a causal mask from Range / comparisons
// -> Not -> Where(m, -inf, 0) -> + scores -> Softmax -> Where(IsNaN(p), 0, p)), each followed by
// P·V. Without a GPU: the graph the builder lowers (cuda_layer_graph) keeps the mask-building
// bool ops and check_gpu_support lowers every layer in fp32, fp16 and bf16. With a GPU: the
// engine's outputs match the CPU plan's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "plan/onnx_test_models.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

constexpr int64_t kB = 2, kS = 7, kH = 8, kVocab = 30;
constexpr int kI64 = onnx::TensorProto::INT64;
constexpr int kBoolT = onnx::TensorProto::BOOL;

void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void int64_init(OnnxModel& m, const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
  auto* t = m.proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(kI64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
}

// The embedding table, [kVocab, kH] row-major, entries in [-0.5, 0.5] (multiples of 1/40).
// Signed arithmetic: (i * 29) % 41 - 20 in size_t wraps to ~2^64 for 20 of every 41 entries
// (embeddings of 4.6e17; BertMaskModelCpuOutputsAreBounded checks the bound).
std::vector<float> embedding_table() {
  std::vector<float> emb(kVocab * kH);
  for (size_t i = 0; i < emb.size(); ++i)
    emb[i] = 0.5f * static_cast<float>(static_cast<int64_t>((i * 29) % 41) - 20) / 20.f;
  return emb;
}

// input_ids, attention_mask: int64 [B, S]. Scores = (E[ids] E[ids]^T) / sqrt(H), [B, 1, S, S].
// Outputs: ctx_legacy (additive float mask) and ctx_sdpa (bool mask with a causal part and the NaN
// guard), P·V with V = E[ids], both float [B, 1, S, H].
OnnxModel bert_mask_model() {
  OnnxModel m(17);
  m.input("input_ids", kI64, {int64_t{kB}, int64_t{kS}});
  m.input("attention_mask", kI64, {int64_t{kB}, int64_t{kS}});
  m.initializer("embeddings", {kVocab, kH}, embedding_table());
  m.initializer("inv_sqrt_h", {}, {1.f / std::sqrt(static_cast<float>(kH))});
  m.initializer("one", {}, {1.f});
  m.initializer("neg_large", {}, {-10000.f});
  m.initializer("neg_inf", {}, {-std::numeric_limits<float>::infinity()});
  m.initializer("zero", {}, {0.f});
  int64_init(m, "axes_1", {1}, {1});
  int64_init(m, "axes_12", {2}, {1, 2});
  int64_init(m, "axes_0", {1}, {0});
  int64_init(m, "i1", {}, {1});
  int64_init(m, "start", {}, {0});
  int64_init(m, "step", {}, {1});
  int64_init(m, "full_shape", {4}, {kB, 1, kS, kS});

  // Scores.
  m.node("Gather", {"embeddings", "input_ids"}, {"x"}, "embed");
  auto* tr = m.node("Transpose", {"x"}, {"xt"}, "xt");
  auto* perm = tr->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 2, 1}) perm->add_ints(p);
  m.node("MatMul", {"x", "xt"}, {"qk"}, "qk");
  m.node("Mul", {"qk", "inv_sqrt_h"}, {"qk_scaled"}, "scale");
  m.node("Unsqueeze", {"qk_scaled", "axes_1"}, {"scores"}, "scores");
  m.node("Unsqueeze", {"x", "axes_1"}, {"v"}, "v");

  // Legacy BERT (get_extended_attention_mask): (1 - mask[:, None, None, :].float()) * -10000.
  m.node("Unsqueeze", {"attention_mask", "axes_12"}, {"ext"}, "ext_unsqueeze");
  int_attr(m.node("Cast", {"ext"}, {"ext_f"}, "ext_cast"), "to", onnx::TensorProto::FLOAT);
  m.node("Sub", {"one", "ext_f"}, {"inv"}, "ext_sub");
  m.node("Mul", {"inv", "neg_large"}, {"add_mask"}, "ext_mul");
  m.node("Add", {"scores", "add_mask"}, {"scores_legacy"}, "add_legacy");
  int_attr(m.node("Softmax", {"scores_legacy"}, {"probs_legacy"}, "softmax_legacy"), "axis", -1);

  // SDPA form: padding mask as bool, expanded, and-ed with a causal mask built from positions.
  int_attr(m.node("Cast", {"ext"}, {"ext_b"}, "mask_to_bool"), "to", kBoolT);
  m.node("Expand", {"ext_b", "full_shape"}, {"pad_ok"}, "mask_expand");
  m.node("Shape", {"input_ids"}, {"ids_shape"}, "ids_shape");
  int_attr(m.node("Gather", {"ids_shape", "i1"}, {"seq_len"}, "seq_len"), "axis", 0);
  m.node("Range", {"start", "seq_len", "step"}, {"pos"}, "positions");
  m.node("Unsqueeze", {"pos", "axes_0"}, {"pos_row"}, "pos_row");
  m.node("Unsqueeze", {"pos", "axes_1"}, {"pos_col"}, "pos_col");
  m.node("LessOrEqual", {"pos_row", "pos_col"}, {"causal"}, "causal");
  m.node("And", {"pad_ok", "causal"}, {"keep"}, "keep");
  m.node("Not", {"keep"}, {"masked"}, "masked");
  m.node("Where", {"masked", "neg_inf", "zero"}, {"bias"}, "mask_bias");
  m.node("Add", {"scores", "bias"}, {"scores_sdpa"}, "add_sdpa");
  int_attr(m.node("Softmax", {"scores_sdpa"}, {"p"}, "softmax_sdpa"), "axis", -1);
  m.node("IsNaN", {"p"}, {"p_nan"}, "nan_check");
  m.node("Where", {"p_nan", "zero", "p"}, {"probs_sdpa"}, "nan_guard");
  m.node("MatMul", {"probs_legacy", "v"}, {"ctx_legacy"}, "pv_legacy");
  m.node("MatMul", {"probs_sdpa", "v"}, {"ctx_sdpa"}, "pv_sdpa");

  const std::vector<OnnxDim> out = {int64_t{kB}, int64_t{1}, int64_t{kS}, int64_t{kH}};
  m.output("ctx_legacy", kF32, out);
  m.output("ctx_sdpa", kF32, out);
  return m;
}

// Token ids and a padding mask whose second row is padded after 4 tokens; the first row of the
// causal + padding mask keeps each query its prefix, so no row is fully masked except where the
// guard must act (none here: the NaN guard stays a no-op, as in a real export).
std::vector<Tensor> mask_inputs() {
  Tensor ids(DataType::kInt64, {kB, kS}), mask(DataType::kInt64, {kB, kS});
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> d(0, kVocab - 1);
  for (int64_t i = 0; i < kB * kS; ++i) {
    ids.data<int64_t>()[i] = d(rng);
    mask.data<int64_t>()[i] = (i / kS == 1 && i % kS >= 4) ? 0 : 1;
  }
  return {ids, mask};
}

StatusOr<ir::Graph> imported() { return onnx_import::import_model_bytes(bert_mask_model().bytes(), ""); }

BuilderConfig pinned_config(const ir::Graph& g, bool fp16, bool bf16) {
  BuilderConfig c;
  c.fp16 = fp16;
  c.bf16 = bf16;
  c.tf32 = false;
  OptimizationProfile p;
  for (ir::ValueId v : g.inputs) (void)p.set_dimensions(g.value(v).name, {kB, kS}, {kB, kS}, {kB, kS});
  c.profiles.push_back(p);
  return c;
}

TEST(GpuAttentionMask, BertMaskSubgraphsLowerWithoutUnsupportedLayers) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  auto g = imported();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (const auto& [fp16, bf16] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    const char* prec = fp16 ? "fp16" : (bf16 ? "bf16" : "fp32");
    auto laid = cuda_layer_graph(*g, pinned_config(*g, fp16, bf16), nullptr);
    ASSERT_TRUE(laid.ok()) << prec << ": " << laid.status().to_string();
    // The mask-building ops on the run-time padding mask survive the optimizer: they are what the
    // CUDA path must run (the causal part, positions of a fixed length, folds to a constant; the
    // softmax and its NaN guard may fuse into an Attention layer, which then reads the mask).
    std::set<std::string> ops;
    for (const ir::Node& n : laid->nodes)
      if (!n.removed) ops.insert(ir::op_name(n.op));
    for (const char* op : {"Not", "Where", "And", "Cast"})
      EXPECT_TRUE(ops.count(op)) << prec << ": no " << op << " node left in the lowered graph";
    auto vs = cuda::infer_value_shapes_by_reference(*laid, {{kB, kS}, {kB, kS}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    const cuda::StorageType st = fp16 ? cuda::StorageType::kF16 : (bf16 ? cuda::StorageType::kBF16 : cuda::StorageType::kF32);
    Status s = cuda::check_gpu_support(*laid, *vs, st);
    EXPECT_TRUE(s.ok()) << prec << ": " << s.to_string();
    // The layers it plans: the bool ops run as Kiln's exact kernels.
    cuda::GpuBuildOptions o;
    o.precision.fp16 = fp16;
    o.precision.bf16 = bf16;
    auto plan = cuda::plan_gpu_streams(*laid, *vs, o);
    ASSERT_TRUE(plan.ok()) << prec << ": " << plan.status().to_string();
    std::set<std::string> layers(plan->layers.begin(), plan->layers.end());
    for (const char* l : {"mask_to_bool", "keep", "masked", "mask_bias"})
      EXPECT_TRUE(layers.count(l)) << prec << ": no layer '" << l << "'";
  }
#endif
}

// The outputs (ctx_legacy, ctx_sdpa) of a plan of the mask model built for `dev` on mask_inputs().
StatusOr<std::vector<Tensor>> run_mask_model(const ir::Graph& g, TargetDevice dev, bool fp16) {
  const std::vector<Tensor> in = mask_inputs();
  BuilderConfig c = pinned_config(g, fp16, false);
  c.target = dev;
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(g, c));
  KILN_ASSIGN_OR_RETURN(auto engine, Runtime::deserialize_engine(plan));
  auto ctx = engine->create_execution_context();
  KILN_RETURN_IF_ERROR(ctx->set_input("input_ids", in[0]));
  KILN_RETURN_IF_ERROR(ctx->set_input("attention_mask", in[1]));
  KILN_RETURN_IF_ERROR(ctx->execute());
  std::vector<Tensor> outs;
  for (const char* name : {"ctx_legacy", "ctx_sdpa"}) {
    KILN_ASSIGN_OR_RETURN(Tensor t, ctx->output(name));
    outs.push_back(t.clone());
  }
  return outs;
}

// The reference the GPU test compares against is what the model means: every output is a
// convex combination (softmax weights) of embedding rows of magnitude <= 0.5, so finite and
// bounded by 0.5, and the mask changes the result (the two outputs differ where the causal part
// removes keys). A tolerance in absolute terms (GPU test) is only meaningful under this bound.
TEST(GpuAttentionMask, BertMaskModelCpuOutputsAreBounded) {
  auto g = imported();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto cpu = run_mask_model(*g, TargetDevice::kCpu, false);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  double differ = 0;
  for (size_t k = 0; k < 2; ++k) {
    const Tensor& t = (*cpu)[k];
    ASSERT_EQ(t.shape(), (Shape{kB, 1, kS, kH}));
    double peak = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float v = t.data<float>()[i];
      ASSERT_TRUE(std::isfinite(v)) << "output " << k << " element " << i;
      peak = std::max(peak, static_cast<double>(std::fabs(v)));
      if (k == 1) differ = std::max(differ, static_cast<double>(std::fabs(v - (*cpu)[0].data<float>()[i])));
    }
    EXPECT_LE(peak, 0.5) << "output " << k;
    EXPECT_GT(peak, 0.05) << "output " << k;
  }
  EXPECT_GT(differ, 1e-3) << "the causal mask does not change ctx_sdpa";

  // Against a direct evaluation of the model's formulas (double precision): scores
  // E[ids] E[ids]^T / sqrt(H); legacy: + (1 - mask) * -10000; SDPA: keys that are padding or
  // after the query excluded; softmax over keys; P V.
  const std::vector<float> emb = embedding_table();
  const std::vector<Tensor> in = mask_inputs();
  const int64_t* ids = in[0].data<int64_t>();
  const int64_t* mask = in[1].data<int64_t>();
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t q = 0; q < kS; ++q)
      for (int sdpa = 0; sdpa < 2; ++sdpa) {
        double s[kS], mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t k = 0; k < kS; ++k) {
          double dot = 0;
          for (int64_t h = 0; h < kH; ++h) dot += double{emb[ids[b * kS + q] * kH + h]} * emb[ids[b * kS + k] * kH + h];
          s[k] = dot / std::sqrt(static_cast<double>(kH));
          const bool pad = mask[b * kS + k] != 0;
          if (!sdpa) s[k] += (1.0 - static_cast<double>(mask[b * kS + k])) * -10000.0;
          else if (!pad || k > q) s[k] = -std::numeric_limits<double>::infinity();
          mx = std::max(mx, s[k]);
        }
        for (int64_t k = 0; k < kS; ++k) sum += std::exp(s[k] - mx);
        for (int64_t h = 0; h < kH; ++h) {
          double want = 0;
          for (int64_t k = 0; k < kS; ++k) want += std::exp(s[k] - mx) / sum * emb[ids[b * kS + k] * kH + h];
          const float got = (*cpu)[sdpa].data<float>()[(b * kS + q) * kH + h];
          EXPECT_NEAR(got, want, 1e-5) << (sdpa ? "ctx_sdpa" : "ctx_legacy") << " [" << b << ", 0, " << q << ", " << h << "]";
        }
      }
}

TEST(GpuAttentionMask, BertMaskModelMatchesCpuPlan) {
  REQUIRE_GPU();
  auto g = imported();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto cpu = run_mask_model(*g, TargetDevice::kCpu, false);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  for (bool fp16 : {false, true}) {
    auto gpu = run_mask_model(*g, TargetDevice::kCuda, fp16);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    for (size_t k = 0; k < 2; ++k) {
      // NaN-aware: a NaN on either side is an infinite error (std::max would skip it).
      double err = 0;
      for (int64_t i = 0; i < (*cpu)[k].numel(); ++i) {
        const double d = std::fabs(static_cast<double>((*cpu)[k].data<float>()[i]) - (*gpu)[k].data<float>()[i]);
        err = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(err, d);
      }
      EXPECT_LE(err, fp16 ? 5e-3 : 1e-5) << "output " << k << (fp16 ? " [fp16]" : " [fp32]");
    }
  }
}

}  // namespace
}  // namespace kiln::testing
