// kiln bench-llm ENGINE_DIR --batch 1,8,64 --input-len 128 --output-len 128 [--json FILE]
//     [--seed S] [--warmup N] [--cuda-graph]
//     [--temperature T --top-k K --top-p P --repetition-penalty R [--host-sampling]]
//     [--profile-decode]
// For each batch size B: B requests of input-len random prompt ids (seeded), greedy unless the
// sampling options say otherwise (request i's sampling seed is S + i; on CUDA engines sampled
// rows choose their token on the GPU, or with --host-sampling on the host from copied logits
// rows: decision 0077's before / after), eos ignored,
// exactly output-len new tokens each, submitted together to LlmRunner::generate (requests past
// the engine's max batch queue and join as rows free up, so B > max batch measures the queue
// too). Reports, per B: time to first token (ms from the call to each request's first token:
// median, p99), time per output token (per request (t_last - t_first) / (n - 1): median, p99),
// output tokens/s (all new tokens / wall time of the call), and peak memory — the device's used
// memory (total - free, cudaMemGetInfo, sampled at every B-th token: includes other processes)
// for CUDA engines, the process's peak resident set for CPU engines.
// --profile-decode (CUDA engines): after each B, the last decode step (B tokens' bucket) runs once
// more with an event pair per layer (LlmRunner::profile_step): per-layer device times, summed by
// layer kind (the name without its "layers.N." prefix) and by op, printed and in the JSON as
// "decode_profile" — where a token's time goes, since the step otherwise runs as one CUDA graph.
#include "tools/llm_generate/llm_bench.h"

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "llm/kv_pool_device.h"
#include "llm/runner.h"

namespace {

using namespace kiln;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // nearest rank: the smallest value with at least p% of the values at or below it
  size_t k = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

// "layers.12.mlp.down_proj" -> "mlp.down_proj": the per-layer kinds of a decoder step.
std::string layer_kind(const std::string& name) {
  const std::string pre = "layers.";
  if (name.compare(0, pre.size(), pre) != 0) return name;
  size_t i = pre.size();
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == pre.size() || i >= name.size() || name[i] != '.') return name;
  return name.substr(i + 1);
}

// The profile as JSON (totals by kind and by op, largest first, and every layer) and a short table.
nlohmann::json decode_profile_json(const std::vector<LayerTiming>& t, int64_t tokens) {
  std::map<std::string, std::pair<double, int>> by_kind, by_op;
  std::map<std::string, std::string> kind_tactic;
  double total = 0;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerTiming& l : t) {
    total += l.ms;
    auto& k = by_kind[layer_kind(l.name)];
    k.first += l.ms;
    ++k.second;
    kind_tactic.emplace(layer_kind(l.name), l.tactic);
    auto& o = by_op[l.op];
    o.first += l.ms;
    ++o.second;
    layers.push_back({{"name", l.name}, {"op", l.op}, {"tactic", l.tactic}, {"ms", l.ms}});
  }
  auto sorted = [](const std::map<std::string, std::pair<double, int>>& m) {
    std::vector<std::pair<std::string, std::pair<double, int>>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    return v;
  };
  nlohmann::json kinds = nlohmann::json::array(), ops = nlohmann::json::array();
  std::printf("  decode step of %lld tokens, per-layer device times: %.3f ms over %zu layers\n",
              static_cast<long long>(tokens), total, t.size());
  for (const auto& [k, v] : sorted(by_kind)) {
    kinds.push_back({{"kind", k}, {"ms", v.first}, {"layers", v.second}, {"tactic", kind_tactic[k]}});
    if (kinds.size() <= 14)
      std::printf("  %-36s %8.3f ms %5.1f%%  x%-3d %s\n", k.c_str(), v.first, total > 0 ? 100 * v.first / total : 0.0,
                  v.second, kind_tactic[k].c_str());
  }
  for (const auto& [k, v] : sorted(by_op)) ops.push_back({{"op", k}, {"ms", v.first}, {"layers", v.second}});
  return {{"tokens", tokens}, {"total_ms", total}, {"by_kind", kinds}, {"by_op", ops}, {"layers", layers}};
}

bool parse_list(const std::string& s, std::vector<int64_t>* out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1) return false;
      out->push_back(v);
    } catch (...) {
      return false;
    }
  }
  return !out->empty();
}

}  // namespace

