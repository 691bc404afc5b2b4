// Gemm, MatMul and MatMulBias (passes/fuse_matmul_add). With a constant 2-D weight B: one cuBLASLt
// GEMM, A [*, M, K] row-major (leading dims folded into M) x B [K, N] (or [N, K] with Gemm's transB;
// in 16-bit storage B is stored [N, K] either way, and with M <= 8 Kiln's skinny GEMM is timed
// beside cuBLASLt's list: kernels_gemv.h, docs/decisions/0089), alpha folded into the weight and beta into the bias, the bias vector of N in the epilogue (ONNX
// Operators.md Gemm: Y = alpha * A' * B' + beta * C; transA and a C that is not a vector of N are
// refused); the activation attribute (Relu, passes/fuse_gemm_activation.cc) is cuBLASLt's RELU
// epilogue. Otherwise MatMul is a batched GEMM over numpy-broadcast batch dims (ONNX MatMul,
// gpu_ops.h plan_batched_matmul), both operands row-major. A Gemm outside the constant-weight
// path (a runtime or non-2-D B, transA, a C that is not a constant vector of N) is one cuBLASLt
// matmul with both operands read as stored and transposes as cuBLASLt ops, alpha and beta as its
// scalars and C broadcast into Y first (GemmGeneralLayer; ONNX Gemm's unidirectional broadcast
// of C; docs/decisions/0070). Storage fp32 (TF32 when the plan allows), fp16 or bf16 with float
// accumulation.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "core/transpose.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"
#include "ir/pointwise_program.h"

