// The plan file: bit-exact round trips (nested subgraphs, tensor attributes, symbolic dims),
// header fields, aligned weights, and refusal of every kind of damage with a clean message.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kiln/runtime.h"
#include "plan/plan_test_util.h"

namespace kiln {
namespace {

using testing::build_add_relu_plan;
using testing::reseal;
using testing::store_le;

TEST(PlanFormat, RoundTripIsBitExact) {
  const auto bytes = build_add_relu_plan();
  ASSERT_FALSE(bytes.empty());
  auto p = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(plan::write_plan(*p), bytes);
  ASSERT_EQ(p->tactics.size(), p->graph.nodes.size());
  for (const auto& t : p->tactics) {
    EXPECT_EQ(t.name, "cpu.ref");
    EXPECT_EQ(t.id, plan::kPlanNoTacticId);
  }
  ASSERT_EQ(p->profiles.size(), 1u);
  const ShapeRange* r = p->profiles[0].find("x");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->min, (Shape{1, 4}));
  EXPECT_EQ(r->opt, (Shape{2, 4}));
  EXPECT_EQ(r->max, (Shape{8, 4}));
}

// Tactic data (serialized cuDNN plans on CUDA targets) round-trips byte for byte, binary
// contents included; a duplicated key and a blob longer than its section are refused.
TEST(PlanFormat, TacticDataRoundTripsAndIsValidated) {
  const auto bytes = build_add_relu_plan();
  auto p = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE(p->tactic_data.empty());
  std::string blob(70000, '\0');
  std::mt19937 rng(5);
  for (char& c : blob) c = static_cast<char>(rng());
  p->tactic_data["cudnn.graph dt2 n1 heur#0"] = blob;
  p->tactic_data["cudnn.graph dt2 n8 heur#3"] = std::string("{\"json\":1}\0tail", 16);
  const auto written = plan::write_plan(*p);
  auto q = plan::read_plan(written.data(), written.size());
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->tactic_data, p->tactic_data);
  EXPECT_EQ(plan::write_plan(*q), written);

  // The same key twice: patch the second key into the first (same length) and re-seal.
  auto dup = written;
  ASSERT_TRUE(testing::patch_bytes(dup, "n8 heur#3", "n1 heur#0"));
  reseal(dup);
  auto d = plan::read_plan(dup.data(), dup.size());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("tactic_data.key"), std::string::npos) << d.status().message();
  EXPECT_NE(d.status().message().find("duplicate key"), std::string::npos) << d.status().message();

  // A blob length past the end of the section.
  auto big = written;
  const std::string key = "cudnn.graph dt2 n1 heur#0";
  const auto at = std::search(big.begin(), big.end(), key.begin(), key.end());
  ASSERT_NE(at, big.end());
  store_le(big, static_cast<size_t>(at - big.begin()) + key.size(), 1u << 30, 8);
  reseal(big);
  auto e = plan::read_plan(big.data(), big.size());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("tactic_data.bytes"), std::string::npos) << e.status().message();
}

