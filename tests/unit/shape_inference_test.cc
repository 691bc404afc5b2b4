// Shape inference on small hand-built graphs: symbolic broadcasting, Reshape with 0/-1 and a
// symbolic batch, Conv/pool output sizes (auto_pad, ceil_mode, dilations), Gemm transposes,
// Slice with negative steps, the exporters' Shape->Gather->Unsqueeze->Concat->Reshape chain,
// legacy attribute forms, data-dependent ops, subgraphs, and errors that name the node.
#include <gtest/gtest.h>

#include "ir/shape_inference.h"
#include "unit/shape_graph_builder.h"

#include "backends/cpu/interpreter.h"

namespace kiln::ir {
namespace {

using testing::GraphBuilder;
using testing::K;
using testing::S;


TEST(ShapeInference, EveryOpHasARule) {
  std::string missing;
  EXPECT_TRUE(every_op_has_shape_rule(&missing)) << "ops without a shape rule: " << missing;
}

TEST(ShapeInference, BroadcastWithSymbols) {
  GraphBuilder b;
  auto x = b.input("x", {S("batch"), K(1), K(64)});
  auto y = b.input("y", {K(1), S("seq"), K(64)});
  auto z = b.input("z", {S("batch"), S("seq"), K(1)});
  auto w = b.input("w", {K(4), K(1), K(1)});
  auto s1 = b.op(OpKind::kAdd, "add", {x, y});
  auto s2 = b.op(OpKind::kMul, "mul", {s1, z});
  auto s3 = b.op(OpKind::kSub, "sub", {x, w});  // a symbol against a known extent != 1
  auto c = b.op(OpKind::kLess, "less", {s2, x});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(s1), "[batch,seq,64]");
  EXPECT_EQ(b.shape(s2), "[batch,seq,64]");
  EXPECT_EQ(b.shape(s3), "[4,1,64]");
  EXPECT_EQ(b.shape(c), "[batch,seq,64]");
  EXPECT_EQ(b.g.value(c).dtype, DataType::kBool);
  EXPECT_EQ(b.g.value(s1).dtype, DataType::kFloat32);
}

TEST(ShapeInference, IncompatibleBroadcastNamesTheNode) {
  GraphBuilder b;
  auto x = b.input("x", {S("batch"), K(3)});
  auto y = b.input("y", {K(4)});
  b.op(OpKind::kAdd, "add_7", {x, y});
  Status s = infer_shapes(b.g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'add_7' (Add): incompatible broadcast"), std::string::npos) << s.message();
}

TEST(ShapeInference, ReshapeZeroAndMinusOneWithSymbolicBatch) {
  GraphBuilder b;
  auto x = b.input("x", {S("batch"), K(3), K(4), K(5)});
  auto r1 = b.op(OpKind::kReshape, "r1", {x, b.ints("s1", {0, -1})});
  auto r2 = b.op(OpKind::kReshape, "r2", {x, b.ints("s2", {0, 3, -1})});
  auto r3 = b.op(OpKind::kReshape, "r3", {x, b.ints("s3", {-1, 20})});   // batch*3: not a symbol
  auto r4 = b.op(OpKind::kReshape, "r4", {x, b.ints("s4", {0, 0, 20})});
  auto y = b.input("y", {K(4), K(6)});
  auto r5 = b.op(OpKind::kReshape, "r5", {y, b.ints("s5", {2, -1, 3})});
  auto r6 = b.op(OpKind::kReshape, "r6", {y, b.ints("s6", {0, -1})}, {{"allowzero", Attribute::of_int(0)}}, 14);
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(r1), "[batch,60]");
  EXPECT_EQ(b.shape(r2), "[batch,3,20]");
  EXPECT_EQ(b.shape(r3), "[?,20]");
  EXPECT_EQ(b.shape(r4), "[batch,3,20]");
  EXPECT_EQ(b.shape(r5), "[2,4,3]");
  EXPECT_EQ(b.shape(r6), "[4,6]");
}

TEST(ShapeInference, ReshapeLegacyAttributeAndErrors) {
  GraphBuilder b(4);
  auto x = b.input("x", {K(2), K(6)});
  auto r = b.op(OpKind::kReshape, "r", {x}, {{"shape", Attribute::of_ints({3, -1})}});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(r), "[3,4]");

