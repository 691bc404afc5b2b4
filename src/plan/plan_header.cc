// The plan's fixed header and section table (layout in kiln/plan.h): parsed with explicit
// bounds checks in a fixed order (magic, version, header size, file length, checksum, fields)
// so each kind of damage gets the message that explains it.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "plan/plan_format.h"

namespace kiln {

uint64_t fnv1a64(const uint8_t* data, size_t size, uint64_t hash) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= kPrime;
  }
  return hash;
}

uint64_t hash64_words(const uint8_t* data, size_t size, uint64_t seed) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t lane[4] = {seed, seed ^ 1, seed ^ 2, seed ^ 3};
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, data + i + 8 * k, 8);  // little-endian hosts only (x86-64, aarch64)
      lane[k] = (lane[k] ^ w) * kPrime;
    }
  }
  lane[0] = fnv1a64(data + i, size - i, lane[0]);
  uint64_t h = seed;
  for (uint64_t v : lane) h = (h ^ v) * kPrime;
  return (h ^ static_cast<uint64_t>(size)) * kPrime;
}

uint64_t plan_checksum(const uint8_t* data, size_t size) {
  const uint64_t head = fnv1a64(data, std::min(size, plan::kOffChecksum));
  if (size <= plan::kOffChecksum + 8) return head;
  return hash64_words(data + plan::kOffChecksum + 8, size - plan::kOffChecksum - 8, head);
}

std::string PlanTarget::to_string() const {
  if (backend == PlanBackend::kCpu) return "cpu";
  return "cuda sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + " (cuDNN " + std::to_string(cudnn_version) +
         ", cuBLASLt " + std::to_string(cublaslt_version) + ")";
}

std::string TensorDesc::shape_string() const {
  if (!rank_known) return "?";
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    if (dims[i] >= 0) s += std::to_string(dims[i]);
    else s += (i < symbols.size() && !symbols[i].empty()) ? symbols[i] : "?";
  }
  return s + "]";
}

StatusOr<PlanHeader> read_plan_header(const uint8_t* data, size_t size) {
  PlanHeader h;
  std::vector<plan::SectionEntry> sections;
  KILN_RETURN_IF_ERROR(plan::parse_header(data, size, &h, &sections));
  return h;
}

namespace plan {

const char* section_name(SectionTag tag) {
  switch (tag) {
    case SectionTag::kGraph: return "graph";
    case SectionTag::kProfiles: return "profiles";
    case SectionTag::kLayers: return "layers";
    case SectionTag::kBuild: return "build";
    case SectionTag::kWeights: return "weights";
  }
  return nullptr;
}

namespace {

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
uint64_t load_u64(const uint8_t* p) { return load_u32(p) | static_cast<uint64_t>(load_u32(p + 4)) << 32; }

Status truncated(const std::string& section, uint64_t need, uint64_t have) {
  return invalid_plan("truncated at section '" + section + "': need " + std::to_string(need) + " bytes, have " +
                      std::to_string(have));
}

Status bad_field(const std::string& field, const std::string& msg) {
  return invalid_plan("plan header field '" + field + "': " + msg);
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

constexpr SectionTag kAllTags[] = {SectionTag::kGraph, SectionTag::kProfiles, SectionTag::kLayers, SectionTag::kBuild,
                                   SectionTag::kWeights};

}  // namespace

Status parse_header(const uint8_t* data, size_t size, PlanHeader* h, std::vector<SectionEntry>* sections) {
  if (size == 0 || data == nullptr) return invalid_plan("not a Kiln plan: the file is empty");
  if (size < kMagicBytes) {
    if (std::memcmp(data, kMagic, size) == 0) return truncated("header", kOffSectionTable, size);
    return invalid_plan("not a Kiln plan (bad magic; expected the file to start with 'KILNPLAN')");
  }
  if (std::memcmp(data, kMagic, kMagicBytes) != 0)
    return invalid_plan("not a Kiln plan (bad magic; expected the file to start with 'KILNPLAN')");
  if (size < kOffHeaderSize) return truncated("header", kOffSectionTable, size);
  h->format_version = load_u32(data + kOffVersion);
  if (h->format_version != kPlanFormatVersion)
    return invalid_plan("plan format version " + std::to_string(h->format_version) + ", this build reads " +
                        std::to_string(kPlanFormatVersion) + " (rebuild the plan with this Kiln)");
  if (size < kOffSectionTable) return truncated("header", kOffSectionTable, size);

  const uint32_t count = load_u32(data + kOffSectionCount);
  if (count == 0 || count > kMaxSections)
    return bad_field("section count", std::to_string(count) + ", expected 1.." + std::to_string(kMaxSections));
  const uint64_t table_end = kOffSectionTable + uint64_t{count} * kSectionEntryBytes;
  const uint64_t want_header = (table_end + kAlign - 1) / kAlign * kAlign;
  const uint32_t header_size = load_u32(data + kOffHeaderSize);
  if (header_size != want_header)
    return bad_field("header size", std::to_string(header_size) + ", expected " + std::to_string(want_header) + " for " +
                                        std::to_string(count) + " sections");
  if (size < header_size) return truncated("header", header_size, size);

  // File length: the payload must be exactly what the header declares.
  const uint64_t payload = load_u64(data + kOffPayloadLength);
  if (payload > UINT64_MAX - header_size) return bad_field("payload length", std::to_string(payload) + " overflows");
  const uint64_t total = header_size + payload;
  std::vector<SectionEntry> raw;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = data + kOffSectionTable + i * kSectionEntryBytes;
    raw.push_back({static_cast<SectionTag>(load_u32(e)), load_u64(e + 8), load_u64(e + 16)});
  }
  std::sort(raw.begin(), raw.end(), [](const SectionEntry& a, const SectionEntry& b) { return a.offset < b.offset; });
  if (size < total) {
    // Name the first section the file ends inside of.
    for (const SectionEntry& s : raw) {
      const char* name = section_name(s.tag);
      if (!name || s.offset > UINT64_MAX - s.length) continue;
      if (s.offset + s.length > size) return truncated(name, s.length, s.offset >= size ? 0 : size - s.offset);
    }
    return invalid_plan("truncated: the header declares " + std::to_string(total) + " bytes, the file has " +
                        std::to_string(size));
  }
  if (size > total)
    return invalid_plan(std::to_string(size - total) + " unexpected bytes after the plan's end (the header declares " +
                        std::to_string(total) + " bytes, the file has " + std::to_string(size) + ")");

