// Graph I/O of CUDA engines (docs/decisions/0069): each graph input and output in the dtype the
// model declares (float16 / bfloat16 staged as given and converted at the boundary by a reformat
// layer; float32 models unchanged), sequence / optional I/O refused by name, and graphs whose
// shapes depend on the input *values* (Range's length from an input scalar) told apart by shape
// discovery and lowered at each call's own values; float64 and uint64 I/O staged as declared
// (docs/decisions/0075). Without a GPU: the dry-run lowering (plan_gpu_streams) and shape
// discovery. With a GPU (GpuIoDtypes suite): float16 I/O, float64 Casts and a value-dependent
// Range end to end against the CPU reference.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/interpreter.h"
#include "builder/build_from_graph.h"
#include "core/numerics.h"
#include "gpu/gpu_test_util.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "op_table/op_table.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_ops.h"
#endif

namespace kiln::testing {
namespace {

using op_table::int_input;

// y = Relu(x) * 0.5 with x and y declared `dt` (float32 or float16), shape [6, 4, 5] (rank 3: no NHWC in 16-bit plans).
TinyGraph relu_scale_graph(DataType dt) {
  TinyGraph t;
  auto x = t.input("x", {6, 4, 5});
  t.g.value(x).dtype = dt;
  auto r = t.node(ir::OpKind::kRelu, "relu", {x}, {6, 4, 5});
  t.g.value(r).dtype = dt;
  Tensor half(dt, {1});
  store_from_double(dt, half.raw(), 0, 0.5);
  auto y = t.node(ir::OpKind::kMul, "scale", {r, t.constant("half", half)}, {6, 4, 5});
  t.g.value(y).dtype = dt;
  t.g.outputs = {y};
  return t;
}

// y = Cast<float>(Range(0, n, 1)) for an int64 scalar input n: y's length is n's value.
TinyGraph range_of_input_graph() {
  TinyGraph t;
  auto n = int_input(t, "n", {}, DataType::kInt64);
  Tensor zero(DataType::kInt64, {}), one(DataType::kInt64, {});
  zero.data<int64_t>()[0] = 0;
  one.data<int64_t>()[0] = 1;
  auto r = t.node(ir::OpKind::kRange, "range", {t.constant("start", zero), n, t.constant("delta", one)}, {});
  t.g.value(r).dtype = DataType::kInt64;
  t.g.value(r).shape.reset();  // its length is data: static inference cannot fix it
  auto y = t.node(ir::OpKind::kCast, "to_float", {r}, {}, {{"to", ir::Attribute::of_int(int64_t{1})}});
  t.g.value(y).shape.reset();
  t.g.outputs = {y};
  return t;
}

#ifdef KILN_HAVE_CUDA
StatusOr<cuda::GpuStreamSummary> dry_run(const ir::Graph& g, const std::vector<Shape>& in, bool fp16) {
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(g, in));
  cuda::GpuBuildOptions o;
  o.precision.fp16 = fp16;
  return cuda::plan_gpu_streams(g, vs, o);
}

bool has_layer(const cuda::GpuStreamSummary& s, const std::string& name) {
  return std::find(s.layers.begin(), s.layers.end(), name) != s.layers.end();
}
#endif

// A float16 model takes and returns float16; the fp32 plan converts at the boundary (one reformat
// in, one out), the fp16 plan computes on the staged input as it is.
TEST(GpuIoDtypesLowering, Float16IoKeepsItsDtype) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const TinyGraph t = relu_scale_graph(DataType::kFloat16);
  for (bool fp16 : {false, true}) {
    auto s = dry_run(t.g, {{6, 4, 5}}, fp16);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->input_dtypes, std::vector<DataType>{DataType::kFloat16}) << (fp16 ? "fp16 plan" : "fp32 plan");
    EXPECT_EQ(s->output_dtypes, std::vector<DataType>{DataType::kFloat16}) << (fp16 ? "fp16 plan" : "fp32 plan");
    EXPECT_EQ(has_layer(*s, "input_reformat:x"), !fp16) << (fp16 ? "fp16 plan" : "fp32 plan");
    EXPECT_EQ(has_layer(*s, "output_reformat:scale_out"), !fp16) << (fp16 ? "fp16 plan" : "fp32 plan");
  }
