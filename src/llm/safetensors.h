// Reader of the safetensors format (Hugging Face, https://github.com/huggingface/safetensors,
// README "Format"): an 8-byte little-endian unsigned header length N, N bytes of UTF-8 JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// byte buffer; offsets are relative to the buffer's start, tensors are row-major little-endian.
// Files are memory-mapped (POSIX mmap, read-only); nothing is copied until a caller asks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "kiln/types.h"

namespace kiln::llm {

// A read-only mapping of a whole file; unmapped when the last owner goes.
class MappedFile {
 public:
  // NotFound if the file is missing, InvalidArgument if it is not a regular file or unreadable.
  static StatusOr<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // bytes
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;  // nullptr for an empty file (nothing mapped)
  size_t size_ = 0;
  std::string path_;
};

// One tensor of a safetensors file, pointing into the mapping (valid while `file` lives).
struct SafetensorsTensor {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;                     // [] is a scalar
  const uint8_t* data = nullptr;   // file bytes; no alignment guaranteed beyond 1
  size_t nbytes = 0;               // == dtype size × product(shape)
  uint64_t file_offset = 0;        // bytes from the start of the file
  std::shared_ptr<MappedFile> file;

  // A host Tensor over the mapped bytes when they are naturally aligned for the dtype, else a
  // copy (a file is little-endian; so is every host Kiln runs on).
  Tensor to_tensor() const;
};

// The dtype strings safetensors writes and Kiln reads: F32 F16 BF16 F8_E4M3 F8_E5M2 I8 I32 I64
// U8 BOOL. kUndefined for any other (F64, I16, U16, U32, U64, F8_E8M0, F4, ...).
DataType dtype_from_safetensors(const std::string& s);
const char* safetensors_dtype_name(DataType t);  // inverse of the above; "" if none

// The limit the reference implementation puts on the header (safetensors' MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

class SafetensorsFile {
 public:
  // Maps and validates `path`: header length within the file and the limit, the header JSON an
  // object of tensor entries (plus "__metadata__", an object of strings), each dtype one of the
  // list above, each shape non-negative, data_offsets [begin <= end] within the buffer with
  // end - begin == dtype size × elements, no two tensors overlapping, and — as the format
  // requires — the tensors covering the buffer without holes. Errors are InvalidModel (NotFound
  // for a missing file, Unsupported for a known-but-unread dtype) and name the file and tensor.
  static StatusOr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in offset order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr if absent.
  const SafetensorsTensor* find(const std::string& name) const;

 private:
  std::shared_ptr<MappedFile> file_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kiln::llm
