// The persistent timing cache (see timing_cache.h and docs/decisions/0007-timing-cache.md).
#include "builder/timing_cache.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kiln {
namespace {

constexpr const char* kFormat = "kiln-timing-cache";
constexpr int kFormatVersion = 1;
constexpr const char* kSeparator = " | ";

}  // namespace

bool TimingCacheHeader::operator==(const TimingCacheHeader& o) const {
  return gpu_name == o.gpu_name && sm_major == o.sm_major && sm_minor == o.sm_minor &&
         cudnn_version == o.cudnn_version && cublaslt_version == o.cublaslt_version && kiln_version == o.kiln_version;
}

std::string TimingCacheHeader::to_string() const {
  return gpu_name + " sm_" + std::to_string(sm_major) + std::to_string(sm_minor) + ", cuDNN " +
         std::to_string(cudnn_version) + ", cuBLASLt " + std::to_string(cublaslt_version) + ", kiln " + kiln_version;
}

std::string TimingCache::key(const std::string& signature, const std::string& tactic) {
  return signature + kSeparator + tactic;
}

std::map<std::string, double> TimingCache::lookup(const std::string& signature) {
  auto it = entries_.find(signature);
  if (it == entries_.end() || it->second.empty()) {
    ++misses_;
    missed_.push_back(signature);
    return {};
  }
  ++hits_;
  return it->second;
}

size_t TimingCache::size() const {
  size_t n = 0;
  for (const auto& [sig, tactics] : entries_) n += tactics.size();
  return n;
}

void TimingCache::record(const std::string& signature, const std::string& tactic, double ms) {
  if (ms < 0) return;
  entries_[signature][tactic] = ms;
}

std::string TimingCache::to_json() const {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kFormatVersion;
  j["header"] = {{"gpu", header_.gpu_name},
                 {"sm", std::to_string(header_.sm_major) + "." + std::to_string(header_.sm_minor)},
                 {"cudnn_version", header_.cudnn_version},
                 {"cublaslt_version", header_.cublaslt_version},
                 {"kiln_version", header_.kiln_version}};
  nlohmann::json e = nlohmann::json::object();
  for (const auto& [sig, tactics] : entries_)
    for (const auto& [tactic, ms] : tactics) e[key(sig, tactic)] = ms;
  j["entries"] = std::move(e);
  return j.dump(1);
}

Status TimingCache::from_json(const std::string& text, const std::function<void(const std::string&)>& log) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("timing cache: not a JSON object");
  if (!j.contains("format") || j["format"] != kFormat)
    return invalid_argument(std::string("timing cache: field 'format' is not \"") + kFormat + "\"");
  if (!j.contains("version") || !j["version"].is_number_integer())
    return invalid_argument("timing cache: field 'version' is missing or not an integer");
  if (j["version"].get<int>() != kFormatVersion) {
    if (log) log("timing cache: format version " + j["version"].dump() + " is not " + std::to_string(kFormatVersion) +
                 "; ignoring its entries");
    return Status::Ok();
  }
  if (!j.contains("header") || !j["header"].is_object()) return invalid_argument("timing cache: field 'header' is missing");
  const nlohmann::json& h = j["header"];
  TimingCacheHeader fh;
  try {
    fh.gpu_name = h.at("gpu").get<std::string>();
    const std::string sm = h.at("sm").get<std::string>();
    const size_t dot = sm.find('.');
    if (dot == std::string::npos) return invalid_argument("timing cache: header.sm '" + sm + "' is not MAJOR.MINOR");
    fh.sm_major = std::stoi(sm.substr(0, dot));
    fh.sm_minor = std::stoi(sm.substr(dot + 1));
    fh.cudnn_version = h.at("cudnn_version").get<uint64_t>();
    fh.cublaslt_version = h.at("cublaslt_version").get<uint64_t>();
    fh.kiln_version = h.at("kiln_version").get<std::string>();
  } catch (const std::exception& e) {
    return invalid_argument(std::string("timing cache: bad header: ") + e.what());
  }
  if (!j.contains("entries") || !j["entries"].is_object())
    return invalid_argument("timing cache: field 'entries' is missing or not an object");
  std::map<std::string, std::map<std::string, double>> entries;
  for (const auto& [k, v] : j["entries"].items()) {
    const size_t sep = k.rfind(kSeparator);
    if (sep == std::string::npos || !v.is_number() || v.get<double>() < 0)
      return invalid_argument("timing cache: entry '" + k + "' is not \"SIGNATURE | TACTIC\": ms >= 0");
    entries[k.substr(0, sep)][k.substr(sep + std::string(kSeparator).size())] = v.get<double>();
  }
  if (!(fh == header_)) {
    if (log) log("timing cache: written for " + fh.to_string() + ", this build is " + header_.to_string() +
                 "; ignoring its " + std::to_string(j["entries"].size()) + " entries");
    return Status::Ok();
  }
  for (auto& [sig, tactics] : entries)
    for (auto& [tactic, ms] : tactics) entries_[sig][tactic] = ms;
  return Status::Ok();
}

Status TimingCache::load(const std::string& path, const std::function<void(const std::string&)>& log) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (log) log("timing cache: '" + path + "' does not exist yet; it will be written after tuning");
    return Status::Ok();
  }
  std::stringstream ss;
  ss << f.rdbuf();
  Status s = from_json(ss.str(), log);
  if (!s.ok()) return s.with_context("'" + path + "'");
  if (log) log("timing cache: read " + std::to_string(size()) + " entries from '" + path + "'");
  return Status::Ok();
}

Status TimingCache::save(const std::string& path) const {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return not_found("timing cache: cannot write '" + tmp + "'");
    f << to_json() << "\n";
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return internal_error("timing cache: writing '" + tmp + "' failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return internal_error("timing cache: cannot rename '" + tmp + "' to '" + path + "'");
  }
  return Status::Ok();
}

}  // namespace kiln
