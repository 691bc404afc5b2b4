// kiln_llm_generate: generates text, printing it as it is produced, from
//   - an engine directory of `kiln build-llm` (kiln_llm.json beside the plan): LlmRunner
//     (src/llm/runner.h), the CPU or CUDA plan of the step graph with the paged KV cache; this is
//     what `kiln generate` runs;
//   - a Hugging Face checkpoint directory: the CPU reference (src/llm/cpu_runner.h).
// `kiln_llm_generate bench-llm ENGINE_DIR ...` (= `kiln bench-llm`) measures an engine (llm_bench.cc).
//
//   kiln_llm_generate DIR (--prompt TEXT | --prompt-ids 1,2,3) [--max-new-tokens N]
//       [--temperature T --top-k K --top-p P --seed S --repetition-penalty R] [--stop TEXT]...
//       [--ignore-eos] [--no-special-tokens] [--json] [--dump-logits FILE.npy (checkpoints)]
//
// This program links the runtime, never the builder: no protobuf, so SentencePiece
// (tokenizer.model) may be linked (docs/decisions/0048, 0060).
//
// Greedy unless --temperature > 0. A seed gives the same tokens on every run of the same engine;
// CUDA engines sample on the GPU with Philox draws (docs/decisions/0077), so their sampled tokens
// differ from a CPU engine's or checkpoint's for the same seed (std::mt19937_64). --prompt-ids takes token ids (no tokenizer needed: checkpoints
// saved without one); --json prints one object at the end (prompt ids, new token ids, text when a
// tokenizer is there, stop reason, timings) instead of streaming; --dump-logits writes the
// prompt's logits, float32 [prompt_len, vocab], as .npy (scripts/llm_reference_hf.py compares them
// with transformers'). Timings go to stderr. Exit status 0 on success, 1 on an error, 2 on a usage error.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/npy.h"
#include "llm/checkpoint.h"
#include "llm/cpu_runner.h"
#include "llm/engine_info.h"
#include "llm/runner.h"
#include "llm/tokenizer.h"
#include "tools/llm_generate/llm_bench.h"
#ifdef KILN_HAVE_SENTENCEPIECE
#include "llm/sentencepiece_tokenizer.h"
#endif

namespace {

using namespace kiln;

bool parse_ids(const std::string& s, std::vector<int32_t>* out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) return false;
      out->push_back(static_cast<int32_t>(v));
    } catch (...) {
      return false;
    }
  }
  return !out->empty();
}

// Length of the longest prefix of `s` that ends on a UTF-8 sequence boundary (a streamed token
// may end inside a character; its rest arrives with the next token).
size_t complete_utf8_prefix(const std::string& s) {
  size_t i = s.size(), back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return s.size();
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  const size_t need = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
  return back + 1 >= need ? s.size() : i - 1;
}

int fail(const Status& s) {
  std::cerr << "kiln_llm_generate: " << s.to_string() << "\n";
  return 1;
}

// Prints the text of a growing token list as it grows, holding back an incomplete UTF-8 tail.
struct TextStreamer {
  const llm::Tokenizer* tok = nullptr;
  std::vector<int32_t> ids;
  std::string printed;  // bytes already written to stdout
  void add(int32_t t, bool print) {
    ids.push_back(t);
    if (!print || !tok) return;
    auto text = tok->decode(ids);
    if (!text.ok() || text->size() < printed.size() || text->compare(0, printed.size(), printed) != 0) return;
    const size_t upto = complete_utf8_prefix(*text);
    if (upto > printed.size()) {
      std::cout << text->substr(printed.size(), upto - printed.size()) << std::flush;
      printed = text->substr(0, upto);
    }
  }
};