  GraphBuilder bad;
  auto y = bad.input("y", {K(4), K(6)});
  bad.op(OpKind::kReshape, "bad_reshape", {y, bad.ints("s", {5, -1})});
  Status s = infer_shapes(bad.g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'bad_reshape' (Reshape): cannot reshape [4,6]"), std::string::npos) << s.message();

  GraphBuilder two;
  auto z = two.input("z", {K(4), K(6)});
  two.op(OpKind::kReshape, "r2", {z, two.ints("s", {-1, -1})});
  EXPECT_FALSE(infer_shapes(two.g).ok());
}

TEST(ShapeInference, ConvOutputSizes) {
  GraphBuilder b;
  auto x = b.input("x", {S("batch"), K(3), K(224), K(224)});
  auto w = b.floats("w", {64, 3, 7, 7});
  auto c1 = b.op(OpKind::kConv, "conv1", {x, w}, {{"strides", Attribute::of_ints({2, 2})}, {"pads", Attribute::of_ints({3, 3, 3, 3})}});
  auto c2 = b.op(OpKind::kConv, "conv2", {x, w}, {{"strides", Attribute::of_ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_UPPER")}});
  auto c3 = b.op(OpKind::kConv, "conv3", {x, w}, {{"strides", Attribute::of_ints({3, 3})}, {"auto_pad", Attribute::of_string("VALID")}});
  auto c4 = b.op(OpKind::kConv, "conv4", {x, w}, {{"dilations", Attribute::of_ints({2, 2})}});
  auto y = b.input("y", {K(1), K(8), K(5), K(5)});
  auto wg = b.floats("wg", {16, 2, 3, 3});
  auto c5 = b.op(OpKind::kConv, "conv5", {y, wg}, {{"group", Attribute::of_int(4)}, {"strides", Attribute::of_ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_LOWER")}});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(c1), "[batch,64,112,112]");
  EXPECT_EQ(b.shape(c2), "[batch,64,112,112]");
  EXPECT_EQ(b.shape(c3), "[batch,64,73,73]");   // floor((224-7)/3)+1
  EXPECT_EQ(b.shape(c4), "[batch,64,212,212]");  // extent (7-1)*2+1 = 13
  EXPECT_EQ(b.shape(c5), "[1,16,3,3]");
}

TEST(ShapeInference, ConvWeightRankError) {
  GraphBuilder b;
  auto x = b.input("x", {K(1), K(3), K(8), K(8)});
  b.op(OpKind::kConv, "conv_17", {x, b.floats("w", {4, 3, 3})});
  Status s = infer_shapes(b.g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "node 'conv_17' (Conv): weight rank 3, expected 4");

  GraphBuilder c;
  auto y = c.input("y", {K(1), K(3), K(8), K(8)});
  c.op(OpKind::kConv, "conv_ch", {y, c.floats("w", {4, 2, 3, 3})});
  s = infer_shapes(c.g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("input has 3 channels"), std::string::npos) << s.message();
}

TEST(ShapeInference, PoolCeilModeAndSymbolicSpatial) {
  GraphBuilder b;
  auto x = b.input("x", {K(1), K(1), K(4), K(4)});
  auto p1 = b.node(OpKind::kMaxPool, "p1", {x}, {{"kernel_shape", Attribute::of_ints({3, 3})}, {"strides", Attribute::of_ints({2, 2})}, {"ceil_mode", Attribute::of_int(1)}}, 2);
  auto p2 = b.op(OpKind::kMaxPool, "p2", {x}, {{"kernel_shape", Attribute::of_ints({3, 3})}, {"strides", Attribute::of_ints({2, 2})}});
  auto x5 = b.input("x5", {K(1), K(1), K(5), K(5)});
  auto p3 = b.op(OpKind::kAveragePool, "p3", {x5}, {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}, {"pads", Attribute::of_ints({1, 1, 1, 1})}, {"ceil_mode", Attribute::of_int(1)}});
  auto y = b.input("y", {K(1), K(16), S("h"), S("w")});
  auto p4 = b.op(OpKind::kMaxPool, "p4", {y}, {{"kernel_shape", Attribute::of_ints({1, 1})}});
  auto p5 = b.op(OpKind::kGlobalAveragePool, "p5", {y});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(p1[0]), "[1,1,2,2]");
  EXPECT_EQ(b.g.value(p1[1]).dtype, DataType::kInt64);
  EXPECT_EQ(b.shape(p2), "[1,1,1,1]");
  // ceil((5+2-2)/2)+1 = 4, but the 4th window would start at 6 = in + pad_begin: dropped.
  EXPECT_EQ(b.shape(p3), "[1,1,3,3]");
  EXPECT_EQ(b.shape(p4), "[1,16,h,w]");
  EXPECT_EQ(b.shape(p5), "[1,16,1,1]");
}

TEST(ShapeInference, ConvTransposeOutputSizes) {
  GraphBuilder b;
  auto x = b.input("x", {K(1), K(1), K(3), K(3)});
  auto w = b.floats("w", {1, 2, 3, 3});
  auto t1 = b.op(OpKind::kConvTranspose, "t1", {x, w});
  auto t2 = b.op(OpKind::kConvTranspose, "t2", {x, w}, {{"strides", Attribute::of_ints({3, 2})}, {"output_padding", Attribute::of_ints({1, 1})}});
  auto t3 = b.op(OpKind::kConvTranspose, "t3", {x, w}, {{"strides", Attribute::of_ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_UPPER")}});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(t1), "[1,2,5,5]");
  EXPECT_EQ(b.shape(t2), "[1,2,10,8]");
  EXPECT_EQ(b.shape(t3), "[1,2,6,6]");
}

TEST(ShapeInference, GemmTransposeFlags) {
  GraphBuilder b;
  auto a = b.input("a", {K(4), S("m")});
  auto w = b.floats("w", {5, 4});
  auto g1 = b.op(OpKind::kGemm, "g1", {a, w}, {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)}});
  auto a2 = b.input("a2", {S("m"), K(4)});
  auto g2 = b.op(OpKind::kGemm, "g2", {a2, b.floats("w2", {4, 7}), b.floats("c", {7})});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(g1), "[m,5]");
  EXPECT_EQ(b.shape(g2), "[m,7]");

  GraphBuilder bad;
  auto x = bad.input("x", {K(3), K(4)});
  bad.op(OpKind::kGemm, "fc", {x, bad.floats("w", {5, 4})});
  Status s = infer_shapes(bad.g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'fc' (Gemm): inner dims differ"), std::string::npos) << s.message();
}

TEST(ShapeInference, MatMulNumpySemantics) {
  GraphBuilder b;
  auto a = b.input("a", {S("batch"), K(1), S("seq"), K(64)});
  auto w = b.input("w", {K(8), K(64), K(32)});
  auto v = b.input("v", {K(64)});
  auto m1 = b.op(OpKind::kMatMul, "m1", {a, w});
  auto m2 = b.op(OpKind::kMatMul, "m2", {a, v});
  auto m3 = b.op(OpKind::kMatMul, "m3", {v, w});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(m1), "[batch,8,seq,32]");
  EXPECT_EQ(b.shape(m2), "[batch,1,seq]");
  EXPECT_EQ(b.shape(m3), "[8,32]");
}

TEST(ShapeInference, SliceNegativeStepsAndLegacyAttributes) {
  GraphBuilder b;
  auto x = b.input("x", {K(20), K(10), K(5)});
  auto s1 = b.op(OpKind::kSlice, "s1", {x, b.ints("st", {20, 10, 4}), b.ints("en", {0, 0, 1}), b.ints("ax", {0, 1, 2}), b.ints("sp", {-1, -3, -2})});
  auto s2 = b.op(OpKind::kSlice, "s2", {x, b.ints("st2", {-3}), b.ints("en2", {INT64_MAX}), b.ints("ax2", {-1})});
  auto s3 = b.op(OpKind::kSlice, "s3", {x}, {{"starts", Attribute::of_ints({1, 0})}, {"ends", Attribute::of_ints({1000, 3})}, {"axes", Attribute::of_ints({0, 1})}}, 9);
  auto y = b.input("y", {S("batch"), K(10)});
  auto s4 = b.op(OpKind::kSlice, "s4", {y, b.ints("st4", {0, 2}), b.ints("en4", {INT64_MAX, 8})});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(s1), "[19,3,2]");
  EXPECT_EQ(b.shape(s2), "[20,10,3]");
  EXPECT_EQ(b.shape(s3), "[19,3,5]");
  EXPECT_EQ(b.shape(s4), "[batch,6]");
}

// The pattern every PyTorch export produces for `x.view(x.size(0), -1)` and friends.
TEST(ShapeInference, ShapeGatherConcatReshapeChainWithSymbolicBatch) {
  GraphBuilder b;
  auto x = b.input("x", {S("batch"), K(16), K(8)});
  auto shp = b.op(OpKind::kShape, "shape", {x});
  auto n = b.op(OpKind::kGather, "gather0", {shp, b.ints("i0", {0}, true)}, {{"axis", Attribute::of_int(0)}});
  auto nu = b.op(OpKind::kUnsqueeze, "unsq", {n, b.ints("axes", {0})});
  auto cat = b.op(OpKind::kConcat, "concat", {nu, b.ints("m1", {-1})}, {{"axis", Attribute::of_int(0)}});
  auto r1 = b.op(OpKind::kReshape, "view", {x, cat});
  // Without -1: the product of the other dims computed on the shape tensor.
  auto d1 = b.op(OpKind::kGather, "gather1", {shp, b.ints("i1", {1}, true)});
  auto d2 = b.op(OpKind::kGather, "gather2", {shp, b.ints("i2", {2}, true)});
  auto prod = b.op(OpKind::kMul, "mul", {d1, d2});
  auto pu = b.op(OpKind::kUnsqueeze, "unsq2", {prod, b.ints("axes2", {0})});
  auto cat2 = b.op(OpKind::kConcat, "concat2", {nu, pu}, {{"axis", Attribute::of_int(0)}});
  auto r2 = b.op(OpKind::kReshape, "view2", {x, cat2});
  // The same target drives Expand and ConstantOfShape.
  auto tgt = b.op(OpKind::kConcat, "concat3", {nu, b.ints("four", {4})}, {{"axis", Attribute::of_int(0)}});
  auto e = b.op(OpKind::kExpand, "expand", {b.floats("one", {1}), tgt});
  auto cs = b.op(OpKind::kConstantOfShape, "cos", {tgt});
  auto sl = b.op(OpKind::kSlice, "slice", {shp, b.ints("a", {1}), b.ints("z", {3})});
  auto r3 = b.op(OpKind::kReshape, "view3", {x, b.op(OpKind::kConcat, "concat4", {b.ints("m1b", {-1}), sl}, {{"axis", Attribute::of_int(0)}})});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(shp), "[3]");
  EXPECT_EQ(b.shape(n), "[]");
  EXPECT_EQ(b.shape(r1), "[batch,128]");
  EXPECT_EQ(b.shape(r2), "[batch,128]");
  EXPECT_EQ(b.shape(e), "[batch,4]");
  EXPECT_EQ(b.shape(cs), "[batch,4]");
  EXPECT_EQ(b.shape(r3), "[batch,16,8]");
}

TEST(ShapeInference, SqueezeUnsqueezeReduceAxesAttributeVersusInput) {
  GraphBuilder b(11);
  auto x = b.input("x", {S("n"), K(1), K(5), K(1)});
  auto s1 = b.op(OpKind::kSqueeze, "sq_attr", {x}, {{"axes", Attribute::of_ints({1, -1})}});
  auto s2 = b.op(OpKind::kSqueeze, "sq_all", {x});  // n may be 1: rank unknown
  auto u1 = b.op(OpKind::kUnsqueeze, "unsq_attr", {x}, {{"axes", Attribute::of_ints({0, -1})}});
  auto s3 = b.op(OpKind::kSqueeze, "sq_in", {x, b.ints("ax", {1})}, {}, 13);
  auto r1 = b.op(OpKind::kReduceMean, "rm_attr", {x}, {{"axes", Attribute::of_ints({2})}, {"keepdims", Attribute::of_int(0)}});
  auto r2 = b.op(OpKind::kReduceSum, "rs_in", {x, b.ints("ax2", {-2})}, {}, 13);
  auto r3 = b.op(OpKind::kReduceSum, "rs_noop", {x, b.ints("ax3", {})}, {{"noop_with_empty_axes", Attribute::of_int(1)}}, 13);
  auto r4 = b.op(OpKind::kReduceMax, "rmax_all", {x}, {}, 18);
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(s1), "[n,5]");
  EXPECT_EQ(b.shape(s2), "norank");
  EXPECT_EQ(b.shape(u1), "[1,n,1,5,1,1]");
  EXPECT_EQ(b.shape(s3), "[n,5,1]");
  EXPECT_EQ(b.shape(r1), "[n,1,1]");
  EXPECT_EQ(b.shape(r2), "[n,1,1,1]");
  EXPECT_EQ(b.shape(r3), "[n,1,5,1]");
  EXPECT_EQ(b.shape(r4), "[1,1,1,1]");

  GraphBuilder bad(11);
  auto y = bad.input("y", {K(2), K(3)});
  bad.op(OpKind::kSqueeze, "sq_bad", {y}, {{"axes", Attribute::of_ints({2})}});
  Status s = infer_shapes(bad.g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "node 'sq_bad' (Squeeze): axis 2 out of range for rank 2");
}

TEST(ShapeInference, PadLegacyAttributesAndInputs) {
  GraphBuilder b(2);
  auto x = b.input("x", {K(1), K(3), K(4), K(5)});
  auto p1 = b.op(OpKind::kPad, "pad_attr", {x}, {{"pads", Attribute::of_ints({0, 0, 1, 2, 0, 0, 3, 4})}});
  auto p2 = b.op(OpKind::kPad, "pad_in", {x, b.ints("p", {0, 0, 1, 1, 0, 0, 1, 1})}, {}, 11);
  auto p3 = b.op(OpKind::kPad, "pad_axes", {x, b.ints("p3", {2, 2}), kNoValue, b.ints("ax", {-1})}, {}, 18);
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(p1), "[1,3,8,11]");
  EXPECT_EQ(b.shape(p2), "[1,3,6,7]");
  EXPECT_EQ(b.shape(p3), "[1,3,4,9]");
}

TEST(ShapeInference, ResizeScalesAndSizes) {
  GraphBuilder b(13);
  auto x = b.input("x", {S("n"), K(3), K(20), K(30)});
  Tensor sc(DataType::kFloat32, {4});
  const float scales[] = {1.0f, 1.0f, 2.0f, 0.5f};
  for (int i = 0; i < 4; ++i) sc.data<float>()[i] = scales[i];
  ValueId sv = b.g.add_value("scales", DataType::kFloat32);
  b.g.value(sv).constant = std::make_shared<Tensor>(sc);
  auto r1 = b.op(OpKind::kResize, "rs_scales", {x, kNoValue, sv});
  auto r2 = b.op(OpKind::kResize, "rs_sizes", {x, kNoValue, kNoValue, b.ints("sizes", {1, 3, 7, 9})});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(r1), "[n,3,40,15]");
  EXPECT_EQ(b.shape(r2), "[1,3,7,9]");
}

