// An independent reference for the decoder tests: the forward pass of GPT-2 and the Llama family
// written directly from the models' equations (transformers' modeling_gpt2.py / modeling_llama.py)
// as loops in double precision over a whole sequence, without Kiln's graph, kernels or KV cache.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "llm/model_config.h"
#include "llm/random_checkpoint.h"

namespace kiln::llm::testing {

using Vec = std::vector<double>;

class NaiveDecoder {
 public:
  NaiveDecoder(const ModelConfig& c, const std::vector<FloatWeight>& ws, std::vector<double> inv_freq = {})
      : c_(c), inv_freq_(std::move(inv_freq)) {
    for (const FloatWeight& w : ws) w_[w.name] = &w;
    if (inv_freq_.empty())  // theta^(-2i/d), RoFormer eq. 15
      for (int64_t i = 0; i < c.head_dim / 2; ++i) inv_freq_.push_back(std::pow(c.rope.theta, -2.0 * i / c.head_dim));
  }

  // logits [S][vocab] of the whole sequence `ids` at positions 0..S-1.
  std::vector<Vec> logits(const std::vector<int32_t>& ids) const {
    return c_.architecture == Architecture::kGpt2 ? gpt2(ids) : llama(ids);
  }

 private:
  const std::vector<float>& W(const std::string& n) const { return w_.at(n)->values; }
  bool has(const std::string& n) const { return w_.count(n) != 0; }

