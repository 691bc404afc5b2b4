// .npz through libzip (see npz.h).
#include "io/npz.h"

#include <zip.h>

#include <cstdio>
#include <memory>
#include <set>

#include "io/input_file.h"
#include "io/npy.h"

namespace kiln::io {
namespace {

std::string zip_error_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

struct ZipCloser {
  void operator()(zip_t* z) const {
    if (z) zip_discard(z);
  }
};

constexpr uint64_t kMaxMemberBytes = 16ull << 30;

}  // namespace

StatusOr<std::vector<std::pair<std::string, Tensor>>> read_npz(const std::string& path) {
  KILN_RETURN_IF_ERROR(check_input_file(path, "calibration archive (.npz)").status());
  int err = 0;
  std::unique_ptr<zip_t, ZipCloser> z(zip_open(path.c_str(), ZIP_RDONLY, &err));
  if (!z) return invalid_argument("'" + path + "' is not a .npz (ZIP) archive: " + zip_error_text(err));
  const zip_int64_t n = zip_get_num_entries(z.get(), 0);
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<std::string> seen;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z.get(), i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE))
      return invalid_argument("'" + path + "': member " + std::to_string(i) + " cannot be read: " +
                              zip_strerror(z.get()));
    std::string name = st.name;
    if (!name.empty() && name.back() == '/') continue;  // a directory entry
    const std::string what = "'" + path + "' member '" + name + "'";
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0)
      return invalid_argument(what + " is not a .npy array (numpy.savez writes <name>.npy members)");
    if (st.size > kMaxMemberBytes)
      return invalid_argument(what + " holds " + std::to_string(st.size) + " bytes, more than 16 GiB");
    std::vector<uint8_t> bytes(static_cast<size_t>(st.size));
    zip_file_t* f = zip_fopen_index(z.get(), i, 0);
    if (!f) return invalid_argument(what + " cannot be opened: " + zip_strerror(z.get()));
    const zip_int64_t got = bytes.empty() ? 0 : zip_fread(f, bytes.data(), bytes.size());
    zip_fclose(f);
    if (got < 0 || static_cast<uint64_t>(got) != st.size)
      return invalid_argument(what + " is truncated or corrupt (read " + std::to_string(got) + " of " +
                              std::to_string(st.size) + " bytes)");
    KILN_ASSIGN_OR_RETURN(Tensor t, parse_npy(bytes.data(), bytes.size(), what));
    name.resize(name.size() - 4);
    if (!seen.insert(name).second) return invalid_argument("'" + path + "' holds two arrays named '" + name + "'");
    out.emplace_back(std::move(name), std::move(t));
  }
  if (out.empty()) return invalid_argument("'" + path + "' holds no arrays");
  return out;
}

Status write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays) {
  const std::string tmp = path + ".tmp";
  std::remove(tmp.c_str());
  int err = 0;
  std::unique_ptr<zip_t, ZipCloser> z(zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err));
  if (!z) return invalid_argument("cannot create '" + tmp + "': " + zip_error_text(err));
  std::vector<std::vector<uint8_t>> keep;  // libzip reads the buffers at zip_close
  keep.reserve(arrays.size());
  for (const auto& [name, t] : arrays) {
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> b, npy_bytes(t));
    keep.push_back(std::move(b));
    zip_source_t* src = zip_source_buffer(z.get(), keep.back().data(), keep.back().size(), 0);
    if (!src) return invalid_argument("'" + path + "': " + zip_strerror(z.get()));
    const zip_int64_t idx = zip_file_add(z.get(), (name + ".npy").c_str(), src, ZIP_FL_OVERWRITE);
    if (idx < 0) {
      zip_source_free(src);
      return invalid_argument("'" + path + "': cannot add '" + name + "': " + zip_strerror(z.get()));
    }
    zip_set_file_compression(z.get(), idx, ZIP_CM_STORE, 0);
  }
  if (zip_close(z.get()) != 0) {
    const std::string why = zip_strerror(z.get());
    std::remove(tmp.c_str());
    return invalid_argument("cannot write '" + path + "': " + why);
  }
  z.release();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return invalid_argument("cannot write '" + path + "' (rename from '" + tmp + "' failed)");
  }
  return Status::Ok();
}

}  // namespace kiln::io
