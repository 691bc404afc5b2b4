// The tap-list Resize and the float64 Einsum of the CUDA path without a GPU (docs/decisions/0075):
// for every Resize / Upsample / Einsum row of the op table (rows_f64.cc), the planned descriptor
// replayed with the kernels' own per-element code (resize_taps_element, einsum_f64_element:
// __host__ __device__) reproduces the CPU reference — Resize bit for bit in float32 (both sum the
// same taps in double in the same order and round once), Einsum to 1e-12 (another summation
// order). Malformed equations and run-time scales are refused naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/cpu/interpreter.h"
#include "core/numerics.h"
#include "gpu/gpu_test_util.h"
#include "op_table/op_table.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_ops.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
// The single node of a row's graph and the concrete shapes of its inputs / output.
const ir::Node& only_node(const op_table::OpCase& c) {
  EXPECT_EQ(c.graph.nodes.size(), 1u);
  return c.graph.nodes[0];
}
#endif

TEST(ResizeTapsPlan, ReplayMatchesCpuReferenceOnEveryRow) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int rows = 0;
  for (const op_table::Row& row : op_table::f64_rows()) {
    if (row.name.find("Resize") == std::string::npos && row.name.find("Upsample") == std::string::npos) continue;
    SCOPED_TRACE(row.name);
    const op_table::OpCase c = row.make();
    auto ref = interpret(c.graph, c.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    const ir::Node& n = only_node(c);
    ASSERT_TRUE(cuda::resize_needs_taps(n));
    const Tensor& x = c.inputs[0];
    auto p = cuda::plan_resize_taps(n, c.graph, x.shape(), (*ref)[0].shape());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Tensor y(DataType::kFloat32, (*ref)[0].shape());
    for (int64_t i = 0; i < y.numel(); ++i)
      y.data<float>()[i] = static_cast<float>(cuda::resize_taps_element(
          p->table.data(), p->d, i, [&](int64_t k) { return static_cast<double>(x.data<float>()[k]); }));
    EXPECT_TRUE(y.bit_equal((*ref)[0]));
    ++rows;
  }
  EXPECT_GE(rows, 6);
#endif
}

TEST(ResizeTapsPlan, RuntimeScalesAreRefusedByNode) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  TinyGraph t;
  auto x = t.input("x", {1, 1, 4, 4});
  auto scales = t.input("scales", {4});
  auto y = t.node(ir::OpKind::kResize, "rs", {x, ir::kNoValue, scales}, {1, 1, 8, 8},
                  {{"mode", ir::Attribute::of_string("cubic")}});
  t.g.outputs = {y};
  auto p = cuda::plan_resize_taps(t.g.nodes[0], t.g, {1, 1, 4, 4}, {1, 1, 8, 8});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("node 'rs' (Resize): scales must be a constant"), std::string::npos)
      << p.status().message();
#endif
}

TEST(EinsumPlan, ReplayMatchesCpuReferenceOnEveryRow) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int rows = 0;
  for (const op_table::Row& row : op_table::f64_rows()) {
    if (row.name.find("Einsum") == std::string::npos) continue;
    SCOPED_TRACE(row.name);
    const op_table::OpCase c = row.make();
    auto ref = interpret(c.graph, c.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    const Tensor& want = (*ref)[0];
    std::vector<Shape> shapes;
    for (const Tensor& in : c.inputs) shapes.push_back(in.shape());
    auto d = cuda::plan_einsum(only_node(c), shapes, want.shape());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    int64_t sum_total = 1;
    for (int k = 0; k < d->n_sum; ++k) sum_total *= d->sum_ext[k];
    double worst = 0, ref_max = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double got = cuda::einsum_f64_element(c.inputs[0].data<double>(),
                                                  c.inputs.size() > 1 ? c.inputs[1].data<double>() : nullptr, *d, i, sum_total);
      worst = std::max(worst, std::fabs(got - want.data<double>()[i]));
      ref_max = std::max(ref_max, std::fabs(want.data<double>()[i]));
    }
    EXPECT_LE(worst, 1e-12 * ref_max);
    ++rows;
  }
  EXPECT_GE(rows, 6);
#endif
}

TEST(EinsumPlan, MalformedEquationsAreRefusedByNode) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  auto plan = [](const std::string& eq, const std::vector<Shape>& in, const Shape& out) {
    ir::Node n;
    n.name = "es";
    n.op = ir::OpKind::kEinsum;
    n.opset = 12;
    n.inputs.assign(in.size(), 0);
    n.attrs["equation"] = ir::Attribute::of_string(eq);
    return cuda::plan_einsum(n, in, out);
  };
  for (const auto& [eq, in] : {std::pair<std::string, std::vector<Shape>>{"ij,jk", {{2, 3}}},   // 2 terms, 1 input
                               std::pair<std::string, std::vector<Shape>>{"ijk", {{2, 3}}},     // rank mismatch
                               std::pair<std::string, std::vector<Shape>>{"i.j", {{2, 3}}},     // bad ellipsis
                               std::pair<std::string, std::vector<Shape>>{"ij,jk", {{2, 3}, {4, 5}}}}) {  // j: 3 vs 4
    auto d = plan(eq, in, {2, 5});
    ASSERT_FALSE(d.ok()) << eq;
    EXPECT_NE(d.status().message().find("node 'es' (Einsum)"), std::string::npos) << d.status().message();
  }
  auto ok = plan("ij,jk->ik", {{2, 3}, {3, 5}}, {2, 5});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->n_out, 2);
  EXPECT_EQ(ok->n_sum, 1);
  EXPECT_EQ(ok->a_sum[0], 1);  // j along a's rows
  EXPECT_EQ(ok->b_sum[0], 5);  // j down b's columns
#endif
}

}  // namespace
}  // namespace kiln::testing
