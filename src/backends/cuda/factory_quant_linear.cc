// QuantLinear (ops.def; passes/fuse_qdq_linear.cc; docs/decisions/0055): a linear layer in 8 bits.
// X [*, K] (row-major, the plan's float storage) is quantized per tensor into the workspace
// (Kiln's kernel, ONNX QuantizeLinear rounding), multiplied with the stored 8-bit weight W [N, K]
// by an 8-bit tensor-core GEMM, and dequantized by Kiln's epilogue kernel with one scale per output
// channel and the bias into Y [*, N]:
//   INT8: cuBLASLt IMMA, int8 x int8 -> int32 (CUBLAS_COMPUTE_32I), "TN" (W transposed, X not);
//   FP8:  cuBLASLt, E4M3 x E4M3 -> float32 (CUBLAS_COMPUTE_32F; sm_89+), "TN" as FP8 requires.
// Tactics: each entry of cuBLASLt's heuristic list (source cublaslt, variant = index) and Kiln's
// reference GEMM (one thread per output; source kiln), which runs any shape: the builder times them.
// FP8 with a 16-bit output also has the fused form (source cublaslt, variant kFusedBase + index;
// decision 0080 addendum, 0085): one cuBLASLt FP8 GEMM that applies the weight scale (A scale), the
// per-tensor activation scale (B scale, a device scalar), the bias and ReLU in its epilogue and
// writes Y in fp16 / bf16 directly — no accumulator in memory and no separate epilogue pass. A
// weight whose N scales are all equal (per-tensor weight scales: `--weight-scales per-tensor`,
// build-llm's FP8 default) gives cuBLASLt a scalar A scale (CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
// w_scale[0]), which cuBLASLt 13.1 lists on Hopper; per-channel scales ask for the outer-vector mode
// (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F), which it lists only where it has such kernels —
// elsewhere the list is empty and the unfused form runs.
// The weight is uploaded as stored in the plan's graph (1 byte per element), never converted.
#include <cublasLt.h>

#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm8.h"
#include "core/numerics.h"
#include "backends/cuda/kernels_quant.h"
#include "backends/cuda/kernels_gemv.h"
#include "backends/cuda/layer_factory.h"
#include "ir/pointwise_program.h"

