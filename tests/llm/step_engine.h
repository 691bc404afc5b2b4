// A step-graph CPU plan run for one sequence, for the LLM step-graph tests (FP8 projections,
// calibrated or from FP8 checkpoints): build_step_graph -> build_from_graph (CPU) -> Engine /
// ExecutionContext, prefill and greedy decode; and the cosine the tests compare logits with.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "llm/random_checkpoint.h"
#include "llm/step_graph.h"

namespace kiln::llm::testing {

// One sequence (block-table row 0) through a step-graph CPU plan.
class SeqEngine {
 public:
  static constexpr int64_t kRows = 8, kBlocks = 8, kBlockSize = 4;  // up to 32 tokens

  // Calibrated FP8 projections when `fp8` is not empty (per-tensor or per-channel weight scales).
  SeqEngine(const Model& m, std::map<std::string, float> fp8, bool per_tensor = false)
      : SeqEngine(m.ck, fp8_options(std::move(fp8), per_tensor)) {}
  // The step graph of `ck` with `o` (its max_rows, max_blocks_per_seq and block_size replaced).
  SeqEngine(const Checkpoint& ck, StepGraphOptions o) : c_(ck.config()) {
    o.max_rows = kRows;
    o.max_blocks_per_seq = kBlocks;
    o.block_size = kBlockSize;
    auto g = build_step_graph(c_, ck, o);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return;
    graph_ = std::move(*g);
    BuilderConfig config;
    config.target = TargetDevice::kCpu;
    OptimizationProfile p;
    for (const char* name : {kStepInputIdsName, kStepPositionIdsName, kStepTokenSeqName})
      EXPECT_TRUE(p.set_dimensions(name, {1}, {4}, {kRows}).ok());
    config.profiles = {p};
    auto plan = build_from_graph(graph_, config);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) return;
    auto e = Runtime::deserialize_engine(*plan);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    if (!e.ok()) return;
    engine_ = *e;
    ctx_ = engine_->create_execution_context();
    pools_.assign(static_cast<size_t>(c_.num_layers),
                  std::vector<float>(static_cast<size_t>(kBlocks * kv_block_elements(c_, kBlockSize)), 0.f));
  }
  bool ready() const { return ctx_ != nullptr; }
  const ir::Graph& graph() const { return graph_; }
  const Engine& engine() const { return *engine_; }

  // Tokens `ids` at positions start.. of the sequence; logits of each, [n, vocab] (n <= kRows).
  StatusOr<Tensor> step(const std::vector<int32_t>& ids, int64_t start) {
    const int64_t t = static_cast<int64_t>(ids.size());
    Tensor in(DataType::kInt64, {t}), pos(DataType::kInt64, {t}), seq(DataType::kInt32, {t}),
        table(DataType::kInt32, {kRows, kBlocks}), pools(DataType::kInt64, {c_.num_layers, 2}), rows(DataType::kInt64, {kRows});
    for (int64_t i = 0; i < t; ++i) {
      in.data<int64_t>()[i] = ids[i];
      pos.data<int64_t>()[i] = start + i;
      seq.data<int32_t>()[i] = 0;
    }
    for (int64_t i = 0; i < kRows * kBlocks; ++i) table.data<int32_t>()[i] = static_cast<int32_t>(i % kBlocks);
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      pools.data<int64_t>()[2 * l] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pools_[l].data()));
      pools.data<int64_t>()[2 * l + 1] = kBlocks;
    }
    for (int64_t r = 0; r < kRows; ++r) rows.data<int64_t>()[r] = std::min(r, t - 1);
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepInputIdsName, in));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepPositionIdsName, pos));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepTokenSeqName, seq));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepBlockTableName, table));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepKvPoolsName, pools));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepLogitRowsName, rows));
    KILN_RETURN_IF_ERROR(ctx_->execute());
    KILN_ASSIGN_OR_RETURN(Tensor out, ctx_->output(kStepLogitsName));
    return out.clone();
  }

  // Greedy generation: `prompt` prefilled, then `n` tokens decoded one per step.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n) {
    std::vector<int32_t> out;
    auto l = step(prompt, 0);
    EXPECT_TRUE(l.ok()) << l.status().to_string();
    int64_t row = static_cast<int64_t>(prompt.size()) - 1;
    for (int i = 0; l.ok() && i < n; ++i) {
      const float* r = l->data<float>() + row * c_.vocab_size;
      const int32_t next = static_cast<int32_t>(std::max_element(r, r + c_.vocab_size) - r);
      out.push_back(next);
      l = step({next}, static_cast<int64_t>(prompt.size()) + i);
      EXPECT_TRUE(l.ok()) << l.status().to_string();
      row = 0;
    }
    return out;
  }

 private:
  static StepGraphOptions fp8_options(std::map<std::string, float> fp8, bool per_tensor) {
    StepGraphOptions o;
    o.fp8_x_scales = std::move(fp8);
    o.fp8_per_tensor_weights = per_tensor;
    return o;
  }

  ModelConfig c_;
  ir::Graph graph_;
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> ctx_;
  std::vector<std::vector<float>> pools_;
};

inline double cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace kiln::llm::testing
