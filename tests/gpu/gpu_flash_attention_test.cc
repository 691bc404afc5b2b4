// The fused FlashAttention-2 tactic at the sizes of the models (docs/decisions/0061): built alone
// (tactic sources "kiln") in fp16 and bf16, its output on the first and last (batch, head) pairs
// against a float64 host computation of the op (the whole CPU reference is slow at these sizes;
// the op table checks every row against it at small ones); and the benchmark beside the kernel
// (STYLE.md): its build-time timing, printed beside the tactic and time the builder chooses with
// every source enabled (the cuBLASLt path where that is faster). GPU only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/runtime.h"
#include "op_table/transformer_graphs.h"

namespace kiln::testing {
namespace {

using op_table::AttnCase;

struct Built {
  std::vector<Tensor> outputs;
  std::string tactic;
  double tuned_ms = 0;
};

StatusOr<Built> build_and_run(const op_table::OpCase& c, bool bf16, const std::string& sources) {
  BuilderConfig config;
  config.target = TargetDevice::kCuda;
  config.fp16 = !bf16;
  config.bf16 = bf16;
  config.tactic_sources = sources;
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(c.graph, config));
  KILN_ASSIGN_OR_RETURN(auto engine, Runtime::deserialize_engine(plan));
  auto ctx = engine->create_execution_context();
  size_t k = 0;
  for (const IOTensor& io : engine->io_tensors())
    if (io.is_input) KILN_RETURN_IF_ERROR(ctx->set_input(io.desc.name, c.inputs.at(k++)));
  KILN_RETURN_IF_ERROR(ctx->execute());
  Built b;
  for (const IOTensor& io : engine->io_tensors()) {
    if (io.is_input) continue;
    KILN_ASSIGN_OR_RETURN(Tensor t, ctx->output(io.desc.name));
    b.outputs.push_back(t.clone());
  }
  for (const DeviceLayerInfo& l : engine->device_layers())
    if (l.op == "Attention") {
      b.tactic = l.tactic;
      b.tuned_ms = l.tuned_ms;
    }
  return b;
}

// max |got - ref| / max |ref| over (batch, head) pairs (0, 0) and (B-1, Hq-1) of the 4-D case `c`
// (no mask or the [B, 1, 1, Sk] additive one; causal bottom-right), the op computed in float64.
double sampled_error(const AttnCase& c, const op_table::OpCase& oc, const Tensor& got) {
  const float* q = oc.inputs[0].data<float>();
  const float* k = oc.inputs[1].data<float>();
  const float* v = oc.inputs[2].data<float>();
  const float* mask = c.mask == AttnCase::kAddInput ? oc.inputs[3].data<float>() : nullptr;
  const int64_t group = c.hq / c.hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  double err = 0, ref_max = 0;
  std::vector<double> p(static_cast<size_t>(c.sk));
  for (auto [b, h] : {std::pair<int64_t, int64_t>{0, 0}, {c.b - 1, c.hq - 1}}) {
    const int64_t hk = h / group;
    const float* qh = q + ((b * c.hq + h) * c.sq) * c.d;
    const float* kh = k + ((b * c.hkv + hk) * c.sk) * c.d;
    const float* vh = v + ((b * c.hkv + hk) * c.sk) * c.dv;
    const float* oh = got.data<float>() + ((b * c.hq + h) * c.sq) * c.dv;
    for (int64_t i = 0; i < c.sq; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < c.sk; ++j) {
        double s = 0;
        for (int64_t e = 0; e < c.d; ++e) s += static_cast<double>(qh[i * c.d + e]) * kh[j * c.d + e];
        s = s * scale + (mask ? mask[b * c.sk + j] : 0.0);
        if (c.causal && j > i + c.sk - c.sq) s = -INFINITY;
        p[j] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (int64_t j = 0; j < c.sk; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t e = 0; e < c.dv; ++e) {
        double o = 0;
        for (int64_t j = 0; j < c.sk; ++j) o += p[j] * vh[j * c.dv + e];
        o /= sum;
        ref_max = std::max(ref_max, std::fabs(o));
        err = std::max(err, std::fabs(o - oh[i * c.dv + e]));
      }
    }
  }
  return ref_max > 0 ? err / ref_max : err;
}

TEST(GpuFlashAttention, FusedKernelMatchesTheOpAtModelSizes) {
  REQUIRE_GPU();
  struct Case {
    const char* what;
    AttnCase c;
  };
  const std::vector<Case> cases = {
      {"BERT-base b32 S128 +mask", {32, 12, 12, 128, 128, 64, 64, false, AttnCase::kAddInput}},
      {"ViT-B/16 b64 S197", {64, 12, 12, 197, 197, 64, 64}},
      {"GPT-2 b8 S512 causal", {8, 12, 12, 512, 512, 64, 64, true}},
      {"Llama-like b2 S1024 causal GQA 32:8 D128", {2, 32, 8, 1024, 1024, 128, 128, true}},
  };
  for (const Case& k : cases) {
    const op_table::OpCase c = op_table::attention_graph(k.c, 1700);
    for (bool bf16 : {false, true}) {
      auto fused = build_and_run(c, bf16, "kiln");
      ASSERT_TRUE(fused.ok()) << k.what << ": " << fused.status().to_string();
      EXPECT_NE(fused->tactic.find("kiln.flash_attention"), std::string::npos) << fused->tactic;
      ASSERT_EQ(fused->outputs.size(), 1u);
      const double e = sampled_error(k.c, c, fused->outputs[0]);
      EXPECT_LE(e, op_table::kArithTol.of(bf16 ? op_table::Precision::kBf16 : op_table::Precision::kFp16)) << k.what << (bf16 ? " bf16" : " fp16");
      auto chosen = build_and_run(c, bf16, "");  // every source: the selector times both tactics
      ASSERT_TRUE(chosen.ok()) << k.what << ": " << chosen.status().to_string();
      std::printf("  %-42s %s  fused %.4f ms, error %.1e  |  with every source: %.4f ms (%s)\n", k.what,
                  bf16 ? "bf16" : "fp16", fused->tuned_ms, e, chosen->tuned_ms, chosen->tactic.c_str());
    }
  }
}

}  // namespace
}  // namespace kiln::testing
