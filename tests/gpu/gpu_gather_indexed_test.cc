// GatherND / GatherElements on the CUDA path without a GPU (backends/cuda/gather_indexed.h,
// kernels_gather.h): for every GatherND / GatherElements row of the op table, the planned
// descriptor replayed with the kernels' own per-element code (gather_nd_source /
// gather_elements_source, __host__ __device__) over the row's indices reproduces the CPU
// reference bit for bit; out-of-range run-time indices address nothing (the kernels write zeros);
// constant indices out of range and malformed shapes are refused naming the node. With a GPU
// (GpuGatherIndexed): out-of-range run-time indices give zeros in a built engine.
#include <gtest/gtest.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/interpreter.h"
#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/runtime.h"
#include "op_table/op_table.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gather_indexed.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
// The indices as the layer reads them: int64 (constants normalized like the factory) or the
// graph input's int32 / int64 values as they are.
struct Indices {
  std::vector<int64_t> i64;
  std::vector<int32_t> i32;
  bool is_64 = true;
};

Indices indices_of(const Tensor& t) {
  Indices r;
  r.is_64 = t.dtype() == DataType::kInt64;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (r.is_64) r.i64.push_back(t.data<int64_t>()[i]);
    else r.i32.push_back(t.data<int32_t>()[i]);
  }
  return r;
}

// y[i] = x[source(i)] bytes, zero bytes where the source is -1: what the kernels write.
template <typename Source>
Tensor replay(const Tensor& x, DataType dt, const Shape& out, Source source) {
  Tensor y(dt, out);
  const size_t eb = static_cast<size_t>(dtype_bits(dt) / 8);  // 1, 4 or 8: bool, int32, int64, float
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t s = source(i);
    char* dst = static_cast<char*>(y.raw()) + i * eb;
    if (s < 0) std::memset(dst, 0, eb);
    else std::memcpy(dst, static_cast<const char*>(x.raw()) + s * eb, eb);
  }
  return y;
}

// The replayed output of a single-node GatherND / GatherElements row graph.
StatusOr<Tensor> replay_row(const op_table::OpCase& c, const Shape& out) {
  const ir::Node& n = c.graph.nodes.at(0);
  const Tensor& x = c.inputs.at(0);
  const auto& k = c.graph.value(n.inputs[1]).constant;
  const Tensor& it = k ? *k : c.inputs.at(1);
  Indices idx = indices_of(it);
  if (n.op == ir::OpKind::kGatherND) {
    KILN_ASSIGN_OR_RETURN(cuda::GatherNDDesc d, cuda::plan_gather_nd(n, x.shape(), it.shape()));
    if (k) {
      if (!idx.is_64) for (int32_t v : idx.i32) idx.i64.push_back(v);
      idx.is_64 = true;
      KILN_RETURN_IF_ERROR(cuda::normalize_gather_nd_indices(n, d, &idx.i64));
    }
    return replay(x, x.dtype(), out, [&](int64_t i) {
      return idx.is_64 ? cuda::gather_nd_source(d, i, idx.i64.data()) : cuda::gather_nd_source(d, i, idx.i32.data());
    });
  }
  KILN_ASSIGN_OR_RETURN(cuda::GatherElementsDesc d, cuda::plan_gather_elements(n, x.shape(), it.shape()));
  if (k) {
    if (!idx.is_64) for (int32_t v : idx.i32) idx.i64.push_back(v);
    idx.is_64 = true;
    KILN_RETURN_IF_ERROR(cuda::normalize_gather_elements_indices(n, d, &idx.i64));
  }
  return replay(x, x.dtype(), out, [&](int64_t i) {
    return idx.is_64 ? cuda::gather_elements_source(d, i, idx.i64.data())
                     : cuda::gather_elements_source(d, i, idx.i32.data());
  });
}

// The scatter kernels' combine (kernels_gather.cu) on the host, in the element type (float for
// float32 data: the rows' plans in fp32).
template <typename T>
T combine(T a, T b, cuda::ScatterReduce r) {
  using cuda::ScatterReduce;
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (r == ScatterReduce::kAdd) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    if (r == ScatterReduce::kMul) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    if (r == ScatterReduce::kAdd) return a + b;
    if (r == ScatterReduce::kMul) return a * b;
  }
  if (r == ScatterReduce::kMax) return a < b ? b : a;
  if (r == ScatterReduce::kMin) return b < a ? b : a;
  return b;
}

