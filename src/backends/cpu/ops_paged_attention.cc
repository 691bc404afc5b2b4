// CPU reference kernel of PagedAttention (ops.def; docs/decisions/0059-llm-paged-step-graph.md):
// a decoder layer's attention for a step of packed tokens over a paged KV cache the caller owns
// in host memory. Every index is checked before the first write, so a bad step writes nothing
// and fails with the node's name. Scores, softmax and the weighted sum are computed in double
// from the pool's stored values (so a token attends to its own key as stored in cache_dtype). An
// FP8 E4M3FN pool stores E4M3(x / k_scale) and E4M3(x / v_scale) (round to nearest even,
// saturating at +-448: the ONNX QuantizeLinear rule) and reads back code * scale. With inv_freq
// (input 7), Q and K are rotated first exactly as the Rope kernel rotates them (rope_math.h).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/ops_nn_common.h"
#include "backends/cpu/rope_math.h"
#include "core/numerics.h"

namespace kiln::cpu {

namespace {

enum class CacheType : uint8_t { kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN };

bool parse_cache_dtype(const std::string& s, CacheType* t) {
  if (s == "float32") *t = CacheType::kFloat32;
  else if (s == "float16") *t = CacheType::kFloat16;
  else if (s == "bfloat16") *t = CacheType::kBFloat16;
  else if (s == "fp8e4m3fn") *t = CacheType::kFloat8E4M3FN;
  else return false;
  return true;
}

size_t element_bytes(CacheType t) {
  return t == CacheType::kFloat32 ? 4 : t == CacheType::kFloat8E4M3FN ? 1 : 2;
}

// One element of the pool, as stored, read as a float / written rounding to nearest even. `scale`
// is the FP8 pool's dequantization scale (the stored code is x / scale); 16/32-bit pools ignore it.
float load(const void* base, int64_t i, CacheType t, float scale) {
  switch (t) {
    case CacheType::kFloat32: return static_cast<const float*>(base)[i];
    case CacheType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(base)[i]);
    case CacheType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case CacheType::kFloat8E4M3FN: return fp8e4m3fn_to_float(static_cast<const uint8_t*>(base)[i]) * scale;
  }
  return 0.f;
}

void store(void* base, int64_t i, CacheType t, float v, float scale) {
  switch (t) {
    case CacheType::kFloat32: static_cast<float*>(base)[i] = v; return;
    case CacheType::kFloat16: static_cast<uint16_t*>(base)[i] = float_to_fp16(v); return;
    case CacheType::kBFloat16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); return;
    case CacheType::kFloat8E4M3FN:
      static_cast<uint8_t*>(base)[i] = double_to_fp8e4m3fn(static_cast<double>(v / scale), /*saturate=*/true);
      return;
  }
}

struct Dims {
  int64_t t, hq, hkv, d, rows, max_blocks, block_size, num_blocks;
  // Element offset of pool[block][kv][head][slot][0]: [num_blocks, 2, Hkv, block_size, D].
  int64_t at(int64_t block, int kv, int64_t head, int64_t slot) const {
    return (((block * 2 + kv) * hkv + head) * block_size + slot) * d;
  }
};

template <typename F>
void run(const F* q, const F* k, const F* v, F* o, const int64_t* pos, const int32_t* seq, const int32_t* table,
         void* pool, CacheType ct, const Dims& n, double scale, float k_scale, float v_scale) {
  // 1. append the step's keys and values.
  for (int64_t t = 0; t < n.t; ++t) {
    if (seq[t] < 0) continue;
    const int64_t p = pos[t], block = table[seq[t] * n.max_blocks + p / n.block_size], slot = p % n.block_size;
    for (int64_t h = 0; h < n.hkv; ++h)
      for (int64_t i = 0; i < n.d; ++i) {
        store(pool, n.at(block, 0, h, slot) + i, ct, static_cast<float>(k[(t * n.hkv + h) * n.d + i]), k_scale);
        store(pool, n.at(block, 1, h, slot) + i, ct, static_cast<float>(v[(t * n.hkv + h) * n.d + i]), v_scale);
      }
  }
  // 2. attend over positions 0..p of the token's sequence, read back from the pool.
  const int64_t group = n.hq / n.hkv;
  std::vector<double> s, acc(static_cast<size_t>(n.d));
  for (int64_t t = 0; t < n.t; ++t) {
    if (seq[t] < 0) continue;  // padding: O[t] stays 0
    const int64_t p = pos[t];
    const int32_t* row = table + seq[t] * n.max_blocks;
    s.assign(static_cast<size_t>(p + 1), 0.0);
    for (int64_t h = 0; h < n.hq; ++h) {
      const int64_t kvh = h / group;
      const F* qh = q + (t * n.hq + h) * n.d;
      double mx = -INFINITY;
      for (int64_t j = 0; j <= p; ++j) {
        const int64_t base = n.at(row[j / n.block_size], 0, kvh, j % n.block_size);
        double dot = 0;
        for (int64_t i = 0; i < n.d; ++i) dot += static_cast<double>(qh[i]) * load(pool, base + i, ct, k_scale);
        s[j] = scale * dot;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j <= p; ++j) sum += (s[j] = std::exp(s[j] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= p; ++j) {
        const int64_t base = n.at(row[j / n.block_size], 1, kvh, j % n.block_size);
        const double w = s[j] / sum;
        for (int64_t i = 0; i < n.d; ++i) acc[i] += w * load(pool, base + i, ct, v_scale);
      }
      F* oh = o + (t * n.hq + h) * n.d;
      for (int64_t i = 0; i < n.d; ++i) oh[i] = static_cast<F>(acc[i]);
    }
  }
}

// The fused RoPE (input 7, inv_freq [D / 2]): every row of x [T, H, D] rotated in place by its
// token's position as the Rope kernel computes it.
template <typename F>
void rotate_rows(Tensor& x, const int64_t* pos, const float* inv_freq) {
  const int64_t t = x.dim(0), h = x.dim(1), d = x.dim(2), half = d / 2;
  std::vector<F> cs(static_cast<size_t>(2 * half));
  F* p = x.data<F>();
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t k = 0; k < half; ++k) {
      float c, s;
      rope_cos_sin(pos[i], inv_freq[k], &c, &s);
      cs[static_cast<size_t>(k)] = static_cast<F>(c);
      cs[static_cast<size_t>(half + k)] = static_cast<F>(s);
    }
    for (int64_t j = 0; j < h; ++j) rope_rotate_row<F>(p + (i * h + j) * d, half, false, cs.data(), cs.data() + half);
  }
}

