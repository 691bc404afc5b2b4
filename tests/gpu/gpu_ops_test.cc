// The CUDA path's transformer / data-movement ops (gpu_ops.*, kernels_more.cu) against the CPU
// reference: one test per op family on random, never-zero data, several shapes, FP32 (exact for
// data movement, 1e-4 for arithmetic, TF32 off), FP16 and BF16 storage (normalized error). The
// lowering runs in all three without a GPU (check_gpu_support); runs on the device skip
// without one. GpuSupportCheck runs the lowering alone (CUDA builds).
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <cmath>
#include <random>

#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_ops.h"
#endif

namespace kiln::testing {
namespace {

using ir::Attribute;
using ir::OpKind;

#ifdef KILN_HAVE_CUDA
#define REQUIRE_CUDA_BUILD()
#define SKIP_WITHOUT_GPU() \
  if (!cuda::device_info().available) GTEST_SKIP() << "no CUDA device (lowering and planning were checked)"
#else
#define REQUIRE_CUDA_BUILD() GTEST_SKIP() << "built without CUDA"
#define SKIP_WITHOUT_GPU()
#endif

// Magnitudes in [0.1, 1] with random signs (+ offset): never zero.
Tensor nonzero_tensor(const Shape& s, uint32_t seed, float offset = 0.f) {
  Tensor t(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.1f, 1.f);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (neg(rng) ? -mag(rng) : mag(rng)) + offset;
  return t;
}

Tensor ints(const std::vector<int64_t>& v, DataType dt = DataType::kInt64, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t(dt, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DataType::kInt64) t.data<int64_t>()[i] = v[i];
    else t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  }
  return t;
}

Tensor scalar_index(int64_t v, DataType dt) {
  Tensor t(dt, Shape{});
  if (dt == DataType::kInt64) t.data<int64_t>()[0] = v;
  else t.data<int32_t>()[0] = static_cast<int32_t>(v);
  return t;
}

// A single-node graph: y = op(x, consts...) with output shape `out`.
struct OneOp {
  TinyGraph t;
  ir::ValueId x;
  OneOp(const Shape& in) { x = t.input("x", in); }
  ir::ValueId c(const std::string& name, Tensor v) { return t.constant(name, std::move(v)); }
  ir::Graph finish(ir::ValueId y) {
    t.g.outputs = {y};
    return t.g;
  }
};

#ifdef KILN_HAVE_CUDA
// Host emulation of the kernels' index arithmetic on the planned descriptors: checks the
// build-time planning (gpu_ops.cc) against the CPU reference on machines without a GPU.
float at(const Tensor& t, int64_t i) { return t.data<float>()[i]; }

void strided(const cuda::StridedDesc& d, const Tensor& x, Tensor* y) {
  for (int64_t i = 0; i < y->numel(); ++i) {
    int64_t rem = i, off = d.src_offset;
    for (int k = d.rank - 1; k >= 0; --k) {
      off += (rem % d.out_dims[k]) * d.src_strides[k];
      rem /= d.out_dims[k];
    }
    y->data<float>()[i] = at(x, off);
  }
}

StatusOr<std::vector<Tensor>> emulate(const ir::Graph& g, const cuda::ValueShapes& vs, const Tensor& x) {
  if (g.nodes.size() != 1) return unsupported("emulation covers single-node graphs");
  const ir::Node& n = g.nodes[0];
  const Shape& in = x.shape();
  std::vector<Tensor> out;
  for (ir::ValueId v : n.outputs) out.emplace_back(DataType::kFloat32, vs.shapes[v]);
  Tensor& y = out[0];
  switch (n.op) {
    case OpKind::kTranspose: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_transpose(n, in));
      strided(d, x, &y);
      break;
    }
    case OpKind::kSlice: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_slice(n, g, in, y.shape()));
      strided(d, x, &y);
      break;
    }
    case OpKind::kExpand: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_expand(n, in, y.shape()));
      strided(d, x, &y);
      break;
    }
    case OpKind::kSplit: {
      std::vector<Shape> shapes;
      for (const Tensor& t : out) shapes.push_back(t.shape());
      KILN_ASSIGN_OR_RETURN(auto ds, cuda::plan_split(n, in, shapes));
      for (size_t k = 0; k < ds.size(); ++k) strided(ds[k], x, &out[k]);
      break;
    }
    case OpKind::kGather: {
      const auto& ic = g.value(n.inputs[1]).constant;
      if (!ic) return internal_error("the host emulation covers constant indices only");
      KILN_ASSIGN_OR_RETURN(auto p, cuda::plan_gather(n, g, in, ic->shape(), ic->dtype()));
      const int64_t ni = static_cast<int64_t>(p.indices.size());
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t inner = i % p.inner, j = (i / p.inner) % ni, o = i / (p.inner * ni);
        y.data<float>()[i] = at(x, (o * p.axis_dim + p.indices[j]) * p.inner + inner);
      }
      break;
    }
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin: {
      KILN_ASSIGN_OR_RETURN(auto p, cuda::plan_reduce(n, g, in));
      if (p.outer * p.inner != y.numel()) return internal_error("reduce plan disagrees with the output size");
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t o = i / p.inner, inner = i % p.inner;
        float acc = p.kind == cuda::ReduceKind::kMax ? -INFINITY : (p.kind == cuda::ReduceKind::kMin ? INFINITY : 0.f);
        for (int64_t r = 0; r < p.red; ++r) {
          const float v = at(x, (o * p.red + r) * p.inner + inner);
          acc = p.kind == cuda::ReduceKind::kMax ? std::max(acc, v) : (p.kind == cuda::ReduceKind::kMin ? std::min(acc, v) : acc + v);
        }
        y.data<float>()[i] = p.kind == cuda::ReduceKind::kMean ? acc / static_cast<float>(p.red) : acc;
      }
      break;
    }
    case OpKind::kPad: {
      KILN_ASSIGN_OR_RETURN(auto p, cuda::plan_pad(n, g, in, y.shape()));
      const auto& d = p.desc;
      for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t rem = i, off = 0, stride = 1;
        bool outside = false;
        for (int k = d.rank - 1; k >= 0; --k) {
          int64_t c = rem % d.out_dims[k] - d.begin[k];
          rem /= d.out_dims[k];
          const int64_t len = d.in_dims[k];
          if (c < 0 || c >= len) {
            if (p.mode == cuda::PadMode::kEdge) c = c < 0 ? 0 : len - 1;
            else if (p.mode == cuda::PadMode::kReflect) {
              const int64_t period = 2 * (len - 1);
              c = ((c % period) + period) % period;
              if (c >= len) c = period - c;
            } else outside = true;
          }
          off += c * stride;
          stride *= len;
        }
        y.data<float>()[i] = outside ? p.value : at(x, off);
      }
      break;
    }
    case OpKind::kResize: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_resize(n, g, in, y.shape()));
      auto coord = [&](double o, double scale, double len, int64_t len_in) {
        switch (d.coord) {
          case 0: return (o + 0.5) / scale - 0.5;
          case 1: return o / scale;
          case 2: return len > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
          case 3: return len == 1 ? 0.0 : o * static_cast<double>(len_in - 1) / (len - 1);
          default: return (o + 0.5) / scale;
        }
      };
      auto nearest = [&](double f, int64_t len_in) {
        int64_t i = f == std::floor(f) ? static_cast<int64_t>(f)
                    : d.nearest == 0 ? static_cast<int64_t>(std::ceil(f - 0.5))
                    : d.nearest == 1 ? static_cast<int64_t>(std::floor(f + 0.5))
                    : d.nearest == 2 ? static_cast<int64_t>(std::floor(f)) : static_cast<int64_t>(std::ceil(f));
        return std::clamp<int64_t>(i, 0, len_in - 1);
      };
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t ox = i % d.ow, oy = (i / d.ow) % d.oh, pl = i / (d.ow * d.oh);
        const double fy = coord(static_cast<double>(oy), d.scale_h, d.len_h, d.ih);
        const double fx = coord(static_cast<double>(ox), d.scale_w, d.len_w, d.iw);
        const int64_t base = pl * d.ih * d.iw;
        float v;
        if (!d.linear) {
          v = at(x, base + nearest(fy, d.ih) * d.iw + nearest(fx, d.iw));
        } else {
          const double y0 = std::floor(fy), x0 = std::floor(fx);
          const float ry = static_cast<float>(fy - y0), rx = static_cast<float>(fx - x0);
          auto cl = [](int64_t c, int64_t len) { return std::clamp<int64_t>(c, 0, len - 1); };
          const int64_t ya = cl(static_cast<int64_t>(y0), d.ih), yb = cl(static_cast<int64_t>(y0) + 1, d.ih);
          const int64_t xa = cl(static_cast<int64_t>(x0), d.iw), xb = cl(static_cast<int64_t>(x0) + 1, d.iw);
          const float top = (1.f - rx) * at(x, base + ya * d.iw + xa) + rx * at(x, base + ya * d.iw + xb);
          const float bot = (1.f - rx) * at(x, base + yb * d.iw + xa) + rx * at(x, base + yb * d.iw + xb);
          v = (1.f - ry) * top + ry * bot;
        }
        y.data<float>()[i] = v;
      }
      break;
    }
    default: return unsupported("no emulation for this op");
  }
  return out;
}