// Replays a scatter row as the kernels visit it: ScatterElements line by line along the axis
// (update i = (o * A + k) * inner + q), ScatterND slice offset by slice offset over the tuples.
template <typename T>
StatusOr<Tensor> replay_scatter_typed(const op_table::OpCase& c, const Tensor& it, const Tensor& upd) {
  const ir::Node& n = c.graph.nodes.at(0);
  const Tensor& x = c.inputs.at(0);
  const bool constant = static_cast<bool>(c.graph.value(n.inputs[1]).constant);
  Indices idx = indices_of(it);
  Tensor y = x.clone();
  T* yp = static_cast<T*>(y.raw());
  const T* up = static_cast<const T*>(upd.raw());
  cuda::ScatterReduce r = cuda::ScatterReduce::kNone;
  auto to64 = [&] {
    if (!idx.is_64) for (int32_t v : idx.i32) idx.i64.push_back(v);
    idx.is_64 = true;
  };
  if (n.op == ir::OpKind::kScatterND) {
    KILN_ASSIGN_OR_RETURN(cuda::GatherNDDesc d, cuda::plan_scatter_nd(n, x.shape(), it.shape(), upd.shape(), &r));
    if (constant) {
      to64();
      KILN_RETURN_IF_ERROR(cuda::normalize_gather_nd_indices(n, d, &idx.i64));
    }
    for (int64_t s = 0; s < d.slice; ++s)
      for (int64_t t = 0; t < d.tuples; ++t) {
        const int64_t i = t * d.slice + s;
        const int64_t dst = idx.is_64 ? cuda::gather_nd_source(d, i, idx.i64.data())
                                       : cuda::gather_nd_source(d, i, idx.i32.data());
        if (dst >= 0) yp[dst] = combine(yp[dst], up[i], r);
      }
    return y;
  }
  KILN_ASSIGN_OR_RETURN(cuda::GatherElementsDesc d,
                        cuda::plan_scatter_elements(n, x.shape(), it.shape(), upd.shape(), &r));
  if (constant) {
    to64();
    KILN_RETURN_IF_ERROR(cuda::normalize_gather_elements_indices(n, d, &idx.i64));
  }
  int64_t total = 1, inner = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.dims[k];
  for (int k = d.axis + 1; k < d.rank; ++k) inner *= d.dims[k];
  const int64_t a = d.dims[d.axis];
  for (int64_t l = 0; l < total / a; ++l)
    for (int64_t k = 0; k < a; ++k) {
      const int64_t i = (l / inner * a + k) * inner + l % inner;
      const int64_t dst = idx.is_64 ? cuda::gather_elements_source(d, i, idx.i64.data())
                                     : cuda::gather_elements_source(d, i, idx.i32.data());
      if (dst >= 0) yp[dst] = combine(yp[dst], up[i], r);
    }
  return y;
}

StatusOr<Tensor> replay_scatter(const op_table::OpCase& c) {
  const ir::Node& n = c.graph.nodes.at(0);
  const auto& k = c.graph.value(n.inputs[1]).constant;
  const Tensor& it = k ? *k : c.inputs.at(1);
  const Tensor& upd = c.inputs.back();
  switch (c.inputs.at(0).dtype()) {
    case DataType::kFloat32: return replay_scatter_typed<float>(c, it, upd);
    case DataType::kInt32: return replay_scatter_typed<int32_t>(c, it, upd);
    case DataType::kInt64: return replay_scatter_typed<int64_t>(c, it, upd);
    case DataType::kBool: return replay_scatter_typed<uint8_t>(c, it, upd);
    default: return unsupported("replay_scatter: dtype");
  }
}
#endif

// Every scatter row replayed as the kernels visit the updates (their own index helpers and
// combine) equals the CPU reference bit for bit: the per-line / per-slice-offset order keeps the
// CPU's order wherever two updates address one element.
TEST(GatherIndexedPlan, ScatterReplayMatchesCpuReferenceOnEveryRow) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int rows = 0;
  for (const op_table::Row& row : op_table::scatter_rows()) {
    SCOPED_TRACE(row.name);
    const op_table::OpCase c = row.make();
    const ir::OpKind op = c.graph.nodes.at(0).op;
    if (op != ir::OpKind::kScatterElements && op != ir::OpKind::kScatter && op != ir::OpKind::kScatterND)
      continue;  // ReverseSequence, MaxUnpool, Pad: their GPU rows check them
    auto ref = interpret(c.graph, c.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto got = replay_scatter(c);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(got->bit_equal((*ref)[0]));
    ++rows;
  }
  EXPECT_GE(rows, 15);
#endif
}