// Packed weights (docs/decisions/0040) round-trip byte for byte and point into the weights
// section; a constant stored only packed keeps its dtype and shape, reads as zeros, and the
// reader refuses a list that disagrees with the graph, a key naming no layer, a range outside
// the weights section, and shape-tactic sets outside the profile.
TEST(PlanFormat, PackedWeightsAndShapeTacticsRoundTripAndAreValidated) {
  const auto bytes = build_add_relu_plan();
  auto p = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ir::ValueId b = ir::kNoValue;
  for (const ir::Value& v : p->graph.values)
    if (v.constant && v.name == "b") b = v.id;
  ASSERT_NE(b, ir::kNoValue);
  auto blob = std::make_shared<std::vector<uint8_t>>(8);
  for (size_t i = 0; i < blob->size(); ++i) (*blob)[i] = static_cast<uint8_t>(0xA0 + i);
  p->packed_weights.clear();  // a CUDA plan (a machine with a GPU) has its own: this test's one alone
  p->packed_weights["add0|b|fp16|rowmajor|[4]"] = plan::Plan::PackedBlob{blob, blob->data(), blob->size()};
  p->elided_constants = {b};
  plan::Plan::ShapeTactics set;
  set.shapes = {Shape{8, 4}};
  set.layers.push_back({"add0", plan::PlanTactic{"", 7, 0.25}});
  set.layers.push_back({"reformat:sum", plan::PlanTactic{"", 3, 0.0}});
  p->shape_tactics = {set};
  const auto written = plan::write_plan(*p);
  auto q = plan::read_plan(written.data(), written.size());
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(plan::write_plan(*q), written);
  ASSERT_EQ(q->packed_weights.size(), 1u);
  const auto& got = q->packed_weights.begin()->second;
  ASSERT_EQ(got.bytes, 8u);
  EXPECT_EQ(std::vector<uint8_t>(got.data, got.data + got.bytes), *blob);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data) % 64, 0u);
  EXPECT_EQ(q->elided_constants, std::vector<ir::ValueId>{b});
  const auto& c = q->graph.value(b).constant;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->shape(), (Shape{4}));
  EXPECT_EQ(c->dtype(), DataType::kFloat32);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c->data<float>()[i], 0.f);
  ASSERT_EQ(q->shape_tactics.size(), 1u);
  EXPECT_EQ(q->shape_tactics[0].shapes, set.shapes);
  ASSERT_EQ(q->shape_tactics[0].layers.size(), 2u);
  EXPECT_EQ(q->shape_tactics[0].layers[1].first, "reformat:sum");
  EXPECT_EQ(q->shape_tactics[0].layers[0].second.id, 7u);

  auto refused = [&](plan::Plan edited, const std::string& field) {
    const auto w = plan::write_plan(edited);
    auto r = plan::read_plan(w.data(), w.size());
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  };
  {
    plan::Plan e = *p;  // without the list the writer stores b in full
    e.elided_constants.clear();
    const auto w = plan::write_plan(e);
    auto r = plan::read_plan(w.data(), w.size());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->elided_constants.empty());
    EXPECT_EQ(r->graph.value(b).constant->data<float>()[3], -2.f);
  }
  {
    plan::Plan e = *q;
    auto renamed = std::move(e.packed_weights.begin()->second);
    e.packed_weights.clear();
    e.packed_weights["no_such_layer|b|fp16|rowmajor|[4]"] = renamed;
    refused(e, "does not name a layer");
  }
  {
    plan::Plan e = *q;
    e.shape_tactics[0].shapes = {Shape{9, 4}};  // the profile's max is [8, 4]
    refused(e, "outside profile 0");
  }
  {
    plan::Plan e = *q;
    e.shape_tactics[0].shapes = {Shape{8, 4}, Shape{1}};
    refused(e, "graph inputs");
  }
  {
    // Damage after sealing: the elided list names the Add's other (non-constant) input.
    auto dmg = written;
    const std::string key = "add0|b|fp16|rowmajor|[4]";
    const auto at = std::search(dmg.begin(), dmg.end(), key.begin(), key.end());
    ASSERT_NE(at, dmg.end());
    // key, u64 offset, u64 bytes, then u32 count and the i32 id.
    const size_t id_at = static_cast<size_t>(at - dmg.begin()) + key.size() + 8 + 8 + 4;
    ir::ValueId x = p->graph.inputs[0];
    store_le(dmg, id_at, static_cast<uint64_t>(x), 4);
    reseal(dmg);
    auto r = plan::read_plan(dmg.data(), dmg.size());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("elided_constants"), std::string::npos) << r.status().message();
    // A packed range past the weights section.
    auto far = written;
    store_le(far, id_at - 4 - 8 - 8, uint64_t{1} << 40, 8);
    reseal(far);
    auto f = plan::read_plan(far.data(), far.size());
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.status().message().find("packed_weights.offset"), std::string::npos) << f.status().message();
  }
}

// The word-wise checksum sees every single-byte change, at every position of buffers whose
// length leaves each possible tail (0..31 bytes after the 32-byte blocks).
TEST(PlanFormat, WordHashDetectsEverySingleByteChange) {
  std::mt19937 rng(11);
  for (size_t n : {1u, 7u, 8u, 31u, 32u, 33u, 64u, 95u, 200u}) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    const uint64_t h = hash64_words(b.data(), b.size());
    EXPECT_NE(h, hash64_words(b.data(), b.size() - 1)) << n;  // length matters
    for (size_t i = 0; i < n; ++i) {
      for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}}) {
        b[i] ^= flip;
        EXPECT_NE(hash64_words(b.data(), b.size()), h) << "size " << n << " byte " << i;
        b[i] ^= flip;
      }
    }
  }
}

TEST(PlanFormat, HeaderFields) {
  const auto bytes = build_add_relu_plan();
  auto h = read_plan_header(bytes.data(), bytes.size());
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->format_version, kPlanFormatVersion);
  EXPECT_EQ(h->kiln_version, KILN_VERSION_STRING);
  EXPECT_EQ(h->target.backend, PlanBackend::kCpu);
  EXPECT_EQ(h->target.cc_major, 0u);
  EXPECT_EQ(h->file_bytes, bytes.size());
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "KILNPLAN");
}

