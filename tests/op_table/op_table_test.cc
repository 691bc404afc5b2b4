// The runner of the op test table (op_table.h): every row on every backend, through the product
// path a user takes (build_from_graph -> plan bytes -> Runtime::deserialize_engine -> Engine ->
// ExecutionContext::execute), against the CPU reference interpreter on the row's unoptimized
// graph, with the row's tolerance (NaN-aware; failures report the max abs / rel / normalized
// error and where). One test per row x precision:
//   OpTable/OpTableCpu.MatchesReference/Conv_3x3_nchw_fp32    (CPU plans; fp32 only)
//   OpTable/OpTableCuda.MatchesReference/Conv_3x3_nhwc_fp16   (CUDA plans; skip without a GPU)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "builder/build_from_graph.h"
#include "core/numerics.h"
#include "gpu/gpu_test_util.h"
#include "kiln/runtime.h"
#include "op_table/op_table.h"
#include "runtime/engine_impl.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/layer_factory.h"
#endif

namespace kiln::testing::op_table {
namespace {

struct Param {
  const Row* row;
  Precision precision;
  bool cuda;
};

bool is_layout_op(const std::string& op) {
  return op == "Conv" || op == "FusedConv" || op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" ||
         op == "GlobalMaxPool";
}

// The CUDA backend stores conv / pool NHWC in 16-bit precisions; everything else is NCHW.
bool expects_nhwc(const Param& p) { return p.cuda && p.precision != Precision::kFp32; }
const char* expected_layout(const Param& p) { return expects_nhwc(p) ? "NHWC" : "NCHW"; }

std::string test_name(const Param& p) {
  std::string name = p.row->name;
  if (p.row->layout == LayoutRule::kFollowsPrecision) name.append(expects_nhwc(p) ? "_nhwc" : "_nchw");
  name.append("_");
  name.append(precision_name(p.precision));
  return name;
}

// gtest prints a parameter of a failing test with this (not as raw bytes).
void PrintTo(const Param& p, std::ostream* os) { *os << (p.cuda ? "cuda " : "cpu ") << test_name(p); }

std::vector<Param> params(bool cuda) {
  std::vector<Param> r;
  for (const Row& row : all_rows()) {
    if (!cuda) {
      r.push_back({&row, Precision::kFp32, false});
      continue;
    }
    if (!row.cuda) continue;
    for (Precision p : row.precisions) r.push_back({&row, p, true});
  }
  return r;
}

struct Ran {
  std::shared_ptr<Engine> engine;
  std::vector<Tensor> outputs;  // engine outputs, in order
  std::vector<std::string> names;
  std::vector<Tensor> graph_outputs;  // Row::cuda_graph: the outputs of the captured CUDA graph's first run
};

StatusOr<std::vector<Tensor>> execute(ExecutionContext& ctx, const Engine& e, const std::vector<Tensor>& inputs,
                                      std::vector<std::string>* names) {
  size_t k = 0;
  for (const IOTensor& io : e.io_tensors()) {
    if (!io.is_input) continue;
    if (k >= inputs.size()) return invalid_argument("the row gives fewer inputs than the engine has");
    KILN_RETURN_IF_ERROR(ctx.set_input(io.desc.name, inputs[k++]));
  }
  KILN_RETURN_IF_ERROR(ctx.execute());
  std::vector<Tensor> out;
  for (const IOTensor& io : e.io_tensors()) {
    if (io.is_input) continue;
    KILN_ASSIGN_OR_RETURN(Tensor t, ctx.output(io.desc.name));
    out.push_back(t.clone());
    if (names) names->push_back(io.desc.name);
  }
  return out;
}

// The product path. Tactic timing is cut to 2 runs per candidate: the table checks values, not
// speed.
StatusOr<Ran> run_product_path(const OpCase& c, const Param& p) {
  BuilderConfig config;
  config.target = p.cuda ? TargetDevice::kCuda : TargetDevice::kCpu;
  config.fp16 = p.precision == Precision::kFp16;
  config.bf16 = p.precision == Precision::kBf16;
  config.tf32 = false;
  config.workspace_limit = p.row->workspace_limit;
  config.opt_level = p.row->opt_level;
  config.disabled_passes = p.row->disabled_passes;
  config.quant_conv = p.row->quant_conv;
  config.timing_iterations = 2;
  if (p.cuda) config.tactic_sources = p.row->tactic_sources;
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(c.graph, config));
  Ran r;
  KILN_ASSIGN_OR_RETURN(r.engine, Runtime::deserialize_engine(plan));
  auto ctx = r.engine->create_execution_context();
  KILN_ASSIGN_OR_RETURN(r.outputs, execute(*ctx, *r.engine, c.inputs, &r.names));
  if (p.cuda && p.row->cuda_graph) {  // capture on the first run, replay on the second: the same bits
    auto graph_ctx = r.engine->create_execution_context();
    graph_ctx->set_cuda_graph(true);
    KILN_ASSIGN_OR_RETURN(r.graph_outputs, execute(*graph_ctx, *r.engine, c.inputs, nullptr));
    KILN_ASSIGN_OR_RETURN(auto replay, execute(*graph_ctx, *r.engine, c.inputs, nullptr));
    for (size_t k = 0; k < replay.size() && k < r.graph_outputs.size(); ++k)
      if (!replay[k].bit_equal(r.graph_outputs[k]))
        return internal_error("output '" + r.names[k] + "': the CUDA graph's replay differs from its captured run");
  }
  return r;
}

// Element errors of one output against the reference. NaN must match NaN; infinities must match.
struct Diff {
  double max_abs = 0;       // max |got - ref|
  double max_rel = 0;       // max |got - ref| / |ref| over elements with |ref| >= 1e-3 * max |ref|
  double normalized = 0;    // max_abs / max |ref| (what the tolerance bounds)
  int64_t worst = -1;       // index of max_abs
  int64_t mismatched_special = 0;  // NaN / inf where the reference has none, or the reverse
};

Diff compare(const Tensor& ref, const Tensor& got) {
  Diff d;
  double ref_max = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = load_as_double(ref.dtype(), ref.raw(), i);
    if (std::isfinite(a)) ref_max = std::max(ref_max, std::fabs(a));
  }
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = load_as_double(ref.dtype(), ref.raw(), i), b = load_as_double(got.dtype(), got.raw(), i);
    if (!std::isfinite(a) || !std::isfinite(b)) {
      const bool same = (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b);
      d.mismatched_special += !same;
      continue;
    }
    const double e = std::fabs(a - b);
    if (e > d.max_abs) {
      d.max_abs = e;
      d.worst = i;
    }
    if (std::fabs(a) >= 1e-3 * ref_max && std::fabs(a) > 0) d.max_rel = std::max(d.max_rel, e / std::fabs(a));
  }
  d.normalized = ref_max > 0 ? d.max_abs / ref_max : d.max_abs;
  return d;
}