#endif
}

// A float32 model is unchanged: float32 in and out, no boundary layer in an fp32 plan.
TEST(GpuIoDtypesLowering, Float32IoUnchanged) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const TinyGraph t = relu_scale_graph(DataType::kFloat32);
  auto s = dry_run(t.g, {{6, 4, 5}}, false);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->input_dtypes, std::vector<DataType>{DataType::kFloat32});
  EXPECT_EQ(s->output_dtypes, std::vector<DataType>{DataType::kFloat32});
  EXPECT_FALSE(has_layer(*s, "input_reformat:x"));
  EXPECT_FALSE(has_layer(*s, "output_reformat:scale_out"));
  // The fp16 plan converts float32 I/O at the boundary, as before.
  auto h = dry_run(t.g, {{6, 4, 5}}, true);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->input_dtypes, std::vector<DataType>{DataType::kFloat32});
  EXPECT_EQ(h->output_dtypes, std::vector<DataType>{DataType::kFloat32});
  EXPECT_TRUE(has_layer(*h, "input_reformat:x"));
#endif
}

// A bfloat16 input that is also the graph output comes back as bfloat16.
TEST(GpuIoDtypesLowering, Bfloat16PassThrough) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  auto x = t.input("x", {4, 8});
  t.g.value(x).dtype = DataType::kBFloat16;
  t.g.outputs = {x};
  auto s = dry_run(t.g, {{4, 8}}, false);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->input_dtypes, std::vector<DataType>{DataType::kBFloat16});
  EXPECT_EQ(s->output_dtypes, std::vector<DataType>{DataType::kBFloat16});
#endif
}

// Sequence and optional graph I/O: Unsupported, naming the value (not an InvalidArgument from
// shape discovery, which cannot feed a tensor where a sequence is declared).
TEST(GpuIoDtypesLowering, SequenceIoIsUnsupportedByName) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  for (ir::ValueKind kind : {ir::ValueKind::kSequence, ir::ValueKind::kOptionalTensor}) {
    TinyGraph t;
    auto x = t.input("seq_in", {4});
    t.g.value(x).kind = kind;
    auto y = t.node(ir::OpKind::kIdentity, "id", {x}, {4});
    t.g.value(y).kind = kind;
    t.g.outputs = {y};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{4}});
    ASSERT_FALSE(vs.ok());
    EXPECT_EQ(vs.status().code(), StatusCode::kUnsupported) << vs.status().to_string();
    EXPECT_NE(vs.status().message().find("graph input 'seq_in' is a"), std::string::npos) << vs.status().message();
  }
  {  // a tensor input, a sequence output
    TinyGraph t;
    auto x = t.input("x", {4});
    auto y = t.node(ir::OpKind::kSequenceConstruct, "make_seq", {x}, {4});
    t.g.value(y).kind = ir::ValueKind::kSequence;
    t.g.outputs = {y};
    Status s = cuda::check_tensor_io(t.g);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
    EXPECT_NE(s.message().find("graph output 'make_seq_out' is a sequence"), std::string::npos) << s.message();
  }
#endif
}

