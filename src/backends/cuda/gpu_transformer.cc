// CUDA tactics of the internal transformer layers: planning (node -> RmsNormPlan / AttentionPlan,
// checked as the CPU reference checks them) and the layers. Attention runs as cuBLASLt GEMM ->
// Kiln's masked softmax (kernels_transformer.cu) -> cuBLASLt GEMM with the scores in the layer's
// workspace; a fused (flash-style) kernel would replace exactly this layer.
#include "backends/cuda/gpu_transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {
namespace {

Status node_error(const ir::Node& n, const std::string& what) { return invalid_argument(n.describe() + ": " + what); }

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

// Largest power of two (<= 256, the arena's and workspace's alignment) dividing `bytes`.
uint32_t alignment(int64_t bytes) {
  uint32_t a = 256;
  while (a > 1 && bytes % a != 0) a >>= 1;
  return a;
}

}  // namespace

// ------------------------------------------------------------------ planning
StatusOr<RmsNormPlan> plan_rms_norm(const ir::Node& n, const Shape& x, const Shape& scale) {
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int("axis", -1);
  if (axis < -r || axis >= r) return node_error(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  RmsNormPlan p;
  p.rows = prod(x, 0, static_cast<size_t>(axis));
  p.cols = prod(x, static_cast<size_t>(axis), x.size());
  p.eps = n.attr_float("epsilon", 1e-5f);
  // scale broadcasts to dims [axis, rank): one value, or exactly those dims (leading 1s allowed),
  // as the CPU reference accepts.
  const Shape norm(x.begin() + axis, x.end());
  Shape s = scale;
  while (!s.empty() && s.front() == 1 && s.size() > norm.size()) s.erase(s.begin());
  if (shape_numel(scale) == 1) p.scale_n = 1;
  else if (s == norm) p.scale_n = p.cols;
  else return node_error(n, "scale " + shape_str(scale) + " does not match the normalized dims " + shape_str(norm));
  return p;
}

StatusOr<AttentionPlan> plan_attention(const ir::Node& n, const Shape& q_stored, const Shape& k_stored,
                                       const Shape& v_stored, const std::optional<Shape>& mask, bool mask_is_bool,
                                       const Shape& out_stored, int elem_bytes, size_t scratch_limit) {
  const size_t r = q_stored.size();
  if (r < 3 || k_stored.size() != r || v_stored.size() != r)
    return node_error(n, "Q, K, V must have one rank >= 3, got " + shape_str(q_stored) + ", " + shape_str(k_stored) +
                             ", " + shape_str(v_stored));
  const std::string layout = n.attr_string("head_layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd")
    return node_error(n, "head_layout '" + layout + "' is neither \"bhsd\" nor \"bshd\"");
  const bool bshd = layout == "bshd";
  // From here on the shapes in [*, H, S, D] order (bshd: the stored ones with the axes swapped).
  auto heads_first = [&](const Shape& s) {
    Shape t = s;
    if (bshd && t.size() >= 3) std::swap(t[t.size() - 3], t[t.size() - 2]);
    return t;
  };
  const Shape q = heads_first(q_stored), k = heads_first(k_stored), v = heads_first(v_stored),
              out = heads_first(out_stored);
  if (r > static_cast<size_t>(kMaxRank)) return node_error(n, "rank " + std::to_string(r) + " above 6");
  for (size_t i = 0; i + 3 < r; ++i)
    if (k[i] != q[i] || v[i] != q[i])
      return node_error(n, "batch dims differ: Q " + shape_str(q) + ", K " + shape_str(k) + ", V " + shape_str(v));
  AttentionPlan p;
  p.bshd = bshd;
  p.batch = prod(q, 0, r - 3);
  p.hq = q[r - 3];
  p.sq = q[r - 2];
  p.d = q[r - 1];
  p.hkv = k[r - 3];
  p.sk = k[r - 2];
  p.dv = v[r - 1];
  if (v[r - 3] != p.hkv || v[r - 2] != p.sk || k[r - 1] != p.d)
    return node_error(n, "K " + shape_str(k) + " / V " + shape_str(v) + " do not fit Q " + shape_str(q) +
                             " (expected K [*, Hkv, Sk, D], V [*, Hkv, Sk, Dv])");
  if (p.hkv == 0 ? p.hq != 0 : p.hq % p.hkv != 0)
    return node_error(n, "query heads " + std::to_string(p.hq) + " are not a multiple of kv heads " + std::to_string(p.hkv));
  Shape want = q;
  want.back() = p.dv;
  if (out != want)
    return node_error(n, "output " + shape_str(out_stored) + " is not " + (bshd ? "[*, Sq, Hq, Dv] = " : "[*, Hq, Sq, Dv] = ") +
                             shape_str(heads_first(want)));
  if (p.d == 0 && p.sk > 0 && p.sq > 0) return node_error(n, "head size D is 0");
  p.group = p.hkv > 0 ? p.hq / p.hkv : 1;
  p.scale = n.attr_float("scale", p.d > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.d))) : 1.f);

  // Softmax rows over [*, Hq, Sq]; the mask's strides over the full score shape [*, Hq, Sq, Sk]
  // (numpy broadcasting, right-aligned, without growing the mask: stride 0 where it is 1).
  AttentionSoftmaxDesc& sd = p.softmax;
  sd.sq = p.sq;
  sd.sk = p.sk;
  sd.causal = n.attr_int("is_causal", 0) != 0;
  sd.rank = static_cast<int>(r - 1);
  for (size_t i = 0; i + 1 < r; ++i) sd.row_dims[i] = q[i];
  if (mask) {
    Shape full = q;
    full.back() = p.sk;
    const Shape& ms = *mask;
    if (ms.size() > full.size())
      return node_error(n, "mask " + shape_str(ms) + " has a higher rank than the scores " + shape_str(full));
    std::vector<int64_t> strides(full.size(), 0);
    int64_t st = 1;
    for (int i = static_cast<int>(ms.size()) - 1, j = static_cast<int>(full.size()) - 1; i >= 0; --i, --j) {
      if (ms[i] != 1 && ms[i] != full[j])
        return node_error(n, "mask " + shape_str(ms) + " does not broadcast to the scores " + shape_str(full));
      strides[j] = ms[i] == 1 ? 0 : st;
      st *= ms[i];
    }
    sd.mask = mask_is_bool ? AttentionMask::kKeep : AttentionMask::kAdditive;
    for (size_t i = 0; i + 1 < r; ++i) sd.mask_row_strides[i] = strides[i];
    sd.mask_key_stride = strides[r - 1];
  }

  // GEMM units and the chunk of them whose S (and P) fit the scratch limit.
  p.units = p.batch * p.hkv;
  p.m = p.group * p.sq;
  const size_t s_unit = static_cast<size_t>(p.m * p.sk) * sizeof(float);
  const size_t p_unit = elem_bytes == 4 ? 0 : static_cast<size_t>(p.m * p.sk) * static_cast<size_t>(elem_bytes);
  const size_t per_unit = std::max<size_t>(s_unit + p_unit, 1);
  int64_t c = static_cast<int64_t>(std::min<size_t>(scratch_limit / per_unit, std::numeric_limits<int32_t>::max()));
  c = std::clamp<int64_t>(c, 1, std::max<int64_t>(p.units, 1));
  while (p.units > 0 && p.units % c != 0) --c;
  p.chunk = c;
  const size_t s_bytes = align256(static_cast<size_t>(c) * s_unit);
  p.probs_offset = elem_bytes == 4 ? 0 : s_bytes;
  p.scratch_bytes = std::max<size_t>(align256(s_bytes + static_cast<size_t>(c) * p_unit), 256);
  if (bshd) {
    const size_t eb = static_cast<size_t>(elem_bytes);
    p.staging_bytes = align256(static_cast<size_t>(p.batch * p.hq * p.sq * p.d) * eb) +
                      align256(static_cast<size_t>(p.batch * p.hkv * p.sk * p.d) * eb) +
                      align256(static_cast<size_t>(p.batch * p.hkv * p.sk * p.dv) * eb) +
                      align256(static_cast<size_t>(p.batch * p.hq * p.sq * p.dv) * eb);
  }
  return p;
}