StatusOr<std::vector<Tensor>> run_gpu(const ir::Graph& g, const Tensor& x, cuda::StorageType st) {
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(g, {x.shape()}));
  cuda::GpuBuildOptions o;
  o.precision.fp16 = st == cuda::StorageType::kF16;
  o.precision.bf16 = st == cuda::StorageType::kBF16;
  o.precision.tf32 = false;
  KILN_ASSIGN_OR_RETURN(auto model, cuda::GpuModel::create(g, vs, o));
  KILN_ASSIGN_OR_RETURN(auto ctx, model->create_context());
  std::vector<Tensor> out;
  KILN_RETURN_IF_ERROR(ctx->run({x}, &out));
  return out;
}

constexpr cuda::StorageType kStorages[] = {cuda::StorageType::kF32, cuda::StorageType::kF16, cuda::StorageType::kBF16};
std::string storage_label(cuda::StorageType st) { return std::string(" [") + cuda::storage_name(st) + "]"; }
#endif

// CPU reference vs GPU FP32, FP16 and BF16; `label` names the case in failure messages.
void expect_matches(const ir::Graph& g, const Tensor& x, double tol32, double tol16, double tolbf16,
                    const std::string& label) {
#ifdef KILN_HAVE_CUDA
  auto ref = interpret(g, {x});
  ASSERT_TRUE(ref.ok()) << label << ": " << ref.status().to_string();
  // Without a GPU too: the graph lowers, and the planned descriptors reproduce the reference.
  auto vs = cuda::infer_value_shapes_by_reference(g, {x.shape()});
  ASSERT_TRUE(vs.ok()) << label << ": " << vs.status().to_string();
  for (cuda::StorageType st : kStorages) {
    Status support = cuda::check_gpu_support(g, *vs, st);
    ASSERT_TRUE(support.ok()) << label << storage_label(st) << ": " << support.to_string();
  }
  auto emu = emulate(g, *vs, x);
  if (emu.ok()) {
    EXPECT_LE(relative_diff(*ref, *emu), std::max(tol32, 1e-6)) << label << " [host emulation of the plan]";
  }
  if (!cuda::device_info().available) return;
  for (cuda::StorageType st : kStorages) {
    const std::string what = label + storage_label(st);
    auto out = run_gpu(g, x, st);
    ASSERT_TRUE(out.ok()) << what << ": " << out.status().to_string();
    ASSERT_EQ(out->size(), ref->size()) << what;
    const double tol = st == cuda::StorageType::kF32 ? tol32 : (st == cuda::StorageType::kF16 ? tol16 : tolbf16);
    EXPECT_LE(relative_diff(*ref, *out), tol) << what;
  }
#else
  (void)g, (void)x, (void)tol32, (void)tol16, (void)tolbf16, (void)label;
#endif
}

