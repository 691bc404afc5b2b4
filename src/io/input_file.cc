// Checked reads of user-named files (see input_file.h).
#include "io/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln::io {

StatusOr<int64_t> check_input_file(const std::string& path, const std::string& kind) {
  const std::string what = kind + " '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return not_found(what + " not found");
    return invalid_argument(what + " cannot be read: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return invalid_argument(what + " is a directory, not a file");
  if (!S_ISREG(st.st_mode)) return invalid_argument(what + " is not a regular file");
  if (::access(path.c_str(), R_OK) != 0)
    return invalid_argument(what + " cannot be read: " + std::strerror(errno));
  if (st.st_size == 0) return invalid_argument(what + " is empty (0 bytes)");
  return static_cast<int64_t>(st.st_size);
}

StatusOr<std::string> read_input_file(const std::string& path, const std::string& kind) {
  KILN_ASSIGN_OR_RETURN(int64_t size, check_input_file(path, kind));
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalid_argument(kind + " '" + path + "' cannot be opened: " + std::strerror(errno));
  std::string bytes;
  bytes.resize(static_cast<size_t>(size));
  f.read(bytes.data(), size);
  if (f.gcount() != size)
    return invalid_argument(kind + " '" + path + "': read " + std::to_string(f.gcount()) + " of " +
                            std::to_string(size) + " bytes");
  return bytes;
}

}  // namespace kiln::io