StridedDesc attention_axes_swap(int64_t batch, int64_t a, int64_t b, int64_t d, int64_t row) {
  if (row <= 0) row = b * d;
  StridedDesc s;
  s.rank = 4;
  s.out_dims[0] = batch;
  s.out_dims[1] = b;
  s.out_dims[2] = a;
  s.out_dims[3] = d;
  s.src_strides[0] = a * row;
  s.src_strides[1] = d;    // output axis 1 walks the source's axis 2
  s.src_strides[2] = row;  // output axis 2 walks the source's axis 1
  s.src_strides[3] = 1;
  return s;
}

StatusOr<AttentionPlan> plan_attention(const ir::Node& n, const ValueShapes& vs, int elem_bytes, size_t scratch_limit) {
  if (n.inputs.size() < 3) return node_error(n, "needs Q, K and V");
  for (size_t k = 0; k < 3; ++k) {
    if (n.inputs[k] == ir::kNoValue) return node_error(n, "input " + std::to_string(k) + " is omitted");
    if (vs.dtypes[n.inputs[k]] != vs.dtypes[n.inputs[0]])
      return node_error(n, std::string("Q, K, V dtypes differ: ") + dtype_name(vs.dtypes[n.inputs[0]]) + ", " +
                               dtype_name(vs.dtypes[n.inputs[1]]) + ", " + dtype_name(vs.dtypes[n.inputs[2]]));
  }
  std::optional<Shape> mask;
  bool mask_bool = false;
  if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue) {
    const DataType md = vs.dtypes[n.inputs[3]];
    mask_bool = md == DataType::kBool;
    if (!mask_bool && md != DataType::kFloat32 && md != DataType::kFloat16 && md != DataType::kBFloat16)
      return unsupported(n.describe() + ": mask dtype " + dtype_name(md) + " is neither float nor bool");
    mask = vs.shapes[n.inputs[3]];
  }
  return plan_attention(n, vs.shapes[n.inputs[0]], vs.shapes[n.inputs[1]], vs.shapes[n.inputs[2]], mask, mask_bool,
                        vs.shapes[n.outputs[0]], elem_bytes, scratch_limit);
}

