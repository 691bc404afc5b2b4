// The persistent timing cache (`kiln build --timing-cache FILE`): measured device times of
// candidate tactics, keyed by layer signature + tactic, valid for one GPU and library set.
// A build reads the file at start, skips timing for layers whose signature it holds, and
// writes the file back at the end (atomic rename). Format: docs/decisions/0007-timing-cache.md.
// Compiled in every build (no CUDA dependency) so key building and the file are CPU-testable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln {

// What measured times are valid for: a cache written under another header is ignored.
struct TimingCacheHeader {
  std::string gpu_name;          // cudaDeviceProp::name, "NVIDIA H200"
  int sm_major = 0, sm_minor = 0;  // compute capability
  uint64_t cudnn_version = 0;      // cudnnGetVersion(), 91900 for 9.19.0
  uint64_t cublaslt_version = 0;   // cublasLtGetVersion()
  std::string kiln_version;        // KILN_VERSION_STRING of the writer
  bool operator==(const TimingCacheHeader& o) const;
  std::string to_string() const;   // "NVIDIA H200 sm_90, cuDNN 91900, cuBLASLt 130100, kiln 0.1.0"
};

class TimingCache {
 public:
  explicit TimingCache(TimingCacheHeader header = {}) : header_(std::move(header)) {}

  // The file key of one measurement: "<signature> | <tactic>". A signature names the op kind,
  // every shape, dtypes/layouts, op parameters, epilogue and the workspace cap; the tactic is
  // the candidate's id within that layer ("algo=1", "heuristic#3", "cudnn").
  static std::string key(const std::string& signature, const std::string& tactic);

  // Every cached tactic of `signature` -> ms. Non-empty counts as a hit, empty as a miss.
  std::map<std::string, double> lookup(const std::string& signature);
  // Records one measured time (ms >= 0; replaces an older entry).
  void record(const std::string& signature, const std::string& tactic, double ms);

  size_t size() const;  // measurements held
  int hits() const { return hits_; }
  int misses() const { return misses_; }
  // The signatures that missed, in lookup order (the build log names them: a miss on a warm
  // rebuild means a layer's signature or candidate set changed).
  const std::vector<std::string>& missed() const { return missed_; }
  const TimingCacheHeader& header() const { return header_; }

  // JSON text of the cache (see the decision record) and back. from_json refuses malformed
  // text with an error naming the field; entries of a file whose header differs from this
  // cache's are ignored (not an error) and `log` says why.
  std::string to_json() const;
  Status from_json(const std::string& text, const std::function<void(const std::string&)>& log);
  // File versions: a missing file is an empty cache (first build); save writes FILE.tmp.<pid>
  // and renames it over FILE, so readers never see half a file.
  Status load(const std::string& path, const std::function<void(const std::string&)>& log);
  Status save(const std::string& path) const;

 private:
  TimingCacheHeader header_;
  std::map<std::string, std::map<std::string, double>> entries_;  // signature -> tactic -> ms
  int hits_ = 0, misses_ = 0;
  std::vector<std::string> missed_;
};

}  // namespace kiln
