// Status formatting.
#include "kiln/status.h"
#include "kiln/logger.h"

namespace kiln {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kInvalidModel: return "InvalidModel";
    case StatusCode::kInvalidPlan: return "InvalidPlan";
    case StatusCode::kOutOfMemory: return "OutOfMemory";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace kiln

namespace kiln {

const char* log_severity_name(LogSeverity s) {
  switch (s) {
    case LogSeverity::kError: return "error";
    case LogSeverity::kWarning: return "warning";
    case LogSeverity::kInfo: return "info";
    case LogSeverity::kVerbose: return "verbose";
  }
  return "unknown";
}

}  // namespace kiln