int llm_bench_main(int argc, char** argv) {
  CLI::App app{"Measure an LLM engine directory: TTFT, TPOT, output tokens/s, peak memory", "kiln bench-llm"};
  std::string dir, batches_text = "1,8,64", json_path;
  int64_t input_len = 128, output_len = 128;
  uint64_t seed = 1;
  int warmup = 1;
  bool profile_decode = false;
  app.add_option("engine", dir, "engine directory (kiln build-llm)")->required();
  app.add_option("--batch", batches_text, "batch sizes, comma-separated")->capture_default_str();
  app.add_option("--input-len", input_len, "prompt tokens per request")->capture_default_str();
  app.add_option("--output-len", output_len, "new tokens per request")->capture_default_str();
  app.add_option("--seed", seed, "seed of the random prompt ids")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed generate calls per batch size first")->capture_default_str();
  app.add_option("--json", json_path, "also write the results as JSON here");
  bool cuda_graph = false;
  app.add_flag("--cuda-graph", cuda_graph, "CUDA engines: capture each step bucket into a CUDA graph, then replay it");
  llm::SamplingOptions sampling;
  bool host_sampling = false;
  app.add_option("--temperature", sampling.temperature, "sampling temperature (0 = greedy)")->capture_default_str();
  app.add_option("--top-k", sampling.top_k, "keep the k most likely tokens (0 = all)")->capture_default_str();
  app.add_option("--top-p", sampling.top_p, "nucleus sampling threshold (1 = off)")->capture_default_str();
  app.add_option("--repetition-penalty", sampling.repetition_penalty, "transformers' repetition penalty (1 = off)")
      ->capture_default_str();
  app.add_flag("--profile-decode", profile_decode,
               "CUDA engines: per-layer device times of the last decode step at each batch size");
  app.add_flag("--host-sampling", host_sampling,
               "CUDA engines: copy sampled rows' logits to the host and sample there (the path before GPU sampling)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::vector<int64_t> batches;
  if (!parse_list(batches_text, &batches)) {
    std::cerr << "kiln bench-llm: --batch '" << batches_text << "' is not a list of positive integers\n";
    return 2;
  }
  if (input_len < 1 || output_len < 1 || warmup < 0) {
    std::cerr << "kiln bench-llm: --input-len and --output-len must be >= 1, --warmup >= 0\n";
    return 2;
  }
  if (kiln::Status v = llm::validate_sampling(sampling); !v.ok()) {
    std::cerr << "kiln bench-llm: " << v.message() << "\n";
    return 2;
  }
  llm::LlmRunnerOptions ro;
  ro.load_tokenizer = false;
  ro.cuda_graph = cuda_graph;
  ro.device_sampling = !host_sampling;
  // Engine::load_phases as {"read": ms, "parse": ms, ...}: where a large plan's load goes.
  auto load_phases_json = [](const Engine& e) {
    nlohmann::json j = nlohmann::json::object();
    for (const Engine::LoadPhase& p : e.load_phases()) j[p.name] = p.ms;
    return j;
  };
  auto t_load = std::chrono::steady_clock::now();
  auto runner = llm::LlmRunner::from_dir(dir, ro);
  if (!runner.ok()) {
    std::cerr << "kiln bench-llm: " << runner.status().to_string() << "\n";
    return 1;
  }
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count();
  llm::LlmRunner& r = **runner;
  const bool cuda = r.info().device == "cuda";
  nlohmann::json out = {{"engine", dir},
                        {"device", r.info().device},
                        {"dtype", r.info().dtype},
                        {"max_batch", r.info().max_rows},
                        {"max_num_tokens", r.info().max_num_tokens},
                        {"cuda_graph", cuda_graph},
                        {"kv_blocks", r.pool().num_blocks()},
                        {"kv_pool_bytes", r.pool().bytes()},
                        {"weights_bytes", r.engine().weights_bytes()},
                        {"load_ms", load_ms},
                        {"load_phases_ms", load_phases_json(r.engine())},
                        {"input_len", input_len},
                        {"output_len", output_len},
                        {"sampling",
                         {{"temperature", sampling.temperature},
                          {"top_k", sampling.top_k},
                          {"top_p", sampling.top_p},
                          {"repetition_penalty", sampling.repetition_penalty},
                          {"host_sampling", host_sampling}}},
                        {"results", nlohmann::json::array()}};
  std::printf("%s engine %s (%s), max batch %lld, KV pool %lld blocks (%.1f MiB), load %.0f ms\n", r.info().device.c_str(),
              dir.c_str(), r.info().dtype.c_str(), static_cast<long long>(r.info().max_rows),
              static_cast<long long>(r.pool().num_blocks()), r.pool().bytes() / 1048576.0, load_ms);
  std::printf("%6s %12s %12s %12s %12s %14s %12s\n", "batch", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms",
              "out tokens/s", "peak MiB");
  std::mt19937_64 rng(seed);
  for (int64_t b : batches) {
    std::vector<llm::LlmRequest> reqs(static_cast<size_t>(b));
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(r.config().vocab_size - 1));
    for (size_t i = 0; i < reqs.size(); ++i) {
      llm::LlmRequest& q = reqs[i];
      q.prompt.resize(static_cast<size_t>(input_len));
      for (int32_t& t : q.prompt) t = id(rng);
      q.options.max_new_tokens = output_len;
      q.options.ignore_eos = true;
      q.options.sampling = sampling;
      q.options.sampling.seed = seed + i;
    }
    for (int w = 0; w < warmup; ++w) {
      auto res = r.generate(reqs);
      if (!res.ok()) {
        std::cerr << "kiln bench-llm: batch " << b << ": " << res.status().to_string() << "\n";
        return 1;
      }
    }
    size_t peak_used = 0, calls = 0;
    auto sample = [&]() {
      size_t free_b = 0, total = 0;
      llm::kv_device_memory(&free_b, &total);
      if (total > free_b) peak_used = std::max(peak_used, total - free_b);
    };
    if (cuda) sample();
    const auto t0 = std::chrono::steady_clock::now();
    auto res = r.generate(reqs, [&](size_t, int32_t, bool) {
      if (cuda && ++calls % static_cast<size_t>(b) == 0) sample();
    });
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!res.ok()) {
      std::cerr << "kiln bench-llm: batch " << b << ": " << res.status().to_string() << "\n";
      return 1;
    }
    if (!cuda) {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      peak_used = static_cast<size_t>(u.ru_maxrss) * 1024;  // kilobytes on Linux
    }
    std::vector<double> ttft, tpot;
    size_t tokens = 0;
    for (const llm::LlmResult& x : *res) {
      tokens += x.tokens.size();
      if (x.token_ms.empty()) continue;
      ttft.push_back(x.token_ms.front());
      if (x.token_ms.size() > 1)
        tpot.push_back((x.token_ms.back() - x.token_ms.front()) / static_cast<double>(x.token_ms.size() - 1));
    }
    const double tps = wall_ms > 0 ? tokens * 1000.0 / wall_ms : 0;
    const llm::LlmRunStats& st = r.last_stats();
    std::printf("%6lld %12.2f %12.2f %12.3f %12.3f %14.1f %12.1f\n", static_cast<long long>(b), percentile(ttft, 50),
                percentile(ttft, 99), percentile(tpot, 50), percentile(tpot, 99), tps, peak_used / 1048576.0);
    nlohmann::json profile;
    if (profile_decode && cuda) {
      const int64_t decode_tokens = std::min<int64_t>(b, r.info().max_rows);  // the last steps' rows
      auto prof = r.profile_step(decode_tokens);
      if (!prof.ok()) {
        std::cerr << "kiln bench-llm: --profile-decode at batch " << b << ": " << prof.status().to_string() << "\n";
        return 1;
      }
      profile = decode_profile_json(*prof, r.bucket(decode_tokens));
    }
    out["results"].push_back({{"batch", b},
                              {"ttft_ms_p50", percentile(ttft, 50)},
                              {"ttft_ms_p99", percentile(ttft, 99)},
                              {"tpot_ms_p50", percentile(tpot, 50)},
                              {"tpot_ms_p99", percentile(tpot, 99)},
                              {"output_tokens_per_s", tps},
                              {"output_tokens", tokens},
                              {"wall_ms", wall_ms},
                              {"steps", st.steps},
                              {"padded_tokens", st.padded_tokens},
                              {"max_running", st.max_running},
                              {"device_io", st.device_io},
                              {"argmax_only_steps", st.argmax_only_steps},
                              {"logits_rows_read", st.logits_rows_read},
                              {"device_sampling", st.device_sampling},
                              {"device_sampled_tokens", st.device_sampled_tokens},
                              {cuda ? "peak_device_used_bytes" : "peak_rss_bytes", peak_used}});
    if (!profile.is_null()) out["results"].back()["decode_profile"] = std::move(profile);
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) {
      std::cerr << "kiln bench-llm: cannot write '" << json_path << "'\n";
      return 1;
    }
  }
  return 0;
}
