// NumPy .npy files (format versions 1.0, 2.0 and 3.0; little-endian; C order), as specified in
// numpy's "NEP 1 — A simple file format for NumPy arrays" (numpy/lib/format.py). Dtypes:
// f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1. Errors name the file and what is wrong (Fortran order,
// unsupported dtype, big-endian data, truncated data, malformed header).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kiln/status.h"

namespace kiln::io {

StatusOr<Tensor> read_npy(const std::string& path);
// Parses .npy bytes; `what` names the source in errors ("'x.npy'").
StatusOr<Tensor> parse_npy(const uint8_t* data, size_t size, const std::string& what);
// Serializes as format 1.0 (2.0 when the header needs it); kUnsupported for dtypes .npy
// cannot hold (bfloat16, fp8, 4-bit types, string).
StatusOr<std::vector<uint8_t>> npy_bytes(const Tensor& t);
Status write_npy(const std::string& path, const Tensor& t);

}  // namespace kiln::io
