// Shape inference on extents near int64's range (fuzzed plans and models carry them): each is an
// error naming the node or an unknown dim, never a wrapped value, a division by zero or an
// undefined float-to-int cast (UBSan flags those in build-asan; several gave wrong shapes here).
#include <gtest/gtest.h>

#include <limits>

#include "ir/shape_inference.h"
#include "unit/shape_graph_builder.h"

namespace kiln::ir {
namespace {

using testing::GraphBuilder;
using testing::K;

TEST(ShapeInferenceOverflow, IsAnErrorOrUnknownNeverWrapped) {
  const auto error_of = [](GraphBuilder& b) { Status s = infer_shapes(b.g); return s.ok() ? std::string("ok") : s.message(); };
  GraphBuilder r1;  // 2^62 * 4 wraps to 0
  r1.op(OpKind::kReshape, "r1", {r1.input("y", {K(4), K(6)}), r1.ints("s", {int64_t{1} << 62, 4, -1})});
  EXPECT_NE(error_of(r1).find("node 'r1' (Reshape): cannot reshape [4,6]"), std::string::npos) << error_of(r1);
  GraphBuilder r2;  // (2^61 + 3) * 8 wraps to 24, the input's element count
  r2.op(OpKind::kReshape, "r2", {r2.input("y", {K(4), K(6)}), r2.ints("s", {(int64_t{1} << 61) + 3, 8})});
  EXPECT_NE(error_of(r2).find("element count overflows"), std::string::npos) << error_of(r2);

  GraphBuilder m;  // a tracked shape value: (2^61 + 3) * 8
  auto prod = m.op(OpKind::kMul, "mul", {m.ints("a", {(int64_t{1} << 61) + 3}), m.ints("b", {8})});
  auto r3 = m.op(OpKind::kReshape, "r3", {m.input("y", {K(4), K(6)}), prod});
  ASSERT_TRUE(infer_shapes(m.g).ok());
  EXPECT_EQ(m.shape(r3), "[?]");

  GraphBuilder f;
  auto fl = f.op(OpKind::kFlatten, "flat", {f.input("x", {K(int64_t{1} << 40), K(int64_t{1} << 40), K(2)})},
                 {{"axis", Attribute::of_int(2)}});
  ASSERT_TRUE(infer_shapes(f.g).ok());
  EXPECT_EQ(f.shape(fl), "[?,2]");

  GraphBuilder c;  // kernel extent (3 - 1) * 2^62 + 1 wraps negative
  c.op(OpKind::kConv, "conv", {c.input("x", {K(1), K(1), K(8), K(8)}), c.floats("w", {1, 1, 3, 3})},
       {{"dilations", Attribute::of_ints({int64_t{1} << 62, 1})}});
  EXPECT_NE(error_of(c).find("node 'conv' (Conv): kernel extent 9223372036854775809 is too large"), std::string::npos) << error_of(c);
  GraphBuilder t;  // 2^62 * (3 - 1) wraps negative
  t.op(OpKind::kConvTranspose, "convt", {t.input("x", {K(1), K(1), K(3), K(3)}), t.floats("w", {1, 1, 3, 3})},
       {{"strides", Attribute::of_ints({int64_t{1} << 62, 1})}});
  EXPECT_NE(error_of(t).find("passes the largest tensor extent"), std::string::npos) << error_of(t);
  GraphBuilder same;  // 8 + INT64_MAX - 1 wraps negative
  auto cs = same.op(OpKind::kConv, "conv", {same.input("x", {K(1), K(1), K(8), K(8)}), same.floats("w", {1, 1, 3, 3})},
                    {{"strides", Attribute::of_ints({std::numeric_limits<int64_t>::max(), 1})},
                     {"auto_pad", Attribute::of_string("SAME_UPPER")}});
  ASSERT_TRUE(infer_shapes(same.g).ok());
  EXPECT_EQ(same.shape(cs), "[1,1,1,8]");
  GraphBuilder u;  // (3 - 1) * 2^62 wraps negative
  u.op(OpKind::kMaxUnpool, "unpool", {u.input("x", {K(1), K(1), K(3), K(3)}), u.input("i", {K(1), K(1), K(3), K(3)}, DataType::kInt64)},
       {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({int64_t{1} << 62, 1})}});
  EXPECT_NE(error_of(u).find("node 'unpool' (MaxUnpool): output spatial dim"), std::string::npos) << error_of(u);
  // Extents computed in floating point: casting 1e30 or NaN to int64 is undefined.
  const auto float_const = [](GraphBuilder& b, const std::string& name, std::vector<float> v, bool scalar) {
    Tensor t(DataType::kFloat32, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
    return b.constant(name, std::move(t));
  };
  for (float scale : {1e30f, std::numeric_limits<float>::quiet_NaN()}) {
    GraphBuilder rs(13);
    rs.op(OpKind::kResize, "resize", {rs.input("x", {K(1), K(1), K(4), K(4)}), kNoValue, float_const(rs, "s", {1, 1, scale, 1}, false)});
    EXPECT_NE(error_of(rs).find("node 'resize' (Resize): scale"), std::string::npos) << error_of(rs);
  }
  GraphBuilder rg(13);
  rg.op(OpKind::kRange, "range", {float_const(rg, "a", {0}, true), float_const(rg, "b", {1e30f}, true), float_const(rg, "d", {1}, true)});
  EXPECT_NE(error_of(rg).find("node 'range' (Range): start, limit and delta give"), std::string::npos) << error_of(rg);
  GraphBuilder oh;
  oh.op(OpKind::kOneHot, "onehot", {oh.input("i", {K(3)}, DataType::kInt64), float_const(oh, "depth", {1e30f}, true), oh.floats("v", {2})});
  EXPECT_NE(error_of(oh).find("node 'onehot' (OneHot): depth"), std::string::npos) << error_of(oh);
  GraphBuilder d2s;  // blocksize^2 wraps
  d2s.op(OpKind::kDepthToSpace, "d2s", {d2s.input("x", {K(1), K(4), K(2), K(2)})}, {{"blocksize", Attribute::of_int(int64_t{1} << 32)}});
  EXPECT_NE(error_of(d2s).find("blocksize must be positive"), std::string::npos) << error_of(d2s);
  GraphBuilder p(2);  // 4 + INT64_MAX + 1 wraps negative
  p.op(OpKind::kPad, "pad", {p.input("x", {K(1), K(4)})},
       {{"pads", Attribute::of_ints({0, std::numeric_limits<int64_t>::max(), 0, 1})}});
  EXPECT_NE(error_of(p).find("longer than the largest tensor extent"), std::string::npos) << error_of(p);
}

}  // namespace
}  // namespace kiln::ir