TEST(GatherIndexedPlan, ScatterRefusesBadShapesAndReductions) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  cuda::ScatterReduce r;
  ir::Node se;
  se.name = "s";
  se.op = ir::OpKind::kScatterElements;
  EXPECT_FALSE(cuda::plan_scatter_elements(se, {3, 4}, {2, 4}, {2, 3}, &r).ok());  // updates != indices
  EXPECT_TRUE(cuda::plan_scatter_elements(se, {3, 4}, {2, 4}, {2, 4}, &r).ok());
  se.attrs["reduction"] = ir::Attribute::of_string("mean");
  auto bad = cuda::plan_scatter_elements(se, {3, 4}, {2, 4}, {2, 4}, &r);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("'s'"), std::string::npos) << bad.status().to_string();
  ir::Node nd;
  nd.name = "nd";
  nd.op = ir::OpKind::kScatterND;
  EXPECT_FALSE(cuda::plan_scatter_nd(nd, {3, 4, 5}, {2, 1}, {2, 5}, &r).ok());  // [2, 4, 5] expected
  EXPECT_TRUE(cuda::plan_scatter_nd(nd, {3, 4, 5}, {2, 1}, {2, 4, 5}, &r).ok());
  nd.attrs["reduction"] = ir::Attribute::of_string("max");
  ASSERT_TRUE(cuda::plan_scatter_nd(nd, {3, 4, 5}, {2, 2}, {2, 5}, &r).ok());
  EXPECT_EQ(r, cuda::ScatterReduce::kMax);
#endif
}

TEST(GatherIndexedPlan, ReplayMatchesCpuReferenceOnEveryRow) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int rows = 0;
  for (const op_table::Row& row : op_table::gather_indexed_rows()) {
    SCOPED_TRACE(row.name);
    const op_table::OpCase c = row.make();
    auto ref = interpret(c.graph, c.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto got = replay_row(c, (*ref)[0].shape());
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(got->bit_equal((*ref)[0]));
    ++rows;
  }
  EXPECT_GE(rows, 15);
#endif
}

#ifdef KILN_HAVE_CUDA
ir::Node node_of(ir::OpKind op, std::map<std::string, ir::Attribute> attrs) {
  ir::Node n;
  n.name = "g";
  n.op = op;
  n.opset = 13;
  n.attrs = std::move(attrs);
  return n;
}
#endif

// Run-time indices outside their dim address nothing (zeros), negative ones count from the end,
// and in-range neighbours are unaffected.
TEST(GatherIndexedPlan, OutOfRangeRuntimeIndicesAddressNothing) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  // GatherND: data [3, 4], tuples (row, col).
  auto nd = cuda::plan_gather_nd(node_of(ir::OpKind::kGatherND, {}), {3, 4}, {4, 2});
  ASSERT_TRUE(nd.ok()) << nd.status().to_string();
  const int64_t t[] = {2, 3, -1, -4, 3, 0, 0, -5};
  EXPECT_EQ(cuda::gather_nd_source(*nd, 0, t), 2 * 4 + 3);
  EXPECT_EQ(cuda::gather_nd_source(*nd, 1, t), 2 * 4 + 0);  // (-1, -4) = (2, 0)
  EXPECT_EQ(cuda::gather_nd_source(*nd, 2, t), -1);         // row 3 of 3
  EXPECT_EQ(cuda::gather_nd_source(*nd, 3, t), -1);         // col -5 of 4
  // GatherElements along axis 1 of data [2, 3]: indices [2, 2].
  auto ge = cuda::plan_gather_elements(node_of(ir::OpKind::kGatherElements, {{"axis", ir::Attribute::of_int(-1)}}),
                                       {2, 3}, {2, 2});
  ASSERT_TRUE(ge.ok()) << ge.status().to_string();
  const int32_t e[] = {-3, 3, 2, -4};
  EXPECT_EQ(cuda::gather_elements_source(*ge, 0, e), 0);
  EXPECT_EQ(cuda::gather_elements_source(*ge, 1, e), -1);
  EXPECT_EQ(cuda::gather_elements_source(*ge, 2, e), 3 + 2);
  EXPECT_EQ(cuda::gather_elements_source(*ge, 3, e), -1);
#endif
}

