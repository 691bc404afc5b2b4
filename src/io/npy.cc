// .npy reader and writer (see npy.h). The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline so the data starts at a multiple of 64 bytes.
#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <variant>

namespace kiln::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct DescrEntry {
  const char* code;  // kind + item size, without the byte-order character
  DataType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"f2", DataType::kFloat16}, {"f4", DataType::kFloat32}, {"f8", DataType::kFloat64}, {"i1", DataType::kInt8},
    {"i2", DataType::kInt16},   {"i4", DataType::kInt32},   {"i8", DataType::kInt64},   {"u1", DataType::kUInt8},
    {"u2", DataType::kUInt16},  {"u4", DataType::kUInt32},  {"u8", DataType::kUInt64},  {"b1", DataType::kBool},
};

// A value of the header dict: a string, a bool, or a tuple of ints.
using HeaderValue = std::variant<std::string, bool, std::vector<int64_t>>;

// Recursive-descent parser for the subset of Python literals .npy headers use.
class HeaderParser {
 public:
  explicit HeaderParser(std::string text) : s_(std::move(text)) {}

  Status parse(std::map<std::string, HeaderValue>* out) {
    skip();
    if (!eat('{')) return err("expected '{'");
    for (;;) {
      skip();
      if (eat('}')) return Status::Ok();
      std::string key;
      KILN_RETURN_IF_ERROR(string_lit(&key));
      skip();
      if (!eat(':')) return err("expected ':' after '" + key + "'");
      skip();
      HeaderValue v;
      KILN_RETURN_IF_ERROR(value(&v));
      (*out)[key] = std::move(v);
      skip();
      if (eat(',')) continue;
      skip();
      if (eat('}')) return Status::Ok();
      return err("expected ',' or '}'");
    }
  }