TEST(PlanFormat, WeightsAreAlignedAndShared) {
  const auto bytes = build_add_relu_plan();
  auto p = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_TRUE(p.ok());
  int constants = 0;
  for (const ir::Value& v : p->graph.values) {
    if (!v.constant) continue;
    ++constants;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.constant->raw()) % 64, 0u) << v.name;
  }
  EXPECT_GE(constants, 1);
  EXPECT_GE(p->weights_bytes, 16u);
}

// A graph with every attribute kind, a nested If with outer-scope references, symbolic dims
// and an internal op survives write -> read -> write unchanged.
TEST(PlanFormat, RoundTripsEveryAttributeKindAndSubgraphs) {
  plan::Plan p;
  p.header.kiln_version = "test";
  ir::Graph& g = p.graph;
  g.name = "main";
  g.opset_imports[""] = 17;
  const ir::ValueId x = g.add_value("x", DataType::kFloat32);
  g.value(x).shape = ir::SymShape{ir::Dim::sym("batch"), ir::Dim::known(3), ir::Dim{}};
  g.inputs.push_back(x);
  const ir::ValueId cond = g.add_value("cond", DataType::kBool);
  g.inputs.push_back(cond);
  const ir::ValueId w = g.add_value("w", DataType::kFloat16);
  Tensor wt(DataType::kFloat16, {2, 3});
  for (int i = 0; i < 6; ++i) wt.data<uint16_t>()[i] = static_cast<uint16_t>(0x3c00 + i);
  g.value(w).constant = std::make_shared<Tensor>(wt);
  g.value(w).shape = ir::SymShape{ir::Dim::known(2), ir::Dim::known(3)};

  auto then_g = std::make_shared<ir::Graph>();
  then_g->name = "then";
  const ir::ValueId outer_x = then_g->add_value("x", DataType::kFloat32);
  then_g->outer_refs.push_back(outer_x);
  const ir::ValueId t_out = then_g->add_value("t_out", DataType::kFloat32);
  ir::Node relu;
  relu.name = "inner_relu";
  relu.op = ir::OpKind::kRelu;
  relu.opset = 17;
  relu.inputs = {outer_x};
  relu.outputs = {t_out};
  then_g->add_node(relu);
  then_g->outputs.push_back(t_out);

  const ir::ValueId y = g.add_value("y", DataType::kFloat32);
  ir::Node n;
  n.name = "if0";
  n.op = ir::OpKind::kIf;
  n.opset = 17;
  n.inputs = {cond};
  n.outputs = {y};
  ir::Attribute a;
  a.kind = ir::Attribute::Kind::kGraph;
  a.g = then_g;
  n.attrs["then_branch"] = a;
  n.attrs["else_branch"] = a;
  ir::Attribute ai;
  ai.kind = ir::Attribute::Kind::kInt;
  ai.i = -7;
  n.attrs["i"] = ai;
  ir::Attribute af;
  af.kind = ir::Attribute::Kind::kFloats;
  af.floats = {1.5f, -0.0f, 3e-30f};
  n.attrs["fs"] = af;
  ir::Attribute as;
  as.kind = ir::Attribute::Kind::kStrings;
  as.strings = {"a", "", "c"};
  n.attrs["ss"] = as;
  ir::Attribute at;
  at.kind = ir::Attribute::Kind::kTensor;
  Tensor tv(DataType::kInt64, {3});
  tv.data<int64_t>()[0] = 1;
  tv.data<int64_t>()[2] = -9;
  at.t = std::make_shared<Tensor>(tv);
  n.attrs["t"] = at;
  n.origin = {"if0", "absorbed_a"};
  g.add_node(n);
  const ir::ValueId z = g.add_value("z", DataType::kFloat32);
  ir::Node fused;
  fused.name = "fused";
  fused.op = ir::OpKind::kFusedConv;
  fused.inputs = {y, w, ir::kNoValue};
  fused.outputs = {z};
  g.add_node(fused);
  g.outputs = {z};
  OptimizationProfile prof;
  ASSERT_TRUE(prof.set_dimensions("x", {1, 3, 1}, {2, 3, 4}, {4, 3, 9}).ok());
  ASSERT_TRUE(prof.set_dimensions("cond", {}, {}, {}).ok());
  p.profiles = {prof};
  p.tactics = {plan::PlanTactic{"cpu.ref"}, plan::PlanTactic{"cudnn.conv_bias_act algo=1", 0x01000001u, 0.0625}};
  p.build.precision.fp16 = true;
  p.build.opt_level = 3;
  p.build.workspace_limit = 1 << 20;
  p.build.max_aux_streams = 2;

  const auto bytes = plan::write_plan(p);
  auto back = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(plan::write_plan(*back), bytes);
  ASSERT_EQ(back->tactics.size(), 2u);
  EXPECT_EQ(back->tactics[0].id, plan::kPlanNoTacticId);
  EXPECT_EQ(back->tactics[1].name, "cudnn.conv_bias_act algo=1");
  EXPECT_EQ(back->tactics[1].id, 0x01000001u);
  EXPECT_DOUBLE_EQ(back->tactics[1].tuned_ms, 0.0625);
  const ir::Graph& bg = back->graph;
  ASSERT_EQ(bg.nodes.size(), 2u);
  EXPECT_EQ(bg.nodes[1].op, ir::OpKind::kFusedConv);
  EXPECT_EQ(bg.nodes[1].inputs[2], ir::kNoValue);
  EXPECT_EQ(bg.nodes[0].origin, (std::vector<std::string>{"if0", "absorbed_a"}));
  EXPECT_EQ(ir::sym_shape_str(*bg.value(bg.inputs[0]).shape), "[batch,3,?]");
  const auto& sub = *bg.nodes[0].attrs.at("then_branch").g;
  ASSERT_EQ(sub.outer_refs.size(), 1u);
  EXPECT_EQ(sub.value(sub.outer_refs[0]).name, "x");
  EXPECT_EQ(bg.nodes[0].attrs.at("i").i, -7);
  EXPECT_EQ(bg.nodes[0].attrs.at("ss").strings, (std::vector<std::string>{"a", "", "c"}));
  EXPECT_TRUE(bg.nodes[0].attrs.at("t").t->bit_equal(tv));
  EXPECT_TRUE(bg.value(bg.find_value("w")).constant->bit_equal(wt));
  EXPECT_TRUE(back->build.precision.fp16);
  EXPECT_FALSE(back->build.precision.bf16);
  EXPECT_EQ(back->build.opt_level, 3);
  EXPECT_EQ(back->build.workspace_limit, 1u << 20);
  EXPECT_EQ(back->build.max_aux_streams, 2);
}

