// Reading a file the user named (a model, a plan, a tensor): one message per way it can be
// wrong, naming the path, instead of whatever the first read happened to report (a directory
// opened as an empty stream, a size of 2^63 - 1 from tellg).
#pragma once

#include <string>

#include "kiln/status.h"

namespace kiln::io {

// Checks `path` before it is read as `kind` ("ONNX model", "plan", "input file"):
// kNotFound when nothing is there; kInvalidArgument when it is a directory, not a regular file
// (a device, a FIFO), unreadable (permission), or empty. Returns its size in bytes.
StatusOr<int64_t> check_input_file(const std::string& path, const std::string& kind);

// check_input_file, then the whole file's bytes.
StatusOr<std::string> read_input_file(const std::string& path, const std::string& kind);

}  // namespace kiln::io