TEST(ShapeInference, DataDependentOpsGiveUnknownDims) {
  GraphBuilder b;
  auto x = b.input("x", {K(2), K(3)});
  auto nz = b.op(OpKind::kNonZero, "nz", {x});
  auto u = b.node(OpKind::kUnique, "uq", {x}, {}, 4);
  auto k = b.input("k", {K(1)}, DataType::kInt64);
  auto tk = b.node(OpKind::kTopK, "topk", {x, k}, {{"axis", Attribute::of_int(1)}}, 2);
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(nz), "[2,?]");
  EXPECT_EQ(b.g.value(nz).dtype, DataType::kInt64);
  EXPECT_EQ(b.shape(u[0]), "[?]");
  EXPECT_EQ(b.shape(u[2]), "[6]");
  EXPECT_EQ(b.shape(tk[0]), "[2,?]");
  EXPECT_EQ(b.g.value(tk[1]).dtype, DataType::kInt64);
}

TEST(ShapeInference, IfBranchesAreMerged) {
  auto branch = [](const char* name, SymShape s) {
    auto g = std::make_shared<Graph>();
    g->name = name;
    ValueId outer = g->add_value("x");
    g->outer_refs.push_back(outer);
    Node n;
    n.name = std::string(name) + "_relu";
    n.op = OpKind::kRelu;
    n.opset = 17;
    n.inputs = {outer};
    n.outputs = {g->add_value(std::string(name) + "_y")};
    g->outputs = n.outputs;
    g->add_node(std::move(n));
    (void)s;
    return g;
  };
  GraphBuilder b;
  b.input("x", {S("batch"), K(3)});  // read by the branches through the outer scope
  auto c = b.input("c", {}, DataType::kBool);
  Attribute then_a, else_a;
  then_a.kind = else_a.kind = Attribute::Kind::kGraph;
  then_a.g = branch("then", {});
  else_a.g = branch("else", {});
  auto y = b.op(OpKind::kIf, "if", {c}, {{"then_branch", then_a}, {"else_branch", else_a}});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(y), "[batch,3]");
  EXPECT_EQ(b.g.value(y).dtype, DataType::kFloat32);
  // The branch graphs were annotated too.
  const Graph& then_g = *b.g.nodes[0].attrs.at("then_branch").g;
  EXPECT_EQ(sym_shape_str(*then_g.value(then_g.outputs[0]).shape), "[batch,3]");
}

