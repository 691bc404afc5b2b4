// TensorProto decoding, including external data (location/offset/length keys, memory-mapped).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>

#include "core/checked_size.h"
#include "core/numerics.h"
#include "onnx/importer.h"

namespace kiln::onnx_import {

namespace {

struct MappedFile {
  void* addr = nullptr;
  size_t size = 0;
  ~MappedFile() {
    if (addr) munmap(addr, size);
  }
};

StatusOr<Tensor> load_external(const onnx::TensorProto& p, DataType dt, Shape shape, const std::string& base_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  const std::string where = "tensor '" + p.name() + "'";
  // offset and length are decimal byte counts; anything else is a malformed model, not an exception.
  auto parse_count = [&](const std::string& key, const std::string& text, int64_t* out) -> Status {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0)
      return invalid_model(where + ": external data " + key + " '" + text + "' is not a non-negative decimal byte count");
    *out = v;
    return Status::Ok();
  };
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") KILN_RETURN_IF_ERROR(parse_count("offset", kv.value(), &offset));
    else if (kv.key() == "length") KILN_RETURN_IF_ERROR(parse_count("length", kv.value(), &length));
  }
  if (location.empty()) return invalid_model(where + ": external data without a 'location' key");
  if (location.find("..") != std::string::npos || (!location.empty() && location[0] == '/'))
    return invalid_model(where + ": external data location '" + location + "' escapes the model directory");
  const std::string path = base_dir.empty() ? location : base_dir + "/" + location;
  const size_t need = dtype_storage_bytes(dt, shape_numel(shape));
  if (length >= 0 && static_cast<size_t>(length) != need)
    return invalid_model(where + ": external data length " + std::to_string(length) + " bytes, expected " + std::to_string(need));
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return not_found(where + ": external data file '" + path + "' not found");
  struct stat st {};
  fstat(fd, &st);
  int64_t end = 0;
  if (!checked_add(offset, static_cast<int64_t>(need), &end) || end > static_cast<int64_t>(st.st_size)) {
    ::close(fd);
    return invalid_model(where + ": external data file '" + path + "' holds " + std::to_string(st.st_size) +
                         " bytes, need " + std::to_string(need) + " at offset " + std::to_string(offset));
  }
  if (need == 0) {
    ::close(fd);
    return Tensor(dt, shape);
  }
  auto mf = std::make_shared<MappedFile>();
  mf->size = static_cast<size_t>(st.st_size);
  mf->addr = mmap(nullptr, mf->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mf->addr == MAP_FAILED) {
    mf->addr = nullptr;
    return internal_error(where + ": cannot map '" + path + "'");
  }
  void* data = static_cast<char*>(mf->addr) + offset;
  // Misaligned data is copied so kernels can assume natural alignment.
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0) {
    Tensor t(dt, shape);
    std::memcpy(t.raw(), data, need);
    return t;
  }
  return Tensor::wrap(dt, shape, mf, data);
}

}  // namespace

