// The Attention layer's fused tactic (docs/decisions/0061): Kiln's FlashAttention-2 kernel
// (kernels_flash_attention.cu) on row-major Q [*, Hq, Sq, D], K / V [*, Hkv, Sk, D] — or, head_layout
// "bshd" (docs/decisions/0065), Q [*, Sq, Hq, D], K / V [*, Sk, Hkv, D] and O [*, Sq, Hq, D], read
// and written through the kernel's strides — and the optional mask (in the storage type, bool as 0/1), fp16 / bf16, D = Dv in {64, 128}, on sm_80 and
// newer. Two tactic ids, source kKiln — blocks of 64 or of 128 query rows (docs/decisions/0084) —;
// lower_attention offers them beside the cuBLASLt + softmax + cuBLASLt layer, and the builder's
// selector keeps whichever is fastest.
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gpu_transformer.h"
#include "backends/cuda/kernels_flash_attention.h"

namespace kiln::cuda {
namespace {

class FlashAttentionLayer : public Layer {
 public:
  FlashAttentionLayer(const AttentionPlan& plan, StorageType t) : plan_(plan), t_(t) {
    op = "Attention";
    const auto& sd = plan.softmax;
    tactic = std::string("kiln.flash_attention ") + storage_name(t) + " d" + std::to_string(plan.d) +
             (plan.group > 1 ? " gqa=" + std::to_string(plan.group) : "") + (sd.causal ? " causal" : "") +
             (sd.mask == AttentionMask::kAdditive ? " +mask" : sd.mask == AttentionMask::kKeep ? " +bool_mask" : "") +
             (plan.bshd ? " bshd" : "") + plan.row_stride_tag();
    base_tactic_ = tactic;
  }

  // Its ids (64-row blocks first, the untuned default), on GPUs of compute capability 8.0 or
  // newer (mma.sync bf16, ldmatrix, cp.async).
  StatusOr<std::vector<TacticId>> candidates(ExecState& s) override {
    KILN_RETURN_IF_ERROR(check_device());
    return std::vector<TacticId>{kFlashAttentionTactic, kFlashAttention128Tactic};
  }

  Status select(TacticId id, ExecState& s) override {
    if (id != kFlashAttentionTactic && id != kFlashAttention128Tactic)
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not one of its tactics");
    KILN_RETURN_IF_ERROR(check_device());
    block_rows_ = id == kFlashAttention128Tactic ? 128 : 64;
    tactic = base_tactic_ + (block_rows_ == 128 ? " q128" : "");
    tactic_id = id;
    for (size_t k = 0; k < ins.size() && k < 3; ++k)  // Q, K, V tiles move in 16-byte pieces
      if (reinterpret_cast<uintptr_t>(s.ptr(ins[k])) % 16 != 0)
        return unsupported("layer '" + name + "': input " + std::to_string(k) + " is not 16-byte aligned");
    if (reinterpret_cast<uintptr_t>(s.ptr(outs[0])) % 16 != 0)  // O rows leave in 16-byte pieces
      return unsupported("layer '" + name + "': the output is not 16-byte aligned");
    return Status::Ok();
  }

  Status enqueue(ExecState& s) override {
    FlashAttentionParams p;
    p.q = s.ptr(ins[0]);
    p.k = s.ptr(ins[1]);
    p.v = s.ptr(ins[2]);
    p.mask = ins.size() > 3 && ins[3] >= 0 ? s.ptr(ins[3]) : nullptr;
    p.o = s.ptr(outs[0]);
    p.batch = plan_.batch;
    p.hq = plan_.hq;
    p.hkv = plan_.hkv;
    p.sq = plan_.sq;
    p.sk = plan_.sk;
    p.head_dim = static_cast<int>(plan_.d);
    strides(p.q_stride, plan_.hq, plan_.sq, plan_.d, plan_.row(0, plan_.hq, plan_.d));
    strides(p.k_stride, plan_.hkv, plan_.sk, plan_.d, plan_.row(1, plan_.hkv, plan_.d));
    strides(p.v_stride, plan_.hkv, plan_.sk, plan_.dv, plan_.row(2, plan_.hkv, plan_.dv));
    strides(p.o_stride, plan_.hq, plan_.sq, plan_.dv, plan_.hq * plan_.dv);
    p.scale = plan_.scale;
    p.rows = plan_.softmax;
    p.block_rows = block_rows_;
    KILN_CUDA_CHECK(launch_flash_attention(p, t_, s.stream));
    return Status::Ok();
  }

  std::string signature() const override {
    const auto& sd = plan_.softmax;
    return "flash_attention b=" + std::to_string(plan_.batch) + " hq=" + std::to_string(plan_.hq) +
           " hkv=" + std::to_string(plan_.hkv) + " sq=" + std::to_string(plan_.sq) + " sk=" + std::to_string(plan_.sk) +
           " d=" + std::to_string(plan_.d) + " " + storage_name(t_) + (sd.causal ? " causal" : "") +
           (sd.mask == AttentionMask::kAdditive ? " mask" : sd.mask == AttentionMask::kKeep ? " bool_mask" : "") +
           (plan_.bshd ? " bshd" : "") + plan_.row_stride_tag();
  }

 protected:
  TacticId single_id() const override { return kFlashAttentionTactic; }

 private:
  // Element strides of batch, head, seq: row-major [batch, heads, seq, d], or [batch, seq, heads, d]
  // for a bshd plan with `row` elements from one token to the next (heads · d, or more for a view
  // into a packed QKV tensor; lower_attention checks it is a multiple of 8, as d is 64 or 128).
  void strides(int64_t (&st)[3], int64_t heads, int64_t seq, int64_t d, int64_t row) const {
    st[0] = plan_.bshd ? seq * row : heads * seq * d;
    st[1] = plan_.bshd ? d : seq * d;
    st[2] = plan_.bshd ? row : d;
  }

  Status check_device() const {
    int dev = 0, major = 0;
    KILN_CUDA_CHECK(cudaGetDevice(&dev));
    KILN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8)
      return unsupported("layer '" + name + "': the fused attention kernel needs compute capability 8.0 or newer, the GPU has " +
                         std::to_string(major) + ".x");
    return Status::Ok();
  }

  AttentionPlan plan_;
  StorageType t_;
  std::string base_tactic_;  // the tactic name without the block size
  int block_rows_ = 64;      // query rows per block of the selected id
};

}  // namespace

bool flash_attention_offered(const AttentionPlan& p, StorageType t) {
  return flash_attention_supported(t, p.d, p.dv, p.batch, p.hq, p.sq);
}

std::unique_ptr<Layer> make_flash_attention_layer(const AttentionPlan& p, StorageType t) {
  return std::make_unique<FlashAttentionLayer>(p, t);
}

}  // namespace kiln::cuda