TEST(ShapeInference, ConcreteInputsOverrideDeclaredShapes) {
  GraphBuilder b;
  auto x = b.input("x", {S("batch"), K(3)});
  auto y = b.op(OpKind::kFlatten, "flat", {b.op(OpKind::kTranspose, "tr", {x})}, {{"axis", Attribute::of_int(1)}});
  std::map<std::string, Shape> concrete{{"x", {8, 3}}};
  ASSERT_TRUE(infer_shapes(b.g, &concrete).ok());
  EXPECT_EQ(b.shape(y), "[3,8]");
}

// Hugging Face exports guard Expand shapes: Where(Equal(shape, -1), ones, shape) with shape from
// Shape -> Gather -> Concat. At concrete input shapes the guard folds through the constant
// evaluator (the tracked shape values become tensors), so every dim is known and the CUDA path
// needs no CPU reference run to discover it (BERT with a sequence profile, run 33).
TEST(ShapeInference, ConcreteShapeValuesFoldThroughWhereGuards) {
  // shape = Reshape(Concat(dim0, dim1), [-1]); ones = ConstantOfShape(Shape(shape), 1);
  // Expand(row, Where(Equal(shape, ones * -1), ones, shape)) -- BERT's token-type Expand.
  auto build = [](GraphBuilder& b) {
    auto x = b.input("x", {S("batch"), S("seq")}, DataType::kInt64);
    auto s = b.op(OpKind::kShape, "shape", {x});
    auto d0 = b.op(OpKind::kUnsqueeze, "u0", {b.op(OpKind::kGather, "g0", {s, b.ints("i0", {0}, true)}), b.ints("a0", {0})});
    auto d1 = b.op(OpKind::kUnsqueeze, "u1", {b.op(OpKind::kGather, "g1", {s, b.ints("i1", {1}, true)}), b.ints("a1", {0})});
    auto cat = b.op(OpKind::kConcat, "cat", {d0, d1}, {{"axis", Attribute::of_int(0)}});
    auto target = b.op(OpKind::kReshape, "flat", {cat, b.ints("minus1", {-1})});
    Tensor one(DataType::kInt64, {1});
    one.data<int64_t>()[0] = 1;
    Attribute value;
    value.kind = Attribute::Kind::kTensor;
    value.t = std::make_shared<Tensor>(one);
    auto ones = b.op(OpKind::kConstantOfShape, "ones", {b.op(OpKind::kShape, "shape2", {target})}, {{"value", value}});
    auto neg = b.op(OpKind::kMul, "neg", {ones, b.ints("m1", {-1}, true)});
    auto eq = b.op(OpKind::kEqual, "eq", {target, neg});
    auto guarded = b.op(OpKind::kWhere, "where", {eq, ones, target});
    return b.op(OpKind::kExpand, "expand", {b.floats("row", {1, 1}), guarded});
  };
  std::map<std::string, Shape> concrete{{"x", {3, 384}}};
  GraphBuilder b;
  auto y = build(b);
  ASSERT_TRUE(infer_shapes(b.g, &concrete, &reference_evaluator()).ok());
  EXPECT_EQ(b.shape(y), "[3,384]");
}

