// Helpers every `kiln` subcommand shares: the error printer and shape-range text.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "onnx/importer.h"
#include "plan/plan_format.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

namespace {
thread_local Status g_last_error;
}

int report_error(const char* command, const Status& s) {
  std::fprintf(stderr, "kiln %s: %s\n", command, s.to_string().c_str());
  g_last_error = s;
  return kExitError;
}

StatusOr<std::shared_ptr<Engine>> load_plan(const std::string& path, const Logger& logger) {
  auto e = Runtime::load_engine(path, logger);
  if (e.ok() || e.status().code() != StatusCode::kInvalidPlan) return e;
  // Not a plan: say so when the file is an ONNX model (read only on this error path).
  std::ifstream f(path, std::ios::binary);
  char magic[plan::kMagicBytes] = {};
  if (!f.read(magic, sizeof magic) || std::memcmp(magic, plan::kMagic, sizeof magic) == 0) return e;
  f.seekg(0);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!onnx_import::looks_like_onnx(bytes)) return e;
  return invalid_argument("'" + path + "' is an ONNX model, not a Kiln plan (build a plan first: kiln build " + path +
                          " -o model.plan)");
}

const Status& last_reported_error() { return g_last_error; }

std::string range_string(const ShapeRange& r) {
  if (r.min == r.max) return shape_str(r.min);
  return shape_str(r.min) + ".." + shape_str(r.max) + " (opt " + shape_str(r.opt) + ")";
}

}  // namespace kiln::cli
