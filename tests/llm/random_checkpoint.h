// Tiny random checkpoints for the decoder tests: every weight of a config's spec filled with
// seeded uniform values (norm scales near 1, embeddings in [-1, 1], matrices scaled by
// 1/sqrt(fan-in)), written as model.safetensors in F32, F16 or BF16, plus config.json and
// optionally generation_config.json.
#pragma once

#include <cmath>
#include <random>
#include <utility>

#include <gtest/gtest.h>

#include "core/numerics.h"
#include "llm/checkpoint.h"
#include "llm/llm_test_util.h"

namespace kiln::llm::testing {

struct FloatWeight {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

inline bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// The weights of `config_json`'s spec (lm_head only when untied), seeded.
inline std::vector<FloatWeight> random_weights(const std::string& config_json, uint32_t seed) {
  auto c = parse_model_config(config_json, "config.json");
  if (!c.ok()) return {};
  const std::string prefix = c->architecture == Architecture::kGpt2 ? "transformer." : "";
  std::mt19937 rng(seed);
  std::vector<FloatWeight> out;
  for (const ExpectedWeight& w : expected_weights(*c, prefix)) {
    if (!w.required) continue;
    FloatWeight f{w.name, w.shape, {}};
    int64_t n = 1;
    for (int64_t d : w.shape) n *= d;
    const bool norm = w.name.find("norm") != std::string::npos || w.name.find("ln_") != std::string::npos;
    const bool bias = ends_with(w.name, ".bias");
    const bool embed = w.name.find("wte") != std::string::npos || w.name.find("wpe") != std::string::npos ||
                       w.name.find("embed_tokens") != std::string::npos;
    // nn.Linear weights are [out, in], GPT-2's Conv1D [in, out].
    const int64_t fan_in = w.shape.size() == 2 ? (c->architecture == Architecture::kGpt2 ? w.shape[0] : w.shape[1]) : 1;
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    f.values.resize(static_cast<size_t>(n));
    for (float& v : f.values) {
      const float r = u(rng);
      v = norm && !bias ? 1.f + 0.2f * r : bias ? 0.1f * r : embed ? r : r * 1.7f / std::sqrt(static_cast<float>(fan_in));
    }
    out.push_back(std::move(f));
  }
  return out;
}

inline StTensor encode(const FloatWeight& w, const std::string& dtype) {
  StTensor t{w.name, dtype, w.shape, {}};
  if (dtype == "F32") {
    t.bytes.assign(reinterpret_cast<const char*>(w.values.data()), w.values.size() * 4);
  } else {
    t.bytes.resize(w.values.size() * 2);
    for (size_t i = 0; i < w.values.size(); ++i) {
      const uint16_t h = dtype == "F16" ? float_to_fp16(w.values[i]) : float_to_bf16(w.values[i]);
      std::memcpy(&t.bytes[2 * i], &h, 2);
    }
  }
  return t;
}

// Writes config.json, model.safetensors (and generation_config.json when given) into `dir`.
inline void write_checkpoint(const std::string& dir, const std::string& config_json, const std::vector<FloatWeight>& weights,
                             const std::string& dtype = "F32", const std::string& generation_json = "") {
  std::filesystem::create_directories(dir);
  write_file(dir + "/config.json", config_json);
  if (!generation_json.empty()) write_file(dir + "/generation_config.json", generation_json);
  std::vector<StTensor> ts;
  for (const FloatWeight& w : weights) ts.push_back(encode(w, dtype));
  write_file(dir + "/model.safetensors", st_file(ts));
}

inline FloatWeight* find_weight(std::vector<FloatWeight>& ws, const std::string& name) {
  for (FloatWeight& w : ws)
    if (w.name == name) return &w;
  return nullptr;
}

// A checkpoint written to a temporary directory, removed with the Model.
struct Model {
  Model() = default;
  Model(Model&& o) noexcept : dir(std::exchange(o.dir, {})), config_json(std::move(o.config_json)), weights(std::move(o.weights)), ck(std::move(o.ck)) {}
  Model& operator=(Model&&) = delete;
  ~Model() {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  std::string dir;
  std::string config_json;
  std::vector<FloatWeight> weights;
  Checkpoint ck;
};

// A random checkpoint of `config_json` (seeded weights written in `dtype`), opened.
inline Model make_model(const std::string& tag, const std::string& config_json, uint32_t seed, const std::string& dtype = "F32",
                        const std::string& generation_json = "") {
  Model m;
  m.dir = make_temp_dir(tag);
  m.config_json = config_json;
  m.weights = random_weights(config_json, seed);
  EXPECT_FALSE(m.weights.empty());
  write_checkpoint(m.dir, config_json, m.weights, dtype, generation_json);
  auto ck = Checkpoint::open(m.dir);
  EXPECT_TRUE(ck.ok()) << ck.status().to_string();
  if (ck.ok()) m.ck = std::move(*ck);
  return m;
}

}  // namespace kiln::llm::testing