void check_row(const Param& p) {
  const Row& row = *p.row;
  const OpCase c = row.make();
  auto ref = interpret(c.graph, c.inputs);
  ASSERT_TRUE(ref.ok()) << row.name << ": the CPU reference fails: " << ref.status().to_string();
  auto ran = run_product_path(c, p);
  ASSERT_TRUE(ran.ok()) << row.name << " [" << precision_name(p.precision) << "]: " << ran.status().to_string();
  ASSERT_EQ(ran->outputs.size(), ref->size()) << row.name;

  const double tol = p.cuda ? row.tol.of(p.precision) : row.cpu_tol;
  const bool graph = !ran->graph_outputs.empty();
  for (size_t k = 0; k < (graph ? 2 : 1) * ref->size(); ++k) {
    const size_t o = k % ref->size();
    const Tensor &want = (*ref)[o], &got = k < ref->size() ? ran->outputs[o] : ran->graph_outputs.at(o);
    const std::string what = row.name + " output '" + ran->names[o] + "'" + (k < ref->size() ? "" : " (CUDA graph)");
    ASSERT_EQ(got.shape(), want.shape()) << what;
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
    // int32 / int64 / uint64 / bool: exactly the reference's; float32 and float64 within the tolerance.
    if (want.dtype() != DataType::kFloat32 && want.dtype() != DataType::kFloat64) {
      int64_t first = -1;
      for (int64_t i = 0; i < want.numel() && first < 0; ++i)
        if (load_as_double(want.dtype(), want.raw(), i) != load_as_double(got.dtype(), got.raw(), i)) first = i;
      EXPECT_TRUE(want.bit_equal(got)) << what << " [" << (p.cuda ? "cuda " : "cpu ") << precision_name(p.precision)
                                       << "]: first mismatch at element " << first << ": ref "
                                       << (first >= 0 ? load_as_double(want.dtype(), want.raw(), first) : 0) << ", got "
                                       << (first >= 0 ? load_as_double(got.dtype(), got.raw(), first) : 0);
      continue;
    }
    const Diff d = compare(want, got);
    EXPECT_EQ(d.mismatched_special, 0) << what << ": NaN / inf where the reference has none (or the reverse)";
    EXPECT_LE(d.normalized, tol) << what << " [" << (p.cuda ? "cuda " : "cpu ") << precision_name(p.precision)
                                 << "]: max abs error " << d.max_abs << " at element " << d.worst << " (ref "
                                 << (d.worst >= 0 ? load_as_double(want.dtype(), want.raw(), d.worst) : 0.0) << ", got "
                                 << (d.worst >= 0 ? load_as_double(got.dtype(), got.raw(), d.worst) : 0.0)
                                 << "), max rel error " << d.max_rel
                                 << ", normalized " << d.normalized << " > tolerance " << tol;
  }

  // What the row is about is in the plan: its layers' ops ...
  std::vector<std::string> expect = row.expect_ops;
  if (expect.empty() && c.graph.nodes.size() == 1) expect = {ir::op_name(c.graph.nodes[0].op)};
  if (p.cuda && p.precision != Precision::kFp32) expect.insert(expect.end(), row.expect_ops_16bit.begin(), row.expect_ops_16bit.end());
  std::ostringstream ops;
  for (const LayerInfo& l : ran->engine->layers()) ops << l.op << " ";
  for (const std::string& op : expect) {
    bool found = false;
    for (const LayerInfo& l : ran->engine->layers()) found |= l.op == op;
    EXPECT_TRUE(found) << row.name << ": no " << op << " layer in the plan; its layers: " << ops.str();
  }
  for (const std::string& op : row.absent_ops)
    for (const LayerInfo& l : ran->engine->layers())
      EXPECT_NE(l.op, op) << row.name << ": layer '" << l.name << "' should have been fused; the plan's layers: " << ops.str();
  if (p.cuda && !row.expect_tactic.empty()) {
    std::string tactics;
    bool found = false;
    for (const DeviceLayerInfo& l : ran->engine->device_layers()) {
      found |= l.tactic.find(row.expect_tactic) != std::string::npos;
      tactics += "'" + l.tactic + "' ";
    }
    EXPECT_TRUE(found) << row.name << ": no tactic with '" << row.expect_tactic << "'; tactics: " << tactics;
  }
  if (p.cuda && !row.absent_tactic.empty())
    for (const DeviceLayerInfo& l : ran->engine->device_layers())
      EXPECT_EQ(l.tactic.find(row.absent_tactic), std::string::npos)
          << row.name << ": layer '" << l.name << "' runs '" << l.tactic << "'";
  // ... the workspace limit it sets ...
  if (p.cuda && row.workspace_limit > 0) {
    for (const DeviceLayerInfo& l : ran->engine->device_layers()) {
      EXPECT_LE(l.workspace_bytes, row.workspace_limit) << row.name << ": layer '" << l.name << "' (" << l.tactic << ")";
    }
  }
  // ... and the layout of its conv / pool layers.
  if (row.layout == LayoutRule::kFollowsPrecision) {
    int checked = 0;
    for (const ir::Node& n : engine_impl(*ran->engine).graph.nodes) {
      if (n.removed || !is_layout_op(ir::op_name(n.op))) continue;
      ++checked;
      EXPECT_EQ(n.attr_string("layout", "NCHW"), expected_layout(p)) << row.name << ": layer '" << n.name << "'";
    }
    EXPECT_GT(checked, 0) << row.name << ": the row has a layout rule but the plan has no conv / pool layer";
  }
}

