// The CUDA Attention layer's two tactics on head_layout "bshd" (docs/decisions/0065), each run
// alone (no selector): the cuBLASLt + softmax path through its [*, H, S, D] copies in the
// workspace (fp32 and fp16) and the fused FlashAttention-2 kernel through its strides (fp16 and
// bf16), against the CPU reference of the same bshd layer (whose agreement with the unfolded
// Transposes + [*, H, S, D] Attention tests/passes/attention_layout_test.cc checks). The inputs
// are rounded to the storage type before the reference runs. GPU only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_test_util.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "backends/cuda/gpu_transformer.h"
#include "core/numerics.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
using cuda::StorageType;

struct Case {
  const char* what;
  int64_t b, hq, hkv, sq, sk, d, dv;
  bool causal = false;
  bool mask = false;  // additive [B, 1, 1, Sk] padding mask
};

// x rounded to storage `t` (kept as float32), and its bytes in that type.
std::vector<uint8_t> to_storage(Tensor& x, StorageType t) {
  const int64_t n = x.numel();
  float* f = x.data<float>();
  std::vector<uint8_t> out(static_cast<size_t>(n) * static_cast<size_t>(cuda::storage_bytes(t)));
  for (int64_t i = 0; i < n; ++i) {
    if (t == StorageType::kF32) {
      std::memcpy(out.data() + i * 4, &f[i], 4);
      continue;
    }
    const uint16_t h = t == StorageType::kF16 ? float_to_fp16(f[i]) : float_to_bf16(f[i]);
    f[i] = t == StorageType::kF16 ? fp16_to_float(h) : bf16_to_float(h);
    std::memcpy(out.data() + i * 2, &h, 2);
  }
  return out;
}

// Runs `layer` (ins Q, K, V[, mask], out O) once on the device; O as float32.
StatusOr<Tensor> run_layer(cuda::Layer& layer, TacticId id, const std::vector<std::vector<uint8_t>>& ins,
                           const Shape& out_shape, StorageType t) {
  std::vector<cuda::GVal> vals(ins.size() + 1);
  std::vector<void*> dev(vals.size(), nullptr);
  const size_t out_bytes = static_cast<size_t>(shape_numel(out_shape)) * static_cast<size_t>(cuda::storage_bytes(t));
  for (size_t i = 0; i < vals.size(); ++i) {
    const size_t bytes = i < ins.size() ? ins[i].size() : out_bytes;
    if (cudaMalloc(&dev[i], bytes) != cudaSuccess) return internal_error("cudaMalloc");
    if (i < ins.size()) cudaMemcpy(dev[i], ins[i].data(), bytes, cudaMemcpyHostToDevice);
    vals[i].weight = dev[i];
    vals[i].type = t;
  }
  vals.back().shape = out_shape;
  layer.name = "attn";
  for (size_t i = 0; i < ins.size(); ++i) layer.ins.push_back(static_cast<int>(i));
  layer.outs = {static_cast<int>(ins.size())};
  layer.finalize(vals);
  cuda::ExecState s;
  s.vals = &vals;
  cublasLtCreate(&s.lt);
  s.workspace_bytes = std::max<size_t>(layer.workspace(), 256);
  cudaMalloc(&s.workspace, s.workspace_bytes);
  Status st = layer.select(id, s);
  if (st.ok()) st = layer.enqueue(s);
  if (st.ok() && cudaDeviceSynchronize() != cudaSuccess) st = internal_error("the layer's kernels failed");
  std::vector<uint8_t> host(out_bytes);
  cudaMemcpy(host.data(), dev.back(), out_bytes, cudaMemcpyDeviceToHost);
  for (void* p : dev) cudaFree(p);
  cudaFree(s.workspace);
  cublasLtDestroy(s.lt);
  KILN_RETURN_IF_ERROR(st);
  Tensor o(DataType::kFloat32, out_shape);
  for (int64_t i = 0; i < o.numel(); ++i) {
    uint16_t h;
    if (t == StorageType::kF32) std::memcpy(&o.data<float>()[i], host.data() + i * 4, 4);
    else {
      std::memcpy(&h, host.data() + i * 2, 2);
      o.data<float>()[i] = t == StorageType::kF16 ? fp16_to_float(h) : bf16_to_float(h);
    }
  }
  return o;
}