// bf16 keeps 8 significant bits to fp16's 11: rounding alone is 8x coarser (2^-9 relative),
// so moves allow 8e-3 and arithmetic the transformer tests' 6e-2 (gpu_transformer_test.cc).
constexpr double kExact = 0, kMove16 = 1e-3, kMoveBf16 = 8e-3, kArith32 = 1e-4, kArith16 = 2e-2, kArithBf16 = 6e-2;

TEST(GpuOps, LayerNormalization) {
  REQUIRE_CUDA_BUILD();
  struct Case { Shape in; int64_t axis; bool bias; };
  for (const Case& k : {Case{{4, 64}, -1, true}, Case{{2, 3, 8, 16}, -1, true}, Case{{2, 5, 24}, 1, false},
                        Case{{3, 768}, -1, true}, Case{{1, 1, 7}, 2, true}}) {
    OneOp o(k.in);
    Shape ns(k.in.begin() + (k.axis < 0 ? k.in.size() + k.axis : k.axis), k.in.end());
    std::vector<ir::ValueId> ins = {o.x, o.c("scale", nonzero_tensor(ns, 2))};
    if (k.bias) ins.push_back(o.c("bias", nonzero_tensor(ns, 3)));
    auto y = o.t.node(OpKind::kLayerNormalization, "ln", ins, k.in,
                      {{"axis", Attribute::of_int(k.axis)}, {"epsilon", Attribute::of_float(1e-5f)}});
    // Offset 3: a mean far from zero checks the two-pass variance.
    expect_matches(o.finish(y), nonzero_tensor(k.in, 1, 3.f), kArith32, kArith16, kArithBf16, "LayerNorm " + shape_str(k.in));
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, Gelu) {
  REQUIRE_CUDA_BUILD();
  for (const char* approx : {"none", "tanh"})
    for (const Shape& s : {Shape{5, 33}, Shape{2, 4, 6, 8}}) {
      OneOp o(s);
      auto y = o.t.node(OpKind::kGelu, "gelu", {o.x}, s, {{"approximate", Attribute::of_string(approx)}});
      auto g = o.finish(y);
      g.nodes[0].opset = 20;
      expect_matches(g, nonzero_tensor(s, 4), kArith32, kArith16, kArithBf16, std::string("Gelu ") + approx + " " + shape_str(s));
    }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, Reductions) {
  REQUIRE_CUDA_BUILD();
  struct Case { OpKind op; Shape in; std::vector<int64_t> axes; bool keep; bool axes_input; Shape out; };
  const std::vector<Case> cases = {
      {OpKind::kReduceMean, {4, 8, 32}, {-1}, true, false, {4, 8, 1}},          // last axis (warp per row)
      {OpKind::kReduceMean, {3, 1000}, {1}, false, false, {3}},                 // long rows
      {OpKind::kReduceSum, {2, 3, 4, 5}, {1, 2}, true, true, {2, 1, 1, 5}},     // contiguous middle set
      {OpKind::kReduceMax, {3, 7, 5}, {1}, false, false, {3, 5}},              // middle axis
      {OpKind::kReduceMin, {2, 3, 4}, {}, true, false, {1, 1, 1}},              // all axes
      {OpKind::kReduceMean, {2, 16, 4, 4}, {2, 3}, true, false, {2, 16, 1, 1}},  // spatial mean of a 4-D tensor
      {OpKind::kReduceMax, {2, 1, 6}, {0, 2}, false, false, {1}},              // size-1 axis between
  };
  for (const Case& k : cases) {
    OneOp o(k.in);
    std::vector<ir::ValueId> ins = {o.x};
    std::map<std::string, Attribute> attrs = {{"keepdims", Attribute::of_int(k.keep)}};
    if (k.axes_input) ins.push_back(o.c("axes", ints(k.axes)));
    else if (!k.axes.empty()) attrs["axes"] = Attribute::of_ints(k.axes);
    auto y = o.t.node(k.op, "reduce", ins, k.out, attrs);
    expect_matches(o.finish(y), nonzero_tensor(k.in, 5), kArith32, kArith16, kArithBf16,
                   std::string(ir::op_name(k.op)) + " " + shape_str(k.in));
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, Transpose) {
  REQUIRE_CUDA_BUILD();
  struct Case { Shape in; std::vector<int64_t> perm; Shape out; };
  for (const Case& k : {Case{{2, 3, 4, 5}, {0, 2, 3, 1}, {2, 4, 5, 3}}, Case{{2, 3, 4, 5, 6}, {4, 1, 0, 3, 2}, {6, 3, 2, 5, 4}},
                        Case{{6, 5}, {}, {5, 6}}, Case{{2, 3, 2, 3, 2, 3}, {5, 4, 3, 2, 1, 0}, {3, 2, 3, 2, 3, 2}},
                        Case{{2, 8, 4, 16}, {0, 2, 1, 3}, {2, 4, 8, 16}}}) {
    OneOp o(k.in);
    std::map<std::string, Attribute> attrs;
    if (!k.perm.empty()) attrs["perm"] = Attribute::of_ints(k.perm);
    auto y = o.t.node(OpKind::kTranspose, "transpose", {o.x}, k.out, attrs);
    expect_matches(o.finish(y), nonzero_tensor(k.in, 6), kExact, kMove16, kMoveBf16, "Transpose " + shape_str(k.in));
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, Slice) {
  REQUIRE_CUDA_BUILD();
  struct Case { Shape in; std::vector<int64_t> starts, ends, axes, steps; Shape out; };
  const std::vector<Case> cases = {
      {{4, 10, 6}, {1, 8, 0}, {4, -100, 6}, {0, 1, 2}, {2, -3, 1}, {2, 3, 6}},  // negative step, clamped end
      {{5, 7}, {-3}, {1000}, {1}, {}, {5, 3}},                                  // negative start, huge end
      {{2, 3, 8, 8}, {0, 0}, {1, 8}, {0, -1}, {1, 2}, {1, 3, 8, 4}},             // 4-D (NHWC input in fp16)
      {{6}, {5}, {-7}, {0}, {-1}, {6}},                                         // full reversal
  };
  for (const Case& k : cases) {
    OneOp o(k.in);
    std::vector<ir::ValueId> ins = {o.x, o.c("starts", ints(k.starts)), o.c("ends", ints(k.ends)), o.c("axes", ints(k.axes))};
    if (!k.steps.empty()) ins.push_back(o.c("steps", ints(k.steps)));
    auto y = o.t.node(OpKind::kSlice, "slice", ins, k.out);
    expect_matches(o.finish(y), nonzero_tensor(k.in, 7), kExact, kMove16, kMoveBf16, "Slice " + shape_str(k.in));
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, Gather) {
  REQUIRE_CUDA_BUILD();
  {  // axis 1, int64 indices incl. negative
    OneOp o({3, 5, 4});
    auto y = o.t.node(OpKind::kGather, "gather", {o.x, o.c("idx", ints({2, -1, 0}))}, {3, 3, 4},
                      {{"axis", Attribute::of_int(1)}});
    expect_matches(o.finish(y), nonzero_tensor({3, 5, 4}, 8), kExact, kMove16, kMoveBf16, "Gather axis 1");
  }
  {  // axis 0, scalar int32 index (the ViT class-token pick x[:, 0] is this on axis 1)
    OneOp o({5, 4});
    auto y = o.t.node(OpKind::kGather, "gather", {o.x, o.c("idx", scalar_index(-2, DataType::kInt32))}, {4});
    expect_matches(o.finish(y), nonzero_tensor({5, 4}, 9), kExact, kMove16, kMoveBf16, "Gather scalar index");
  }
  {  // 2-D indices on the last axis of a 4-D input
    OneOp o({2, 3, 4, 6});
    auto y = o.t.node(OpKind::kGather, "gather", {o.x, o.c("idx", ints({5, 0, 1, 3}, DataType::kInt64, {2, 2}))},
                      {2, 3, 4, 2, 2}, {{"axis", Attribute::of_int(-1)}});
    expect_matches(o.finish(y), nonzero_tensor({2, 3, 4, 6}, 10), kExact, kMove16, kMoveBf16, "Gather 2-D indices");
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, Pad) {
  REQUIRE_CUDA_BUILD();
  for (const char* mode : {"constant", "reflect", "edge"}) {
    OneOp o({2, 3, 5, 6});
    auto y = o.t.node(OpKind::kPad, "pad",
                      {o.x, o.c("pads", ints({0, 0, 1, 2, 0, 0, 2, 1})), o.c("value", nonzero_tensor({}, 11))},
                      {2, 3, 8, 9}, {{"mode", Attribute::of_string(mode)}});
    expect_matches(o.finish(y), nonzero_tensor({2, 3, 5, 6}, 12), kExact, kMove16, kMoveBf16, std::string("Pad ") + mode);
  }
  {  // negative pads crop; 2-D
    OneOp o({4, 7});
    auto y = o.t.node(OpKind::kPad, "pad", {o.x, o.c("pads", ints({-1, 2, 1, -3}))}, {4, 6});
    expect_matches(o.finish(y), nonzero_tensor({4, 7}, 13), kExact, kMove16, kMoveBf16, "Pad negative");
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, Resize) {
  REQUIRE_CUDA_BUILD();
  struct Case { const char* mode; const char* coord; const char* nearest; Shape in, out; bool by_scales; };
  const std::vector<Case> cases = {
      {"nearest", "asymmetric", "floor", {1, 3, 4, 5}, {1, 3, 8, 10}, true},               // YOLO upsample
      {"nearest", "half_pixel", "round_prefer_floor", {2, 2, 5, 7}, {2, 2, 3, 4}, false},  // downsample by sizes
      {"nearest", "pytorch_half_pixel", "round_prefer_ceil", {1, 2, 3, 3}, {1, 2, 7, 5}, false},
      {"linear", "half_pixel", "round_prefer_floor", {1, 3, 4, 5}, {1, 3, 7, 9}, false},
      {"linear", "align_corners", "round_prefer_floor", {2, 1, 4, 4}, {2, 1, 8, 8}, true},
      {"linear", "pytorch_half_pixel", "round_prefer_floor", {1, 2, 6, 6}, {1, 2, 3, 3}, true},
      {"nearest", "tf_half_pixel_for_nn", "ceil", {1, 1, 5, 5}, {1, 1, 10, 10}, true},
  };
  for (const Case& k : cases) {
    OneOp o(k.in);
    std::vector<ir::ValueId> ins = {o.x, ir::kNoValue};
    if (k.by_scales) {
      Tensor sc(DataType::kFloat32, {4});
      for (int i = 0; i < 4; ++i) sc.data<float>()[i] = static_cast<float>(k.out[i]) / static_cast<float>(k.in[i]);
      ins.push_back(o.c("scales", sc));
    } else {
      ins.push_back(ir::kNoValue);
      ins.push_back(o.c("sizes", ints(std::vector<int64_t>(k.out.begin(), k.out.end()))));
    }
    auto y = o.t.node(OpKind::kResize, "resize", ins, k.out,
                      {{"mode", Attribute::of_string(k.mode)},
                       {"coordinate_transformation_mode", Attribute::of_string(k.coord)},
                       {"nearest_mode", Attribute::of_string(k.nearest)}});
    const bool linear = std::string(k.mode) == "linear";
    expect_matches(o.finish(y), nonzero_tensor(k.in, 14), linear ? 1e-5 : kExact, kMove16, kMoveBf16,
                   std::string("Resize ") + k.mode + " " + k.coord + " " + shape_str(k.in) + "->" + shape_str(k.out));
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, WhereExpandCastSplit) {
  REQUIRE_CUDA_BUILD();
  {  // Where: constant bool condition broadcast over rows, scalar b
    OneOp o({3, 5});
    Tensor cond(DataType::kBool, {1, 5});
    for (int i = 0; i < 5; ++i) cond.data<bool>()[i] = (i % 2) == 0;
    auto y = o.t.node(OpKind::kWhere, "where", {o.c("cond", cond), o.x, o.c("b", nonzero_tensor({}, 15))}, {3, 5});
    expect_matches(o.finish(y), nonzero_tensor({3, 5}, 16), kExact, kMove16, kMoveBf16, "Where");
  }
  {  // Expand [3, 1] -> [2, 3, 4]
    OneOp o({3, 1});
    auto y = o.t.node(OpKind::kExpand, "expand", {o.x, o.c("shape", ints({2, 3, 4}))}, {2, 3, 4});
    expect_matches(o.finish(y), nonzero_tensor({3, 1}, 17), kExact, kMove16, kMoveBf16, "Expand");
  }
  {  // Cast float32 -> float16 -> float32: the fp16 rounding is visible in fp32 mode too
    OneOp o({4, 9});
    auto h = o.t.node(OpKind::kCast, "to_half", {o.x}, {4, 9}, {{"to", Attribute::of_int(10)}});
    o.t.g.value(h).dtype = DataType::kFloat16;
    auto y = o.t.node(OpKind::kCast, "to_float", {h}, {4, 9}, {{"to", Attribute::of_int(1)}});
    expect_matches(o.finish(y), nonzero_tensor({4, 9}, 18, 100.f), kExact, kMove16, kMoveBf16, "Cast round trip");
  }
  {  // Split axis 1 of [2, 6, 3] into 2 + 4
    OneOp o({2, 6, 3});
    auto split = o.c("split", ints({2, 4}));
    ir::ValueId y0 = o.t.g.add_value("y0", DataType::kFloat32), y1 = o.t.g.add_value("y1", DataType::kFloat32);
    o.t.g.value(y0).shape = sym({2, 2, 3});
    o.t.g.value(y1).shape = sym({2, 4, 3});
    ir::Node n;
    n.name = "split";
    n.op = OpKind::kSplit;
    n.opset = 17;
    n.inputs = {o.x, split};
    n.outputs = {y0, y1};
    n.attrs["axis"] = Attribute::of_int(1);
    o.t.g.add_node(std::move(n));
    o.t.g.outputs = {y0, y1};
    expect_matches(o.t.g, nonzero_tensor({2, 6, 3}, 19), kExact, kMove16, kMoveBf16, "Split");
  }
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, BatchedMatMul) {
  REQUIRE_CUDA_BUILD();
  const Shape xs = {2, 3, 5, 8};
  {  // equal batches: x · x^T (both activations), as attention's Q·K^T
    OneOp o(xs);
    auto kt = o.t.node(OpKind::kTranspose, "kt", {o.x}, {2, 3, 8, 5}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
    auto y = o.t.node(OpKind::kMatMul, "qk", {o.x, kt}, {2, 3, 5, 5});
    expect_matches(o.finish(y), nonzero_tensor(xs, 20), kArith32, kArith16, kArithBf16, "MatMul equal batches");
  }
  {  // A shared (constant 2-D) times a batched activation
    OneOp o(xs);
    auto kt = o.t.node(OpKind::kTranspose, "kt", {o.x}, {2, 3, 8, 5}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
    auto y = o.t.node(OpKind::kMatMul, "amm", {o.c("a", nonzero_tensor({4, 8}, 21)), kt}, {2, 3, 4, 5});
    expect_matches(o.finish(y), nonzero_tensor(xs, 22), kArith32, kArith16, kArithBf16, "MatMul A shared");
  }
  {  // B shared: a 2-D activation (folded into M)
    OneOp o(xs);
    auto g0 = o.t.node(OpKind::kGather, "g0", {o.x, o.c("i0", scalar_index(0, DataType::kInt64))}, {3, 5, 8});
    auto g1 = o.t.node(OpKind::kGather, "g1", {g0, o.c("i1", scalar_index(1, DataType::kInt64))}, {5, 8});
    auto bt = o.t.node(OpKind::kTranspose, "bt", {g1}, {8, 5});
    auto y = o.t.node(OpKind::kMatMul, "bmm", {o.x, bt}, {2, 3, 5, 5});
    expect_matches(o.finish(y), nonzero_tensor(xs, 23), kArith32, kArith16, kArithBf16, "MatMul B shared");
  }
  {  // constant rank-3 B with a rank-3 activation (equal batches)
    OneOp o({3, 5, 8});
    auto y = o.t.node(OpKind::kMatMul, "cmm", {o.x, o.c("b", nonzero_tensor({3, 8, 6}, 24))}, {3, 5, 6});
    expect_matches(o.finish(y), nonzero_tensor({3, 5, 8}, 25), kArith32, kArith16, kArithBf16, "MatMul constant 3-D B");
  }
  SKIP_WITHOUT_GPU();
}

// One pre-LN transformer block: x [B, S, D], H heads of D/H.
ir::Graph transformer_block(int64_t B, int64_t S, int64_t D, int64_t H) {
  const int64_t dh = D / H, F = 2 * D;
  TinyGraph t;
  uint32_t seed = 100;
  auto w = [&](const std::string& name, const Shape& s, float scale) {
    Tensor r = nonzero_tensor(s, seed++);
    for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] *= scale;
    return t.constant(name, r);
  };
  auto x = t.input("x", {B, S, D});
  auto ln = [&](const std::string& name, ir::ValueId in) {
    return t.node(OpKind::kLayerNormalization, name, {in, w(name + ".g", {D}, 1.f), w(name + ".b", {D}, 0.1f)}, {B, S, D},
                  {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-6f)}});
  };
  auto linear = [&](const std::string& name, ir::ValueId in, int64_t k, int64_t n) {
    auto mm = t.node(OpKind::kMatMul, name + ".mm", {in, w(name + ".w", {k, n}, 1.f / std::sqrt(static_cast<float>(k)))},
                     {B, S, n});
    return t.node(OpKind::kAdd, name + ".add", {mm, w(name + ".bias", {n}, 0.1f)}, {B, S, n});
  };
  auto heads = [&](const std::string& name, ir::ValueId in, std::vector<int64_t> perm, const Shape& out) {
    auto r = t.node(OpKind::kReshape, name + ".reshape", {in, t.constant(name + ".shape", ints({B, S, H, dh}))},
                    {B, S, H, dh});
    return t.node(OpKind::kTranspose, name + ".transpose", {r}, out, {{"perm", Attribute::of_ints(perm)}});
  };
  auto l1 = ln("ln1", x);
  auto q = heads("q", linear("q", l1, D, D), {0, 2, 1, 3}, {B, H, S, dh});
  auto k = heads("k", linear("k", l1, D, D), {0, 2, 3, 1}, {B, H, dh, S});
  auto v = heads("v", linear("v", l1, D, D), {0, 2, 1, 3}, {B, H, S, dh});
  auto s = t.node(OpKind::kMatMul, "qk", {q, k}, {B, H, S, S});
  Tensor sc(DataType::kFloat32, {});
  sc.data<float>()[0] = 1.f / std::sqrt(static_cast<float>(dh));
  auto ss = t.node(OpKind::kMul, "scale", {s, t.constant("scale.c", sc)}, {B, H, S, S});
  auto p = t.node(OpKind::kSoftmax, "softmax", {ss}, {B, H, S, S}, {{"axis", Attribute::of_int(-1)}});
  auto o = t.node(OpKind::kMatMul, "pv", {p, v}, {B, H, S, dh});
  auto ot = t.node(OpKind::kTranspose, "o.transpose", {o}, {B, S, H, dh}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  auto orr = t.node(OpKind::kReshape, "o.reshape", {ot, t.constant("o.shape", ints({B, S, D}))}, {B, S, D});
  auto proj = linear("proj", orr, D, D);
  auto r1 = t.node(OpKind::kAdd, "residual1", {x, proj}, {B, S, D});
  auto l2 = ln("ln2", r1);
  auto h = linear("fc1", l2, D, F);
  auto gl = t.node(OpKind::kGelu, "gelu", {h}, {B, S, F});
  t.g.nodes.back().opset = 20;
  auto m = linear("fc2", gl, F, D);
  auto out = t.node(OpKind::kAdd, "residual2", {r1, m}, {B, S, D});
  t.g.outputs = {out};
  return t.g;
}

TEST(GpuOps, TransformerBlockMatchesCpuReference) {
  REQUIRE_CUDA_BUILD();
  const ir::Graph raw = transformer_block(2, 8, 32, 4);
  ir::Graph opt = raw;
  // The whole pipeline: the block runs as fused Attention and MatMulBias layers (their CUDA
  // tactics in gpu_transformer.cc and the Gemm layer), the Q/K/V projections as one wider GEMM.
  ASSERT_TRUE(passes::run_pipeline(opt, kiln::testing::reference_pass_options()).ok());
  EXPECT_EQ(count_op(opt, OpKind::kAttention), 1);
  EXPECT_GE(count_op(opt, OpKind::kMatMulBias), 1);
  const Tensor x = nonzero_tensor({2, 8, 32}, 30);
  expect_matches(raw, x, kArith32, kArith16, kArithBf16, "transformer block (unoptimized)");
  expect_matches(opt, x, kArith32, kArith16, kArithBf16, "transformer block (optimized)");
  SKIP_WITHOUT_GPU();
}

TEST(GpuOps, TransformerBlockViTSizes) {
  REQUIRE_GPU();  // ViT-B/16 widths: 197 tokens, 768 hidden, 12 heads
  const ir::Graph g = transformer_block(1, 197, 768, 12);
  expect_matches(g, nonzero_tensor({1, 197, 768}, 31), 1e-3, kArith16, kArithBf16, "transformer block ViT-B sizes");
}

// A dynamic-batch export's shape arithmetic (as torch writes ViT's class token and reshapes):
// Shape -> Gather -> Unsqueeze -> Concat feeding Expand and Reshape; the class token joins the
// tokens by a Concat with a constant part once the batch is concrete; x[:, 0] is a Gather.
ir::Graph class_token_head() {
  TinyGraph t;
  auto x = t.input("x", {2, 4, 8});
  auto as_int = [&](ir::ValueId v) {
    t.g.value(v).dtype = DataType::kInt64;
    return v;
  };
  auto shape = as_int(t.node(OpKind::kShape, "shape", {x}, {3}));
  auto batch = as_int(t.node(OpKind::kGather, "batch", {shape, t.constant("i0", scalar_index(0, DataType::kInt64))}, {}));
  auto b1 = as_int(t.node(OpKind::kUnsqueeze, "batch1", {batch, t.constant("ax0", ints({0}))}, {1}));
  auto eshape = as_int(t.node(OpKind::kConcat, "eshape", {b1, t.constant("rest", ints({1, 8}))}, {3},
                              {{"axis", Attribute::of_int(0)}}));
  auto cls = t.node(OpKind::kExpand, "expand_cls", {t.constant("cls", nonzero_tensor({1, 1, 8}, 50)), eshape}, {2, 1, 8});
  auto cat = t.node(OpKind::kConcat, "cat", {cls, x}, {2, 5, 8}, {{"axis", Attribute::of_int(1)}});
  auto ln = t.node(OpKind::kLayerNormalization, "ln", {cat, t.constant("g", nonzero_tensor({8}, 51))}, {2, 5, 8},
                   {{"axis", Attribute::of_int(-1)}});
  auto first = t.node(OpKind::kGather, "first", {ln, t.constant("i1", scalar_index(0, DataType::kInt64))}, {2, 8},
                      {{"axis", Attribute::of_int(1)}});
  auto head = t.node(OpKind::kMatMul, "head", {first, t.constant("w", nonzero_tensor({8, 3}, 52))}, {2, 3});
  auto rshape = as_int(t.node(OpKind::kConcat, "rshape", {b1, t.constant("m1", ints({-1}))}, {2},
                              {{"axis", Attribute::of_int(0)}}));
  auto flat = t.node(OpKind::kReshape, "flat", {cat, rshape}, {2, 40});
  t.g.outputs = {head, flat};
  return t.g;
}

TEST(GpuOps, DynamicBatchShapeArithmeticFoldsAtBuildShapes) {
  REQUIRE_CUDA_BUILD();
  expect_matches(class_token_head(), nonzero_tensor({2, 4, 8}, 53), kArith32, kArith16, kArithBf16, "class-token head");
  SKIP_WITHOUT_GPU();
}

// The lowering itself (planning, layer construction) runs without a GPU: every op of the block
// is supported, and unsupported cases are listed all at once with the node named.
TEST(GpuSupportCheck, TransformerBlockLowersAndErrorsNameNodes) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const ir::Graph g = transformer_block(2, 8, 32, 4);
  auto vs = cuda::infer_value_shapes_by_reference(g, {{2, 8, 32}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  Status s = cuda::check_gpu_support(g, *vs);
  EXPECT_TRUE(s.ok()) << s.to_string();

  OneOp o({2, 3, 4, 5});
  auto r = o.t.node(OpKind::kReduceSum, "bad_reduce", {o.x, o.c("axes", ints({0, 2}))}, {1, 3, 1, 5});
  auto m = o.t.node(OpKind::kMatMul, "bad_matmul", {r, o.c("b", nonzero_tensor({2, 1, 5, 3}, 40))}, {2, 3, 1, 3});
  ir::Graph bad = o.finish(m);
  auto bvs = cuda::infer_value_shapes_by_reference(bad, {{2, 3, 4, 5}});
  ASSERT_TRUE(bvs.ok()) << bvs.status().to_string();
  Status e = cuda::check_gpu_support(bad, *bvs);
  EXPECT_EQ(e.code(), StatusCode::kUnsupported);
  EXPECT_NE(e.message().find("bad_reduce"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("non-contiguous"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("bad_matmul"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("batch broadcasting"), std::string::npos) << e.message();
#endif
}

// bf16 storage lowers the kernels_more.cu ops (LayerNorm, Reduce, Pad, batched MatMul, Cast)
// like fp32 and fp16 do, without a GPU; the bool overload keeps its fp32/fp16 meaning and an
// integer storage type is not a set of lowering rules.
TEST(GpuSupportCheck, Bf16LowersNormReducePad) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  OneOp o({2, 3, 5, 6});
  auto ln = o.t.node(OpKind::kLayerNormalization, "ln",
                     {o.x, o.c("scale", nonzero_tensor({6}, 60)), o.c("bias", nonzero_tensor({6}, 61))}, {2, 3, 5, 6},
                     {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-5f)}});
  auto pad = o.t.node(OpKind::kPad, "pad", {ln, o.c("pads", ints({0, 0, 1, 2, 0, 0, 2, 1}))}, {2, 3, 8, 9},
                      {{"mode", Attribute::of_string("reflect")}});
  auto red = o.t.node(OpKind::kReduceMean, "reduce", {pad}, {2, 3, 8, 1},
                      {{"axes", Attribute::of_ints({-1})}, {"keepdims", Attribute::of_int(1)}});
  const ir::Graph g = o.finish(red);
  auto vs = cuda::infer_value_shapes_by_reference(g, {{2, 3, 5, 6}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  for (cuda::StorageType st : kStorages) {
    Status s = cuda::check_gpu_support(g, *vs, st);
    EXPECT_TRUE(s.ok()) << storage_label(st) << ": " << s.to_string();
  }
  for (bool fp16 : {false, true}) {
    Status s = cuda::check_gpu_support(g, *vs, fp16);
    EXPECT_TRUE(s.ok()) << (fp16 ? "[fp16] " : "[fp32] ") << s.to_string();
  }
  EXPECT_EQ(cuda::check_gpu_support(g, *vs, cuda::StorageType::kI32).code(), StatusCode::kInvalidArgument);

  const ir::Graph block = transformer_block(2, 8, 32, 4);  // LayerNorm, batched MatMul, Softmax, ...
  auto bvs = cuda::infer_value_shapes_by_reference(block, {{2, 8, 32}});
  ASSERT_TRUE(bvs.ok()) << bvs.status().to_string();
  Status s = cuda::check_gpu_support(block, *bvs, cuda::StorageType::kBF16);
  EXPECT_TRUE(s.ok()) << "[bf16] " << s.to_string();
#endif
}

}  // namespace
}  // namespace kiln::testing
