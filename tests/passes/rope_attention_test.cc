// passes::fuse_rope_attention (docs/decisions/0090): an LLM step's Rope layers of Q and K join its
// PagedAttention (input 7, inv_freq) with the same outputs and the same pool contents on the CPU
// reference; near misses (an interleaved Rope, another positions tensor, a Rope read twice) stay.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/cpu/interpreter.h"
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

constexpr int64_t kT = 3, kHq = 4, kHkv = 2, kD = 16, kBlocks = 2, kBlockSize = 4;

struct StepGraph {
  TinyGraph t;
  std::vector<float> pool;  // [blocks, 2, Hkv, block_size, D]
  std::vector<Tensor> inputs;
  ir::ValueId q, k, pos, other_pos;
};

// q/k/v inputs, positions (and a second positions input), token_seq, block_table, kv_pools over
// `pool`; Rope(q) and Rope(k) feed the PagedAttention, whose output is the graph's.
void make(StepGraph* s, int k_interleaved, bool k_other_positions, bool q_read_twice) {
  TinyGraph& t = s->t;
  s->q = t.input("q", {kT, kHq, kD});
  s->k = t.input("k", {kT, kHkv, kD});
  auto v = t.input("v", {kT, kHkv, kD});
  auto int_input = [&](const std::string& name, const Shape& shape, DataType dt) {
    ir::ValueId x = t.input(name, shape);
    t.g.value(x).dtype = dt;
    return x;
  };
  s->pos = int_input("positions", {kT}, DataType::kInt64);
  s->other_pos = int_input("positions2", {kT}, DataType::kInt64);
  auto seq = int_input("token_seq", {kT}, DataType::kInt32);
  auto table = int_input("block_table", {1, kBlocks}, DataType::kInt32);
  auto pools = int_input("kv_pools", {1, 2}, DataType::kInt64);
  Tensor inv(DataType::kFloat32, {kD / 2});
  for (int64_t i = 0; i < kD / 2; ++i) inv.data<float>()[i] = std::pow(10000.f, -2.f * i / kD);
  auto f = t.constant("inv_freq", inv);
  auto qr = t.node(ir::OpKind::kRope, "q_rope", {s->q, s->pos, f}, {kT, kHq, kD}, {{"head_axis", ir::Attribute::of_int(1)}});
  auto kr = t.node(ir::OpKind::kRope, "k_rope", {s->k, k_other_positions ? s->other_pos : s->pos, f}, {kT, kHkv, kD},
                   {{"head_axis", ir::Attribute::of_int(1)}, {"interleaved", ir::Attribute::of_int(k_interleaved)}});
  auto o = t.node(ir::OpKind::kPagedAttention, "attn", {qr, kr, v, s->pos, seq, table, pools}, {kT, kHq, kD},
                  {{"layer", ir::Attribute::of_int(0)},
                   {"block_size", ir::Attribute::of_int(kBlockSize)},
                   {"cache_dtype", ir::Attribute::of_string("float32")}});
  t.g.outputs = {o};
  if (q_read_twice) t.g.outputs.push_back(qr);
  s->pool.assign(static_cast<size_t>(kBlocks * 2 * kHkv * kBlockSize * kD), 0.f);
  Tensor p(DataType::kInt64, {kT}), sq(DataType::kInt32, {kT}), bt(DataType::kInt32, {1, kBlocks}),
      kp(DataType::kInt64, {1, 2});
  for (int64_t i = 0; i < kT; ++i) {
    p.data<int64_t>()[i] = i + 1;  // positions 1..3 of one sequence (position 0 reads the zeroed pool)
    sq.data<int32_t>()[i] = 0;
  }
  bt.data<int32_t>()[0] = 1;
  bt.data<int32_t>()[1] = 0;
  kp.data<int64_t>()[0] = static_cast<int64_t>(reinterpret_cast<intptr_t>(s->pool.data()));
  kp.data<int64_t>()[1] = kBlocks;
  s->inputs = {random_tensor({kT, kHq, kD}, 1), random_tensor({kT, kHkv, kD}, 2), random_tensor({kT, kHkv, kD}, 3), p,
               p, sq, bt, kp};
}

int count(const ir::Graph& g, ir::OpKind op) {
  int n = 0;
  for (const ir::Node& x : g.nodes) n += !x.removed && x.op == op;
  return n;
}

TEST(RopeAttention, RopeLayersJoinThePagedAttention) {
  StepGraph s;
  make(&s, 0, false, false);
  auto before = interpret(s.t.g, s.inputs);
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  const std::vector<float> pool_before = s.pool;
  std::fill(s.pool.begin(), s.pool.end(), 0.f);
  ir::Graph opt = s.t.g;
  ASSERT_TRUE(passes::fuse_rope_attention(opt, reference_pass_options()).ok());
  EXPECT_EQ(count(opt, ir::OpKind::kRope), 0);
  for (const ir::Node& n : opt.nodes) {
    if (n.removed || n.op != ir::OpKind::kPagedAttention) continue;
    ASSERT_EQ(n.inputs.size(), 8u);
    EXPECT_EQ(n.inputs[0], s.q);
    EXPECT_EQ(n.inputs[1], s.k);
    EXPECT_EQ(opt.value(n.inputs[7]).name, "inv_freq");
  }
  auto after = interpret(opt, s.inputs);
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_EQ(relative_diff(*before, *after), 0.0);  // the same float32 arithmetic
  EXPECT_EQ(std::memcmp(pool_before.data(), s.pool.data(), s.pool.size() * sizeof(float)), 0)
      << "the rotated keys in the pool differ";
}

TEST(RopeAttention, NearMissesStay) {
  for (int c = 0; c < 3; ++c) {
    StepGraph s;
    make(&s, c == 0 ? 1 : 0, c == 1, c == 2);
    ir::Graph opt = s.t.g;
    ASSERT_TRUE(passes::fuse_rope_attention(opt, reference_pass_options()).ok());
    EXPECT_EQ(count(opt, ir::OpKind::kRope), 2) << "case " << c;
  }
}

}  // namespace
}  // namespace kiln::testing
