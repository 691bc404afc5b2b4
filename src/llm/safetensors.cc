// safetensors reader: mapping, header parsing and the validation the format's README asks for.
#include "llm/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/checked_size.h"

namespace kiln::llm {

using nlohmann::json;

StatusOr<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found("'" + path + "' not found");
  if (!S_ISREG(st.st_mode)) return invalid_argument("'" + path + "' is not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_argument("'" + path + "' cannot be read: " + std::strerror(errno));
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    // Private and writable: pages a caller writes to are copied (the file never changes), so a
    // Tensor wrapping the mapping is as safe to hand out as an allocated one.
    void* p = ::mmap(nullptr, f->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return invalid_argument("'" + path + "' cannot be mapped: " + std::strerror(err));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Tensor SafetensorsTensor::to_tensor() const {
  const size_t elem = std::max(1, dtype_bits(dtype) / 8);
  if (nbytes > 0 && reinterpret_cast<uintptr_t>(data) % elem == 0)
    return Tensor::wrap(dtype, shape, file, const_cast<uint8_t*>(data));
  Tensor t(dtype, shape);
  if (nbytes) std::memcpy(t.raw(), data, nbytes);
  return t;
}

namespace {

struct DtypeName {
  const char* name;
  DataType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F32", DataType::kFloat32},        {"F16", DataType::kFloat16},      {"BF16", DataType::kBFloat16},
    {"F8_E4M3", DataType::kFloat8E4M3FN}, {"F8_E5M2", DataType::kFloat8E5M2}, {"I8", DataType::kInt8},
    {"I32", DataType::kInt32},          {"I64", DataType::kInt64},        {"U8", DataType::kUInt8},
    {"BOOL", DataType::kBool},
};
// Written by safetensors but not read by Kiln: named as Unsupported rather than malformed.
constexpr const char* kKnownUnread[] = {"F64", "I16", "U16", "U32", "U64", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};

}  // namespace

DataType dtype_from_safetensors(const std::string& s) {
  for (const auto& d : kDtypes)
    if (s == d.name) return d.dtype;
  return DataType::kUndefined;
}

const char* safetensors_dtype_name(DataType t) {
  for (const auto& d : kDtypes)
    if (t == d.dtype) return d.name;
  return "";
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const std::string where = "safetensors file '" + path + "'";
  auto bad = [&](const std::string& m) { return invalid_model(where + ": " + m); };
  if (file->size() < 8)
    return bad("holds " + std::to_string(file->size()) + " bytes, less than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file->data()[i];  // little-endian
  if (n > kMaxSafetensorsHeaderBytes)
    return bad("header length " + std::to_string(n) + " bytes is past the format's limit of " +
               std::to_string(kMaxSafetensorsHeaderBytes));
  if (n > file->size() - 8)
    return bad("header length " + std::to_string(n) + " bytes runs past the end of the file (" +
               std::to_string(file->size()) + " bytes): truncated?");
  const char* hbegin = reinterpret_cast<const char*>(file->data() + 8);
  const std::string_view header(hbegin, n);
  if (n == 0 || header[0] != '{') return bad("header does not start with '{'");

  // Duplicate top-level keys are an error (nlohmann keeps the last silently): watch key events.
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1) {
      const std::string k = parsed.get<std::string>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  // The writer pads the header with spaces to an 8-byte multiple; JSON allows trailing blanks.
  json h = json::parse(header.begin(), header.end(), cb, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object()) return bad("header is not a valid JSON object");
  if (!duplicate.empty()) return bad("tensor '" + duplicate + "' appears twice in the header");

  SafetensorsFile out;
  out.file_ = file;
  const uint64_t data_start = 8 + n;
  const uint64_t buffer = file->size() - data_start;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return bad("__metadata__ is not an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) return bad("__metadata__ entry '" + m.key() + "' is not a string");
        out.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tw = "tensor '" + name + "'";
    if (name.empty()) return bad("a tensor has an empty name");
    if (!e.is_object()) return bad(tw + ": entry is not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!e.contains(key)) return bad(tw + ": no '" + key + "'");
    if (!e["dtype"].is_string()) return bad(tw + ": dtype is not a string");
    const std::string ds = e["dtype"].get<std::string>();
    SafetensorsTensor t;
    t.name = name;
    t.dtype = dtype_from_safetensors(ds);
    if (t.dtype == DataType::kUndefined) {
      for (const char* k : kKnownUnread)
        if (ds == k) return unsupported(where + ": " + tw + ": dtype " + ds + " is not supported (F32 F16 BF16 F8_E4M3 F8_E5M2 I8 I32 I64 U8 BOOL are)");
      return bad(tw + ": unknown dtype '" + ds + "'");
    }
    const json& sh = e["shape"];
    if (!sh.is_array()) return bad(tw + ": shape is not an array");
    for (const json& d : sh) {
      if (!d.is_number_integer()) return bad(tw + ": shape has a non-integer dim");
      if (!d.is_number_unsigned()) return bad(tw + ": shape has a negative dim");
      if (d.get<uint64_t>() > static_cast<uint64_t>(kMaxTensorElements)) return bad(tw + ": dim " + d.dump() + " is past Kiln's limit");
      t.shape.push_back(d.get<int64_t>());
    }
    auto counted = checked_nbytes(t.dtype, t.shape, tw);
    if (!counted.ok()) return bad(counted.status().message());
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad(tw + ": data_offsets is not a pair of non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en) return bad(tw + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] end before they begin");
    if (en > buffer)
      return bad(tw + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] run past the data (" +
                 std::to_string(buffer) + " bytes after the header): truncated?");
    if (en - b != static_cast<uint64_t>(*counted))
      return bad(tw + ": data_offsets span " + std::to_string(en - b) + " bytes, but " + ds + " " + shape_str(t.shape) +
                 " needs " + std::to_string(*counted));
    t.nbytes = static_cast<size_t>(en - b);
    t.file_offset = data_start + b;
    t.data = file->data() + t.file_offset;
    t.file = file;
    out.tensors_.push_back(std::move(t));
  }
  // No overlaps and no holes: in offset order each tensor begins where the previous one ended
  // (empty tensors may sit anywhere an end is), and the last ends at the end of the file.
  std::stable_sort(out.tensors_.begin(), out.tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.file_offset != b.file_offset ? a.file_offset < b.file_offset : a.nbytes < b.nbytes;
  });
  uint64_t pos = data_start;
  const SafetensorsTensor* prev = nullptr;
  for (const auto& t : out.tensors_) {
    if (t.file_offset < pos)
      return bad("tensors '" + prev->name + "' and '" + t.name + "' overlap (bytes " + std::to_string(t.file_offset - data_start) +
                 ".." + std::to_string(pos - data_start) + " of the data)");
    if (t.file_offset > pos)
      return bad("bytes " + std::to_string(pos - data_start) + ".." + std::to_string(t.file_offset - data_start) +
                 " of the data belong to no tensor (before tensor '" + t.name + "'); the format allows no holes");
    pos += t.nbytes;
    if (t.nbytes) prev = &t;
    else if (!prev) prev = &t;
  }
  if (pos != file->size())
    return bad(std::to_string(file->size() - pos) + " bytes after the last tensor belong to no tensor");
  for (size_t i = 0; i < out.tensors_.size(); ++i) out.index_[out.tensors_[i].name] = i;
  return out;
}

}  // namespace kiln::llm