// Range's length from an input scalar: shape discovery on made-up values cannot know it. The two
// runs disagree, so the shapes are marked value-dependent (naming the value); at given values the
// shapes are exact; a graph whose shapes follow from the input shapes is not marked.
TEST(GpuIoDtypesLowering, ValueDependentShapesAreDetected) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const TinyGraph t = range_of_input_graph();
  auto vs = cuda::infer_value_shapes_by_reference(t.g, {{}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  EXPECT_TRUE(vs->value_dependent);
  EXPECT_NE(vs->dependence.find("range_out"), std::string::npos) << vs->dependence;
  for (int64_t n : {3, 10}) {
    std::vector<Tensor> in{Tensor(DataType::kInt64, {})};
    in[0].data<int64_t>()[0] = n;
    auto at = cuda::infer_value_shapes_by_reference(t.g, {{}}, &in);
    ASSERT_TRUE(at.ok()) << at.status().to_string();
    EXPECT_EQ(at->shapes[t.g.outputs[0]], Shape{n});
  }
  const TinyGraph f = relu_scale_graph(DataType::kFloat32);
  auto fs = cuda::infer_value_shapes_by_reference(f.g, {{6, 4, 5}});
  ASSERT_TRUE(fs.ok()) << fs.status().to_string();
  EXPECT_FALSE(fs->value_dependent) << fs->dependence;
#endif
}

// Two narrow integer inputs a, b of `dt` [4, 8]; sum = a + b (wraps natively), top = Max(a, b).
TinyGraph narrow_sum_max_graph(DataType dt) {
  TinyGraph t;
  auto a = int_input(t, "a", {4, 8}, dt);
  auto b = int_input(t, "b", {4, 8}, dt);
  auto sum = t.node(ir::OpKind::kAdd, "sum", {a, b}, {4, 8});
  t.g.value(sum).dtype = dt;
  auto top = t.node(ir::OpKind::kMax, "top", {a, b}, {4, 8});
  t.g.value(top).dtype = dt;
  t.g.outputs = {sum, top};
  return t;
}

#ifdef KILN_HAVE_CUDA
// The message of check_gpu_support on `t` at `in` (empty when it lowers).
std::string lowering_error(const TinyGraph& t, const std::vector<Shape>& in) {
  auto vs = cuda::infer_value_shapes_by_reference(t.g, in);
  if (!vs.ok()) return vs.status().to_string();
  Status s = cuda::check_gpu_support(t.g, *vs);
  return s.ok() ? std::string() : s.message();
}
#endif

// uint8 / int8 / uint16 / int16 are computed as int32 and uint32 as int64 where that is the native
// result after the outputs' truncation: ring ops on anything, order-dependent ops on values that
// cannot have wrapped. The engine stages them wide (its host side converts, gpu_engine.cc).
TEST(GpuIoDtypesLowering, NarrowIntegersComputeWideWhereExact) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  for (DataType dt : {DataType::kUInt8, DataType::kInt8, DataType::kUInt16, DataType::kInt16, DataType::kUInt32}) {
    const TinyGraph t = narrow_sum_max_graph(dt);
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{4, 8}, {4, 8}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    cuda::GpuBuildOptions o;
    auto s = cuda::plan_gpu_streams(t.g, *vs, o);
    ASSERT_TRUE(s.ok()) << dtype_name(dt) << ": " << s.status().to_string();
    const DataType wide = dt == DataType::kUInt32 ? DataType::kInt64 : DataType::kInt32;
    EXPECT_EQ(s->input_dtypes, (std::vector<DataType>{wide, wide})) << dtype_name(dt);
    EXPECT_EQ(s->output_dtypes, (std::vector<DataType>{wide, wide})) << dtype_name(dt);
    // widen_narrow_integers itself: every narrow dtype rewritten to the wide one.
    cuda::ValueShapes w = *vs;
    ASSERT_TRUE(cuda::widen_narrow_integers(t.g, &w).ok());
    for (ir::ValueId v : {t.g.inputs[0], t.g.outputs[0], t.g.outputs[1]}) EXPECT_EQ(w.dtypes[v], wide) << dtype_name(dt);
  }
  {  // Max of a sum that may have wrapped: refused, naming the node and the input
    TinyGraph t;
    auto a = int_input(t, "a", {8}, DataType::kUInt8);
    auto sum = t.node(ir::OpKind::kAdd, "sum", {a, a}, {8});
    t.g.value(sum).dtype = DataType::kUInt8;
    auto top = t.node(ir::OpKind::kMax, "top", {sum, a}, {8});
    t.g.value(top).dtype = DataType::kUInt8;
    t.g.outputs = {top};
    const std::string e = lowering_error(t, {{8}});
    EXPECT_NE(e.find("'top'"), std::string::npos) << e;
    EXPECT_NE(e.find("may have wrapped around"), std::string::npos) << e;
  }
  {  // Cast of a wrapped uint16 to the wider uint32 needs the value: refused; to uint8: exact
    for (int64_t to : {12, 2}) {
      TinyGraph t;
      auto a = int_input(t, "a", {8}, DataType::kUInt16);
      auto sum = t.node(ir::OpKind::kMul, "prod", {a, a}, {8});
      t.g.value(sum).dtype = DataType::kUInt16;
      auto c = t.node(ir::OpKind::kCast, "narrow", {sum}, {8}, {{"to", ir::Attribute::of_int(to)}});
      t.g.value(c).dtype = to == 12 ? DataType::kUInt32 : DataType::kUInt8;
      t.g.outputs = {c};
      const std::string e = lowering_error(t, {{8}});
      if (to == 12) EXPECT_NE(e.find("'narrow'"), std::string::npos) << e;
      else EXPECT_EQ(e, "");
    }
  }
  {  // a Cast to a narrow type keeps the low bits (decision 0076): its value is canonical, so Max
     // may read it where it could not read the wrapped product; the declared dtype is recorded
    TinyGraph t;
    auto a = int_input(t, "a", {8}, DataType::kUInt8);
    auto prod = t.node(ir::OpKind::kMul, "prod", {a, a}, {8});
    t.g.value(prod).dtype = DataType::kUInt8;
    auto c = t.node(ir::OpKind::kCast, "narrow", {prod}, {8}, {{"to", ir::Attribute::of_int(int64_t{2})}});
    t.g.value(c).dtype = DataType::kUInt8;
    auto top = t.node(ir::OpKind::kMax, "top", {c, a}, {8});
    t.g.value(top).dtype = DataType::kUInt8;
    t.g.outputs = {top};
    EXPECT_EQ(lowering_error(t, {{8}}), "");
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{8}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    ASSERT_TRUE(cuda::widen_narrow_integers(t.g, &*vs).ok());
    EXPECT_EQ(cuda::declared_narrow_dtype(*vs, c), DataType::kUInt8);
    EXPECT_EQ(vs->dtypes[c], DataType::kInt32);
  }
  {  // an op outside the list (ReduceSum of int8): refused, naming the node and the dtype
    TinyGraph t;
    auto a = int_input(t, "a", {8}, DataType::kInt8);
    auto r = t.node(ir::OpKind::kReduceSum, "total", {a}, {1}, {{"keepdims", ir::Attribute::of_int(int64_t{1})}});
    t.g.value(r).dtype = DataType::kInt8;
    t.g.outputs = {r};
    const std::string e = lowering_error(t, {{8}});
    EXPECT_NE(e.find("'total'"), std::string::npos) << e;
    EXPECT_NE(e.find("int8"), std::string::npos) << e;
  }
#endif
}