  // y[o] = sum_i M[o][i] x[i] + b[o]: M [out, in] (nn.Linear) or, transposed_store, [in, out] (Conv1D).
  static Vec matvec(const std::vector<float>& m, const Vec& x, int64_t out, bool in_out_store, const std::vector<float>* b) {
    const int64_t in = static_cast<int64_t>(x.size());
    Vec y(static_cast<size_t>(out), 0.0);
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += (in_out_store ? m[i * out + o] : m[o * in + i]) * x[i];
      y[o] = s;
    }
    return y;
  }
  Vec rms(const Vec& x, const std::vector<float>& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1 / std::sqrt(ss / x.size() + c_.norm_eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
  }
  Vec layer_norm(const Vec& x, const std::vector<float>& w, const std::vector<float>& b) const {
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= x.size();
    for (double v : x) var += (v - mean) * (v - mean);
    var /= x.size();
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + c_.norm_eps) * w[i] + b[i];
    return y;
  }
  // softmax(q·k / sqrt(hd)) v over keys 0..s for each query s; q [S][H*hd], k/v [S][KV*hd].
  std::vector<Vec> attention(const std::vector<Vec>& q, const std::vector<Vec>& k, const std::vector<Vec>& v) const {
    const int64_t S = static_cast<int64_t>(q.size()), H = c_.num_heads, hd = c_.head_dim, group = H / c_.num_kv_heads;
    std::vector<Vec> out(static_cast<size_t>(S), Vec(static_cast<size_t>(H * hd), 0.0));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kh = h / group;  // repeat_kv: kv head kh serves query heads kh*group .. kh*group+group-1
        Vec sc(static_cast<size_t>(s + 1));
        double mx = -1e300;
        for (int64_t t = 0; t <= s; ++t) {
          double d = 0;
          for (int64_t j = 0; j < hd; ++j) d += q[s][h * hd + j] * k[t][kh * hd + j];
          sc[t] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[t]);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t t = 0; t <= s; ++t)
          for (int64_t j = 0; j < hd; ++j) out[s][h * hd + j] += sc[t] / sum * v[t][kh * hd + j];
      }
    return out;
  }
  void rope(Vec* x, int64_t heads, int64_t pos) const {
    const int64_t hd = c_.head_dim, half = hd / 2;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < half; ++j) {
        const double a = pos * inv_freq_[j], x1 = (*x)[h * hd + j], x2 = (*x)[h * hd + j + half];
        (*x)[h * hd + j] = x1 * std::cos(a) - x2 * std::sin(a);
        (*x)[h * hd + j + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
  }
  static double silu(double x) { return x / (1 + std::exp(-x)); }
  static double gelu_tanh(double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
  }
  std::vector<Vec> head(const std::vector<Vec>& x, const std::vector<float>& lm) const {
    std::vector<Vec> out;
    for (const Vec& r : x) out.push_back(matvec(lm, r, c_.vocab_size, false, nullptr));
    return out;
  }

  std::vector<Vec> llama(const std::vector<int32_t>& ids) const {
    const int64_t S = static_cast<int64_t>(ids.size()), D = c_.hidden_size, qd = c_.num_heads * c_.head_dim,
                  kvd = c_.num_kv_heads * c_.head_dim, I = c_.intermediate_size;
    const auto& emb = W("model.embed_tokens.weight");
    std::vector<Vec> x(static_cast<size_t>(S), Vec(static_cast<size_t>(D)));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < D; ++i) x[s][i] = emb[ids[s] * D + i];
    auto bias = [&](const std::string& n) { return has(n) ? &W(n) : nullptr; };
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      const std::string L = "model.layers." + std::to_string(l) + ".";
      std::vector<Vec> q, k, v;
      for (int64_t s = 0; s < S; ++s) {
        const Vec h = rms(x[s], W(L + "input_layernorm.weight"));
        q.push_back(matvec(W(L + "self_attn.q_proj.weight"), h, qd, false, bias(L + "self_attn.q_proj.bias")));
        k.push_back(matvec(W(L + "self_attn.k_proj.weight"), h, kvd, false, bias(L + "self_attn.k_proj.bias")));
        v.push_back(matvec(W(L + "self_attn.v_proj.weight"), h, kvd, false, bias(L + "self_attn.v_proj.bias")));
        rope(&q[s], c_.num_heads, s);
        rope(&k[s], c_.num_kv_heads, s);
      }
      const std::vector<Vec> a = attention(q, k, v);
      for (int64_t s = 0; s < S; ++s) {
        const Vec o = matvec(W(L + "self_attn.o_proj.weight"), a[s], D, false, bias(L + "self_attn.o_proj.bias"));
        for (int64_t i = 0; i < D; ++i) x[s][i] += o[i];
        const Vec h = rms(x[s], W(L + "post_attention_layernorm.weight"));
        Vec g = matvec(W(L + "mlp.gate_proj.weight"), h, I, false, bias(L + "mlp.gate_proj.bias"));
        const Vec u = matvec(W(L + "mlp.up_proj.weight"), h, I, false, bias(L + "mlp.up_proj.bias"));
        for (int64_t i = 0; i < I; ++i) g[i] = silu(g[i]) * u[i];
        const Vec d = matvec(W(L + "mlp.down_proj.weight"), g, D, false, bias(L + "mlp.down_proj.bias"));
        for (int64_t i = 0; i < D; ++i) x[s][i] += d[i];
      }
    }
    for (Vec& r : x) r = rms(r, W("model.norm.weight"));
    return head(x, c_.tie_word_embeddings ? emb : W("lm_head.weight"));
  }

  std::vector<Vec> gpt2(const std::vector<int32_t>& ids) const {
    const std::string p = "transformer.";
    const int64_t S = static_cast<int64_t>(ids.size()), D = c_.hidden_size, I = c_.intermediate_size;
    const auto &wte = W(p + "wte.weight"), &wpe = W(p + "wpe.weight");
    std::vector<Vec> x(static_cast<size_t>(S), Vec(static_cast<size_t>(D)));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < D; ++i) x[s][i] = wte[ids[s] * D + i] + wpe[s * D + i];
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      const std::string L = p + "h." + std::to_string(l) + ".";
      std::vector<Vec> q, k, v;
      for (int64_t s = 0; s < S; ++s) {
        const Vec h = layer_norm(x[s], W(L + "ln_1.weight"), W(L + "ln_1.bias"));
        const Vec qkv = matvec(W(L + "attn.c_attn.weight"), h, 3 * D, true, &W(L + "attn.c_attn.bias"));
        q.emplace_back(qkv.begin(), qkv.begin() + D);
        k.emplace_back(qkv.begin() + D, qkv.begin() + 2 * D);
        v.emplace_back(qkv.begin() + 2 * D, qkv.end());
      }
      const std::vector<Vec> a = attention(q, k, v);
      for (int64_t s = 0; s < S; ++s) {
        const Vec o = matvec(W(L + "attn.c_proj.weight"), a[s], D, true, &W(L + "attn.c_proj.bias"));
        for (int64_t i = 0; i < D; ++i) x[s][i] += o[i];
        const Vec h = layer_norm(x[s], W(L + "ln_2.weight"), W(L + "ln_2.bias"));
        Vec f = matvec(W(L + "mlp.c_fc.weight"), h, I, true, &W(L + "mlp.c_fc.bias"));
        for (double& e : f) e = gelu_tanh(e);
        const Vec m = matvec(W(L + "mlp.c_proj.weight"), f, D, true, &W(L + "mlp.c_proj.bias"));
        for (int64_t i = 0; i < D; ++i) x[s][i] += m[i];
      }
    }
    for (Vec& r : x) r = layer_norm(r, W(p + "ln_f.weight"), W(p + "ln_f.bias"));
    return head(x, c_.tie_word_embeddings ? wte : W("lm_head.weight"));
  }

  ModelConfig c_;
  std::vector<double> inv_freq_;
  std::map<std::string, const FloatWeight*> w_;
};

}  // namespace kiln::llm::testing