StatusOr<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir) {
  const std::string where = "tensor '" + p.name() + "'";
  const DataType dt = dtype_from_onnx(p.data_type());
  if (dt == DataType::kUndefined) return unsupported(where + ": ONNX data type " + std::to_string(p.data_type()) + " is not supported");
  if (dt == DataType::kString) return unsupported(where + ": string tensors are not supported");
  if (p.has_segment()) return unsupported(where + ": segmented tensors are not supported");
  Shape shape(p.dims().begin(), p.dims().end());
  auto counted = checked_nbytes(dt, shape, where);  // the limits of core/checked_size.h
  if (!counted.ok()) return invalid_model(counted.status().message());
  const int64_t n = shape_numel(shape);
  if (p.data_location() == onnx::TensorProto::EXTERNAL) return load_external(p, dt, shape, base_dir);
  const size_t nbytes = dtype_storage_bytes(dt, n);
  // Check the data present matches the shape before allocating (a corrupt shape must not
  // turn into a huge allocation).
  if (p.has_raw_data() && p.raw_data().size() != nbytes)
    return invalid_model(where + ": raw_data holds " + std::to_string(p.raw_data().size()) + " bytes, expected " + std::to_string(nbytes));
  const int64_t typed = p.float_data_size() + p.double_data_size() + p.int64_data_size() + p.uint64_data_size() +
                        p.int32_data_size();
  // Sub-byte types hold their packed bytes in int32_data: 2 (4-bit) or 4 (2-bit) elements each.
  const int64_t per_value = dtype_bits(dt) < 8 ? 8 / dtype_bits(dt) : 1;
  if (!p.has_raw_data() && typed < (n + per_value - 1) / per_value)
    return invalid_model(where + ": holds " + std::to_string(typed) + " values, shape " + shape_str(shape) + " needs " +
                         std::to_string(n));
  Tensor t(dt, shape);
  if (p.has_raw_data()) {
    if (nbytes) std::memcpy(t.raw(), p.raw_data().data(), nbytes);
    return t;
  }
  auto count_err = [&](int64_t got) {
    return invalid_model(where + ": holds " + std::to_string(got) + " values, shape " + shape_str(shape) + " needs " + std::to_string(n));
  };
  switch (dt) {
    case DataType::kFloat32:
      if (p.float_data_size() != n) return count_err(p.float_data_size());
      if (n) std::memcpy(t.raw(), p.float_data().data(), nbytes);
      return t;
    case DataType::kFloat64:
      if (p.double_data_size() != n) return count_err(p.double_data_size());
      if (n) std::memcpy(t.raw(), p.double_data().data(), nbytes);
      return t;
    case DataType::kInt64:
      if (p.int64_data_size() != n) return count_err(p.int64_data_size());
      if (n) std::memcpy(t.raw(), p.int64_data().data(), nbytes);
      return t;
    case DataType::kUInt32: case DataType::kUInt64:
      if (p.uint64_data_size() != n) return count_err(p.uint64_data_size());
      for (int64_t i = 0; i < n; ++i) store_from_int64(dt, t.raw(), i, static_cast<int64_t>(p.uint64_data(i)));
      return t;
    case DataType::kFloat16: case DataType::kBFloat16:
      if (p.int32_data_size() != n) return count_err(p.int32_data_size());
      for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(i));
      return t;
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E5M2: case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0:
      // onnx.proto: float8 values are written bit-wise, one code per int32_data entry.
      if (p.int32_data_size() != n) return count_err(p.int32_data_size());
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(p.int32_data(i));
      return t;
    case DataType::kInt4: case DataType::kUInt4: case DataType::kFloat4E2M1: case DataType::kInt2:
    case DataType::kUInt2: {
      // onnx.proto: int32_data holds the packed bytes (two 4-bit or four 2-bit elements each,
      // the first element in the least significant bits), as raw_data does.
      const int64_t packed = (n + per_value - 1) / per_value;
      if (p.int32_data_size() != packed) return count_err(p.int32_data_size() * per_value);
      for (int64_t i = 0; i < packed; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(p.int32_data(i));
      return t;
    }
    default:  // int8/16/32, uint8/16, bool: int32_data
      if (p.int32_data_size() != n) return count_err(p.int32_data_size());
      for (int64_t i = 0; i < n; ++i) store_from_int64(dt, t.raw(), i, p.int32_data(i));
      return t;
  }
}

StatusOr<Tensor> load_tensor_pb_file(const std::string& path, std::string* name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("tensor file '" + path + "' not found");
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::TensorProto p;
  if (!p.ParseFromString(ss.str())) return invalid_model("'" + path + "' is not a serialized ONNX TensorProto");
  if (name) *name = p.name();
  auto dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  return tensor_from_proto(p, dir);
}

}  // namespace kiln::onnx_import
