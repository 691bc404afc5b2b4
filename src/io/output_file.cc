// write_file_atomically (see output_file.h).
#include "io/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::io {

Status write_file_atomically(const std::string& path, const void* data, size_t bytes, const std::string& kind) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return invalid_argument("cannot write the " + kind + " '" + path + "': cannot create '" + tmp + "': " +
                            std::strerror(errno));
  const size_t wrote = bytes ? std::fwrite(data, 1, bytes, f) : 0;
  const int werr = wrote == bytes ? 0 : errno;
  const bool flushed = std::fflush(f) == 0;
  const int ferr = flushed ? 0 : errno;
  const bool closed = std::fclose(f) == 0;
  if (wrote != bytes || !flushed || !closed) {
    std::remove(tmp.c_str());
    const int e = werr ? werr : ferr;
    return invalid_argument("cannot write the " + kind + " '" + path + "': wrote " + std::to_string(wrote) + " of " +
                            std::to_string(bytes) + " bytes" + (e ? std::string(": ") + std::strerror(e) : ""));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return invalid_argument("cannot write the " + kind + " '" + path + "': rename from '" + tmp + "' failed: " +
                            std::strerror(e));
  }
  return Status::Ok();
}

}  // namespace kiln::io