namespace kiln::cuda {
namespace {

// Y[M,N] = alpha * op(A) * op(B) + beta * C, row-major A ([M,K], or [K,M] with trans_a), B ([K,N],
// or [N,K] with trans_b) and Y; C (optional, ins[2]) broadcast into Y by a strided copy first,
// then cuBLASLt's C = D = Y. Row-major Y is column-major Y^T = op(B)^T op(A)^T: cuBLASLt's A
// operand is B, its B operand is A (cublasLt.h cublasLtMatmul).
class GemmGeneralLayer : public Layer {
 public:
  struct Params {
    int64_t m = 0, n = 0, k = 0;
    bool trans_a = false, trans_b = false;
    float alpha = 1.f, beta = 1.f;
    bool has_c = false;
    StridedDesc c_copy;  // C broadcast to [M, N]
  };
  ~GemmGeneralLayer() override {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (la_) cublasLtMatrixLayoutDestroy(la_);
    if (lb_) cublasLtMatrixLayoutDestroy(lb_);
    if (lc_) cublasLtMatrixLayoutDestroy(lc_);
  }
  Status init(const Params& p, StorageType t, bool tf32) {
    p_ = p;
    t_ = t;
    const cudaDataType_t dt = cuda_type(t);
    const cublasComputeType_t ct = t == StorageType::kF32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, ct, CUDA_R_32F));
    // cuBLASLt's A = B' ^T (N x K): B row-major [K,N] is column-major [N,K] (ld N), no op; B
    // row-major [N,K] (transB) is column-major [K,N] (ld K), op T.
    const cublasOperation_t oa = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    // cuBLASLt's B = A'^T (K x M): A row-major [M,K] is column-major [K,M] (ld K), no op; A
    // row-major [K,M] (transA) is column-major [M,K] (ld M), op T.
    const cublasOperation_t ob = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
    if (p.trans_b) KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, dt, p.k, p.n, p.k));
    else KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, dt, p.n, p.k, p.n));
    if (p.trans_a) KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb_, dt, p.m, p.k, p.m));
    else KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb_, dt, p.k, p.m, p.k));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc_, dt, p.n, p.m, p.n));
    op = "Gemm";
    describe();
    return Status::Ok();
  }
  size_t workspace() const override { return kWorkspace; }
  Status select(TacticId id, ExecState& s) override {
    KILN_RETURN_IF_ERROR(Layer::select(id, s));
    if (p_.m == 0 || p_.n == 0) return Status::Ok();  // an empty Y
    cublasLtMatmulPreference_t pref;
    KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = std::min(s.workspace_bytes, kWorkspace);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    // Operands may be views at any element offset (a slice of a split): tell the heuristic the
    // alignment they have (the arena and weights start 256-byte aligned, so it holds for every
    // context of the plan).
    const uint32_t al_b = alignment(s.ptr(ins[1])), al_a = alignment(s.ptr(ins[0])), al_y = alignment(s.ptr(outs[0]));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_b, sizeof al_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_a, sizeof al_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_y, sizeof al_y);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_y, sizeof al_y);
    cublasLtMatmulHeuristicResult_t res[1];
    int returned = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(s.lt, desc_, la_, lb_, lc_, lc_, pref, 1, res, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    KILN_CUBLAS_CHECK(st);
    if (returned == 0) return unsupported("layer '" + name + "': cuBLASLt found no algorithm for this Gemm");
    algo_ = res[0].algo;
    has_algo_ = true;
    describe();
    return Status::Ok();
  }
  Status enqueue(ExecState& s) override {
    void* y = s.ptr(outs[0]);
    const int es = static_cast<int>(storage_bytes(t_));
    if (p_.has_c) KILN_CUDA_CHECK(launch_strided_copy(s.ptr(ins[2]), y, es, p_.c_copy, s.stream));
    const float beta = p_.has_c ? p_.beta : 0.f;
    if (p_.m == 0 || p_.n == 0) return Status::Ok();
    KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, desc_, &p_.alpha, s.ptr(ins[1]), la_, s.ptr(ins[0]), lb_, &beta, y, lc_, y,
                                     lc_, has_algo_ ? &algo_ : nullptr, s.workspace,
                                     std::min(s.workspace_bytes, kWorkspace), s.stream));
    return Status::Ok();
  }
  std::string signature() const override {
    return "gemm_general m=" + std::to_string(p_.m) + " n=" + std::to_string(p_.n) + " k=" + std::to_string(p_.k) +
           (p_.trans_a ? " transA" : "") + (p_.trans_b ? " transB" : "") + (p_.has_c ? " +C" : "") + " " +
           storage_name(t_);
  }

 protected:
  TacticId single_id() const override { return make_tactic_id(TacticSource::kCublasLt, 0); }

 private:
  static constexpr size_t kWorkspace = 32u << 20;  // bytes
  // Largest power of two (<= 256) dividing the address.
  static uint32_t alignment(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    uint32_t r = 256;
    while (r > 1 && a % r != 0) r >>= 1;
    return r;
  }
  void describe() {
    tactic = std::string("cublaslt.gemm_general") + (has_algo_ ? " heuristic#0 " : " ") + storage_name(t_) +
             (p_.trans_a ? " transA" : "") + (p_.trans_b ? " transB" : "") + (p_.has_c ? " +C" : "");
  }
  Params p_;
  StorageType t_ = StorageType::kF32;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool has_algo_ = false;
};

