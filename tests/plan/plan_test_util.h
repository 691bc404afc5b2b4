// Shared helpers of the plan tests: build a plan from a tiny model, patch plan bytes and
// re-seal the checksum (so the structural validation behind it gets exercised).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "builder/build_from_graph.h"
#include "kiln/builder.h"
#include "kiln/plan.h"
#include "onnx/importer.h"
#include "plan/plan_format.h"
#include "plan/onnx_test_models.h"

namespace kiln::testing {

// A CPU plan of add_relu_model() with x in [1..8, 4] (opt [2, 4]), on any machine (the format
// tests expect a CPU plan's header and tactics). fuse_pointwise is off so the plan keeps its two
// layers (Add, Relu) and an edge between them for the engine/inspect/dot tests.
inline std::vector<uint8_t> build_add_relu_plan() {
  auto g = onnx_import::import_model_bytes(add_relu_model().bytes(), ".");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  BuilderConfig c;
  c.target = TargetDevice::kCpu;
  c.disabled_passes = {"fuse_pointwise"};
  OptimizationProfile p;
  EXPECT_TRUE(p.set_dimensions("x", {1, 4}, {2, 4}, {8, 4}).ok());
  c.profiles.push_back(p);
  auto bytes = build_from_graph(*g, c);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

inline void store_le(std::vector<uint8_t>& b, size_t off, uint64_t v, int n) {
  if (off + static_cast<size_t>(n) > b.size()) {
    ADD_FAILURE() << "store_le past the end of a " << b.size() << "-byte plan";
    return;
  }
  for (int i = 0; i < n; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes the checksum after a deliberate edit.
inline void reseal(std::vector<uint8_t>& b) {
  store_le(b, plan::kOffChecksum, plan_checksum(b.data(), b.size()), 8);
}

// Replaces the first occurrence of `from` with `to` (same length); false if absent.
inline bool patch_bytes(std::vector<uint8_t>& b, const std::string& from, const std::string& to) {
  auto it = std::search(b.begin(), b.end(), from.begin(), from.end());
  if (it == b.end()) return false;
  std::copy(to.begin(), to.end(), it);
  return true;
}

// The kiln CLI beside the running test binary (the GPU machine carries both in one folder),
// else the one in this build's directory.
inline std::string kiln_binary() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path() / "kiln")) return (self.parent_path() / "kiln").string();
  return std::string(KILN_BINARY_DIR) + "/kiln";
}

// Runs `kiln <args>` with stdout and stderr into `dir`/log.txt; returns the exit code (-1 when
// it did not exit normally) and the log in *out.
inline int run_kiln(const std::string& args, const std::string& dir, std::string* out) {
  const std::string log = dir + "/log.txt";
  const std::string cmd = kiln_binary() + " " + args + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace kiln::testing
