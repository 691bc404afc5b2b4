// PagedAttention (ops.def; issue 13, docs/decisions/0063): one layer running Kiln's two kernels of
// kernels_llm.h on the layer's stream — the append of the step's K/V into the caller's paged pool,
// then the streaming-softmax attention over the pool (split over key partitions, flash-decoding,
// when a step has too few (token, kv head) pairs to fill the GPU). Q, K, V and O are in the layer's
// float storage; positions, token_seq, block_table and kv_pools are read as stored (int64 / int32
// graph inputs staged in device memory by the engine). The pool address is read on the device from
// kv_pools, so a captured CUDA graph stays valid while only input contents change.
#include <cmath>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels_llm.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

// ins: Q, K, V, positions, token_seq, block_table, kv_pools (, inv_freq: the fused RoPE,
// docs/decisions/0090); out: O.
class PagedAttentionLayer : public Layer {
 public:
  explicit PagedAttentionLayer(const PagedAttentionDesc& d) : d_(d) {
    op = "PagedAttention";
    tactic = std::string("kiln.paged_attention ") + storage_name(d.io) + " cache=" + storage_name(d.cache) +
             (d.splits > 1 ? " splits=" + std::to_string(d.splits) + "x" + std::to_string(d.partition) : "") +
             (d.rope ? " +rope" : "");
  }
  std::string signature() const override {
    return op + " T=" + std::to_string(d_.tokens) + " hq=" + std::to_string(d_.hq) + " hkv=" + std::to_string(d_.hkv) +
           " d=" + std::to_string(d_.d) + " bs=" + std::to_string(d_.block_size) + " mb=" + std::to_string(d_.max_blocks) +
           " " + tactic;
  }
  // With the fused RoPE, the rotated Q [T, Hq, D] first (256-byte aligned), then the attention's.
  size_t q_bytes() const {
    if (!d_.rope) return 0;
    return (static_cast<size_t>(d_.tokens * d_.hq * d_.d) * storage_bytes(d_.io) + 255) / 256 * 256;
  }
  size_t workspace() const override { return q_bytes() + paged_attention_workspace(d_); }
  Status select(TacticId id, ExecState& s) override {
    KILN_RETURN_IF_ERROR(Layer::select(id, s));
    if (s.workspace_bytes < workspace())
      return internal_error("layer '" + name + "': needs " + std::to_string(workspace()) + " bytes of workspace, " +
                                std::to_string(s.workspace_bytes) + " available");
    return Status::Ok();
  }
  Status enqueue(ExecState& s) override {
    const auto* positions = static_cast<const int64_t*>(s.ptr(ins[3]));
    const auto* token_seq = static_cast<const int32_t*>(s.ptr(ins[4]));
    const auto* block_table = static_cast<const int32_t*>(s.ptr(ins[5]));
    const auto* kv_pools = static_cast<const int64_t*>(s.ptr(ins[6]));
    const void* q = s.ptr(ins[0]);
    char* ws = static_cast<char*>(s.workspace);
    if (d_.rope) {  // Q and K rotated in the append; the attention reads the rotated Q
      KILN_CUDA_CHECK(launch_paged_rope_append(q, s.ptr(ins[1]), s.ptr(ins[2]), static_cast<const float*>(s.ptr(ins[7])),
                                               positions, token_seq, block_table, kv_pools, ws, d_, s.stream));
      q = ws;
      ws += q_bytes();
    } else {
      KILN_CUDA_CHECK(launch_paged_kv_append(s.ptr(ins[1]), s.ptr(ins[2]), positions, token_seq, block_table, kv_pools,
                                             d_, s.stream));
    }
    KILN_CUDA_CHECK(launch_paged_attention(q, positions, token_seq, block_table, kv_pools, s.ptr(outs[0]),
                                           paged_attention_workspace(d_) > 0 ? ws : nullptr, d_, s.stream));
    return Status::Ok();
  }

 private:
  PagedAttentionDesc d_;
};

}  // namespace

