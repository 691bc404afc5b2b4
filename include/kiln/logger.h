// The logger: where the library's messages go (TensorRT's ILogger). Kiln's library never
// writes to stdout or stderr itself; a tool or application passes a Logger (BuilderConfig::logger,
// Runtime's load functions) and decides what to print. Build progress has its own structured
// callback (BuilderConfig::progress).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kiln {

enum class LogSeverity : uint8_t {
  kError = 0,    // the operation failed (the Status says the same)
  kWarning = 1,  // something the user should know: a fallback, an ignored setting
  kInfo = 2,     // what was done: timing-cache hits, tactic counts
  kVerbose = 3,  // where time went: load steps, lowering per op kind (was KILN_LOAD_TRACE)
};
const char* log_severity_name(LogSeverity s);  // "error", "warning", "info", "verbose"

// Called synchronously on the thread doing the work; may be called from several threads when
// several engines load at once. An empty Logger drops every message.
using Logger = std::function<void(LogSeverity severity, const std::string& message)>;

}  // namespace kiln