class OpTableCpu : public ::testing::TestWithParam<Param> {};
class OpTableCuda : public ::testing::TestWithParam<Param> {};

TEST_P(OpTableCpu, MatchesReference) { check_row(GetParam()); }

TEST_P(OpTableCuda, MatchesReference) {
  REQUIRE_GPU();
  check_row(GetParam());
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) { return test_name(info.param); }

INSTANTIATE_TEST_SUITE_P(OpTable, OpTableCpu, ::testing::ValuesIn(params(false)), param_name);
INSTANTIATE_TEST_SUITE_P(OpTable, OpTableCuda, ::testing::ValuesIn(params(true)), param_name);

// The table itself: names usable as test names, each row builds a graph its CPU reference runs,
// and the CUDA column covers fp32, fp16 and bf16 for every op family.
TEST(OpTableRows, NamesAreUniqueAndPrecisionsListed) {
  ASSERT_GT(all_rows().size(), 100u);
  for (const Row& row : all_rows()) {
    EXPECT_FALSE(row.name.empty());
    for (char ch : row.name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << row.name;
    EXPECT_FALSE(row.precisions.empty()) << row.name;
    EXPECT_TRUE(row.make) << row.name;
  }
}

// Every op the CUDA backend lowers — each op with a registered layer factory, float or exact
// (src/backends/cuda/layer_factories.cc, docs/decisions/0042, 0051), the plan's Reformat layers and Shape
// (folded to a constant at the build shapes) — is the subject of some row: in a row's graph or its
// expect_ops. A factory registered without a row fails here.
TEST(OpTableRows, EveryCudaLoweredOpHasARow) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA (the factory table is part of it)";
#else
  std::vector<std::string> lowered = {"Reformat", "Shape"};
  for (int i = 0; i < ir::kNumOps; ++i)
    if (cuda::find_layer_factory(static_cast<ir::OpKind>(i))) lowered.push_back(ir::op_name(static_cast<ir::OpKind>(i)));
  for (int i = 0; i < ir::kNumOps; ++i)
    if (cuda::find_exact_layer_factory(static_cast<ir::OpKind>(i)))
      lowered.push_back(ir::op_name(static_cast<ir::OpKind>(i)));
  ASSERT_GT(lowered.size(), 50u) << "the factory table lost its registrations";
  std::set<std::string> covered;
  for (const Row& row : all_rows()) {
    if (!row.cuda) continue;
    const OpCase c = row.make();
    for (const ir::Node& n : c.graph.nodes) covered.insert(ir::op_name(n.op));
    covered.insert(row.expect_ops.begin(), row.expect_ops.end());
    covered.insert(row.expect_ops_16bit.begin(), row.expect_ops_16bit.end());
  }
  for (const std::string& op : lowered) EXPECT_TRUE(covered.count(op)) << op << " has no row in the op table";
#endif
}

}  // namespace
}  // namespace kiln::testing::op_table
