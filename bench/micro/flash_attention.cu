// Microbenchmark and check of Kiln's fused attention kernel (src/backends/cuda/kernels_flash_attention.cu,
// docs/decisions/0061, 0084) at the transformer shapes that matter: ViT-B/16 (S 197, no mask; and with the
// all-zero additive [B, 1, S, S] mask today's plans pass it), BERT-base (S 128, key-padding mask [B, 1, 1, S]),
// GPT-2 (S 128, causal), each 12 heads x D 64, FP16, batch 32 and 1, Q / K / V read from one packed QKV
// tensor [B, S, 3 * 768] as the models' plans do (head_layout bshd, row stride 2304), O [B, S, 768]. Then
// correctness-only cases for the other paths: bf16, D 128, GQA 32:8 causal Sq < Sk, a decode step
// (Sq 1, Sk 1000), a bool mask with an empty row, causal Sq > Sk.
//   nvcc -O2 -std=c++17 -arch=sm_90 -Isrc -Iinclude bench/micro/flash_attention.cu \
//     src/backends/cuda/kernels_flash_attention.cu -o /tmp/flash_bench && /tmp/flash_bench
// Each case is checked against a plain float32 attention computed on the GPU (one thread per query row,
// written from the definition: softmax(scale q.k + mask) v with the exclusions of docs/decisions/0006);
// max |kernel - reference| is printed and the exit status is 1 when it exceeds 2e-2 anywhere. Timing: CUDA
// events around 10 back-to-back launches, median of 30 such (after 5 warm-ups), us per launch; inputs stay
// in L2 where they fit, as in a plan's layer-by-layer run. tflops counts 4 * D FLOPs per visible (query, key)
// pair (causal: about half the square). Every block_rows variant the kernel has is timed in the same run.
// argv[1] (optional) labels the lines' "kernel" field: build this file against another version of the
// kernel source (e.g. `git show main:src/backends/cuda/kernels_flash_attention.cu > /tmp/fa_old.cu`) and
// pass "old" to time that one beside this one.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/kernels_flash_attention.h"
#include "micro_timing.cuh"


using kiln::cuda::AttentionMask;
using kiln::cuda::FlashAttentionParams;
using kiln::cuda::StorageType;

namespace {

enum class MaskKind { kNone, kZeroSquare, kKeyPadding, kBoolSquare };

struct Case {
  std::string name;
  int64_t batch, hq, hkv, sq, sk;
  int d;
  bool causal;
  MaskKind mask;
  bool bf16;
  bool timed;
};

template <typename T>
__device__ float to_f(T x);
template <>
__device__ float to_f(__half x) {
  return __half2float(x);
}
template <>
__device__ float to_f(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

// Reference: O[b, i, h, :] for every (b, h, i) from the packed tensors, in float32. The mask is
// [B, 1, mrows, Sk] (mrows = Sq or 1) in the storage type: additive, or 0/1 keep when keep_mask.
template <typename T>
__global__ void reference_attention(const T* q, const T* k, const T* v, const T* mask, float* out, int64_t batch,
                                    int64_t hq, int64_t hkv, int64_t sq, int64_t sk, int d, int64_t q_row,
                                    int64_t kv_row, bool causal, bool keep_mask, int64_t mrows, float scale) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= batch * hq * sq) return;
  const int64_t i = idx % sq, h = (idx / sq) % hq, b = idx / (sq * hq);
  const int64_t hk = h / (hq / hkv);
  const T* qi = q + (b * sq + i) * q_row + h * d;
  auto visible = [&](int64_t j, float* add) {
    *add = 0.f;
    if (causal && j > i + sk - sq) return false;
    if (mask) {
      const float mv = to_f(mask[(b * mrows + (mrows == 1 ? 0 : i)) * sk + j]);
      if (keep_mask) return mv != 0.f;
      *add = mv;
    }
    return true;
  };
  float mx = -INFINITY;
  for (int64_t j = 0; j < sk; ++j) {
    float add;
    if (!visible(j, &add)) continue;
    const T* kj = k + (b * sk + j) * kv_row + hk * d;
    float s = 0.f;
    for (int e = 0; e < d; ++e) s += to_f(qi[e]) * to_f(kj[e]);
    mx = fmaxf(mx, s * scale + add);
  }
  float acc[128];
  for (int e = 0; e < d; ++e) acc[e] = 0.f;
  float sum = 0.f;
  if (mx != -INFINITY) {
    for (int64_t j = 0; j < sk; ++j) {
      float add;
      if (!visible(j, &add)) continue;
      const T* kj = k + (b * sk + j) * kv_row + hk * d;
      const T* vj = v + (b * sk + j) * kv_row + hk * d;
      float s = 0.f;
      for (int e = 0; e < d; ++e) s += to_f(qi[e]) * to_f(kj[e]);
      const float p = expf(s * scale + add - mx);
      sum += p;
      for (int e = 0; e < d; ++e) acc[e] += p * to_f(vj[e]);
    }
  }
  float* oi = out + (b * sq + i) * hq * d + h * d;
  for (int e = 0; e < d; ++e) oi[e] = sum > 0.f ? acc[e] / sum : 0.f;  // no visible key: zeros
}