// ------------------------------------------------------------------ layers
namespace {

class RmsNormLayer : public Layer {
 public:
  RmsNormLayer(const RmsNormPlan& p, StorageType t) : p_(p), t_(t) {
    op = "RMSNormalization";
    tactic = std::string("kiln.rms_norm ") + storage_name(t);
  }
  Status enqueue(ExecState& s) override {
    KILN_CUDA_CHECK(launch_rms_norm(s.ptr(ins[0]), s.ptr(ins[1]), p_.scale_n, s.ptr(outs[0]), t_, p_.rows, p_.cols,
                                    p_.eps, s.stream));
    return Status::Ok();
  }

 private:
  RmsNormPlan p_;
  StorageType t_;
};

// Row-major operands through cuBLASLt's column-major view (a row-major [R, C] matrix is a
// column-major C x R one with ld C):
//   S[m, sk] = scale · Q[m, d] K[sk, d]ᵀ  is  Sᵀ = op(K as d x sk, transposed) · (Q as d x m)
//   O[m, dv] = P[m, sk] V[sk, dv]         is  Oᵀ = (V as dv x sk) · (P as sk x m)
// one strided batch entry per unit (batch, kv head); the scratch holds S (fp32), then P. A bshd
// plan first copies Q, K, V to [*, H, S, D] in the staging area after the scratch, runs the same
// GEMMs there and copies O back to [*, S, H, D] (Kiln's strided copy: a Transpose layer's kernel).
class AttentionLayer : public Layer {
 public:
  ~AttentionLayer() override {
    for (cublasLtMatmulDesc_t d : {qk_, pv_})
      if (d) cublasLtMatmulDescDestroy(d);
    for (cublasLtMatrixLayout_t l : {k_, q_, s_, v_, p_, o_})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }

  Status init(const AttentionPlan& plan, StorageType t, bool tf32) {
    plan_ = plan;
    t_ = t;
    tf32_ = tf32;
    op = "Attention";
    describe();
    if (empty()) return Status::Ok();
    const cudaDataType_t dt = cuda_type(t);
    // FP32 accumulation and FP32 alpha/beta for every storage type (TF32 only when allowed).
    const cublasComputeType_t ct =
        t != StorageType::kF32 ? CUBLAS_COMPUTE_32F : (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    const cublasOperation_t tr = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&qk_, ct, CUDA_R_32F));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(qk_, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(qk_, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&pv_, ct, CUDA_R_32F));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pv_, CUBLASLT_MATMUL_DESC_TRANSA, &nt, sizeof nt));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pv_, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
    const int64_t m = plan.m, sk = plan.sk, d = plan.d, dv = plan.dv;
    KILN_RETURN_IF_ERROR(layout(&k_, dt, d, sk, sk * d));
    KILN_RETURN_IF_ERROR(layout(&q_, dt, d, m, m * d));
    KILN_RETURN_IF_ERROR(layout(&s_, CUDA_R_32F, sk, m, m * sk));
    KILN_RETURN_IF_ERROR(layout(&v_, dt, dv, sk, sk * dv));
    KILN_RETURN_IF_ERROR(layout(&p_, dt, sk, m, m * sk));
    KILN_RETURN_IF_ERROR(layout(&o_, dt, dv, m, m * dv));
    return Status::Ok();
  }

  size_t workspace() const override { return plan_.scratch_bytes + plan_.staging_bytes + gemm_cap_; }
  // One tactic (cuBLASLt's first heuristic choice for each matmul, within the workspace).
  Status select(TacticId id, ExecState& s) override {
    KILN_RETURN_IF_ERROR(Layer::select(id, s));
    return pick(s);
  }

  Status enqueue(ExecState& s) override {
    if (plan_.units == 0 || plan_.m == 0 || plan_.dv == 0) return Status::Ok();  // empty output
    char* o = static_cast<char*>(s.ptr(outs[0]));
    const size_t es = storage_bytes(t_);
    if (plan_.sk == 0) {  // no keys: every row is fully excluded, so the output is zeros
      KILN_CUDA_CHECK(cudaMemsetAsync(o, 0, static_cast<size_t>(plan_.units * plan_.m * plan_.dv) * es, s.stream));
      return Status::Ok();
    }
    const char* q = static_cast<const char*>(s.ptr(ins[0]));
    const char* k = static_cast<const char*>(s.ptr(ins[1]));
    const char* v = static_cast<const char*>(s.ptr(ins[2]));
    const void* mask = ins.size() > 3 ? s.ptr(ins[3]) : nullptr;
    char* ws = static_cast<char*>(s.workspace);
    float* scores = reinterpret_cast<float*>(ws);
    void* probs = ws + plan_.probs_offset;
    const size_t fixed = plan_.scratch_bytes + plan_.staging_bytes;  // before the cuBLASLt workspace
    void* gemm_ws = ws + fixed;
    const size_t gemm_bytes = std::min(gemm_cap_, s.workspace_bytes - std::min(s.workspace_bytes, fixed));
    char* o_stored = o;
    if (plan_.bshd) {  // Q, K, V to [*, H, S, D] in the staging area; O computed there
      const int eb = static_cast<int>(es);
      const int64_t b = plan_.batch;
      char* st = ws + plan_.scratch_bytes;
      char* qh = st;
      char* kh = qh + align256(static_cast<size_t>(b * plan_.hq * plan_.sq * plan_.d) * es);
      char* vh = kh + align256(static_cast<size_t>(b * plan_.hkv * plan_.sk * plan_.d) * es);
      o = vh + align256(static_cast<size_t>(b * plan_.hkv * plan_.sk * plan_.dv) * es);
      KILN_CUDA_CHECK(launch_strided_copy(q, qh, eb, attention_axes_swap(b, plan_.sq, plan_.hq, plan_.d, plan_.row_stride[0]), s.stream));
      KILN_CUDA_CHECK(launch_strided_copy(k, kh, eb, attention_axes_swap(b, plan_.sk, plan_.hkv, plan_.d, plan_.row_stride[1]), s.stream));
      KILN_CUDA_CHECK(launch_strided_copy(v, vh, eb, attention_axes_swap(b, plan_.sk, plan_.hkv, plan_.dv, plan_.row_stride[2]), s.stream));
      q = qh;
      k = kh;
      v = vh;
    }
    const float scale = plan_.scale, one = 1.f, zero = 0.f;
    const int64_t m = plan_.m, sk = plan_.sk, d = plan_.d, dv = plan_.dv;
    for (int64_t u = 0; u < plan_.units; u += plan_.chunk) {
      const void* ku = k + static_cast<size_t>(u * sk * d) * es;
      const void* qu = q + static_cast<size_t>(u * m * d) * es;
      const void* vu = v + static_cast<size_t>(u * sk * dv) * es;
      void* ou = o + static_cast<size_t>(u * m * dv) * es;
      KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, qk_, &scale, ku, k_, qu, q_, &zero, scores, s_, scores, s_,
                                       picked_ ? &qk_algo_ : nullptr, gemm_ws, gemm_bytes, s.stream));
      KILN_CUDA_CHECK(launch_attention_softmax(scores, probs, t_, mask, plan_.softmax, u * m, plan_.chunk * m, s.stream));
      KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, pv_, &one, vu, v_, probs, p_, &zero, ou, o_, ou, o_,
                                       picked_ ? &pv_algo_ : nullptr, gemm_ws, gemm_bytes, s.stream));
    }
    if (plan_.bshd)  // O [*, Hq, Sq, Dv] -> [*, Sq, Hq, Dv]
      KILN_CUDA_CHECK(launch_strided_copy(o, o_stored, static_cast<int>(es),
                                          attention_axes_swap(plan_.batch, plan_.hq, plan_.sq, plan_.dv), s.stream));
    return Status::Ok();
  }

  std::string signature() const override {
    return "attention units=" + std::to_string(plan_.units) + " m=" + std::to_string(plan_.m) +
           " sk=" + std::to_string(plan_.sk) + " d=" + std::to_string(plan_.d) + " dv=" + std::to_string(plan_.dv) +
           " " + storage_name(t_) + (t_ == StorageType::kF32 ? (tf32_ ? " tf32" : " fma") : "") +
           " chunk=" + std::to_string(plan_.chunk) + (plan_.bshd ? " bshd" : "") + plan_.row_stride_tag();
  }

 protected:
  TacticId single_id() const override { return make_tactic_id(TacticSource::kCublasLt, 0); }

 private:
  static constexpr size_t kGemmWorkspace = 32u << 20;  // bytes of cuBLASLt workspace after the scratch

  bool empty() const { return plan_.units == 0 || plan_.m == 0 || plan_.dv == 0 || plan_.sk == 0; }

  // A column-major rows x cols matrix (ld = rows), `chunk` of them `stride` elements apart.
  Status layout(cublasLtMatrixLayout_t* l, cudaDataType_t dt, int64_t rows, int64_t cols, int64_t stride) {
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, dt, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows));
    if (plan_.chunk > 1) {
      const int32_t count = static_cast<int32_t>(plan_.chunk);
      KILN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      KILN_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return Status::Ok();
  }

  // cuBLASLt's first heuristic choice for one GEMM. Matrices after the first start at multiples
  // of their size in bytes (batch strides, chunk offsets): the alignments tell the heuristic so
  // it picks no algorithm that needs more.
  Status heuristic(ExecState& s, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                   cublasLtMatrixLayout_t c, uint32_t al_a, uint32_t al_b, uint32_t al_c, cublasLtMatmulAlgo_t* algo,
                   const char* what) {
    cublasLtMatmulPreference_t pref;
    KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &gemm_cap_, sizeof gemm_cap_);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t res[1];
    int returned = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(s.lt, desc, a, b, c, c, pref, 1, res, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    KILN_CUBLAS_CHECK(st);
    if (returned == 0)
      return unsupported("layer '" + name + "': cuBLASLt has no algorithm for the " + what + " GEMM of " + signature());
    *algo = res[0].algo;
    return Status::Ok();
  }

  Status pick(ExecState& s) {
    const size_t fixed = plan_.scratch_bytes + plan_.staging_bytes;
    if (s.workspace_bytes < fixed)
      return Status(StatusCode::kOutOfMemory, "layer '" + name + "': the scores" +
                                                  (plan_.bshd ? " and the [*, H, S, D] copies" : "") + " need " +
                                                  std::to_string(fixed) + " bytes of workspace, " +
                                                  std::to_string(s.workspace_bytes) + " available");
    gemm_cap_ = std::min(kGemmWorkspace, s.workspace_bytes - fixed);
    if (empty()) return Status::Ok();
    const int64_t es = storage_bytes(t_), m = plan_.m, sk = plan_.sk, d = plan_.d, dv = plan_.dv;
    KILN_RETURN_IF_ERROR(heuristic(s, qk_, k_, q_, s_, alignment(sk * d * es), alignment(m * d * es),
                                   alignment(m * sk * 4), &qk_algo_, "Q K^T"));
    KILN_RETURN_IF_ERROR(heuristic(s, pv_, v_, p_, o_, alignment(sk * dv * es), alignment(m * sk * es),
                                   alignment(m * dv * es), &pv_algo_, "P V"));
    picked_ = true;
    describe();
    return Status::Ok();
  }

  void describe() {
    const auto& sd = plan_.softmax;
    tactic = std::string("kiln.attention cublaslt+softmax+cublaslt") + (picked_ ? " heuristic#0 " : " ") +
             storage_name(t_) + (plan_.bshd ? " bshd" : "") + " chunk=" + std::to_string(plan_.chunk) + "/" +
             std::to_string(plan_.units) +
             (plan_.group > 1 ? " gqa=" + std::to_string(plan_.group) : "") + (sd.causal ? " causal" : "") +
             (sd.mask == AttentionMask::kAdditive ? " +mask" : sd.mask == AttentionMask::kKeep ? " +bool_mask" : "") +
             plan_.row_stride_tag();
  }

  AttentionPlan plan_;
  StorageType t_ = StorageType::kF32;
  bool tf32_ = false;
  size_t gemm_cap_ = kGemmWorkspace;  // bytes of cuBLASLt workspace the algorithms were chosen for
  bool picked_ = false;
  cublasLtMatmulDesc_t qk_ = nullptr, pv_ = nullptr;
  cublasLtMatrixLayout_t k_ = nullptr, q_ = nullptr, s_ = nullptr, v_ = nullptr, p_ = nullptr, o_ = nullptr;
  cublasLtMatmulAlgo_t qk_algo_{}, pv_algo_{};
};

}  // namespace

std::unique_ptr<Layer> make_rms_norm_layer(const RmsNormPlan& p, StorageType t) {
  return std::make_unique<RmsNormLayer>(p, t);
}

StatusOr<std::unique_ptr<Layer>> make_attention_layer(const AttentionPlan& p, StorageType t, bool tf32) {
  auto l = std::make_unique<AttentionLayer>();
  KILN_RETURN_IF_ERROR(l->init(p, t, tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

}  // namespace kiln::cuda