// y = Cast<to>(x) for x declared `from` [3, 5], optionally followed by Relu (a float32 use).
TinyGraph cast_graph(DataType from, int64_t to, DataType to_dt, bool relu_after) {
  TinyGraph t;
  auto x = t.input("x", {3, 5});
  t.g.value(x).dtype = from;
  auto y = t.node(ir::OpKind::kCast, "cast", {x}, {3, 5}, {{"to", ir::Attribute::of_int(to)}});
  t.g.value(y).dtype = to_dt;
  if (relu_after) y = t.node(ir::OpKind::kRelu, "relu", {y}, {3, 5});
  t.g.outputs = {y};
  return t;
}

// float64 is stored and computed as double on the GPU (docs/decisions/0075): inputs and outputs
// are staged as float64, a Cast to float32 / float16 rounds once on the device, and a float64 value
// read by an op without a float64 kernel is refused naming that node (not the input).
TEST(GpuIoDtypesLowering, Float64Native) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  {
    const TinyGraph t = cast_graph(DataType::kFloat64, 1, DataType::kFloat32, true);
    auto s = dry_run(t.g, {{3, 5}}, false);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->input_dtypes, std::vector<DataType>{DataType::kFloat64});
  }
  for (DataType from : {DataType::kFloat32, DataType::kFloat16}) {
    const TinyGraph t = cast_graph(from, 11, DataType::kFloat64, false);
    auto s = dry_run(t.g, {{3, 5}}, false);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->output_dtypes, std::vector<DataType>{DataType::kFloat64}) << dtype_name(from);
  }
  {  // float64 to float16: one cast layer from float64 to half, then the exact widening into fp32 storage
    const TinyGraph t = cast_graph(DataType::kFloat64, 10, DataType::kFloat16, false);
    auto s = dry_run(t.g, {{3, 5}}, false);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->input_dtypes, std::vector<DataType>{DataType::kFloat64});
    EXPECT_EQ(s->output_dtypes, std::vector<DataType>{DataType::kFloat16});
  }
  {  // a float64 Relu: no float64 kernel; refused naming the node
    TinyGraph t;
    auto x = t.input("wide", {3, 5});
    t.g.value(x).dtype = DataType::kFloat64;
    auto y = t.node(ir::OpKind::kRelu, "relu", {x}, {3, 5});
    t.g.value(y).dtype = DataType::kFloat64;
    t.g.outputs = {y};
    auto s = dry_run(t.g, {{3, 5}}, false);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("node 'relu' (Relu): no CUDA tactic for float64 outputs"), std::string::npos)
        << s.status().message();
  }
  {  // uint64 I/O: staged and returned as uint64 (Max computes unsigned); uint64 Neg is refused by node
    TinyGraph t;
    auto a = t.input("a", {3, 5});
    auto b = t.input("b", {3, 5});
    t.g.value(a).dtype = t.g.value(b).dtype = DataType::kUInt64;
    auto y = t.node(ir::OpKind::kMax, "max", {a, b}, {3, 5});
    t.g.value(y).dtype = DataType::kUInt64;
    t.g.outputs = {y};
    auto s = dry_run(t.g, {{3, 5}, {3, 5}}, false);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->input_dtypes, (std::vector<DataType>{DataType::kUInt64, DataType::kUInt64}));
    EXPECT_EQ(s->output_dtypes, std::vector<DataType>{DataType::kUInt64});
    auto z = t.node(ir::OpKind::kNeg, "neg", {y}, {3, 5});
    t.g.value(z).dtype = DataType::kUInt64;
    t.g.outputs = {z};
    auto r = dry_run(t.g, {{3, 5}, {3, 5}}, false);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("node 'neg' (Neg): uint64 Neg"), std::string::npos) << r.status().message();
  }
  {  // a float64 activation read by a float32 op: refused naming the node
    TinyGraph t;
    auto x = t.input("wide", {3, 5});
    t.g.value(x).dtype = DataType::kFloat64;
    auto y = t.node(ir::OpKind::kSoftmax, "softmax", {x}, {3, 5});
    t.g.outputs = {y};
    auto s = dry_run(t.g, {{3, 5}}, false);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("node 'softmax' (Softmax)"), std::string::npos) << s.status().message();
  }