TEST(GatherIndexedPlan, RefusesBadShapesAndConstantIndicesOutOfRange) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const ir::Node nd0 = node_of(ir::OpKind::kGatherND, {});
  const ir::Node nd1 = node_of(ir::OpKind::kGatherND, {{"batch_dims", ir::Attribute::of_int(1)}});
  EXPECT_FALSE(cuda::plan_gather_nd(nd0, {3, 4}, {2, 3}).ok());      // tuple of 3 into rank 2
  EXPECT_FALSE(cuda::plan_gather_nd(nd1, {2, 4}, {3, 1}).ok());      // batch 2 vs 3
  EXPECT_FALSE(cuda::plan_gather_nd(nd1, {2, 4}, {2}).ok());         // batch_dims >= rank(indices)
  EXPECT_FALSE(cuda::plan_gather_nd(nd0, {}, {1}).ok());             // rank-0 data
  auto d = cuda::plan_gather_nd(nd0, {3, 4}, {2, 2});
  ASSERT_TRUE(d.ok());
  std::vector<int64_t> idx = {0, 1, 2, 4};
  Status s = cuda::normalize_gather_nd_indices(nd0, *d, &idx);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("'g'"), std::string::npos) << s.to_string();
  EXPECT_NE(s.to_string().find("index 4"), std::string::npos) << s.to_string();
  idx = {-3, -1, 2, -4};
  ASSERT_TRUE(cuda::normalize_gather_nd_indices(nd0, *d, &idx).ok());
  EXPECT_EQ(idx, (std::vector<int64_t>{0, 3, 2, 0}));

  const ir::Node ge = node_of(ir::OpKind::kGatherElements, {{"axis", ir::Attribute::of_int(1)}});
  EXPECT_FALSE(cuda::plan_gather_elements(ge, {3, 4}, {3}).ok());          // ranks differ
  EXPECT_FALSE(cuda::plan_gather_elements(ge, {3, 4}, {4, 2}).ok());       // dim 0: 4 > 3
  EXPECT_FALSE(cuda::plan_gather_elements(node_of(ir::OpKind::kGatherElements, {{"axis", ir::Attribute::of_int(2)}}),
                                          {3, 4}, {3, 4}).ok());           // axis out of range
  auto e = cuda::plan_gather_elements(ge, {3, 4}, {3, 6});
  ASSERT_TRUE(e.ok());
  idx = {0, -4, 3, -5};
  s = cuda::normalize_gather_elements_indices(ge, *e, &idx);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("index -5"), std::string::npos) << s.to_string();
#endif
}

// Out-of-range run-time indices (undefined in ONNX; the CPU reference rejects them) read
// nothing out of bounds on the GPU: what they address is zero, the in-range outputs are the
// data's. GatherND over a bool mask, GatherElements over int64 positions.
TEST(GpuGatherIndexed, OutOfRangeRuntimeIndicesGiveZeros) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  auto run = [](ir::OpKind op, const Tensor& data, const Tensor& idx, const Shape& out,
                std::map<std::string, ir::Attribute> attrs) -> StatusOr<Tensor> {
    TinyGraph t;
    auto x = op_table::int_input(t, "data", data.shape(), data.dtype());
    auto i = op_table::int_input(t, "indices", idx.shape(), idx.dtype());
    auto y = t.node(op, "y", {x, i}, out, std::move(attrs));
    t.g.value(y).dtype = data.dtype();
    t.g.outputs = {y};
    BuilderConfig c;
    c.target = TargetDevice::kCuda;
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(t.g, c));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Engine> e, Runtime::deserialize_engine(plan));
    auto ctx = e->create_execution_context();
    KILN_RETURN_IF_ERROR(ctx->set_input("data", data));
    KILN_RETURN_IF_ERROR(ctx->set_input("indices", idx));
    KILN_RETURN_IF_ERROR(ctx->execute());
    KILN_ASSIGN_OR_RETURN(Tensor got, ctx->output("y_out"));
    return got.clone();
  };
  Tensor mask(DataType::kBool, {3, 4});
  auto* m = static_cast<uint8_t*>(mask.raw());
  for (int i = 0; i < 12; ++i) m[i] = 1;
  Tensor tuples = op_table::ints({2, 3, -1, -4, 3, 0, 0, -5}, DataType::kInt64, {4, 2});
  auto nd = run(ir::OpKind::kGatherND, mask, tuples, {4}, {});
  ASSERT_TRUE(nd.ok()) << nd.status().to_string();
  const auto* y = static_cast<const uint8_t*>(nd->raw());
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[1], 1);
  EXPECT_EQ(y[2], 0);  // row 3 of 3
  EXPECT_EQ(y[3], 0);  // col -5 of 4

  Tensor pos = op_table::ints({10, 11, 12, 13, 14, 15}, DataType::kInt64, {2, 3});
  Tensor at = op_table::ints({-3, 3, 2, -4}, DataType::kInt32, {2, 2});
  auto ge = run(ir::OpKind::kGatherElements, pos, at, {2, 2}, {{"axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(ge.ok()) << ge.status().to_string();
  EXPECT_EQ(ge->data<int64_t>()[0], 10);
  EXPECT_EQ(ge->data<int64_t>()[1], 0);
  EXPECT_EQ(ge->data<int64_t>()[2], 15);
  EXPECT_EQ(ge->data<int64_t>()[3], 0);
#endif
}

}  // namespace
}  // namespace kiln::testing
