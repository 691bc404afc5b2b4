// The CPU reference kernel of Rope (ops.def; docs/decisions/0067) against the rotation written
// out in double here (RoFormer eq. 34 / transformers' rotate_half, or GPT-J's interleaved pairs),
// at the float32 angle float(p) * inv_freq[i] the op specifies: every layout the decoder graphs
// and the ONNX import emit, int32 / int64 positions, a partial rotary_dim, the cache mode, fp16 X;
// and its refusals, each naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/numerics.h"
#include "ops/run_op.h"

namespace kiln::cpu::testing {
namespace {

using ir::Attribute;
using ir::OpKind;

Tensor random_floats(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Tensor t(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

struct Case {
  Shape x;
  int64_t head_axis = 1, rotary_dim = 0;
  bool interleaved = false, caches = false;
  DataType positions = DataType::kInt64;
};

// y of x [outer, H, inner, D] (head_axis splits outer / inner) per the op's formula, in double.
void check(const Case& c, uint32_t seed) {
  SCOPED_TRACE(shape_str(c.x));
  const int64_t r = static_cast<int64_t>(c.x.size()), D = c.x.back(), H = c.x[c.head_axis];
  const int64_t R = c.rotary_dim ? c.rotary_dim : D, half = R / 2;
  int64_t outer = 1, inner = 1;
  Shape ps;
  for (int64_t i = 0; i + 1 < r; ++i) {
    if (i == c.head_axis) continue;
    ps.push_back(c.x[i]);
    (i < c.head_axis ? outer : inner) *= c.x[i];
  }
  const Tensor x = random_floats(c.x, seed);
  Tensor pos(c.positions, ps);
  std::mt19937 rng(seed + 1);
  const int64_t max_pos = c.caches ? 37 : 131072;
  std::vector<int64_t> p(static_cast<size_t>(outer * inner));
  for (auto& v : p) v = std::uniform_int_distribution<int64_t>(0, max_pos - 1)(rng);
  if (!c.caches && p.size() > 1) p[1] = 100000;
  for (size_t i = 0; i < p.size(); ++i) {
    if (c.positions == DataType::kInt64) pos.data<int64_t>()[i] = p[i];
    else pos.data<int32_t>()[i] = static_cast<int32_t>(p[i]);
  }
  Tensor inv(DataType::kFloat32, {half});
  for (int64_t i = 0; i < half; ++i) inv.data<float>()[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / R));
  Tensor cc(DataType::kFloat32, {max_pos, half}), sc(DataType::kFloat32, {max_pos, half});
  if (c.caches) {
    const Tensor a = random_floats({max_pos, half}, seed + 2), b = random_floats({max_pos, half}, seed + 3);
    cc = a, sc = b;
  }
  auto cs = [&](int64_t pp, int64_t i, bool sine) -> double {
    if (c.caches) return (sine ? sc : cc).data<float>()[pp * half + i];
    const double a = static_cast<double>(static_cast<float>(pp) * inv.data<float>()[i]);
    return sine ? std::sin(a) : std::cos(a);
  };
  std::vector<const Tensor*> ins = {&x, &pos};
  if (c.caches) ins.insert(ins.end(), {&cc, &sc});
  else ins.push_back(&inv);
  const OpRun run = run_op(OpKind::kRope, 21, ins,
                           {{"head_axis", Attribute::of_int(c.head_axis)}, {"rotary_dim", Attribute::of_int(c.rotary_dim)},
                            {"interleaved", Attribute::of_int(c.interleaved)}});
  ASSERT_TRUE(run.status.ok()) << run.status.to_string();
  const Tensor& y = run.outputs[0];
  ASSERT_EQ(y.shape(), c.x);
  double worst = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = ((o * H + h) * inner + i) * D, pp = p[static_cast<size_t>(o * inner + i)];
        const float* xr = x.data<float>() + base;
        const float* yr = y.data<float>() + base;
        for (int64_t j = R; j < D; ++j) ASSERT_EQ(yr[j], xr[j]) << "pass-through feature " << j;
        for (int64_t k = 0; k < half; ++k) {
          const int64_t a = c.interleaved ? 2 * k : k, b = c.interleaved ? 2 * k + 1 : k + half;
          const double co = cs(pp, k, false), si = cs(pp, k, true);
          worst = std::max({worst, std::fabs(yr[a] - (xr[a] * co - xr[b] * si)), std::fabs(yr[b] - (xr[b] * co + xr[a] * si))});
        }
      }
  EXPECT_LT(worst, 2e-6);
}

TEST(RopeKernel, PackedTokensHeadsAtAxis1) { check({{7, 5, 64}}, 1); }
TEST(RopeKernel, BatchHeadsSeqLayout) { check({{2, 3, 9, 32}}, 2); }
TEST(RopeKernel, BatchSeqHeadsLayoutWithInt32Positions) { check({{2, 9, 3, 16}, 2, 0, false, false, DataType::kInt32}, 3); }
TEST(RopeKernel, PartialRotaryDimCopiesTheRest) { check({{4, 3, 40}, 1, 24}, 4); }
TEST(RopeKernel, InterleavedPairs) { check({{4, 3, 40}, 1, 24, true}, 5); }
TEST(RopeKernel, CachesReadByPosition) { check({{2, 3, 5, 16}, 1, 0, false, true}, 6); }
TEST(RopeKernel, CachesInterleavedHeadAxis0) { check({{3, 5, 8}, 0, 0, true, true}, 7); }

// fp16 X is computed in float32 and rounded once: the result is the float32 result rounded.
TEST(RopeKernel, HalfInputsRoundOnce) {
  const Tensor x32 = random_floats({3, 2, 16}, 8);
  auto x16 = cast_tensor(x32, DataType::kFloat16);
  ASSERT_TRUE(x16.ok());
  auto x16f = cast_tensor(*x16, DataType::kFloat32);  // the fp16 values, as float32
  ASSERT_TRUE(x16f.ok());
  Tensor pos(DataType::kInt64, {3});
  pos.data<int64_t>()[0] = 5, pos.data<int64_t>()[1] = 100000, pos.data<int64_t>()[2] = 77;
  Tensor inv(DataType::kFloat32, {8});
  for (int i = 0; i < 8; ++i) inv.data<float>()[i] = static_cast<float>(std::pow(10000.0, -i / 8.0));
  const OpRun a = run_op(OpKind::kRope, 21, {&*x16, &pos, &inv});
  const OpRun b = run_op(OpKind::kRope, 21, {&*x16f, &pos, &inv});
  ASSERT_TRUE(a.status.ok() && b.status.ok()) << a.status.to_string() << b.status.to_string();
  ASSERT_EQ(a.outputs[0].dtype(), DataType::kFloat16);
  auto want = cast_tensor(b.outputs[0], DataType::kFloat16);
  ASSERT_TRUE(want.ok());
  for (int64_t i = 0; i < x32.numel(); ++i) EXPECT_EQ(a.outputs[0].data<uint16_t>()[i], want->data<uint16_t>()[i]) << i;
}

TEST(RopeKernel, BadInputsAreRefusedNamingTheNode) {
  const Tensor x = random_floats({2, 3, 8}, 9);
  Tensor pos(DataType::kInt64, {2});
  pos.data<int64_t>()[0] = 1, pos.data<int64_t>()[1] = 40;
  Tensor pos_wrong(DataType::kInt64, {3});
  Tensor pos_float(DataType::kFloat32, {2});
  Tensor inv(DataType::kFloat32, {4}), inv_short(DataType::kFloat32, {3});
  Tensor cache(DataType::kFloat32, {10, 4});
  struct Bad {
    std::vector<const Tensor*> ins;
    std::map<std::string, Attribute> attrs;
    const char* expect;
  };
  const std::vector<Bad> cases = {
      {{&x, &pos_wrong, &inv}, {}, "positions [3]"},
      {{&x, &pos_float, &inv}, {}, "dtype float32"},
      {{&x, &pos, &inv_short}, {}, "inv_freq [3]"},
      {{&x, &pos, &inv}, {{"head_axis", Attribute::of_int(2)}}, "head_axis 2"},
      {{&x, &pos, &inv}, {{"rotary_dim", Attribute::of_int(10)}}, "rotary_dim 10"},
      {{&x, &pos, &cache, &cache}, {}, "position 40"},
  };
  for (const Bad& b : cases) {
    const OpRun r = run_op(OpKind::kRope, 21, b.ins, b.attrs);
    ASSERT_FALSE(r.status.ok()) << b.expect;
    EXPECT_NE(r.status.message().find("test_node"), std::string::npos) << r.status.to_string();
    EXPECT_NE(r.status.message().find(b.expect), std::string::npos) << r.status.to_string();
  }
}

}  // namespace
}  // namespace kiln::cpu::testing