// The build section's max_aux_streams is -1..16; the reader names the field otherwise.
TEST(PlanFormat, RefusesBadMaxAuxStreams) {
  const auto good = build_add_relu_plan();
  auto p = plan::read_plan(good.data(), good.size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->build.max_aux_streams, -1) << "the builder's default: it decides";
  for (int32_t bad : {-2, 17}) {
    p->build.max_aux_streams = bad;
    const auto b = plan::write_plan(*p);
    auto q = plan::read_plan(b.data(), b.size());
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find("build.max_aux_streams"), std::string::npos) << q.status().message();
  }
}

TEST(PlanFormat, RefusesBadMagic) {
  auto b = build_add_relu_plan();
  b[0] = 'X';
  auto p = plan::read_plan(b.data(), b.size());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidPlan);
  EXPECT_NE(p.status().message().find("not a Kiln plan"), std::string::npos) << p.status().message();
  const std::string onnx = testing::add_relu_model().bytes();
  auto q = plan::read_plan(reinterpret_cast<const uint8_t*>(onnx.data()), onnx.size());
  EXPECT_NE(q.status().message().find("not a Kiln plan"), std::string::npos);
  auto e = plan::read_plan(nullptr, 0);
  EXPECT_NE(e.status().message().find("empty"), std::string::npos);
}

TEST(PlanFormat, RefusesOtherFormatVersion) {
  auto b = build_add_relu_plan();
  store_le(b, plan::kOffVersion, 99, 4);
  reseal(b);
  auto p = plan::read_plan(b.data(), b.size());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("plan format version 99, this build reads " + std::to_string(kPlanFormatVersion)),
            std::string::npos)
      << p.status().message();
}

TEST(PlanFormat, RefusesTruncation) {
  const auto b = build_add_relu_plan();
  auto p = plan::read_plan(b.data(), b.size() - 3);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("truncated at section 'weights': need"), std::string::npos)
      << p.status().message();
  auto h = plan::read_plan(b.data(), 40);
  EXPECT_NE(h.status().message().find("truncated at section 'header': need"), std::string::npos)
      << h.status().message();
}