#endif
}

// ---- with a GPU

StatusOr<std::shared_ptr<Engine>> cuda_engine(const ir::Graph& g, bool fp16) {
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.tf32 = false;
  c.fp16 = fp16;
  KILN_ASSIGN_OR_RETURN(auto plan, build_from_graph(g, c));
  return Runtime::deserialize_engine(plan);
}

// float16 in and out, fp32 and fp16 plans, against the CPU reference on the same float16 input.
// Relu and a multiply by 0.5 are exact in float16 (no rounding but the subnormal edge, which a
// product by 0.5 of a normal fp16 value does not reach here): the outputs match bit for bit.
TEST(GpuIoDtypes, Float16IoEndToEnd) {
  REQUIRE_GPU();
  const TinyGraph t = relu_scale_graph(DataType::kFloat16);
  Tensor x(DataType::kFloat16, {6, 4, 5});
  Tensor r = random_tensor({6, 4, 5}, 7);
  for (int64_t i = 0; i < x.numel(); ++i) store_from_double(DataType::kFloat16, x.raw(), i, 1.0 + 2.0 * r.data<float>()[i]);
  auto ref = interpret(t.g, {x});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  ASSERT_EQ((*ref)[0].dtype(), DataType::kFloat16);
  for (bool fp16 : {false, true}) {
    auto e = cuda_engine(t.g, fp16);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    auto ctx = (*e)->create_execution_context();
    ASSERT_TRUE(ctx->set_input("x", x).ok());
    Status run = ctx->execute();
    ASSERT_TRUE(run.ok()) << run.to_string();
    auto y = ctx->output("scale_out");
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    ASSERT_EQ(y->dtype(), DataType::kFloat16) << (fp16 ? "fp16 plan" : "fp32 plan");
    ASSERT_EQ(y->shape(), (*ref)[0].shape());
    for (int64_t i = 0; i < y->numel(); ++i)
      ASSERT_EQ(y->data<uint16_t>()[i], (*ref)[0].data<uint16_t>()[i]) << "element " << i << (fp16 ? " fp16 plan" : " fp32 plan");
  }
}

