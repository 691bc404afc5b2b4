// Kiln's skinny GEMM (kernels_gemv.h; docs/decisions/0089): 16-bit constant-weight GEMMs with few
// rows built alone with tactic sources "kiln" — so the layer runs the skinny GEMM — in fp16 and
// bf16, M from 1 to 8, with and without bias, residual and ReLU, N not a multiple of a block's
// outputs, the LM head's float32 output: against the CPU reference within the 16-bit storage's
// error; every source enabled gives the same within that error whatever the builder chooses.
// Above kGemvMaxM rows it is not offered; without a GPU: the bounds of gemv_supports.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/interpreter.h"
#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/kernels_gemv.h"
#endif

namespace kiln::testing {
namespace {

struct Case {
  int64_t m, k, n;
  bool bias, residual, relu;
};

// y = [relu](x · w [+ b] [+ r]) with x [m, k] and r [m, n] inputs, w [k, n], b [n] constants.
TinyGraph gemm_graph(const Case& c, uint32_t seed) {
  TinyGraph t;
  auto x = t.input("x", {c.m, c.k});
  auto y = t.node(ir::OpKind::kMatMul, "mm", {x, t.constant("w", random_tensor({c.k, c.n}, seed, -0.2f, 0.2f))}, {c.m, c.n});
  if (c.bias) y = t.node(ir::OpKind::kAdd, "bias", {y, t.constant("b", random_tensor({c.n}, seed + 1))}, {c.m, c.n});
  if (c.residual) y = t.node(ir::OpKind::kAdd, "res", {y, t.input("r", {c.m, c.n})}, {c.m, c.n});
  if (c.relu) y = t.node(ir::OpKind::kRelu, "relu", {y}, {c.m, c.n});
  t.g.outputs = {y};
  return t;
}

struct Run {
  std::vector<Tensor> out;
  std::vector<std::string> gemm_tactics;
};

StatusOr<Run> build_and_run(const ir::Graph& g, const std::vector<Tensor>& in, bool bf16, const std::string& sources) {
  BuilderConfig config;
  config.target = TargetDevice::kCuda;
  config.fp16 = !bf16;
  config.bf16 = bf16;
  config.tactic_sources = sources;
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(g, config));
  KILN_ASSIGN_OR_RETURN(auto engine, Runtime::deserialize_engine(plan));
  auto ctx = engine->create_execution_context();
  size_t k = 0;
  for (const IOTensor& io : engine->io_tensors())
    if (io.is_input) KILN_RETURN_IF_ERROR(ctx->set_input(io.desc.name, in.at(k++)));
  KILN_RETURN_IF_ERROR(ctx->execute());
  Run r;
  for (const IOTensor& io : engine->io_tensors()) {
    if (io.is_input) continue;
    KILN_ASSIGN_OR_RETURN(Tensor t, ctx->output(io.desc.name));
    r.out.push_back(t.clone());
  }
  for (const DeviceLayerInfo& l : engine->device_layers())
    if (l.op == "Gemm") r.gemm_tactics.push_back(l.tactic);
  return r;
}

TEST(GpuGemv, SkinnyGemmMatchesTheReference) {
  REQUIRE_GPU();
  const std::vector<Case> cases = {
      {1, 64, 96, false, false, false},   {1, 4096, 515, false, false, false}, {3, 136, 1030, true, false, false},
      {8, 256, 4100, true, true, false},  {5, 72, 33, false, true, true},      {2, 1032, 257, true, false, true},
      {8, 512, 1, false, false, false},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    const TinyGraph t = gemm_graph(c, seed);
    std::vector<Tensor> in = {random_tensor({c.m, c.k}, seed + 2)};
    if (c.residual) in.push_back(random_tensor({c.m, c.n}, seed + 3));
    seed += 10;
    auto ref = interpret(t.g, in);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (bool bf16 : {false, true}) {
      const std::string what = "m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) +
                               (c.bias ? " +bias" : "") + (c.residual ? " +residual" : "") + (c.relu ? " +relu" : "") +
                               (bf16 ? " bf16" : " fp16");
      // bf16 keeps 8 bits of mantissa: X, W and Y each rounded.
      const double tol = bf16 ? 3e-2 : 4e-3;
      auto kiln = build_and_run(t.g, in, bf16, "kiln");
      ASSERT_TRUE(kiln.ok()) << what << ": " << kiln.status().to_string();
      ASSERT_EQ(kiln->gemm_tactics.size(), 1u) << what;
      EXPECT_EQ(kiln->gemm_tactics[0].rfind("kiln.gemv", 0), 0u) << what << ": " << kiln->gemm_tactics[0];
      EXPECT_LE(relative_diff(*ref, kiln->out), tol) << what << " (" << kiln->gemm_tactics[0] << ")";
      auto all = build_and_run(t.g, in, bf16, "");
      ASSERT_TRUE(all.ok()) << what << ": " << all.status().to_string();
      EXPECT_LE(relative_diff(*ref, all->out), tol) << what << " (" << all->gemm_tactics.at(0) << ")";
    }
  }
}

// A decoder layer's RMSNorm -> gate/up -> silu(gate) * up (docs/decisions/0092): the passes make one
// GEMM with the norm in its prologue and the gate in its epilogue. The skinny GEMM ("kiln") and
// cuBLASLt with the norm kernel before and the gate kernel after ("cublaslt") both match the CPU
// reference, M from 1 to 8 — K = 4096 at M = 8 puts 64 KiB of normalized rows in shared memory.
// Without the gate (q/k/v: the norm alone) the same.
TinyGraph norm_mlp_graph(int64_t m, int64_t k, int64_t n, bool gate, uint32_t seed) {
  TinyGraph t;
  auto x = t.input("x", {m, k});
  auto h = t.node(ir::OpKind::kRMSNormalization, "norm", {x, t.constant("scale", random_tensor({k}, seed, 0.5f, 1.5f))},
                  {m, k}, {{"axis", ir::Attribute::of_int(-1)}, {"epsilon", ir::Attribute::of_float(1e-5f)}});
  auto g = t.node(ir::OpKind::kMatMul, "gate_proj", {h, t.constant("wg", random_tensor({k, n}, seed + 1, -0.05f, 0.05f))},
                  {m, n});
  if (!gate) {
    t.g.outputs = {g};
    return t;
  }
  auto u = t.node(ir::OpKind::kMatMul, "up_proj", {h, t.constant("wu", random_tensor({k, n}, seed + 2, -0.05f, 0.05f))},
                  {m, n});
  auto s = t.node(ir::OpKind::kSigmoid, "act.sigmoid", {g}, {m, n});
  auto a = t.node(ir::OpKind::kMul, "act", {g, s}, {m, n});
  t.g.outputs = {t.node(ir::OpKind::kMul, "gate_up", {a, u}, {m, n})};
  return t;
}

TEST(GpuGemv, NormPrologueAndSiluGateEpilogue) {
  REQUIRE_GPU();
  struct NCase {
    int64_t m, k, n;
    bool gate;
  };
  const std::vector<NCase> cases = {{1, 4096, 1024, true}, {3, 512, 200, true},  {8, 4096, 512, true},
                                    {1, 4096, 1536, false}, {5, 1024, 96, false}, {8, 4096, 256, false}};
  uint32_t seed = 900;
  for (const NCase& c : cases) {
    const TinyGraph t = norm_mlp_graph(c.m, c.k, c.n, c.gate, seed);
    const std::vector<Tensor> in = {random_tensor({c.m, c.k}, seed + 5, -2.f, 2.f)};
    seed += 10;
    auto ref = interpret(t.g, in);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (bool bf16 : {false, true}) {
      const std::string what = "m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) +
                               (c.gate ? " gate" : "") + (bf16 ? " bf16" : " fp16");
      const double tol = bf16 ? 3e-2 : 4e-3;
      std::vector<Tensor> outs;
      for (const char* sources : {"kiln", "cublaslt"}) {
        auto r = build_and_run(t.g, in, bf16, sources);
        ASSERT_TRUE(r.ok()) << what << " " << sources << ": " << r.status().to_string();
        ASSERT_EQ(r->gemm_tactics.size(), 1u) << what << " " << sources << ": the norm and gate are one layer";
        const std::string& tac = r->gemm_tactics[0];
        EXPECT_NE(tac.find("rms_norm"), std::string::npos) << what << ": " << tac;
        EXPECT_EQ(tac.find("silu_gate") != std::string::npos, c.gate) << what << ": " << tac;
        EXPECT_EQ(tac.rfind(sources[0] == 'k' ? "kiln.gemv" : "cublaslt.matmul", 0), 0u) << what << ": " << tac;
        EXPECT_LE(relative_diff(*ref, r->out), tol) << what << " (" << tac << ")";
        outs.push_back(r->out.at(0).clone());
      }
      // The two tactics agree with each other more closely than either with the float32 reference.
      EXPECT_LE(relative_diff({outs[0]}, {outs[1]}), bf16 ? 2e-2 : 2e-3) << what;
    }
  }
}

// Above kGemvMaxM rows the skinny GEMM is not offered: a "kiln"-only build has no GEMM tactic.
TEST(GpuGemv, NotOfferedForManyRows) {
  REQUIRE_GPU();
  const TinyGraph t = gemm_graph({9, 64, 96, false, false, false}, 7);
  auto r = build_and_run(t.g, {random_tensor({9, 64}, 8)}, false, "kiln");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no tactic from the enabled sources"), std::string::npos) << r.status().message();
}

TEST(GpuGemv, SupportBounds) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  cuda::GemvDesc d;
  d.m = 1;
  d.n = 4096;
  d.k = 4096;
  d.t = cuda::StorageType::kF16;
  EXPECT_TRUE(cuda::gemv_supports(d));
  d.t = cuda::StorageType::kBF16;
  EXPECT_TRUE(cuda::gemv_supports(d));
  d.t = cuda::StorageType::kF32;
  EXPECT_FALSE(cuda::gemv_supports(d));  // 16-bit only
  d.t = cuda::StorageType::kF16;
  d.m = cuda::kGemvMaxM + 1;
  EXPECT_FALSE(cuda::gemv_supports(d));
  d.m = cuda::kGemvMaxM;
  d.k = 4100;  // rows not 16-byte aligned
  EXPECT_FALSE(cuda::gemv_supports(d));
  d.k = 4096;
  d.rows_per_warp = 3;
  EXPECT_FALSE(cuda::gemv_supports(d));
  // The norm keeps M x K 16-bit values in shared memory; the gate takes 1 or 2 outputs per warp.
  d.rows_per_warp = 1;
  d.norm = true;
  EXPECT_TRUE(cuda::gemv_supports(d));  // 8 x 4096 x 2 = 64 KiB
  d.k = 8192;
  EXPECT_FALSE(cuda::gemv_supports(d));  // 128 KiB
  d.k = 4096;
  d.out_f32 = true;
  EXPECT_FALSE(cuda::gemv_supports(d));
  d.out_f32 = false;
  d.gate = true;
  EXPECT_TRUE(cuda::gemv_supports(d));
  d.rows_per_warp = 4;
  EXPECT_FALSE(cuda::gemv_supports(d));
  d.rows_per_warp = 2;
  d.relu = true;
  EXPECT_FALSE(cuda::gemv_supports(d));
#endif
}

}  // namespace
}  // namespace kiln::testing
