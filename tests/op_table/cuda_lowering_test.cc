// The CUDA column of the op table without a GPU (CUDA builds): every CUDA row's graph, after the
// optimizer's pipeline and the layout assignment of each of its precisions, lowers with that
// precision's rules (check_gpu_support: no device touched), and where the row is a single op whose plan has a host emulation
// (cuda_emulation.h) the planned descriptors reproduce the CPU reference. One test per row:
//   OpTable/OpTableCudaLowering.LowersWithoutGpu/Attention_MHA_d64
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"

#include <algorithm>
#include <ostream>

#include "kiln/precision.h"
#include "op_table/op_table.h"
#include "passes/passes.h"

#ifdef KILN_HAVE_CUDA
#include "op_table/cuda_emulation.h"
#endif

namespace kiln::testing::op_table {

// gtest prints the parameter of a failing test with this (its row's name, not an address).
void PrintTo(const Row* row, std::ostream* os) { *os << row->name; }

namespace {

class OpTableCudaLowering : public ::testing::TestWithParam<const Row*> {};

#ifdef KILN_HAVE_CUDA
cuda::StorageType storage_of(Precision p) {
  return p == Precision::kFp32 ? cuda::StorageType::kF32
                               : (p == Precision::kFp16 ? cuda::StorageType::kF16 : cuda::StorageType::kBF16);
}

// A single Attention node: its plan for fp32 and fp16 scratch layouts, with a scratch limit
// that allows all units at once and one that forces chunks, emulated on the host.
void check_attention_plan(const OpCase& c, const cuda::ValueShapes& vs, const std::vector<Tensor>& ref) {
  const ir::Node& n = c.graph.nodes[0];
  // Operands as the lowering sees them: graph inputs in order, constants; a bool mask (constant
  // or a run-time input) as 0/1.
  std::vector<Tensor> ops;
  size_t next_input = 0;
  for (ir::ValueId v : n.inputs) {
    const auto& k = c.graph.value(v).constant;
    const Tensor& src = k ? *k : c.inputs.at(next_input++);
    Tensor f(DataType::kFloat32, src.shape());
    for (int64_t i = 0; i < src.numel(); ++i)
      f.data<float>()[i] = src.dtype() == DataType::kBool ? static_cast<const uint8_t*>(src.raw())[i] : src.data<float>()[i];
    ops.push_back(std::move(f));
  }
  for (int eb : {4, 2})
    for (size_t limit : {size_t{64} << 20, size_t{4096}}) {
      auto p = cuda::plan_attention(n, vs, eb, limit);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_EQ(p->units % p->chunk, 0);
      auto emu = emulate_attention(*p, ops[0], ops[1], ops[2], ops.size() > 3 ? &ops[3] : nullptr, ref[0].shape());
      EXPECT_LE(relative_diff(ref, emu), 1e-5)
          << "host emulation, " << eb << "-byte storage, chunk " << p->chunk << "/" << p->units;
    }
}

// An exporter-style head-transposed Attention (AttnCase::bshd, docs/decisions/0065): the CUDA
// pipeline leaves one Attention of head_layout "bshd" and no Transpose; its plan (fp32 and fp16
// scratch, all units at once and in chunks) run as the cuBLASLt path runs it — Q, K, V copied to
// [B, H, S, D] by the plan's strided-copy descriptors, the planned GEMMs and softmax, O copied
// back — reproduces the CPU reference of the unfolded graph.
void check_bshd_attention_plan(const OpCase& c, const std::vector<Shape>& shapes, const std::vector<Tensor>& ref) {
  BuilderConfig config;
  OptimizationProfile prof;
  for (size_t i = 0; i < c.graph.inputs.size(); ++i)
    ASSERT_TRUE(prof.set_dimensions(c.graph.value(c.graph.inputs[i]).name, shapes[i], shapes[i], shapes[i]).ok());
  config.profiles.push_back(prof);
  auto laid = cuda_layer_graph(c.graph, config, nullptr);
  ASSERT_TRUE(laid.ok()) << laid.status().to_string();
  const ir::Node* n = nullptr;
  for (const ir::Node& x : laid->nodes) {
    if (x.removed) continue;
    EXPECT_NE(x.op, ir::OpKind::kTranspose) << x.describe() << " was not folded";
    if (x.op == ir::OpKind::kAttention) n = &x;
  }
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->attr_string("head_layout", ""), "bshd");
  auto vs = cuda::infer_value_shapes_by_reference(*laid, shapes);
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  std::vector<Tensor> ops;  // Q, K, V [B, S, H, D] and the mask (bool as 0/1), as stored
  for (ir::ValueId v : n->inputs) {
    const auto& k = laid->value(v).constant;
    const auto at = std::find(laid->inputs.begin(), laid->inputs.end(), v);
    ASSERT_TRUE(k || at != laid->inputs.end()) << "input " << laid->value(v).name << " is neither constant nor a graph input";
    const Tensor& src = k ? *k : c.inputs.at(static_cast<size_t>(at - laid->inputs.begin()));
    Tensor f(DataType::kFloat32, src.shape());
    for (int64_t i = 0; i < src.numel(); ++i)
      f.data<float>()[i] = src.dtype() == DataType::kBool ? static_cast<const uint8_t*>(src.raw())[i] : src.data<float>()[i];
    ops.push_back(std::move(f));
  }
  for (int eb : {4, 2})
    for (size_t limit : {size_t{64} << 20, size_t{4096}}) {
      auto p = cuda::plan_attention(*n, *vs, eb, limit);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_TRUE(p->bshd);
      const size_t e = static_cast<size_t>(eb);
      EXPECT_GE(p->staging_bytes, static_cast<size_t>(p->batch * (p->hq * p->sq * (p->d + p->dv) + p->hkv * p->sk * (p->d + p->dv))) * e);
      const Tensor q = emulate_strided_copy(cuda::attention_axes_swap(p->batch, p->sq, p->hq, p->d), ops[0]);
      const Tensor k = emulate_strided_copy(cuda::attention_axes_swap(p->batch, p->sk, p->hkv, p->d), ops[1]);
      const Tensor v = emulate_strided_copy(cuda::attention_axes_swap(p->batch, p->sk, p->hkv, p->dv), ops[2]);
      auto o = emulate_attention(*p, q, k, v, ops.size() > 3 ? &ops[3] : nullptr, {p->batch, p->hq, p->sq, p->dv});
      const Tensor y = emulate_strided_copy(cuda::attention_axes_swap(p->batch, p->hq, p->sq, p->dv), o[0]);
      EXPECT_LE(relative_diff(ref, {y}), 1e-5) << "host emulation, " << eb << "-byte storage, chunk " << p->chunk << "/" << p->units;
    }
}
#endif

TEST_P(OpTableCudaLowering, LowersWithoutGpu) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const Row& row = *GetParam();
  const OpCase c = row.make();
  auto ref = interpret(c.graph, c.inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  std::vector<Shape> shapes;
  for (const Tensor& t : c.inputs) shapes.push_back(t.shape());

  // What the builder lowers: cuda_layer_graph runs Builder::build's own steps (the optimizer's
  // pipeline, each layer's precision decided, NHWC conv / pool and Reformat layers in fp16 / bf16).
  for (Precision p : row.precisions) {
    BuilderConfig config;
    config.opt_level = row.opt_level;
    config.disabled_passes = {row.disabled_passes.begin(), row.disabled_passes.end()};
    config.fp16 = p == Precision::kFp16;
    config.bf16 = p == Precision::kBf16;
    OptimizationProfile prof;
    for (size_t i = 0; i < c.graph.inputs.size() && i < shapes.size(); ++i)
      ASSERT_TRUE(prof.set_dimensions(c.graph.value(c.graph.inputs[i]).name, shapes[i], shapes[i], shapes[i]).ok());
    config.profiles.push_back(prof);
    auto laid = cuda_layer_graph(c.graph, config, nullptr);
    ASSERT_TRUE(laid.ok()) << "[" << precision_name(p) << "] " << laid.status().to_string();
    auto vs = cuda::infer_value_shapes_by_reference(*laid, shapes);
    ASSERT_TRUE(vs.ok()) << "[" << precision_name(p) << "] " << vs.status().to_string();
    Status s = cuda::check_gpu_support(*laid, *vs, storage_of(p));
    EXPECT_TRUE(s.ok()) << "[" << precision_name(p) << "] " << s.to_string();
  }

  for (const ir::Node& n : c.graph.nodes)
    if (n.op == ir::OpKind::kTranspose && row.name.rfind("Attention_", 0) == 0) {  // an AttnCase::bshd graph
      check_bshd_attention_plan(c, shapes, *ref);
      return;
    }
  if (c.graph.nodes.size() != 1) return;
  auto raw_vs = cuda::infer_value_shapes_by_reference(c.graph, shapes);
  ASSERT_TRUE(raw_vs.ok()) << raw_vs.status().to_string();
  if (c.graph.nodes[0].op == ir::OpKind::kAttention) {
    check_attention_plan(c, *raw_vs, *ref);
    return;
  }
  if (c.inputs.size() != 1 || c.inputs[0].dtype() != DataType::kFloat32) return;
  auto emu = emulate_single_op(c.graph, *raw_vs, c.inputs[0]);
  if (emu.ok()) {
    EXPECT_LE(relative_diff(*ref, *emu), std::max(row.tol.fp32, 1e-6)) << "host emulation of the plan";
  } else if (emu.status().code() != StatusCode::kUnsupported) {  // Unsupported: no emulation for this op
    ADD_FAILURE() << "host emulation of the plan: " << emu.status().to_string();
  }
#endif
}

std::vector<const Row*> cuda_rows() {
  std::vector<const Row*> r;
  for (const Row& row : all_rows())
    if (row.cuda) r.push_back(&row);
  return r;
}

INSTANTIATE_TEST_SUITE_P(OpTable, OpTableCudaLowering, ::testing::ValuesIn(cuda_rows()),
                         [](const ::testing::TestParamInfo<const Row*>& info) { return info.param->name; });

}  // namespace
}  // namespace kiln::testing::op_table