namespace kiln::cuda {
namespace {

struct QuantLinearParams {
  int64_t m = 0, n = 0, k = 0;
  bool fp8 = false;
  float x_scale = 1.f;
  int zero_point = 0;
  bool has_bias = false;
  bool relu = false;
  bool uniform_w_scale = false;  // every w_scale[n] equal: cuBLASLt's scalar A scale
  // Attribute gate (passes::fuse_gated_gemm, docs/decisions/0092): the [M, N] product goes to the
  // workspace in Y's storage and launch_silu_gate writes Y [M, N / 2] from its halves.
  bool gate = false;
  StorageType x_type = StorageType::kF32, y_type = StorageType::kF32;
};

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

// ins: 0 X, 1 W [N, K] 8-bit, 2 w_scale [N] f32, 3 weight row sums [N] f32 (-1 without a zero
// point), 4 bias [N] f32 (-1 without), 5 x_scale [1] f32 and 6 the bias [N] in Y's 16-bit storage
// (the fused FP8 form's B scale and bias; -1 otherwise).
class QuantLinearLayer : public Layer {
 public:
  ~QuantLinearLayer() override {
    if (fdesc_) cublasLtMatmulDescDestroy(fdesc_);
    if (d_) cublasLtMatrixLayoutDestroy(d_);
  }
  // Y[M, N] = X[M, K] W[N, K]^T through the 8-bit "TN" GEMM (gemm8.h).
  Status init(const QuantLinearParams& p) {
    p_ = p;
    op = "QuantLinear";
    KILN_RETURN_IF_ERROR(gemm_.init(p.m, p.n, p.k, p.fp8));
    if (p.fp8 && (p.y_type == StorageType::kF16 || p.y_type == StorageType::kBF16)) {
      const cudaDataType_t y_t = p.y_type == StorageType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&fdesc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      const int32_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, scalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
      const int32_t a_mode = p.uniform_w_scale ? scalar : outer;
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode));
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &scalar, sizeof scalar));
      const cublasLtEpilogue_t ep = p.has_bias ? (p.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                               : (p.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
      if (p.has_bias) {
        KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &y_t, sizeof y_t));
      }
      KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_, y_t, p.n, p.m, p.n));
    }
    describe("");
    return Status::Ok();
  }
  size_t workspace() const override { return scratch() + cap_; }

  StatusOr<std::vector<TacticId>> candidates(ExecState& s) override {
    if (s.workspace_bytes < scratch_full())
      return unsupported("layer '" + name + "': needs " + std::to_string(scratch_full()) +
                         " bytes of workspace for the quantized input and the accumulator, the cap is " +
                         std::to_string(s.workspace_bytes));
    query_heuristics(s);
    std::vector<TacticId> c;
    for (size_t i = 0; i < fheur_.size(); ++i)
      c.push_back(make_tactic_id(TacticSource::kCublasLt, kFusedBase + static_cast<uint32_t>(i)));
    for (size_t i = 0; i < heur_.size(); ++i) c.push_back(make_tactic_id(TacticSource::kCublasLt, static_cast<uint32_t>(i)));
    c.push_back(make_tactic_id(TacticSource::kKiln, 0));
    return c;
  }
  Status select(TacticId id, ExecState& s) override {
    fused_ = false;
    if (tactic_id_source(id) == TacticSource::kCublasLt && tactic_id_variant(id) >= kFusedBase && fdesc_) {
      if (fheur_.empty() && heur_.empty()) query_heuristics(s);
      const uint32_t i = tactic_id_variant(id) - kFusedBase;
      if (i >= fheur_.size())
        return invalid_plan("layer '" + name + "': cuBLASLt fused FP8 heuristic #" + std::to_string(i) +
                            " does not exist here (" + std::to_string(fheur_.size()) + " listed)");
      algo_ = fheur_[i];
      use_lt_ = true;
      fused_ = true;
      cap_ = lt_cap_;
      fallback.clear();
      describe("cublaslt.matmul fused-scale heuristic#" + std::to_string(i));
    } else if (id == make_tactic_id(TacticSource::kKiln, 0)) {
      use_lt_ = false;
      cap_ = 0;
      fallback = "no 8-bit tensor-core GEMM selected: Kiln's reference GEMM";
      describe("kiln.gemm8_reference");
    } else if (tactic_id_source(id) == TacticSource::kCublasLt) {
      if (heur_.empty()) query_heuristics(s);
      const uint32_t i = tactic_id_variant(id);
      if (i >= heur_.size())
        return invalid_plan("layer '" + name + "': cuBLASLt heuristic #" + std::to_string(i) + " does not exist here (" +
                            std::to_string(heur_.size()) + " listed)");
      algo_ = heur_[i];
      use_lt_ = true;
      cap_ = lt_cap_;
      fallback.clear();
      describe("cublaslt.matmul heuristic#" + std::to_string(i));
    } else {
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not one of its tactics");
    }
    tactic_id = id;
    if (s.verify) return enqueue(s);
    return Status::Ok();
  }

  Status enqueue(ExecState& s) override {
    char* ws = static_cast<char*>(s.workspace);
    int8_t* qx = reinterpret_cast<int8_t*>(ws);
    // With the gate the product [M, N] after the quantized X, the accumulator after it.
    void* prod = ws + align256(static_cast<size_t>(p_.m * p_.k));
    void* acc = static_cast<char*>(prod) + gate_bytes();
    void* y = p_.gate ? prod : s.ptr(outs[0]);
    KILN_CUDA_CHECK(launch_quantize_8bit(p_.x_type, s.ptr(ins[0]), qx, p_.m * p_.k, p_.x_scale, p_.zero_point, p_.fp8,
                                         s.stream));
    const int8_t* w = static_cast<const int8_t*>(s.ptr(ins[1]));
    if (fused_) {  // scales, bias and ReLU in cuBLASLt's epilogue; Y written directly
      const void* a_scale = s.ptr(ins[2]);
      const void* b_scale = s.ptr(ins[5]);
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
      if (p_.has_bias) {
        const void* bias = s.ptr(ins[6]);
        KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fdesc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
      }
      const float fa = 1.f, fb = 0.f;
      KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, fdesc_, &fa, w, gemm_.a(), qx, gemm_.b(), &fb, y, d_, y, d_, &algo_,
                                       ws + scratch(), cap_, s.stream));
      if (p_.gate) KILN_CUDA_CHECK(launch_silu_gate(prod, s.ptr(outs[0]), p_.m, p_.n / 2, p_.y_type, s.stream));
      return Status::Ok();
    }
    if (use_lt_) {
      KILN_RETURN_IF_ERROR(gemm_.run(s.lt, w, qx, acc, algo_, ws + scratch(), cap_, s.stream));
    } else {
      KILN_CUDA_CHECK(launch_gemm_8bit_reference(qx, w, acc, p_.m, p_.n, p_.k, p_.fp8, s.stream));
    }
    const float* wsum = ins[3] >= 0 ? static_cast<const float*>(s.ptr(ins[3])) : nullptr;
    const float* bias = ins[4] >= 0 ? static_cast<const float*>(s.ptr(ins[4])) : nullptr;
    KILN_CUDA_CHECK(launch_dequant_epilogue(acc, !p_.fp8, y, p_.y_type, p_.m, p_.n, p_.x_scale,
                                            static_cast<const float*>(s.ptr(ins[2])), wsum, p_.zero_point, bias,
                                            p_.relu, s.stream));
    if (p_.gate) KILN_CUDA_CHECK(launch_silu_gate(prod, s.ptr(outs[0]), p_.m, p_.n / 2, p_.y_type, s.stream));
    return Status::Ok();
  }

  std::string signature() const override {
    return "quant_linear m=" + std::to_string(p_.m) + " n=" + std::to_string(p_.n) + " k=" + std::to_string(p_.k) +
           (p_.fp8 ? " fp8e4m3" : " int8") + " x=" + storage_name(p_.x_type) + " y=" + storage_name(p_.y_type) +
           (p_.zero_point ? " zp" : "") + (p_.has_bias ? " +bias" : "") + (p_.relu ? " +relu" : "") +
           (p_.uniform_w_scale ? " wscale=tensor" : "") + (p_.gate ? " +silu_gate" : "") + " ws<=" + std::to_string(lt_cap_);
  }

 private:
  static constexpr size_t kLtWorkspace = 32u << 20;
  static constexpr int kHeuristics = 8;
  static constexpr uint32_t kFusedBase = 64;  // cuBLASLt variants >= this: the fused FP8 form
  // Bytes before cuBLASLt's own workspace: the quantized X, then (unfused forms) the [M, N]
  // accumulator.
  size_t scratch_full() const {
    return align256(static_cast<size_t>(p_.m * p_.k)) + gate_bytes() + align256(static_cast<size_t>(p_.m * p_.n) * 4);
  }
  size_t scratch() const {
    return fused_ ? align256(static_cast<size_t>(p_.m * p_.k)) + gate_bytes() : scratch_full();
  }
  // The gate's [M, N] product in Y's storage (0 without a gate).
  size_t gate_bytes() const {
    return p_.gate ? align256(static_cast<size_t>(p_.m * p_.n) * storage_bytes(p_.y_type)) : 0;
  }
  // cuBLASLt's list for this problem within the cap left after the scratch; none (an empty
  // list, not an error) where it has no 8-bit kernel (shapes, GPU generation).
  void query_heuristics(ExecState& s) {
    lt_cap_ = std::min(s.workspace_bytes - scratch_full(), kLtWorkspace);
    heur_ = gemm_.algorithms(s.lt, lt_cap_, kHeuristics);
    fheur_.clear();
    if (fdesc_) fheur_ = lt_algorithms(s.lt, fdesc_, gemm_.a(), gemm_.b(), d_, lt_cap_, kHeuristics);
  }

  void describe(const std::string& gemm) {
    tactic = "quant_linear " + std::string(p_.fp8 ? "fp8e4m3" : "int8") + (gemm.empty() ? "" : " " + gemm) + " " +
             storage_name(p_.y_type) + (p_.has_bias ? " +bias" : "") + (p_.relu ? " +relu" : "") +
             (p_.gate ? " ->silu_gate" : "");
  }
  QuantLinearParams p_;
  Gemm8 gemm_;
  cublasLtMatmulAlgo_t algo_{};
  bool use_lt_ = false, fused_ = false;
  size_t cap_ = 0, lt_cap_ = 0;
  std::vector<cublasLtMatmulAlgo_t> heur_, fheur_;
  cublasLtMatmulDesc_t fdesc_ = nullptr;
  cublasLtMatrixLayout_t d_ = nullptr;
};

}  // namespace

