// Helpers every `kiln` subcommand shares: the error printer and shape-range text.
#include <cstdio>

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

const Status& last_reported_error() { return g_last_error; }

std::string range_string(const ShapeRange& r) {
  if (r.min == r.max) return shape_str(r.min);
  return shape_str(r.min) + ".." + shape_str(r.max) + " (opt " + shape_str(r.opt) + ")";
}

}  // namespace kiln::cli
