// NumPy .npz archives (numpy.savez / numpy.savez_compressed: a ZIP file with one "<name>.npy"
// member per array, stored or deflated; numpy/lib/npyio.py), read with libzip. Each member is
// parsed by parse_npy (npy.h). Errors name the archive and the member.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kiln/status.h"

namespace kiln::io {

// The arrays of `path` in archive order, each named by its member name without ".npy"
// (numpy's key). Errors: kNotFound (no file), kInvalidArgument (not a ZIP archive, a member that
// is not a .npy file or does not parse, a member larger than 16 GiB, duplicate names, no arrays).
StatusOr<std::vector<std::pair<std::string, Tensor>>> read_npz(const std::string& path);

// Writes `arrays` as an uncompressed .npz (numpy.savez's layout) to `path`, replacing it only
// once the archive is complete. kUnsupported for dtypes .npy cannot hold.
Status write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays);

}  // namespace kiln::io