// Range's length from an input: each execute gets the length of its own input value (two values,
// then the first again from the parked context), equal to the CPU reference; enqueue, which
// cannot read device inputs, is refused.
TEST(GpuIoDtypes, ValueDependentRangeFollowsEachCall) {
  REQUIRE_GPU();
  const TinyGraph t = range_of_input_graph();
  auto e = cuda_engine(t.g, false);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto ctx = (*e)->create_execution_context();
  for (int64_t n : {5, 12, 5}) {
    Tensor in(DataType::kInt64, {});
    in.data<int64_t>()[0] = n;
    ASSERT_TRUE(ctx->set_input("n", in).ok());
    Status run = ctx->execute();
    ASSERT_TRUE(run.ok()) << run.to_string();
    auto y = ctx->output("to_float_out");
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    auto ref = interpret(t.g, {in});
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    ASSERT_EQ(y->shape(), (*ref)[0].shape()) << "n = " << n;
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y->data<float>()[i], (*ref)[0].data<float>()[i]) << "n = " << n;
  }
#ifdef KILN_HAVE_CUDA
  void* dn = nullptr;
  void* dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dn, sizeof(int64_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 64 * sizeof(float)), cudaSuccess);
  ASSERT_TRUE(ctx->set_tensor_address("n", dn).ok());
  ASSERT_TRUE(ctx->set_tensor_address("to_float_out", dy).ok());
  Status enq = ctx->enqueue(nullptr);
  EXPECT_EQ(enq.code(), StatusCode::kUnsupported) << enq.to_string();
  EXPECT_NE(enq.message().find("input values"), std::string::npos) << enq.message();
  cudaFree(dn);
  cudaFree(dy);
#endif
}

// uint8 / int8 / uint32 inputs and outputs end to end: sums that wrap and maxima, against the CPU
// reference bit for bit (values near the top of the range so that most sums wrap).
TEST(GpuIoDtypes, NarrowIntegersEndToEnd) {
  REQUIRE_GPU();
  for (DataType dt : {DataType::kUInt8, DataType::kInt8, DataType::kUInt32}) {
    const TinyGraph t = narrow_sum_max_graph(dt);
    std::vector<Tensor> in;
    for (uint32_t seed : {3u, 4u}) {
      Tensor x(dt, {4, 8});
      std::mt19937 rng(seed);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t top = dt == DataType::kUInt8 ? 255 : dt == DataType::kInt8 ? 127 : 4294967295LL;
        const int64_t lo = dt == DataType::kInt8 ? -128 : 0;
        const int64_t v = i % 2 ? top - static_cast<int64_t>(rng() % 40) : lo + static_cast<int64_t>(rng() % 40);
        store_from_int64(dt, x.raw(), i, v);
      }
      in.push_back(x);
    }
    auto ref = interpret(t.g, in);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto e = cuda_engine(t.g, false);
    ASSERT_TRUE(e.ok()) << dtype_name(dt) << ": " << e.status().to_string();
    auto ctx = (*e)->create_execution_context();
    ASSERT_TRUE(ctx->set_input("a", in[0]).ok());
    ASSERT_TRUE(ctx->set_input("b", in[1]).ok());
    Status run = ctx->execute();
    ASSERT_TRUE(run.ok()) << run.to_string();
    const char* names[2] = {"sum_out", "top_out"};
    for (int k = 0; k < 2; ++k) {
      auto y = ctx->output(names[k]);
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      ASSERT_EQ(y->dtype(), dt) << names[k];
      ASSERT_EQ(y->nbytes(), (*ref)[k].nbytes());
      EXPECT_EQ(std::memcmp(y->raw(), (*ref)[k].raw(), y->nbytes()), 0) << dtype_name(dt) << " " << names[k];
    }
  }
}

