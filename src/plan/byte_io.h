// Little-endian byte writer and bounds-checked reader for the plan format. The reader has a
// sticky error: after the first failure every read returns zero and the error names the
// section and field where reading stopped, so decoders check ok() before using a count or id.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/host_memory.h"
#include "kiln/status.h"

namespace kiln::plan {

class ByteWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i32(int32_t v) { put(static_cast<uint32_t>(v), 4); }
  void i64(int64_t v) { put(static_cast<uint64_t>(v), 8); }
  void f32(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    put(b, 4);
  }
  void f64(double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    put(b, 8);
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  // A u64 length then the bytes (opaque blobs larger than a str may be).
  void blob(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  void pad_to(size_t alignment) {
    while (bytes_.size() % alignment) bytes_.push_back(0);
  }
  void zeros(size_t n) { bytes_.insert(bytes_.end(), n, uint8_t{0}); }
  // Capacity for `n` more bytes up front (one allocation, huge pages for a plan of GiBs:
  // core/host_memory.h), so appending never reallocates.
  void reserve_more(size_t n) {
    bytes_.reserve(bytes_.size() + n);
    if (bytes_.capacity() >= (size_t{64} << 20)) advise_huge_pages(bytes_.data(), bytes_.capacity());
  }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string section)
      : data_(data), size_(size), section_(std::move(section)) {}

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  size_t remaining() const { return size_ - pos_; }
  size_t pos() const { return pos_; }
  const std::string& section() const { return section_; }

  uint8_t u8(const char* field) { return static_cast<uint8_t>(get(field, 1)); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(get(field, 4)); }
  uint64_t u64(const char* field) { return get(field, 8); }
  int32_t i32(const char* field) { return static_cast<int32_t>(static_cast<uint32_t>(get(field, 4))); }
  int64_t i64(const char* field) { return static_cast<int64_t>(get(field, 8)); }
  float f32(const char* field) {
    uint32_t b = u32(field);
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  }
  double f64(const char* field) {
    uint64_t b = u64(field);
    double v;
    std::memcpy(&v, &b, 8);
    return v;
  }
  // A u32 length then that many bytes; lengths past kMaxString are refused.
  std::string str(const char* field) {
    uint32_t n = u32(field);
    if (!ok()) return {};
    if (n > kMaxString) {
      fail(field, "string length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxString));
      return {};
    }
    if (!need(field, n)) return {};
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // A u64 length then that many bytes; lengths past kMaxBlob are refused.
  std::string blob(const char* field) {
    const uint64_t n = u64(field);
    if (!ok()) return {};
    if (n > kMaxBlob) {
      fail(field, "blob length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxBlob));
      return {};
    }
    if (!need(field, static_cast<size_t>(n))) return {};
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  // A u32 element count, refused when `count * min_elem_bytes` exceeds what is left (so a
  // corrupt count cannot make the decoder allocate gigabytes).
  uint32_t count(const char* field, size_t min_elem_bytes) {
    uint32_t n = u32(field);
    if (!ok()) return 0;
    if (static_cast<uint64_t>(n) * min_elem_bytes > remaining()) {
      fail(field, "count " + std::to_string(n) + " needs at least " +
                      std::to_string(static_cast<uint64_t>(n) * min_elem_bytes) + " bytes, " +
                      std::to_string(remaining()) + " remain in the section");
      return 0;
    }
    return n;
  }
  // Records the first error: "plan section 'graph', field 'node.op': <msg>".
  void fail(const std::string& field, const std::string& msg) {
    if (ok()) status_ = invalid_plan("plan section '" + section_ + "', field '" + field + "': " + msg);
  }
  void fail_status(Status s) {
    if (ok()) status_ = std::move(s);
  }

  static constexpr uint32_t kMaxString = 1u << 20;
  static constexpr uint64_t kMaxBlob = 256ull << 20;

 private:
  bool need(const char* field, size_t n) {
    if (!ok()) return false;
    if (n > remaining()) {
      status_ = invalid_plan("truncated at section '" + section_ + "': need " + std::to_string(n) + " bytes, have " +
                             std::to_string(remaining()) + " (field '" + field + "')");
      return false;
    }
    return true;
  }
  uint64_t get(const char* field, int n) {
    if (!need(field, static_cast<size_t>(n))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string section_;
  Status status_;
};

}  // namespace kiln::plan