// Gemm with operands as stored (GemmGeneralLayer): A and B 2-D (constants or activations), C
// absent or unidirectionally broadcastable to [M, N].
Status lower_gemm_general(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& a = ctx.shape(n.inputs[0]);
  const Shape& b = ctx.shape(n.inputs[1]);
  if (a.size() != 2 || b.size() != 2)
    return invalid_argument(where + "Gemm operands must be 2-D, got " + shape_str(a) + " and " + shape_str(b));
  if (!n.attr_string("activation", "").empty())
    return unsupported(where + "activation '" + n.attr_string("activation", "") + "' with a runtime weight");
  GemmGeneralLayer::Params p;
  p.trans_a = n.attr_int("transA", 0) != 0;
  p.trans_b = n.attr_int("transB", 0) != 0;
  p.alpha = n.attr_float("alpha", 1.f);
  p.beta = n.attr_float("beta", 1.f);
  p.m = p.trans_a ? a[1] : a[0];
  p.k = p.trans_a ? a[0] : a[1];
  p.n = p.trans_b ? b[0] : b[1];
  if ((p.trans_b ? b[1] : b[0]) != p.k)
    return invalid_argument(where + "inner dims differ: " + shape_str(a) + (p.trans_a ? " (transA)" : "") + " x " +
                            shape_str(b) + (p.trans_b ? " (transB)" : ""));
  if (p.k == 0) return unsupported(where + "Gemm with K = 0");
  const Shape& y = ctx.shape(n.outputs[0]);
  if (y != Shape{p.m, p.n}) return invalid_argument(where + "output " + shape_str(y) + ", expected [" +
                                                    std::to_string(p.m) + ", " + std::to_string(p.n) + "]");
  KILN_ASSIGN_OR_RETURN(int aa, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int ba, ctx.row_major_operand(n.inputs[1]));
  std::vector<int> ins = {aa, ba};
  if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    const Shape& c = ctx.shape(n.inputs[2]);
    if (c.size() > 2) return invalid_argument(where + "C " + shape_str(c) + " has rank > 2");
    p.c_copy.rank = 2;
    p.c_copy.out_dims[0] = p.m;
    p.c_copy.out_dims[1] = p.n;
    const Shape c2 = c.size() == 2 ? c : (c.size() == 1 ? Shape{1, c[0]} : Shape{1, 1});
    const int64_t full[2] = {p.m, p.n};
    for (int d = 0; d < 2; ++d) {
      if (c2[d] != 1 && c2[d] != full[d])
        return invalid_argument(where + "C " + shape_str(c) + " does not broadcast to " + shape_str(y));
      p.c_copy.src_strides[d] = c2[d] == 1 ? 0 : (d == 0 ? c2[1] : 1);
    }
    KILN_ASSIGN_OR_RETURN(int ca, ctx.row_major_operand(n.inputs[2]));
    ins.push_back(ca);
    p.has_c = true;
  }
  auto layer = std::make_unique<GemmGeneralLayer>();
  const Status st = layer->init(p, ctx.storage(), ctx.options().precision.tf32);
  if (!st.ok()) return Status(st.code(), where + st.message());
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// The [K, N] constant `w` as float32 [nw, K] times alpha (rows n..nw zero; core/transpose.h).
std::vector<float> transposed_weight(const Tensor& w, int64_t nw, float alpha) {
  const int64_t k = w.dim(0), n = w.dim(1);
  std::vector<float> out(static_cast<size_t>(nw * k), 0.f);
  if (!transpose_to_float32(w.raw(), w.dtype(), k, n, alpha, out.data())) {
    const std::vector<float> conv = floats_of(w);  // float64, integer constants
    transpose_to_float32(conv.data(), DataType::kFloat32, k, n, alpha, out.data());
  }
  return out;
}

// A constant 2-D weight behind an input of rank >= 2: one GEMM.
bool has_2d_weight(const LowerContext& ctx, const ir::Node& n) {
  const auto& c = ctx.graph().value(n.inputs[1]).constant;
  return c && c->rank() == 2 && ctx.shape(n.inputs[0]).size() >= 2;
}

// Whether value `v` of a layer stored in `st` is a graph output declared float32 that no node
// reads, with `st` 16-bit: then the layer may write the output's float32 directly (the output
// reformat gpu_model.cc adds otherwise is a fp16 -> fp32 copy of the whole tensor).
bool only_float32_output(const LowerContext& ctx, ir::ValueId v, StorageType st) {
  const ir::Graph& g = ctx.graph();
  if (st != StorageType::kF16 && st != StorageType::kBF16) return false;
  if (ctx.dtype(v) != DataType::kFloat32) return false;
  if (std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end()) return false;
  for (const ir::Node& m : g.nodes) {
    if (m.removed) continue;
    if (std::find(m.inputs.begin(), m.inputs.end(), v) != m.inputs.end()) return false;
  }
  return true;
}

