// Writing a file the user asked for (a plan, an engine directory's files, a quantized model):
// whole or not at all, so an existing file is never half-replaced and a failed write leaves no
// partial output behind.
#pragma once

#include <cstddef>
#include <string>

#include "kiln/status.h"

namespace kiln::io {

// Writes `bytes` bytes at `data` to `path` as `kind` ("plan", "engine info"): to `path` + ".tmp"
// first, flushed, then renamed over `path`. InvalidArgument naming the path (and the OS reason)
// when the temporary file cannot be created or written or the rename fails (e.g. `path` is a
// directory); the temporary file is removed and `path` is left as it was.
Status write_file_atomically(const std::string& path, const void* data, size_t bytes, const std::string& kind);

}  // namespace kiln::io