  // The checksum covers every byte but its own field, so any damage below is caught here.
  const uint64_t stored = load_u64(data + kOffChecksum);
  const uint64_t hash = plan_checksum(data, size);
  if (hash != stored)
    return invalid_plan("checksum mismatch: the header says " + hex64(stored) + ", the bytes hash to " + hex64(hash) +
                        " (the plan is corrupt)");
  h->checksum = stored;
  h->file_bytes = size;

  // Kiln version: printable ASCII, then NUL padding.
  const char* kv = reinterpret_cast<const char*>(data + kOffKilnVersion);
  size_t len = 0;
  while (len < kKilnVersionBytes && kv[len] != '\0') {
    if (kv[len] < 0x20 || kv[len] > 0x7e) return bad_field("kiln version", "non-printable byte at " + std::to_string(len));
    ++len;
  }
  if (len == 0) return bad_field("kiln version", "empty");
  for (size_t i = len; i < kKilnVersionBytes; ++i)
    if (kv[i] != '\0') return bad_field("kiln version", "bytes after the terminating NUL are not zero");
  h->kiln_version.assign(kv, len);

  const uint8_t* t = data + kOffTarget;
  if (t[0] > static_cast<uint8_t>(PlanBackend::kCuda))
    return bad_field("target backend", "unknown backend code " + std::to_string(t[0]));
  if (t[1] || t[2] || t[3]) return bad_field("target reserved", "bytes 49..51 must be zero");
  h->target.backend = static_cast<PlanBackend>(t[0]);
  h->target.cc_major = load_u32(t + 4);
  h->target.cc_minor = load_u32(t + 8);
  h->target.cudnn_version = load_u32(t + 12);
  h->target.cublaslt_version = load_u32(t + 16);
  if (h->target.backend == PlanBackend::kCpu &&
      (h->target.cc_major || h->target.cc_minor || h->target.cudnn_version || h->target.cublaslt_version))
    return bad_field("target", "a CPU plan must have zero CUDA fields");
  if (h->target.backend == PlanBackend::kCuda && (h->target.cc_major == 0 || h->target.cc_major > 99 || h->target.cc_minor > 9))
    return bad_field("target compute capability", std::to_string(h->target.cc_major) + "." + std::to_string(h->target.cc_minor));

  // Section table: known tags, each once, aligned, inside the payload, not overlapping.
  sections->clear();
  uint64_t prev_end = header_size;
  for (const SectionEntry& s : raw) {
    const char* name = section_name(s.tag);
    if (!name) return bad_field("section table", "unknown section tag " + hex64(static_cast<uint32_t>(s.tag)));
    for (const SectionEntry& seen : *sections)
      if (seen.tag == s.tag) return bad_field("section table", std::string("section '") + name + "' appears twice");
    if (s.offset % kAlign) return bad_field(std::string("section '") + name + "' offset", "not 64-byte aligned");
    if (s.offset < prev_end || s.offset > total || s.length > total - s.offset)
      return bad_field(std::string("section '") + name + "' offset",
                       "bytes [" + std::to_string(s.offset) + ", +" + std::to_string(s.length) +
                           ") overlap another section or leave the file");
    prev_end = s.offset + s.length;
    sections->push_back(s);
  }
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = data + kOffSectionTable + i * kSectionEntryBytes;
    if (load_u32(e + 4) != 0) return bad_field("section table", "reserved field of entry " + std::to_string(i) + " is not zero");
  }
  for (SectionTag tag : kAllTags) {
    bool found = false;
    for (const SectionEntry& s : *sections) found |= s.tag == tag;
    if (!found) return bad_field("section table", std::string("section '") + section_name(tag) + "' is missing");
  }
  return Status::Ok();
}

}  // namespace plan
}  // namespace kiln