Status lower_paged_attention(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() != 7 && n.inputs.size() != 8)
    return invalid_argument(where + "expects 7 inputs (Q, K, V, positions, token_seq, block_table, kv_pools) or 8 (+ inv_freq), has " +
                            std::to_string(n.inputs.size()));
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (n.inputs[k] == ir::kNoValue) return invalid_argument(where + "input " + std::to_string(k) + " is missing");
  const Shape &q = ctx.shape(n.inputs[0]), &k = ctx.shape(n.inputs[1]), &v = ctx.shape(n.inputs[2]);
  const Shape &pos = ctx.shape(n.inputs[3]), &seq = ctx.shape(n.inputs[4]), &table = ctx.shape(n.inputs[5]),
              &pools = ctx.shape(n.inputs[6]);
  if (q.size() != 3 || k != v || k.size() != 3 || k[0] != q[0] || k[2] != q[2])
    return invalid_argument(where + "Q " + shape_str(q) + ", K " + shape_str(k) + ", V " + shape_str(v) +
                            " are not [T, Hq, D], [T, Hkv, D], [T, Hkv, D]");
  const int64_t T = q[0];
  if (pos != Shape{T} || seq != Shape{T} || table.size() != 2 || pools.size() != 2 || pools[1] != 2)
    return invalid_argument(where + "positions " + shape_str(pos) + ", token_seq " + shape_str(seq) + ", block_table " +
                            shape_str(table) + ", kv_pools " + shape_str(pools) + " are not [T], [T], [R, MB], [L, 2]");
  const DataType want[4] = {DataType::kInt64, DataType::kInt32, DataType::kInt32, DataType::kInt64};
  for (int i = 0; i < 4; ++i)
    if (ctx.dtype(n.inputs[3 + i]) != want[i])
      return invalid_argument(where + "input " + std::to_string(3 + i) + " has dtype " +
                              dtype_name(ctx.dtype(n.inputs[3 + i])) + ", expected " + dtype_name(want[i]));
  PagedAttentionDesc d;
  d.tokens = T;
  d.hq = q[1];
  d.hkv = k[1];
  d.d = q[2];
  d.rows = table[0];
  d.max_blocks = table[1];
  d.block_size = n.attr_int("block_size", 0);
  d.layer = n.attr_int("layer", 0);
  d.io = ctx.storage();
  if (d.hkv <= 0 || d.hq % d.hkv != 0)
    return invalid_argument(where + std::to_string(d.hq) + " query heads are not a multiple of " + std::to_string(d.hkv) +
                            " kv heads");
  if (d.block_size <= 0) return invalid_argument(where + "block_size " + std::to_string(d.block_size) + " is not > 0");
  if (d.layer < 0 || d.layer >= pools[0])
    return invalid_argument(where + "layer " + std::to_string(d.layer) + " is not a row of kv_pools " + shape_str(pools));
  const std::string cache_dtype = n.attr_string("cache_dtype", "float32");
  if (cache_dtype == "float32") d.cache = StorageType::kF32;
  else if (cache_dtype == "float16") d.cache = StorageType::kF16;
  else if (cache_dtype == "bfloat16") d.cache = StorageType::kBF16;
  else if (cache_dtype == "fp8e4m3fn") d.cache = StorageType::kF8E4M3;
  else return invalid_argument(where + "cache_dtype '" + cache_dtype + "' is not float32, float16, bfloat16 or fp8e4m3fn");
  // FP8 pools: the stored code is x / scale (ops.def); 16/32-bit pools ignore the scales.
  d.k_scale = n.attr_float("k_scale", 1.f);
  d.v_scale = n.attr_float("v_scale", 1.f);
  if (!(d.k_scale > 0) || !(d.v_scale > 0) || !std::isfinite(d.k_scale) || !std::isfinite(d.v_scale))
    return invalid_argument(where + "k_scale " + std::to_string(d.k_scale) + " / v_scale " + std::to_string(d.v_scale) +
                            " must be finite and > 0");
  if (n.attr_int("sliding_window", 0) != 0)
    return unsupported(where + "sliding_window " + std::to_string(n.attr_int("sliding_window", 0)) +
                       " (only 0, no window, is implemented)");
  if (d.d > 256 || (d.d % 8 != 0 && d.d > 64))
    return unsupported(where + "head dim " + std::to_string(d.d) +
                       ": the CUDA kernel takes multiples of 8 up to 256 (16-byte row accesses) and any up to 64");
  if (!storage_is_float(d.io)) return unsupported(where + "output storage " + storage_name(d.io));
  d.scale = n.attr_float("scale", 1.f / std::sqrt(static_cast<float>(d.d)));
  d.rope = n.inputs.size() == 8;
  if (d.rope) {  // passes::fuse_rope_attention's inv_freq: float32 [D / 2]
    const Shape& f = ctx.shape(n.inputs[7]);
    if (d.d % 2 != 0 || f != Shape{d.d / 2} || ctx.dtype(n.inputs[7]) != DataType::kFloat32)
      return invalid_argument(where + "inv_freq " + shape_str(f) + " " + dtype_name(ctx.dtype(n.inputs[7])) +
                              " is not float32 [D / 2] of head dim " + std::to_string(d.d));
  }
  plan_paged_attention_splits(&d, ctx.options().workspace_limit / 2);

  std::vector<int> ins;
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.row_major_operand(n.inputs[i]));
    ins.push_back(a);
  }
  const StorageType int_types[4] = {StorageType::kI64, StorageType::kI32, StorageType::kI32, StorageType::kI64};
  for (int i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(n.inputs[3 + i], int_types[i]));
    ins.push_back(a);
  }
  if (d.rope) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(n.inputs[7], StorageType::kF32));
    ins.push_back(a);
  }
  ctx.add_layer(std::make_unique<PagedAttentionLayer>(d), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