// float64 <-> float32 / float16 Casts end to end against the CPU reference, bit for bit (float64 to
// float16 rounds once, on the device: docs/decisions/0075).
TEST(GpuIoDtypes, Float64CastsEndToEnd) {
  REQUIRE_GPU();
  struct Case { DataType from; int64_t to; DataType to_dt; };
  for (const Case& c : {Case{DataType::kFloat64, 1, DataType::kFloat32}, Case{DataType::kFloat32, 11, DataType::kFloat64},
                        Case{DataType::kFloat64, 10, DataType::kFloat16}, Case{DataType::kFloat16, 11, DataType::kFloat64}}) {
    const TinyGraph t = cast_graph(c.from, c.to, c.to_dt, false);
    Tensor x(c.from, {3, 5});
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> d(-3.0, 3.0);
    for (int64_t i = 0; i < x.numel(); ++i) store_from_double(c.from, x.raw(), i, d(rng) / 7.0);
    auto ref = interpret(t.g, {x});
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto e = cuda_engine(t.g, false);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    auto ctx = (*e)->create_execution_context();
    ASSERT_TRUE(ctx->set_input("x", x).ok());
    Status run = ctx->execute();
    ASSERT_TRUE(run.ok()) << run.to_string();
    auto y = ctx->output("cast_out");
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    ASSERT_EQ(y->dtype(), c.to_dt);
    ASSERT_EQ(y->nbytes(), (*ref)[0].nbytes());
    EXPECT_EQ(std::memcmp(y->raw(), (*ref)[0].raw(), y->nbytes()), 0) << dtype_name(c.from) << " -> " << dtype_name(c.to_dt);
  }
}

// BuilderConfig::output_types "fp16" (docs/decisions/0083) on an fp16 plan of an LM-head-shaped
// MatMul: the output binding is float16, the GEMM's fp16 result is the output (the Cast is a view,
// no output reformat layer), within fp16's error of the CPU reference; the same plan without the
// option returns float32 written by the GEMM itself (tactic "->f32 out", no reformat either).
TEST(GpuIoDtypes, OutputTypesFp16LmHead) {
  REQUIRE_GPU();
  TinyGraph t;
  auto x = t.input("x", {2, 9, 64});
  t.g.outputs = {t.node(ir::OpKind::kMatMul, "head", {x, t.constant("w", random_tensor({64, 1001}, 71, -0.3f, 0.3f))},
                        {2, 9, 1001})};
  const std::vector<Tensor> in = {random_tensor({2, 9, 64}, 72)};
  auto ref = interpret(t.g, in);
  ASSERT_TRUE(ref.ok());
  for (const std::string types : {"fp16", ""}) {
    BuilderConfig c;
    c.target = TargetDevice::kCuda;
    c.fp16 = true;
    c.output_types = types;
    auto plan = build_from_graph(t.g, c);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    auto e = Runtime::deserialize_engine(*plan);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    const DataType want = types.empty() ? DataType::kFloat32 : DataType::kFloat16;
    ASSERT_NE((*e)->find_io("head_out"), nullptr);
    EXPECT_EQ((*e)->find_io("head_out")->desc.dtype, want);
    for (const DeviceLayerInfo& l : (*e)->device_layers())
      EXPECT_EQ(l.name.rfind("output_reformat:", 0), std::string::npos) << l.name << ": " << l.tactic;
    auto ctx = (*e)->create_execution_context();
    ASSERT_TRUE(ctx->set_input("x", in[0]).ok());
    Status run = ctx->execute();
    ASSERT_TRUE(run.ok()) << run.to_string();
    auto y = ctx->output("head_out");
    ASSERT_TRUE(y.ok());
    ASSERT_EQ(y->dtype(), want);
    Tensor f(DataType::kFloat32, y->shape());
    for (int64_t i = 0; i < y->numel(); ++i) f.data<float>()[i] = static_cast<float>(load_as_double(want, y->raw(), i));
    EXPECT_LE(relative_diff(*ref, {f}), 2e-2) << "output_types '" << types << "'";
  }
}

}  // namespace
}  // namespace kiln::testing