 private:
  Status value(HeaderValue* v) {
    if (peek() == '\'' || peek() == '"') {
      std::string s;
      KILN_RETURN_IF_ERROR(string_lit(&s));
      *v = s;
      return Status::Ok();
    }
    if (s_.compare(pos_, 4, "True") == 0) { pos_ += 4; *v = true; return Status::Ok(); }
    if (s_.compare(pos_, 5, "False") == 0) { pos_ += 5; *v = false; return Status::Ok(); }
    if (peek() == '[') return err("structured (record) dtypes are not supported");
    if (!eat('(')) return err("unexpected character '" + std::string(1, peek()) + "'");
    std::vector<int64_t> dims;
    for (;;) {
      skip();
      if (eat(')')) break;
      if (peek() < '0' || peek() > '9') return err("expected a non-negative integer in the shape tuple");
      int64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (d > (INT64_MAX - 9) / 10) return err("shape dimension too large");
        d = d * 10 + (s_[pos_++] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix, written by old numpy
      dims.push_back(d);
      skip();
      if (eat(',')) continue;
      skip();
      if (eat(')')) break;
      return err("expected ',' or ')' in the shape tuple");
    }
    *v = dims;
    return Status::Ok();
  }
  Status string_lit(std::string* out) {
    const char q = peek();
    if (q != '\'' && q != '"') return err("expected a quoted string");
    ++pos_;
    const size_t end = s_.find(q, pos_);
    if (end == std::string::npos) return err("unterminated string");
    *out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return Status::Ok();
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  Status err(const std::string& m) const {
    return invalid_argument("malformed .npy header at character " + std::to_string(pos_) + ": " + m);
  }

  std::string s_;
  size_t pos_ = 0;
};

const char* descr_code(DataType t) {
  for (const auto& d : kDescrs)
    if (d.dtype == t) return d.code;
  return nullptr;
}

}  // namespace

StatusOr<Tensor> parse_npy(const uint8_t* data, size_t size, const std::string& what) {
  auto fail = [&](const std::string& m) { return invalid_argument(what + ": " + m); };
  if (size < kMagicLen + 2 || std::memcmp(data, kMagic, kMagicLen) != 0)
    return fail("not a .npy file (missing the \\x93NUMPY magic)");
  const int major = data[6];
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    if (size < 10) return fail("truncated in the header length");
    header_len = data[8] | static_cast<size_t>(data[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return fail("truncated in the header length");
    header_len = data[8] | static_cast<size_t>(data[9]) << 8 | static_cast<size_t>(data[10]) << 16 |
                 static_cast<size_t>(data[11]) << 24;
    offset = 12;
  } else {
    return fail(".npy format version " + std::to_string(major) + "." + std::to_string(data[7]) +
                " is not supported (1.0, 2.0, 3.0 are)");
  }
  if (header_len > size - offset)
    return fail("truncated: the header needs " + std::to_string(header_len) + " bytes, " +
                std::to_string(size - offset) + " remain");
  std::map<std::string, HeaderValue> dict;
  Status ps = HeaderParser(std::string(reinterpret_cast<const char*>(data + offset), header_len)).parse(&dict);
  if (!ps.ok()) return ps.with_context(what);
  offset += header_len;

  auto descr = dict.find("descr");
  auto fortran = dict.find("fortran_order");
  auto shape_it = dict.find("shape");
  if (descr == dict.end() || !std::holds_alternative<std::string>(descr->second))
    return fail("the header has no 'descr' string");
  if (fortran == dict.end() || !std::holds_alternative<bool>(fortran->second))
    return fail("the header has no 'fortran_order' flag");
  if (shape_it == dict.end() || !std::holds_alternative<std::vector<int64_t>>(shape_it->second))
    return fail("the header has no 'shape' tuple");
  if (std::get<bool>(fortran->second))
    return fail("Fortran-order arrays are not supported; save a C-order array (numpy.ascontiguousarray)");
  const std::string d = std::get<std::string>(descr->second);
  if (d.size() < 3) return fail("unsupported dtype '" + d + "'");
  const char order = d[0];
  const std::string code = d.substr(1);
  DataType dtype = DataType::kUndefined;
  for (const auto& e : kDescrs)
    if (code == e.code) dtype = e.dtype;
  if (dtype == DataType::kUndefined)
    return fail("unsupported dtype '" + d + "' (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)");
  const bool one_byte = code[1] == '1';
  if (order == '>' && !one_byte) return fail("big-endian dtype '" + d + "' is not supported; save with '<'");
  if (order != '<' && order != '|' && order != '=' && order != '>') return fail("unsupported dtype '" + d + "'");

  const Shape shape = std::get<std::vector<int64_t>>(shape_it->second);
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim > 0 && numel > (int64_t{1} << 48) / dim) return fail("shape " + shape_str(shape) + " is too large");
    numel *= dim;
  }
  const size_t need = dtype_storage_bytes(dtype, numel);
  if (size - offset < need)
    return fail("truncated: shape " + shape_str(shape) + " of " + dtype_name(dtype) + " needs " + std::to_string(need) +
                " bytes of data, the file has " + std::to_string(size - offset));
  Tensor t(dtype, shape);
  if (need) std::memcpy(t.raw(), data + offset, need);
  if (dtype == DataType::kBool) {
    for (int64_t i = 0; i < numel; ++i)
      if (t.data<uint8_t>()[i] > 1) return fail("bool element " + std::to_string(i) + " is neither 0 nor 1");
  }
  return t;
}

StatusOr<Tensor> read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("'" + path + "' not found or not readable");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_npy(bytes.data(), bytes.size(), "'" + path + "'");
}

StatusOr<std::vector<uint8_t>> npy_bytes(const Tensor& t) {
  const char* code = descr_code(t.dtype());
  if (!code)
    return unsupported(std::string(".npy cannot hold dtype ") + dtype_name(t.dtype()) + " (cast it to float32 first)");
  std::string header = std::string("{'descr': '") + (code[1] == '1' ? "|" : "<") + code +
                       "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i) {
    header += std::to_string(t.shape()[i]);
    if (t.shape().size() == 1 || i + 1 < t.shape().size()) header += ",";
    if (i + 1 < t.shape().size()) header += " ";
  }
  header += "), }";
  // Pad with spaces and end with '\n' so that magic + version + length + header is a multiple of 64.
  const bool v2 = header.size() + 1 + 10 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + kMagicLen);
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  const size_t n = header.size();
  out.push_back(static_cast<uint8_t>(n));
  out.push_back(static_cast<uint8_t>(n >> 8));
  if (v2) {
    out.push_back(static_cast<uint8_t>(n >> 16));
    out.push_back(static_cast<uint8_t>(n >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  const auto* p = static_cast<const uint8_t*>(t.raw());
  out.insert(out.end(), p, p + t.nbytes());
  return out;
}

Status write_npy(const std::string& path, const Tensor& t) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, npy_bytes(t));
  std::ofstream f(path, std::ios::binary);
  if (!f) return not_found("cannot write '" + path + "'");
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return internal_error("writing '" + path + "' failed");
  return Status::Ok();
}

}  // namespace kiln::io