Status paged_attention(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(7));
  const Tensor &q0 = ctx.in(0), &k0 = ctx.in(1), &v0 = ctx.in(2);
  const Tensor &pos = ctx.in(3), &seq = ctx.in(4), &table = ctx.in(5), &pools = ctx.in(6);
  if (q0.rank() != 3 || k0.rank() != 3 || v0.rank() != 3)
    return ctx.fail("Q, K, V must be [T, H, D], got " + shape_str(q0.shape()) + ", " + shape_str(k0.shape()) + ", " +
                    shape_str(v0.shape()));
  if (k0.dtype() != q0.dtype() || v0.dtype() != q0.dtype())
    return ctx.fail(std::string("Q, K, V dtypes differ: ") + dtype_name(q0.dtype()) + ", " + dtype_name(k0.dtype()) +
                    ", " + dtype_name(v0.dtype()));
  Dims n{};
  n.t = q0.dim(0);
  n.hq = q0.dim(1);
  n.d = q0.dim(2);
  n.hkv = k0.dim(1);
  if (k0.dim(0) != n.t || v0.shape() != k0.shape() || k0.dim(2) != n.d)
    return ctx.fail("K " + shape_str(k0.shape()) + " / V " + shape_str(v0.shape()) + " do not fit Q " +
                    shape_str(q0.shape()) + " (expected [T, Hkv, D])");
  if (n.hkv == 0 || n.hq % n.hkv != 0)
    return ctx.fail("query heads " + std::to_string(n.hq) + " are not a multiple of kv heads " + std::to_string(n.hkv));
  if (pos.dtype() != DataType::kInt64 || pos.shape() != Shape{n.t})
    return ctx.fail("positions must be int64 [T = " + std::to_string(n.t) + "], got " + dtype_name(pos.dtype()) + " " +
                    shape_str(pos.shape()));
  if (seq.dtype() != DataType::kInt32 || seq.shape() != Shape{n.t})
    return ctx.fail("token_seq must be int32 [T = " + std::to_string(n.t) + "], got " + dtype_name(seq.dtype()) + " " +
                    shape_str(seq.shape()));
  if (table.dtype() != DataType::kInt32 || table.rank() != 2)
    return ctx.fail("block_table must be int32 [R, MB], got " + std::string(dtype_name(table.dtype())) + " " +
                    shape_str(table.shape()));
  if (pools.dtype() != DataType::kInt64 || pools.rank() != 2 || pools.dim(1) != 2)
    return ctx.fail("kv_pools must be int64 [L, 2], got " + std::string(dtype_name(pools.dtype())) + " " +
                    shape_str(pools.shape()));
  n.rows = table.dim(0);
  n.max_blocks = table.dim(1);
  const int64_t layer = ctx.attr_int("layer", -1);
  n.block_size = ctx.attr_int("block_size", 0);
  const std::string cache_dtype = ctx.attr_string("cache_dtype", "");
  CacheType ct;
  if (!parse_cache_dtype(cache_dtype, &ct))
    return ctx.fail("cache_dtype '" + cache_dtype + "' is not float32, float16, bfloat16 or fp8e4m3fn");
  const float k_scale = ctx.attr_float("k_scale", 1.f), v_scale = ctx.attr_float("v_scale", 1.f);
  if (!(k_scale > 0) || !(v_scale > 0) || !std::isfinite(k_scale) || !std::isfinite(v_scale))
    return ctx.fail("k_scale " + std::to_string(k_scale) + " and v_scale " + std::to_string(v_scale) +
                    " must be finite and > 0");
  if (n.block_size <= 0) return ctx.fail("block_size " + std::to_string(n.block_size) + " must be > 0");
  if (ctx.attr_int("sliding_window", 0) != 0)
    return ctx.unsupported_here("sliding_window " + std::to_string(ctx.attr_int("sliding_window", 0)) +
                                " is not supported (only 0)");
  if (layer < 0 || layer >= pools.dim(0))
    return ctx.fail("layer " + std::to_string(layer) + " is not a row of kv_pools " + shape_str(pools.shape()));
  const int64_t address = pools.data<int64_t>()[layer * 2];
  n.num_blocks = pools.data<int64_t>()[layer * 2 + 1];
  if (address == 0) return ctx.fail("kv_pools[" + std::to_string(layer) + "] has a null pool address");
  if (n.num_blocks <= 0)
    return ctx.fail("kv_pools[" + std::to_string(layer) + "] has " + std::to_string(n.num_blocks) + " blocks");
  if (address % static_cast<int64_t>(element_bytes(ct)) != 0)
    return ctx.fail("kv_pools[" + std::to_string(layer) + "] pool address is not aligned to " + cache_dtype);

  // Every index the two phases use, checked before anything is written.
  const int64_t* pp = pos.data<int64_t>();
  const int32_t* sp = seq.data<int32_t>();
  const int32_t* tp = table.data<int32_t>();
  for (int64_t t = 0; t < n.t; ++t) {
    const std::string tok = "token " + std::to_string(t);
    if (sp[t] < -1 || sp[t] >= n.rows)
      return ctx.fail(tok + ": token_seq " + std::to_string(sp[t]) + " is not -1 (padding) or a block_table row < " +
                      std::to_string(n.rows));
    if (sp[t] < 0) continue;
    if (pp[t] < 0) return ctx.fail(tok + ": position " + std::to_string(pp[t]) + " is negative");
    if (pp[t] / n.block_size >= n.max_blocks)
      return ctx.fail(tok + ": position " + std::to_string(pp[t]) + " needs block " +
                      std::to_string(pp[t] / n.block_size) + " of its sequence, block_table has " +
                      std::to_string(n.max_blocks) + " per row (block_size " + std::to_string(n.block_size) + ")");
    for (int64_t b = 0; b <= pp[t] / n.block_size; ++b) {
      const int32_t id = tp[sp[t] * n.max_blocks + b];
      if (id < 0 || id >= n.num_blocks)
        return ctx.fail(tok + ": block_table[" + std::to_string(sp[t]) + "][" + std::to_string(b) + "] = " +
                        std::to_string(id) + " is outside the pool's " + std::to_string(n.num_blocks) + " blocks");
    }
  }

  const bool rope = ctx.num_inputs() > 7 && ctx.has_input(7);
  if (rope) {
    const Tensor& f = ctx.in(7);
    if (f.dtype() != DataType::kFloat32 || n.d % 2 != 0 || f.shape() != Shape{n.d / 2})
      return ctx.fail("inv_freq " + shape_str(f.shape()) + " " + dtype_name(f.dtype()) + " is not float32 [D / 2 = " +
                      std::to_string(n.d / 2) + "]");
  }

  KILN_ASSIGN_OR_RETURN(Tensor q, nn::to_compute(ctx, q0));
  KILN_ASSIGN_OR_RETURN(Tensor k, nn::to_compute(ctx, k0));
  KILN_ASSIGN_OR_RETURN(Tensor v, nn::to_compute(ctx, v0));
  if (rope) {
    // to_compute may return the input itself: rotate copies.
    q = q.clone();
    k = k.clone();
    const float* f = ctx.in(7).data<float>();
    for (Tensor* x : {&q, &k}) {
      if (x->dtype() == DataType::kFloat64) rotate_rows<double>(*x, pp, f);
      else rotate_rows<float>(*x, pp, f);
      // Rounded to Q's dtype as the Rope layer's output was (a no-op for float32 / float64).
      KILN_ASSIGN_OR_RETURN(Tensor stored, nn::from_compute(*x, q0.dtype()));
      KILN_ASSIGN_OR_RETURN(*x, nn::to_compute(ctx, stored));
    }
  }
  Tensor o(q.dtype(), q.shape());  // zero-filled: padding tokens keep 0
  const double scale = ctx.attr_float("scale", static_cast<float>(1.0 / std::sqrt(static_cast<double>(n.d))));
  void* pool = reinterpret_cast<void*>(static_cast<intptr_t>(address));
  if (q.dtype() == DataType::kFloat64)
    run<double>(q.data<double>(), k.data<double>(), v.data<double>(), o.data<double>(), pp, sp, tp, pool, ct, n, scale,
                k_scale, v_scale);
  else
    run<float>(q.data<float>(), k.data<float>(), v.data<float>(), o.data<float>(), pp, sp, tp, pool, ct, n, scale,
               k_scale, v_scale);
  KILN_ASSIGN_OR_RETURN(Tensor out, nn::from_compute(o, q0.dtype()));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

void register_paged_attention_kernel(KernelRegistry& r) { r.add(ir::OpKind::kPagedAttention, paged_attention); }

}  // namespace kiln::cpu