TEST(PlanFormat, RefusesChecksumMismatch) {
  auto b = build_add_relu_plan();
  b[plan::kOffChecksum] ^= 0x01;
  auto p = plan::read_plan(b.data(), b.size());
  EXPECT_NE(p.status().message().find("checksum mismatch"), std::string::npos) << p.status().message();
  auto c = build_add_relu_plan();
  c[c.size() / 2] ^= 0x40;
  auto q = plan::read_plan(c.data(), c.size());
  EXPECT_NE(q.status().message().find("checksum mismatch"), std::string::npos) << q.status().message();
}

TEST(PlanFormat, RefusesUnknownOpName) {
  auto b = build_add_relu_plan();
  // Op names are stored by name: "Relu" behind its u32 length 4.
  ASSERT_TRUE(testing::patch_bytes(b, std::string("\x04\0\0\0Relu", 8), std::string("\x04\0\0\0Rexu", 8)));
  reseal(b);
  auto p = plan::read_plan(b.data(), b.size());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("unknown op name 'Rexu'"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("section 'graph'"), std::string::npos) << p.status().message();
}

TEST(PlanFormat, RefusesPlanForAnotherTarget) {
  auto b = build_add_relu_plan();
  b[plan::kOffTarget] = static_cast<uint8_t>(PlanBackend::kCuda);
  store_le(b, plan::kOffTarget + 4, 1, 4);  // sm_10: no machine has it
  store_le(b, plan::kOffTarget + 8, 0, 4);
  store_le(b, plan::kOffTarget + 12, 90100, 4);
  reseal(b);
  auto h = read_plan_header(b.data(), b.size());
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->target.to_string(), "cuda sm_10 (cuDNN 90100, cuBLASLt 0)");
  auto e = Runtime::deserialize_engine(b);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("target mismatch"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("sm_10"), std::string::npos) << e.status().message();
}

TEST(PlanFormat, RefusesTrailingBytes) {
  auto b = build_add_relu_plan();
  b.push_back(0);
  auto p = plan::read_plan(b.data(), b.size());
  EXPECT_NE(p.status().message().find("unexpected bytes after the plan's end"), std::string::npos)
      << p.status().message();
}

// Every single-byte change and every truncation is refused (FNV-1a detects any one-byte change
// of a fixed-length message), never a crash.
TEST(PlanFormat, EveryFlipAndTruncationIsRefused) {
  const auto b = build_add_relu_plan();
  for (size_t off = 0; off < b.size(); ++off) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      auto c = b;
      c[off] ^= mask;
      auto p = plan::read_plan(c.data(), c.size());
      ASSERT_FALSE(p.ok()) << "flip at " << off;
      ASSERT_EQ(p.status().code(), StatusCode::kInvalidPlan) << off;
      ASSERT_FALSE(p.status().message().empty());
    }
  }
  for (size_t len = 0; len < b.size(); ++len) {
    auto p = plan::read_plan(b.data(), len);
    ASSERT_FALSE(p.ok()) << "truncated to " << len;
    ASSERT_EQ(p.status().code(), StatusCode::kInvalidPlan) << len;
  }
}

// With the checksum re-sealed after the damage, the structural validation must catch what it
// can and never crash; whatever still loads must also run or fail cleanly.
TEST(PlanFormat, ResealedCorruptionNeverCrashes) {
  const auto b = build_add_relu_plan();
  std::mt19937 rng(1234);
  Tensor x(DataType::kFloat32, {2, 4});
  for (int i = 0; i < 8; ++i) x.data<float>()[i] = static_cast<float>(i) - 3.5f;
  int refused = 0, loaded = 0;
  auto try_plan = [&](std::vector<uint8_t>& c) {
    reseal(c);
    auto e = Runtime::deserialize_engine(c);
    if (!e.ok()) {
      EXPECT_FALSE(e.status().message().empty());
      ++refused;
      return;
    }
    ++loaded;
    auto ctx = (*e)->create_execution_context();
    if (ctx->set_input("x", x).ok()) (void)ctx->execute();
  };
  for (size_t off = 0; off < b.size(); ++off) {
    if (off >= plan::kOffChecksum && off < plan::kOffChecksum + 8) continue;
    auto c = b;
    c[off] ^= static_cast<uint8_t>(1 + rng() % 255);
    try_plan(c);
  }
  for (int iter = 0; iter < 3000; ++iter) {
    auto c = b;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const size_t off = plan::kOffSectionTable + rng() % (c.size() - plan::kOffSectionTable);
      c[off] = static_cast<uint8_t>(rng());
    }
    try_plan(c);
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);  // e.g. changed weight values or padding still load
}

}  // namespace
}  // namespace kiln
