// The CUDA transformer layers' planning (gpu_transformer.*; no GPU needed, CUDA builds): the
// Attention plan's GQA folding, chunks, mask / causal index helpers, and errors that name the
// node. The layers' values against the CPU reference are rows of the op table (tests/op_table/:
// Attention_*, RMSNormalization_*, MatMulBias_*, DecoderBlock_*; the host emulation of the
// Attention plan runs in OpTable/OpTableCudaLowering.*).
#include <gtest/gtest.h>

#include <optional>

#include "op_table/op_table.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_transformer.h"
#endif

namespace kiln::testing {
namespace {

using ir::Attribute;
using ir::OpKind;
using op_table::nonzero;

// ---------------------------------------------------------------- planning errors (no GPU needed)
#ifdef KILN_HAVE_CUDA
ir::Node attention_node(std::map<std::string, Attribute> attrs = {}) {
  ir::Node n;
  n.name = "attn_7";
  n.op = OpKind::kAttention;
  n.attrs = std::move(attrs);
  return n;
}
#endif

TEST(GpuTransformerPlan, AttentionPlanFoldsGqaIntoMAndChunks) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  // Q [2, 8, 10, 64], K/V [2, 2, 12, 64]: 4 units (batch x kv heads) of M = 4 query heads x 10 rows.
  auto p = cuda::plan_attention(attention_node({{"is_causal", Attribute::of_int(1)}}), {2, 8, 10, 64}, {2, 2, 12, 64},
                                {2, 2, 12, 64}, Shape{2, 1, 1, 12}, false, {2, 8, 10, 64}, 2, 64u << 20);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->units, 4);
  EXPECT_EQ(p->m, 40);
  EXPECT_EQ(p->group, 4);
  EXPECT_EQ(p->chunk, 4);
  EXPECT_FLOAT_EQ(p->scale, 0.125f);
  EXPECT_EQ(p->probs_offset % 256, 0u);
  EXPECT_GE(p->probs_offset, 4u * 40 * 12 * 4);                     // S: fp32
  EXPECT_GE(p->scratch_bytes, p->probs_offset + 4u * 40 * 12 * 2);  // P: fp16
  EXPECT_EQ(p->softmax.mask, cuda::AttentionMask::kAdditive);
  EXPECT_EQ(p->softmax.mask_key_stride, 1);
  // Row (b=1, h=5, i=3): the mask row of batch 1 (stride Sk = 12), heads and queries broadcast.
  EXPECT_EQ(cuda::attention_mask_row_offset(p->softmax, (1 * 8 + 5) * 10 + 3), 12);
  // Causal, bottom-right aligned: query 3 of 10 against 12 keys sees keys 0..5.
  EXPECT_EQ(cuda::attention_key_limit(p->softmax, 3), 5);
  // A scratch limit of one unit: 4 chunks of 1; fp32 storage: P overwrites S.
  auto small = cuda::plan_attention(attention_node(), {2, 8, 10, 64}, {2, 2, 12, 64}, {2, 2, 12, 64}, std::nullopt, false,
                                    {2, 8, 10, 64}, 4, 40 * 12 * 4);
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  EXPECT_EQ(small->chunk, 1);
  EXPECT_EQ(small->probs_offset, 0u);
  EXPECT_EQ(small->softmax.mask, cuda::AttentionMask::kNone);
#endif
}

TEST(GpuTransformerPlan, BadShapesGiveErrorsNamingTheNode) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  struct Bad { Shape q, k, v; std::optional<Shape> mask; Shape out; const char* expect; };
  const std::vector<Bad> bad = {
      {{2, 4, 8, 64}, {2, 4, 8, 32}, {2, 4, 8, 64}, std::nullopt, {2, 4, 8, 64}, "do not fit"},
      {{2, 6, 8, 64}, {2, 4, 8, 64}, {2, 4, 8, 64}, std::nullopt, {2, 6, 8, 64}, "not a multiple of kv heads"},
      {{2, 4, 8, 64}, {3, 4, 8, 64}, {3, 4, 8, 64}, std::nullopt, {2, 4, 8, 64}, "batch dims differ"},
      {{4, 8}, {4, 8}, {4, 8}, std::nullopt, {4, 8}, "rank >= 3"},
      {{2, 4, 8, 64}, {2, 4, 8, 64}, {2, 4, 8, 64}, Shape{2, 1, 3, 8}, {2, 4, 8, 64}, "does not broadcast"},
      {{2, 4, 8, 64}, {2, 4, 8, 64}, {2, 4, 8, 64}, std::nullopt, {2, 4, 8, 32}, "is not [*, Hq, Sq, Dv]"},
  };
  for (const Bad& b : bad) {
    auto p = cuda::plan_attention(attention_node(), b.q, b.k, b.v, b.mask, false, b.out, 4, 64u << 20);
    ASSERT_FALSE(p.ok()) << b.expect;
    EXPECT_NE(p.status().message().find("node 'attn_7' (Attention)"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(b.expect), std::string::npos) << p.status().message();
  }
  ir::Node rms;
  rms.name = "rms_3";
  rms.op = OpKind::kRMSNormalization;
  auto r = cuda::plan_rms_norm(rms, {2, 5, 24}, {5, 24});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'rms_3'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("does not match the normalized dims"), std::string::npos) << r.status().message();
  rms.attrs["axis"] = Attribute::of_int(3);
  EXPECT_FALSE(cuda::plan_rms_norm(rms, {2, 5, 24}, {24}).ok());
  rms.attrs["axis"] = Attribute::of_int(1);
  auto ok = cuda::plan_rms_norm(rms, {2, 5, 24}, {1, 5, 24});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->rows, 2);
  EXPECT_EQ(ok->cols, 120);
  EXPECT_EQ(ok->scale_n, 120);