Status lower_batched_matmul(LowerContext& ctx, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(BatchedMatMulParams p, plan_batched_matmul(n, ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1]),
                                                                   ctx.shape(n.outputs[0])));
  KILN_ASSIGN_OR_RETURN(int a, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int b, ctx.row_major_operand(n.inputs[1]));
  KILN_ASSIGN_OR_RETURN(auto layer, make_batched_matmul_layer(p, ctx.storage(), ctx.options().precision.tf32));
  ctx.add_layer(std::move(layer), n.name, {a, b}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_gemm(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.op == ir::OpKind::kMatMul && !has_2d_weight(ctx, n)) return lower_batched_matmul(ctx, n);
  const ir::Graph& g = ctx.graph();
  if (n.op == ir::OpKind::kGemm) {
    // The constant-weight path folds alpha into B and beta into a bias vector of N.
    const auto& b = g.value(n.inputs[1]).constant;
    const ir::ValueId cv = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
    const auto* c = cv != ir::kNoValue ? g.value(cv).constant.get() : nullptr;
    const int64_t bn = b && b->rank() == 2 ? b->dim(n.attr_int("transB", 0) != 0 ? 0 : 1) : -1;
    // A bias over the columns: [N] or [1, N] (a [N, 1] C varies by row; unidirectional broadcast).
    const bool c_vector =
        cv == ir::kNoValue || (c && c->numel() == bn && (c->rank() <= 1 || (c->rank() == 2 && c->dim(0) == 1)));
    if (!b || b->rank() != 2 || n.attr_int("transA", 0) != 0 || ctx.shape(n.inputs[0]).size() != 2 || !c_vector)
      return lower_gemm_general(ctx, n, where);
  }
  const Shape& a = ctx.shape(n.inputs[0]);
  const auto& wc = g.value(n.inputs[1]).constant;
  if (!wc || wc->rank() != 2 || a.size() < 2) return unsupported(where + "GEMM needs a constant 2-D weight");
  GemmParams p{};
  const bool gemm = n.op == ir::OpKind::kGemm;
  // MatMulBias (A [*, M, K] of rank > 2): the leading dims fold into M, the bias is the epilogue's.
  const bool mm_bias = n.op == ir::OpKind::kMatMulBias;
  if (gemm && (n.attr_int("transA", 0) != 0 || a.size() != 2)) return unsupported(where + "transA");
  const bool const_nk = gemm && n.attr_int("transB", 0) != 0;  // the constant is [N, K]
  p.k = a.back();
  p.m = p.k > 0 ? shape_numel(a) / p.k : 0;
  p.n = const_nk ? wc->dim(0) : wc->dim(1);
  if ((const_nk ? wc->dim(1) : wc->dim(0)) != p.k)
    return invalid_argument(where + "inner dims differ: " + shape_str(a) + " x " + shape_str(wc->shape()) +
                            (const_nk ? " (transB)" : ""));
  // In 16-bit storage the weight is stored [N, K] whatever the constant's layout (a [K, N] one
  // transposed once, at build: the plan keeps it packed): every output's K values contiguous, as
  // Kiln's skinny GEMM streams them for decode steps and batch 1, and cuBLASLt's "TN" form
  // (docs/decisions/0089).
  p.weight_is_nk = const_nk || (ctx.storage() != StorageType::kF32 && p.k % 8 == 0);
  const bool transpose_w = p.weight_is_nk && !const_nk;
  if (mm_bias && (n.inputs.size() < 3 || n.inputs[2] == ir::kNoValue)) return invalid_argument(where + "bias is required");
  // passes/fuse_gemm_activation.cc's Relu: cuBLASLt's RELU(_BIAS) epilogue, max(0, x) after the
  // bias (cublasLt.h cublasLtEpilogue_t; docs/decisions/0058).
  const std::string act = n.attr_string("activation", "");
  if (!act.empty() && act != "Relu" && act != "GeluTanh")
    return unsupported(where + "activation '" + act + "': the GEMM epilogue takes Relu or GeluTanh");
  p.relu = act == "Relu";
  // GeluTanh: cuBLASLt's GELU epilogue where it is checked to compute that formula on this
  // device (cublaslt_gelu_is_tanh), else the GEMM and then Kiln's GELU kernel (0058 addendum 2).
  const bool gelu_layer = act == "GeluTanh" && !cublaslt_gelu_is_tanh();
  p.gelu_tanh = act == "GeluTanh" && !gelu_layer;
  const StorageType st = ctx.storage();
  const bool has_residual = mm_bias && n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  // passes::fuse_rmsnorm_gemm's norm scale (input 4) and fuse_gated_gemm's gate (docs/decisions/0092).
  p.norm = mm_bias && n.inputs.size() > 4 && n.inputs[4] != ir::kNoValue;
  p.norm_eps = n.attr_float("norm_epsilon", 1e-5f);
  const std::string gate = mm_bias ? n.attr_string("gate", "") : "";
  if (!gate.empty()) {
    StatusOr<ir::PwProgram> prog = ir::parse_pw_program(gate);
    if (!prog.ok() || !ir::pw_is_silu_gate(*prog))
      return unsupported(where + "gate program '" + gate + "': the GPU's gated GEMM computes silu(in0) * in1 only");
    if (has_residual || !act.empty()) return unsupported(where + "a gate with a residual or an activation");
    p.gate = true;
  }
  // An N whose rows are not 16-byte aligned (GPT-2's vocabulary of 50,257): the weight and bias are
  // stored padded with zeros to n_pad outputs, so the layer may also run as the padded GEMM + a
  // compacting copy (gpu_layers.h gemm_padded_n; the builder times both forms). Only large N (the
  // LM heads this is for) and no residual (the padded form has no C in Y's layout).
  p.n_pad = p.n >= 256 && !has_residual && !p.gate ? gemm_padded_n(p.n, st) : 0;
  const int64_t nw = p.n_pad > 0 ? p.n_pad : p.n;  // outputs stored
  std::vector<float> w;
  const float alpha = gemm ? n.attr_float("alpha", 1.f) : 1.f;
  const Shape w_shape = p.weight_is_nk ? Shape{nw, p.k} : Shape{p.k, nw};
  KILN_ASSIGN_OR_RETURN(int wa, ctx.upload(g.value(n.inputs[1]).name, n.inputs[1], static_cast<size_t>(nw * p.k),
                                           w_shape, false, [&]() -> const float* {
                                             // A float32 weight as it is needs no copy (an
                                             // LLM's are GiBs).
                                             if (wc->dtype() == DataType::kFloat32 && alpha == 1.f && nw == p.n &&
                                                 !transpose_w)
                                               return wc->data<float>();
                                             if (transpose_w) {  // [K, N] -> [nw, K], zero rows n..nw
                                               w = transposed_weight(*wc, nw, alpha);
                                               return w.data();
                                             }
                                             w = floats_of(*wc);
                                             for (float& v : w) v *= alpha;
                                             if (nw == p.n) return w.data();
                                             // Zero outputs n..n_pad: extra rows of [N, K], extra columns of [K, N].
                                             std::vector<float> padded(static_cast<size_t>(nw * p.k), 0.f);
                                             if (p.weight_is_nk) {
                                               std::copy(w.begin(), w.end(), padded.begin());
                                             } else {
                                               for (int64_t r = 0; r < p.k; ++r)
                                                 std::copy(w.begin() + r * p.n, w.begin() + (r + 1) * p.n,
                                                           padded.begin() + r * nw);
                                             }
                                             w = std::move(padded);
                                             return w.data();
                                           }));
  std::vector<int> ins;
  KILN_ASSIGN_OR_RETURN(int xa, ctx.activation(n.inputs[0]));
  ins = {ctx.as_layout(xa, false), wa};
  // A bias of zeros (the passes' MatMulBias of a bias-free MatMul) adds nothing: left out.
  const auto zero_bias = [&](const Tensor& b) {
    if (b.dtype() != DataType::kFloat32) return false;
    const float* v = b.data<float>();
    return std::all_of(v, v + b.numel(), [](float f) { return f == 0.f; });
  };
  const bool skip_bias = mm_bias && n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue &&
                         g.value(n.inputs[2]).constant && zero_bias(*g.value(n.inputs[2]).constant);
  if ((gemm || mm_bias) && n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue && !skip_bias) {
    const auto& bc = g.value(n.inputs[2]).constant;
    if (!bc || bc->numel() != p.n) return unsupported(where + "bias must be a constant vector of N");
    std::vector<float> b;
    const float beta = n.attr_float("beta", 1.f);
    KILN_ASSIGN_OR_RETURN(int ba, ctx.upload(n.name + ":bias", n.inputs[2], static_cast<size_t>(nw), {nw}, false, [&] {
      b = floats_of(*bc);
      for (float& v : b) v *= beta;
      b.resize(static_cast<size_t>(nw), 0.f);
      return b.data();
    }));
    ins.push_back(ba);
    p.has_bias = true;
  }
  // passes::fuse_gemm_residual's R (MatMulBias input 3): cuBLASLt's C with beta 1, read in Y's
  // row-major layout and storage (ops.def; the GEMM layer's has_residual).
  if (has_residual) {
    if (!act.empty()) return unsupported(where + "a residual with an activation");
    KILN_ASSIGN_OR_RETURN(int ra, ctx.activation(n.inputs[3]));
    ins.push_back(ctx.as_layout(ra, false));
    p.has_residual = true;
  }
  if (p.norm) {  // S [K] as a weight in the layer's storage (the norm kernel's scale)
    const ir::ValueId sv = n.inputs[4];
    const auto& sc = g.value(sv).constant;
    if (!sc || sc->numel() != p.k) return unsupported(where + "the norm scale must be a constant vector of K");
    std::vector<float> sf;
    KILN_ASSIGN_OR_RETURN(int sa, ctx.upload(g.value(sv).name, sv, static_cast<size_t>(p.k), {p.k}, false, [&] {
      sf = floats_of(*sc);
      return sf.data();
    }));
    ins.push_back(sa);
  }
  const Shape& ys = ctx.shape(n.outputs[0]);
  // A 16-bit GEMM whose output is only a graph output declared float32 (an LM head's logits)
  // writes that float32 itself: no fp16 copy, no output reformat (docs/decisions/0083).
  p.out_f32 = !gelu_layer && !p.has_bias && !p.has_residual && !p.gate && only_float32_output(ctx, n.outputs[0], st);
  const int out = ctx.new_value(g.value(n.outputs[0]).name, ys, p.out_f32 ? StorageType::kF32 : st, false);
  KILN_ASSIGN_OR_RETURN(auto layer, make_gemm_layer(p, st, ctx.options().precision.tf32));
  if (!gelu_layer) {
    ctx.add_layer(std::move(layer), n.name, ins, {out}, n.origin);
    ctx.bind(n.outputs[0], out);
    return Status::Ok();
  }
  // The GEMM into a value of its own, then GELU (tanh form) over it, flat.
  const int pre = ctx.new_value(g.value(n.outputs[0]).name + "/pre_gelu", ys, st, false);
  ctx.add_layer(std::move(layer), n.name, ins, {pre}, n.origin);
  BroadcastDesc d;
  d.rank = 1;
  d.out_dims[0] = shape_numel(ys);
  d.a_strides[0] = 1;
  auto gelu = make_pointwise_layer(PointwiseOp::kGeluTanh, d, st, 0.f, 0.f);
  gelu->op = "Gemm";  // the Gemm node's epilogue, as a second kernel
  gelu->tactic = std::string("kiln.pointwise gelu_tanh after the GEMM ") + storage_name(st);
  ctx.add_layer(std::move(gelu), n.name + "/gelu_tanh", {pre}, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