// One request through LlmRunner (an engine directory), streamed like the checkpoint path.
int generate_with_engine(llm::LlmRunner& runner, std::unique_ptr<llm::Tokenizer> tok, const std::vector<int32_t>& ids,
                         const llm::GenerationOptions& gen, bool as_json) {
  TextStreamer streamer;
  streamer.tok = tok.get();
  llm::LlmRequest req{ids, gen};
  auto results = runner.generate({req}, [&](size_t, int32_t t, bool) { streamer.add(t, !as_json); });
  if (!results.ok()) return fail(results.status());
  const llm::LlmResult& r = results->at(0);
  std::string text;
  if (tok) {
    auto t = tok->decode(r.tokens);
    if (t.ok()) text = *t;
  }
  const size_t n = r.tokens.size();
  const double ttft = n ? r.token_ms[0] : 0.0;
  const double tps = n > 1 ? (n - 1) * 1000.0 / (r.token_ms[n - 1] - r.token_ms[0]) : 0.0;
  if (as_json) {
    nlohmann::json j = {{"prompt_ids", ids}, {"tokens", r.tokens}, {"stop", llm::stop_reason_name(r.stop)},
                        {"ttft_ms", ttft}, {"decode_tokens_per_s", tps}, {"engine", runner.info().device}};
    if (tok) j["text"] = text;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    if (!tok) {
      for (size_t i = 0; i < n; ++i) std::cout << (i ? "," : "") << r.tokens[i];
    } else if (text.size() > streamer.printed.size() && text.compare(0, streamer.printed.size(), streamer.printed) == 0) {
      std::cout << text.substr(streamer.printed.size());
    }
    std::cout << "\n";
  }
  std::cerr << "kiln_llm_generate: " << ids.size() << " prompt tokens, " << n << " new (" << llm::stop_reason_name(r.stop)
            << "); " << runner.info().device << " engine, time to first token " << ttft << " ms, decode " << tps
            << " tokens/s\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef KILN_HAVE_SENTENCEPIECE
  llm::register_sentencepiece();
#endif
  if (argc >= 2 && std::string(argv[1]) == "bench-llm") return llm_bench_main(argc - 1, argv + 1);
  CLI::App app{"Generate text from an engine directory (LlmRunner) or a checkpoint (the CPU reference)", "kiln generate"};
  std::string dir, prompt, prompt_ids_text, dump_logits;
  llm::GenerationOptions gen;
  bool as_json = false, no_special = false;
  std::vector<std::string> stops;
  app.add_option("dir", dir, "engine directory (kiln build-llm) or checkpoint directory (the CPU reference)")->required();
  auto* p_text = app.add_option("--prompt", prompt, "prompt text (encoded with the checkpoint's tokenizer)");
  auto* p_ids = app.add_option("--prompt-ids", prompt_ids_text, "prompt token ids, comma-separated");
  p_text->excludes(p_ids);
  app.add_option("--max-new-tokens", gen.max_new_tokens, "tokens to generate at most")->capture_default_str();
  app.add_option("--temperature", gen.sampling.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  app.add_option("--top-k", gen.sampling.top_k, "keep the k most likely tokens (0 = all)")->capture_default_str();
  app.add_option("--top-p", gen.sampling.top_p, "nucleus sampling mass")->capture_default_str();
  app.add_option("--seed", gen.sampling.seed,
                 "the request's random seed (CUDA engines: Philox keyed by it and the position; else mt19937_64)")
      ->capture_default_str();
  app.add_option("--repetition-penalty", gen.sampling.repetition_penalty, "transformers' repetition penalty (1 = none)")
      ->capture_default_str();
  app.add_option("--stop", stops, "stop once the generated text contains TEXT (repeatable; engine directories)");
  bool cuda_graph = false;
  app.add_flag("--cuda-graph", cuda_graph, "CUDA engines: capture each step bucket into a CUDA graph, then replay it");
  app.add_flag("--ignore-eos", gen.ignore_eos, "do not stop at the checkpoint's eos ids");
  app.add_flag("--no-special-tokens", no_special, "do not add the tokenizer's BOS to --prompt");
  app.add_flag("--json", as_json, "print one JSON object at the end instead of streaming text");
  app.add_option("--dump-logits", dump_logits, "checkpoints: write the prompt's logits [prompt_len, vocab] as .npy");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (p_text->count() == 0 && p_ids->count() == 0) {
    std::cerr << "kiln_llm_generate: give --prompt or --prompt-ids\n";
    return 2;
  }
  std::vector<int32_t> ids;
  if (p_ids->count() && !parse_ids(prompt_ids_text, &ids)) {
    std::cerr << "kiln_llm_generate: --prompt-ids '" << prompt_ids_text << "' is not a list of token ids\n";
    return 2;
  }

  gen.stop_strings = stops;
  const bool engine_dir = std::filesystem::exists(std::filesystem::path(dir) / llm::kEngineInfoFile);
  if (engine_dir && !dump_logits.empty()) {
    std::cerr << "kiln_llm_generate: --dump-logits needs a checkpoint directory, not an engine\n";
    return 2;
  }
  std::unique_ptr<llm::LlmRunner> engine;
  StatusOr<llm::Checkpoint> ck = invalid_argument("no checkpoint");
  std::unique_ptr<llm::Tokenizer> tok;
  if (engine_dir) {
    llm::LlmRunnerOptions ro;
    ro.load_tokenizer = !stops.empty();  // the runner checks stop strings; text is decoded below
    ro.cuda_graph = cuda_graph;
    auto e = llm::LlmRunner::from_dir(dir, ro);
    if (!e.ok()) return fail(e.status());
    engine = std::move(*e);
  } else {
    ck = llm::Checkpoint::open(dir);
    if (!ck.ok()) return fail(ck.status());
  }
  if (auto t = llm::load_tokenizer(dir); t.ok()) {
    tok = std::move(*t);
  } else if (p_text->count() || !stops.empty()) {
    return fail(t.status());
  }
  if (p_text->count()) {
    llm::EncodeOptions eo;
    eo.add_special_tokens = !no_special;
    auto enc = tok->encode(prompt, eo);
    if (!enc.ok()) return fail(enc.status());
    ids = *enc;
    if (ids.empty()) {
      std::cerr << "kiln_llm_generate: the prompt encodes to no tokens\n";
      return 2;
    }
  }
  if (engine) return generate_with_engine(*engine, std::move(tok), ids, gen, as_json);
  auto runner = llm::LlmCpuRunner::create(*ck);
  if (!runner.ok()) return fail(runner.status());

  if (!dump_logits.empty()) {
    llm::KvCache cache = (*runner)->empty_cache();
    auto logits = (*runner)->forward(ids, &cache);
    if (!logits.ok()) return fail(logits.status());
    Status s = io::write_npy(dump_logits, logits->reshaped({logits->dim(1), logits->dim(2)}));
    if (!s.ok()) return fail(s);
  }

  std::vector<int32_t> out;
  std::string printed;  // bytes already written to stdout
  auto on_token = [&](int32_t t) {
    out.push_back(t);
    if (as_json || !tok) return;
    auto text = tok->decode(out);
    if (!text.ok() || text->size() < printed.size() || text->compare(0, printed.size(), printed) != 0) return;
    const size_t upto = complete_utf8_prefix(*text);
    if (upto > printed.size()) {
      std::cout << text->substr(printed.size(), upto - printed.size()) << std::flush;
      printed = text->substr(0, upto);
    }
  };
  auto r = (*runner)->generate(ids, gen, on_token);
  if (!r.ok()) return fail(r.status());
  std::string text;
  if (tok) {
    auto t = tok->decode(r->tokens);
    if (t.ok()) text = *t;
  }
  const size_t n = r->tokens.size();
  const double tps = r->decode_ms > 0 && n > 1 ? (n - 1) * 1000.0 / r->decode_ms : 0.0;
  if (as_json) {
    nlohmann::json j = {{"prompt_ids", ids}, {"tokens", r->tokens}, {"stop", llm::stop_reason_name(r->stop)},
                        {"prefill_ms", r->prefill_ms}, {"decode_ms", r->decode_ms}, {"decode_tokens_per_s", tps}};
    if (tok) j["text"] = text;  // invalid UTF-8 (a cut character) is replaced when dumped
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    if (!tok) {  // no tokenizer: the ids are the output
      for (size_t i = 0; i < n; ++i) std::cout << (i ? "," : "") << r->tokens[i];
    } else if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
      std::cout << text.substr(printed.size());
    }
    std::cout << "\n";
  }
  std::cerr << "kiln_llm_generate: " << ids.size() << " prompt tokens, " << n << " new (" << llm::stop_reason_name(r->stop)
            << "); prefill " << r->prefill_ms << " ms, decode " << tps << " tokens/s\n";
  return 0;
}