TEST(ShapeInference, ConcatUnifiesAndChecks) {
  GraphBuilder b;
  auto x = b.input("x", {S("batch"), K(3)});
  auto y = b.input("y", {K(2), K(5)});
  auto c = b.op(OpKind::kConcat, "cat", {x, y}, {{"axis", Attribute::of_int(-1)}});
  ASSERT_TRUE(infer_shapes(b.g).ok());
  EXPECT_EQ(b.shape(c), "[2,8]");

  GraphBuilder bad;
  auto p = bad.input("p", {K(4), K(3)});
  auto q = bad.input("q", {K(2), K(5)});
  bad.op(OpKind::kConcat, "cat_bad", {p, q}, {{"axis", Attribute::of_int(1)}});
  Status s = infer_shapes(bad.g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'cat_bad' (Concat)"), std::string::npos);
}

// Rope (ops.def): Y has X's shape and dtype with symbolic T; positions must be X without its head
// and last axes, the tables [R/2] / [P, R/2]; each mismatch names the node and the tensor.
TEST(ShapeInference, RopeKeepsXAndChecksPositionsAndTables) {
  {
    GraphBuilder b;
    auto x = b.input("x", {S("T"), K(8), K(64)}, DataType::kFloat16);
    auto p = b.input("p", {S("T")}, DataType::kInt64);
    auto y = b.op(OpKind::kRope, "q_rope", {x, p, b.floats("inv", {32})});
    ASSERT_TRUE(infer_shapes(b.g).ok());
    EXPECT_EQ(b.shape(y), "[T,8,64]");
    EXPECT_EQ(b.g.value(y).dtype, DataType::kFloat16);
  }
  struct Bad {
    SymShape x, p;
    DataType pdt;
    Shape table;
    std::map<std::string, Attribute> attrs;
    bool caches;
    const char* expect;
  };
  const std::vector<Bad> cases = {
      {{K(2), K(4), K(5), K(16)}, {K(2), K(4)}, DataType::kInt64, {8}, {}, false, "positions [2,4]"},
      {{K(2), K(4), K(5), K(16)}, {K(2), K(5)}, DataType::kFloat32, {8}, {}, false, "positions have dtype float32"},
      {{K(2), K(4), K(5), K(16)}, {K(2), K(5)}, DataType::kInt64, {6}, {}, false, "inv_freq [6]"},
      {{K(2), K(4), K(5), K(16)}, {K(2), K(5)}, DataType::kInt64, {9, 8}, {{"rotary_dim", Attribute::of_int(8)}}, true,
       "cos_cache [9,8]"},
      {{K(2), K(4), K(16)}, {K(2)}, DataType::kInt64, {8}, {{"head_axis", Attribute::of_int(2)}}, false, "head_axis 2"},
      {{K(2), K(4), K(16)}, {K(2)}, DataType::kInt64, {9}, {{"rotary_dim", Attribute::of_int(18)}}, false, "rotary_dim 18"},
  };
  for (const Bad& c : cases) {
    GraphBuilder b;
    std::vector<ValueId> in = {b.input("x", c.x), b.input("p", c.p, c.pdt)};
    in.push_back(b.floats("t0", c.table));
    if (c.caches) in.push_back(b.floats("t1", c.table));
    b.op(OpKind::kRope, "bad_rope", in, c.attrs);
    Status s = infer_shapes(b.g);
    ASSERT_FALSE(s.ok()) << c.expect;
    EXPECT_NE(s.message().find("node 'bad_rope' (Rope)"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace kiln::ir