void check(const Case& c, StorageType t, bool flash) {
  SCOPED_TRACE(std::string(c.what) + " " + cuda::storage_name(t) + (flash ? " fused" : " cublaslt"));
  TinyGraph g;
  const Shape qs = {c.b, c.sq, c.hq, c.d}, ks = {c.b, c.sk, c.hkv, c.d}, vs = {c.b, c.sk, c.hkv, c.dv};
  const Shape os = {c.b, c.sq, c.hq, c.dv}, ms = {c.b, 1, 1, c.sk};
  std::vector<Tensor> in = {random_tensor(qs, 1, -2.f, 2.f), random_tensor(ks, 2, -2.f, 2.f), random_tensor(vs, 3)};
  std::vector<ir::ValueId> ids = {g.input("q", qs), g.input("k", ks), g.input("v", vs)};
  if (c.mask) {
    Tensor m(DataType::kFloat32, ms);
    for (int64_t i = 0; i < m.numel(); ++i) m.data<float>()[i] = (i % c.sk) < c.sk - 1 - (i / c.sk) * 5 ? 0.f : -10000.f;
    in.push_back(m);
    ids.push_back(g.input("mask", ms));
  }
  std::map<std::string, ir::Attribute> attrs = {{"head_layout", ir::Attribute::of_string("bshd")}};
  if (c.causal) attrs["is_causal"] = ir::Attribute::of_int(1);
  g.g.outputs = {g.node(ir::OpKind::kAttention, "attn", ids, os, attrs)};
  std::vector<std::vector<uint8_t>> bytes;
  for (Tensor& x : in) bytes.push_back(to_storage(x, t));
  auto ref = interpret(g.g, in);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();

  const std::optional<Shape> mask = c.mask ? std::optional<Shape>(ms) : std::nullopt;
  auto p = cuda::plan_attention(g.g.nodes[0], qs, ks, vs, mask, false, os, cuda::storage_bytes(t), size_t{64} << 20);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE(p->bshd);
  std::unique_ptr<cuda::Layer> layer;
  TacticId id;
  if (flash) {
    ASSERT_TRUE(cuda::flash_attention_offered(*p, t));
    layer = cuda::make_flash_attention_layer(*p, t);
    id = cuda::kFlashAttentionTactic;
  } else {
    auto l = cuda::make_attention_layer(*p, t, false);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    layer = std::move(*l);
    id = make_tactic_id(TacticSource::kCublasLt, 0);
  }
  auto o = run_layer(*layer, id, bytes, os, t);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_NE(layer->tactic.find("bshd"), std::string::npos) << layer->tactic;
  double err = 0, ref_max = 0;
  for (int64_t i = 0; i < o->numel(); ++i) {
    ref_max = std::max(ref_max, std::fabs(double((*ref)[0].data<float>()[i])));
    err = std::max(err, std::fabs(double(o->data<float>()[i]) - (*ref)[0].data<float>()[i]));
  }
  const double tol = t == StorageType::kF32 ? 1e-4 : t == StorageType::kF16 ? 2e-2 : 6e-2;  // the op table's
  EXPECT_LE(err / ref_max, tol) << "max abs error " << err << " of max |ref| " << ref_max;
}
#endif

TEST(GpuAttentionLayout, BothTacticsReadAndWriteBshd) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const std::vector<Case> cases = {
      {"BERT-like b2 12 heads S128 +mask", 2, 12, 12, 128, 128, 64, 64, false, true},
      {"GQA 8:2 causal Sq70 Sk90 D128", 2, 8, 2, 70, 90, 128, 128, true, false},
      {"MHA S33 D64", 3, 4, 4, 33, 33, 64, 64, false, true},
  };
  for (const Case& c : cases) {
    check(c, StorageType::kF32, false);
    check(c, StorageType::kF16, false);
    check(c, StorageType::kF16, true);
    check(c, StorageType::kBF16, true);
  }
  check({"D80 Dv48 (cuBLASLt only)", 2, 4, 2, 20, 31, 80, 48, true, true}, StorageType::kF32, false);
#endif
}

}  // namespace
}  // namespace kiln::testing