Status lower_quant_linear(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const ir::Graph& g = ctx.graph();
  if (n.inputs.size() < 3) return invalid_argument(where + "QuantLinear needs X, W and w_scale");
  const auto& wc = g.value(n.inputs[1]).constant;
  const auto& sc = g.value(n.inputs[2]).constant;
  const bool has_bias = n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  const auto& bc = has_bias ? g.value(n.inputs[3]).constant : nullptr;
  if (!wc || wc->rank() != 2 || (wc->dtype() != DataType::kInt8 && wc->dtype() != DataType::kFloat8E4M3FN))
    return unsupported(where + "the weight must be a constant int8 / fp8e4m3fn [N, K]");
  const int64_t nn = wc->dim(0), k = wc->dim(1);
  if (!sc || sc->dtype() != DataType::kFloat32 || sc->numel() != nn)
    return unsupported(where + "w_scale must be a constant float32 [N]");
  if (has_bias && (!bc || bc->dtype() != DataType::kFloat32 || bc->numel() != nn))
    return unsupported(where + "the bias must be a constant float32 [N]");
  const Shape& xs = ctx.shape(n.inputs[0]);
  if (xs.empty() || xs.back() != k) return invalid_argument(where + "input " + shape_str(xs) + " does not end in K = " + std::to_string(k));
  QuantLinearParams p;
  p.n = nn;
  p.k = k;
  p.m = k > 0 ? shape_numel(xs) / k : 0;
  p.fp8 = wc->dtype() == DataType::kFloat8E4M3FN;
  p.x_scale = n.attr_float("x_scale", 0.f);
  p.zero_point = static_cast<int>(n.attr_int("x_zero_point", 0));
  p.has_bias = has_bias;
  const std::string act = n.attr_string("activation", "");
  if (!act.empty() && act != "Relu") return unsupported(where + "activation '" + act + "'");
  p.relu = act == "Relu";
  const std::string gate = n.attr_string("gate", "");
  if (!gate.empty()) {
    StatusOr<ir::PwProgram> prog = ir::parse_pw_program(gate);
    if (!prog.ok() || !ir::pw_is_silu_gate(*prog))
      return unsupported(where + "gate program '" + gate + "': the GPU computes silu(in0) * in1 only");
    if (p.relu || nn % 2 != 0) return unsupported(where + "a gate needs an even N and no activation");
    p.gate = true;
  }
  {
    const float* ws = sc->data<float>();
    p.uniform_w_scale = std::all_of(ws, ws + nn, [&](float v) { return v == ws[0]; });
  }
  if (!(p.x_scale > 0)) return invalid_argument(where + "x_scale must be > 0");
  KILN_ASSIGN_OR_RETURN(int xa, ctx.activation(n.inputs[0]));
  xa = ctx.as_layout(xa, false);
  p.x_type = ctx.value_type(xa);
  p.y_type = ctx.storage();
  KILN_ASSIGN_OR_RETURN(int wv, ctx.upload_raw(n.name + ":weight_q", wc->shape(), wc->raw(), wc->nbytes(), where + "weight",
                                                /*graph_constant=*/true));
  KILN_ASSIGN_OR_RETURN(int sv, ctx.upload_raw(n.name + ":weight_scale", {nn}, sc->raw(), sc->nbytes(), where + "w_scale",
                                                /*graph_constant=*/true));
  int sumv = -1, bv = -1;
  if (p.zero_point != 0 && !p.fp8) {
    // sum_k (q - zp) w = sum_k q w - zp * sum_k w: the row sums, exact in float (|sum| < 2^24 for K < 2^17).
    std::vector<float> sums(static_cast<size_t>(nn), 0.f);
    for (int64_t r = 0; r < nn; ++r)
      for (int64_t j = 0; j < k; ++j) sums[r] += wc->data<int8_t>()[r * k + j];
    KILN_ASSIGN_OR_RETURN(sumv, ctx.upload_raw(n.name + ":weight_sums", {nn}, sums.data(), sums.size() * 4, where + "weight sums"));
  }
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(bv, ctx.upload_raw(n.name + ":bias", {nn}, bc->raw(), bc->nbytes(), where + "bias"));
  }
  int xsv = -1, b16v = -1;
  if (p.fp8 && (p.y_type == StorageType::kF16 || p.y_type == StorageType::kBF16)) {
    KILN_ASSIGN_OR_RETURN(xsv, ctx.upload_raw(n.name + ":x_scale", {1}, &p.x_scale, 4, where + "x_scale"));
    if (has_bias) {  // the fused form's bias, in Y's storage (cuBLASLt's FP8 bias type)
      std::vector<uint16_t> b16(static_cast<size_t>(nn));
      for (int64_t i = 0; i < nn; ++i)
        b16[i] = p.y_type == StorageType::kF16 ? float_to_fp16(bc->data<float>()[i]) : float_to_bf16(bc->data<float>()[i]);
      KILN_ASSIGN_OR_RETURN(b16v, ctx.upload_raw(n.name + ":bias16", {nn}, b16.data(), b16.size() * 2, where + "bias"));
    }
  }
  auto layer = std::make_unique<QuantLinearLayer>();
  KILN_RETURN_IF_ERROR(layer->init(p));
  const int out = ctx.new_value(g.value(n.outputs[0]).name, ctx.shape(n.outputs[0]), ctx.storage(), false);
  ctx.add_layer(std::move(layer), n.name, {xa, wv, sv, sumv, bv, xsv, b16v}, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