template <typename T>
__global__ void max_abs_diff(const T* o, const float* ref, int64_t n, float* result) {
  float m = 0.f;
  for (int64_t x = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float dlt = fabsf(to_f(o[x]) - ref[x]);
    m = fmaxf(m, dlt != dlt ? INFINITY : dlt);  // NaN counts as infinitely wrong
  }
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<int*>(result), __float_as_int(m));  // m >= 0
}


uint16_t to_storage(float x, bool bf16) {
  if (bf16) {
    const __nv_bfloat16 h = __float2bfloat16(x);
    return *reinterpret_cast<const uint16_t*>(&h);
  }
  const __half h = __float2half(x);
  return *reinterpret_cast<const uint16_t*>(&h);
}

// Runs one case; returns false when the check fails.
template <typename T>
bool run_case(const Case& c, const char* label, cudaStream_t stream) {
  const int64_t kv_heads_width = c.hkv * c.d, q_width = c.hq * c.d;
  // Packed rows: [Q heads | K heads | V heads] per token when Sq == Sk (the models' QKV GEMM output);
  // separate Q and KV buffers otherwise (one packed [K | V] row per key).
  const bool packed = c.sq == c.sk;
  const int64_t q_row = packed ? q_width + 2 * kv_heads_width : q_width;
  const int64_t kv_row = packed ? q_row : 2 * kv_heads_width;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&](size_t n) {
    std::vector<uint16_t> h(n);
    for (auto& x : h) x = to_storage(u(rng), c.bf16);
    return h;
  };
  std::vector<uint16_t> hq_data = fill(static_cast<size_t>(c.batch * c.sq * q_row));
  std::vector<uint16_t> hkv_data = packed ? std::vector<uint16_t>() : fill(static_cast<size_t>(c.batch * c.sk * kv_row));
  int64_t mrows = 0;
  std::vector<uint16_t> hmask;
  if (c.mask != MaskKind::kNone) {
    mrows = c.mask == MaskKind::kKeyPadding ? 1 : c.sq;
    hmask.assign(static_cast<size_t>(c.batch * mrows * c.sk), to_storage(c.mask == MaskKind::kBoolSquare ? 1.f : 0.f, c.bf16));
    for (int64_t b = 0; b < c.batch; ++b) {
      if (c.mask == MaskKind::kKeyPadding) {  // sequence b keeps its first sk - 13 b % 50 keys
        for (int64_t j = c.sk - (13 * b) % 50; j < c.sk; ++j) hmask[b * c.sk + j] = to_storage(-1e4f, c.bf16);
      } else if (c.mask == MaskKind::kBoolSquare) {  // a checkerboard-ish keep pattern, row 1 all excluded
        for (int64_t i = 0; i < c.sq; ++i)
          for (int64_t j = 0; j < c.sk; ++j)
            if (i == 1 || (i * 7 + j * 3 + b) % 5 == 0) hmask[(b * c.sq + i) * c.sk + j] = to_storage(0.f, c.bf16);
      }
    }
  }
  T *dq = nullptr, *dkv = nullptr, *dmask = nullptr, *dout = nullptr;
  float *dref = nullptr, *derr = nullptr;
  const int64_t out_n = c.batch * c.sq * q_width;
  CK(cudaMalloc(&dq, hq_data.size() * 2));
  CK(cudaMemcpy(dq, hq_data.data(), hq_data.size() * 2, cudaMemcpyHostToDevice));
  if (!packed) {
    CK(cudaMalloc(&dkv, hkv_data.size() * 2));
    CK(cudaMemcpy(dkv, hkv_data.data(), hkv_data.size() * 2, cudaMemcpyHostToDevice));
  }
  if (!hmask.empty()) {
    CK(cudaMalloc(&dmask, hmask.size() * 2));
    CK(cudaMemcpy(dmask, hmask.data(), hmask.size() * 2, cudaMemcpyHostToDevice));
  }
  CK(cudaMalloc(&dout, out_n * 2));
  CK(cudaMalloc(&dref, out_n * 4));
  CK(cudaMalloc(&derr, 4));
  const T* kbase = packed ? dq + q_width : dkv;
  const T* vbase = packed ? dq + q_width + kv_heads_width : dkv + kv_heads_width;
  const float scale = 1.f / std::sqrt(static_cast<float>(c.d));

  FlashAttentionParams p;
  p.q = dq;
  p.k = kbase;
  p.v = vbase;
  p.o = dout;
  p.mask = dmask;
  p.batch = c.batch;
  p.hq = c.hq;
  p.hkv = c.hkv;
  p.sq = c.sq;
  p.sk = c.sk;
  p.head_dim = c.d;
  const int64_t qs[3] = {c.sq * q_row, c.d, q_row}, ks[3] = {c.sk * kv_row, c.d, kv_row}, os[3] = {c.sq * q_width, c.d, q_width};
  for (int x = 0; x < 3; ++x) p.q_stride[x] = qs[x], p.k_stride[x] = p.v_stride[x] = ks[x], p.o_stride[x] = os[x];
  p.scale = scale;
  p.rows.sq = c.sq;
  p.rows.sk = c.sk;
  p.rows.causal = c.causal;
  p.rows.mask = c.mask == MaskKind::kNone ? AttentionMask::kNone
                : c.mask == MaskKind::kBoolSquare ? AttentionMask::kKeep
                                                  : AttentionMask::kAdditive;
  p.rows.rank = 3;  // rows [B, Hq, Sq]; the mask [B, 1, mrows, Sk]
  p.rows.row_dims[0] = c.batch, p.rows.row_dims[1] = c.hq, p.rows.row_dims[2] = c.sq;
  p.rows.mask_row_strides[0] = mrows * c.sk, p.rows.mask_row_strides[1] = 0, p.rows.mask_row_strides[2] = mrows == 1 ? 0 : c.sk;
  p.rows.mask_key_stride = 1;
  const StorageType st = c.bf16 ? StorageType::kBF16 : StorageType::kF16;

  const int64_t nrows = c.batch * c.hq * c.sq;
  reference_attention<T><<<static_cast<unsigned>((nrows + 127) / 128), 128, 0, stream>>>(
      dq, kbase, vbase, dmask, dref, c.batch, c.hq, c.hkv, c.sq, c.sk, c.d, q_row, kv_row, c.causal,
      c.mask == MaskKind::kBoolSquare, mrows, scale);
  CK(cudaGetLastError());
  double pairs = 0;  // visible (query, key) pairs of one head, mask exclusions not subtracted
  for (int64_t i = 0; i < c.sq; ++i) pairs += c.causal ? std::clamp<int64_t>(i + c.sk - c.sq + 1, 0, c.sk) : c.sk;
  const double flops = 4.0 * c.d * pairs * c.batch * c.hq;

  bool ok = true;
  const bool old_kernel = std::string(label) == "old";
  for (int rows : old_kernel ? std::vector<int>{0} : std::vector<int>{64, 128}) {
    p.block_rows = rows;
    CK(cudaMemsetAsync(dout, 0xff, out_n * 2, stream));  // NaN: an unwritten output fails the check
    CK(launch_flash_attention(p, st, stream));
    CK(cudaMemsetAsync(derr, 0, 4, stream));
    max_abs_diff<T><<<256, 256, 0, stream>>>(dout, dref, out_n, derr);
    CK(cudaGetLastError());
    float err = 0;
    CK(cudaMemcpyAsync(&err, derr, 4, cudaMemcpyDeviceToHost, stream));
    CK(cudaStreamSynchronize(stream));
    const bool pass = err <= 2e-2f;
    ok = ok && pass;
    std::printf("{\"case\": \"%s\", \"kernel\": \"%s\", \"block_rows\": %d, \"batch\": %lld, \"heads\": %lld, \"kv_heads\": %lld, "
                "\"sq\": %lld, \"sk\": %lld, \"d\": %d, \"dtype\": \"%s\", \"causal\": %s, \"max_abs_err\": %.3g, \"pass\": %s",
                c.name.c_str(), label, rows, static_cast<long long>(c.batch), static_cast<long long>(c.hq),
                static_cast<long long>(c.hkv), static_cast<long long>(c.sq), static_cast<long long>(c.sk), c.d,
                c.bf16 ? "bf16" : "fp16", c.causal ? "true" : "false", err, pass ? "true" : "false");
    if (c.timed) {
      const float us = kiln::bench::median_ms(stream, [&] { CK(launch_flash_attention(p, st, stream)); }, 30, 10) * 1000.f;
      std::printf(", \"us\": %.2f, \"tflops\": %.1f", us, flops / (us * 1e-6) / 1e12);
    }
    std::printf("}\n");
    std::fflush(stdout);
  }
  CK(cudaFree(dq));
  if (dkv) CK(cudaFree(dkv));
  if (dmask) CK(cudaFree(dmask));
  CK(cudaFree(dout));
  CK(cudaFree(dref));
  CK(cudaFree(derr));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const char* label = argc > 1 ? argv[1] : "new";
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"kernel\": \"%s\"}\n", prop.name, prop.multiProcessorCount, label);
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  std::vector<Case> cases;
  for (int64_t b : {32, 1}) {
    cases.push_back({"vit_b16", b, 12, 12, 197, 197, 64, false, MaskKind::kNone, false, true});
    cases.push_back({"vit_b16_zero_mask", b, 12, 12, 197, 197, 64, false, MaskKind::kZeroSquare, false, true});
    cases.push_back({"bert_base_padding_mask", b, 12, 12, 128, 128, 64, false, MaskKind::kKeyPadding, false, true});
    cases.push_back({"gpt2_causal", b, 12, 12, 128, 128, 64, true, MaskKind::kNone, false, true});
  }
  cases.push_back({"bert_base_padding_mask_bf16", 4, 12, 12, 128, 128, 64, false, MaskKind::kKeyPadding, true, false});
  cases.push_back({"d128_bool_mask", 2, 4, 4, 77, 77, 128, false, MaskKind::kBoolSquare, false, false});
  cases.push_back({"gqa_32_8_d128_causal_sq_lt_sk", 1, 32, 8, 100, 300, 128, true, MaskKind::kNone, false, false});
  cases.push_back({"gqa_32_8_d128_decode", 4, 32, 8, 1, 1000, 128, true, MaskKind::kNone, true, false});
  cases.push_back({"causal_sq_gt_sk", 2, 4, 2, 150, 70, 64, true, MaskKind::kNone, false, false});
  cases.push_back({"bool_mask_causal_bf16", 2, 4, 4, 130, 130, 64, true, MaskKind::kBoolSquare, true, false});
  bool ok = true;
  for (const Case& c : cases) ok = (c.bf16 ? run_case<__nv_bfloat16>(c, label, stream) : run_case<__half>(c, label, stream)) && ok;
  CK(cudaStreamDestroy(stream));
  std::printf("{\"all_pass\": %s}\n", ok ? "true" : "false");
  return ok ? 0 : 1;
}