#endif
}

// The fused tactic (docs/decisions/0061) is offered exactly for fp16 / bf16 storage with
// D == Dv in {64, 128}, whatever the mask, causal flag or GQA group; the tactic id is stable.
TEST(GpuTransformerPlan, FlashAttentionOfferedForHalfTypesAndHeadSizes64And128) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  EXPECT_EQ(cuda::kFlashAttentionTactic, make_tactic_id(TacticSource::kKiln, 0xFA2));  // 64-row blocks
  EXPECT_EQ(cuda::kFlashAttention128Tactic, make_tactic_id(TacticSource::kKiln, 0x1FA2));  // 128 (0084)
  auto plan = [](int64_t d, int64_t dv, bool causal, std::optional<Shape> mask, bool mask_bool) {
    auto p = cuda::plan_attention(attention_node({{"is_causal", Attribute::of_int(causal)}}), {2, 8, 10, d},
                                  {2, 2, 12, d}, {2, 2, 12, dv}, mask, mask_bool, {2, 8, 10, dv}, 2, 64u << 20);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return *p;
  };
  using cuda::StorageType;
  for (StorageType t : {StorageType::kF16, StorageType::kBF16}) {
    EXPECT_TRUE(cuda::flash_attention_offered(plan(64, 64, false, std::nullopt, false), t));
    EXPECT_TRUE(cuda::flash_attention_offered(plan(128, 128, true, Shape{2, 1, 1, 12}, false), t));
    EXPECT_TRUE(cuda::flash_attention_offered(plan(64, 64, true, Shape{10, 12}, true), t));
    EXPECT_FALSE(cuda::flash_attention_offered(plan(80, 80, false, std::nullopt, false), t));
    EXPECT_FALSE(cuda::flash_attention_offered(plan(64, 32, false, std::nullopt, false), t));
    EXPECT_FALSE(cuda::flash_attention_offered(plan(256, 256, false, std::nullopt, false), t));
  }
  EXPECT_FALSE(cuda::flash_attention_offered(plan(64, 64, false, std::nullopt, false), StorageType::kF32));
  // The layer names its kernel and keys its timings apart from the cuBLASLt path's.
  auto layer = cuda::make_flash_attention_layer(plan(128, 128, true, Shape{2, 1, 1, 12}, false), StorageType::kBF16);
  EXPECT_EQ(layer->tactic, "kiln.flash_attention bf16 d128 gqa=4 causal +mask");
  EXPECT_NE(layer->signature().find("flash_attention b=2 hq=8 hkv=2 sq=10 sk=12 d=128 bf16 causal mask"),
            std::string::npos) << layer->signature();
#endif
}

// check_gpu_support (no GPU needed) lists every bad transformer layer at once, naming each node.
TEST(GpuTransformerPlan, SupportCheckListsBadLayersByName) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  TinyGraph t;
  auto q = t.input("q", {1, 2, 8, 64});
  Tensor im(DataType::kInt64, {1, 1, 1, 8});
  for (int64_t i = 0; i < 8; ++i) im.data<int64_t>()[i] = 1;
  auto a = t.node(OpKind::kAttention, "attn_int_mask", {q, q, q, t.constant("imask", im)}, {1, 2, 8, 64});
  auto r = t.node(OpKind::kRMSNormalization, "rms_bad_scale", {a, t.constant("w", nonzero({32}, 1))}, {1, 2, 8, 64});
  t.g.outputs = {r};
  auto vs = cuda::infer_value_shapes_by_reference(t.g, {{1, 2, 8, 64}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  Status e = cuda::check_gpu_support(t.g, *vs);
  EXPECT_EQ(e.code(), StatusCode::kUnsupported) << e.to_string();
  EXPECT_NE(e.message().find("node 'attn_int_mask' (Attention): mask dtype int64 is neither float nor bool"),
            std::string::npos) << e.message();
  EXPECT_NE(e.message().find("node 'rms_bad_scale'"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("does not match the normalized dims"), std::string::npos) << e.message();
#endif
}

}  // namespace
}  // namespace kiln::testing
