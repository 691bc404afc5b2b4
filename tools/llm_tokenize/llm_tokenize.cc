// kiln_llm_tokenize: encodes lines with a checkpoint's tokenizer and compares the ids with a
// reference (scripts/check_tokenizers.sh feeds it the npm packages' ids).
//
//   kiln_llm_tokenize TOKENIZER LINES.jsonl [REF.jsonl] [--no-parse-special] [--add-special-tokens]
//
// TOKENIZER: a checkpoint directory, a tokenizer.json or a tokenizer.model. LINES.jsonl: one JSON
// string per line (so newlines and tabs inside a text survive). REF.jsonl: one JSON list of ids
// per line. Prints the agreement and round-trip counts and the first mismatches; exit status 0
// when every line agrees and round-trips, 1 otherwise, 2 on a usage or input error. Without REF
// it prints each line's ids as JSON.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/tokenizer.h"
#ifdef KILN_HAVE_SENTENCEPIECE
#include "llm/sentencepiece_tokenizer.h"
#endif

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef KILN_HAVE_SENTENCEPIECE
  kiln::llm::register_sentencepiece();
#endif
  std::vector<std::string> pos;
  kiln::llm::EncodeOptions opts;
  opts.add_special_tokens = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-parse-special") opts.parse_special = false;
    else if (a == "--add-special-tokens") opts.add_special_tokens = true;
    else pos.push_back(a);
  }
  if (pos.size() < 2 || pos.size() > 3) {
    std::cerr << "usage: kiln_llm_tokenize TOKENIZER LINES.jsonl [REF.jsonl] [--no-parse-special] [--add-special-tokens]\n";
    return 2;
  }
  const std::string& tpath = pos[0];
  auto tok = tpath.size() > 5 && tpath.substr(tpath.size() - 5) == ".json" ? kiln::llm::load_tokenizer_json(tpath)
             : tpath.size() > 6 && tpath.substr(tpath.size() - 6) == ".model" ? kiln::llm::load_sentencepiece(tpath)
                                                                             : kiln::llm::load_tokenizer(tpath);
  if (!tok.ok()) {
    std::cerr << "kiln_llm_tokenize: " << tok.status().to_string() << "\n";
    return 2;
  }
  const auto lines = read_lines(pos[1]);
  std::vector<std::string> refs;
  if (pos.size() == 3) {
    refs = read_lines(pos[2]);
    if (refs.size() != lines.size()) {
      std::cerr << "kiln_llm_tokenize: " << lines.size() << " lines but " << refs.size() << " reference lines\n";
      return 2;
    }
  }
  size_t agree = 0, round = 0, shown = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto j = nlohmann::json::parse(lines[i], nullptr, false);
    if (j.is_discarded() || !j.is_string()) {
      std::cerr << "kiln_llm_tokenize: line " << i + 1 << " of " << pos[1] << " is not a JSON string\n";
      return 2;
    }
    const std::string text = j.get<std::string>();
    auto ids = (*tok)->encode(text, opts);
    if (!ids.ok()) {
      std::cerr << "kiln_llm_tokenize: line " << i + 1 << ": " << ids.status().to_string() << "\n";
      return 2;
    }
    auto back = (*tok)->decode(*ids, {});
    const bool rt = back.ok() && *back == text;
    round += rt;
    if (refs.empty()) {
      std::cout << nlohmann::json(*ids).dump() << "\n";
      continue;
    }
    auto r = nlohmann::json::parse(refs[i], nullptr, false);
    const bool same = r.is_array() && r.get<std::vector<int64_t>>() == std::vector<int64_t>(ids->begin(), ids->end());
    agree += same;
    if ((!same || !rt) && shown < 5) {
      ++shown;
      std::cout << "line " << i + 1 << " " << j.dump() << (same ? "" : " ids differ") << (rt ? "" : " round trip differs") << "\n"
                << "  kiln:      " << nlohmann::json(*ids).dump() << "\n";
      if (!same) std::cout << "  reference: " << refs[i] << "\n";
      if (!rt && back.ok()) std::cout << "  decoded:   " << nlohmann::json(*back).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  }
  if (refs.empty()) return round == lines.size() ? 0 : 1;
  std::cout << (*tok)->kind() << " " << tpath << ": ids identical on " << agree << "/" << lines.size() << " lines, round trip exact on "
            << round << "/" << lines.size() << "\n";
  return agree == lines.size() && round == lines.size() ? 0 : 1;
}
