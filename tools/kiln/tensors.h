// Tensors for the CLI: loading input files (.npy or ONNX TensorProto .pb), generating seeded
// random inputs for the rest, and one-line summaries of outputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln::cli {

// .npy by its magic, otherwise an ONNX TensorProto.
StatusOr<Tensor> load_tensor_file(const std::string& path);
// Uniform [-1, 1) for floats, [0, 4) for ints, coin flips for bool; never all zeros.
StatusOr<Tensor> random_tensor(DataType dtype, const Shape& shape, uint64_t seed);

// One tensor per engine input, in the engine's order: from `files`, else random with the
// shape from `shapes`, the input's static shape, or the profile's opt shape. Random integer
// inputs that a Gather uses as indices (token ids) take values in [0, rows of its table);
// integer inputs named like "*mask*" are 0/1 (attention masks); other integers [0, 4).
StatusOr<std::vector<std::pair<std::string, Tensor>>> prepare_inputs(const Engine& engine,
                                                                      const std::map<std::string, std::string>& files,
                                                                      const std::map<std::string, Shape>& shapes,
                                                                      uint64_t seed, int profile = 0);
// set_input_shape + set_input for each.
Status bind_inputs(ExecutionContext& ctx, const std::vector<std::pair<std::string, Tensor>>& inputs,
                   const std::map<std::string, Shape>& shapes);

struct TensorStats {
  double min = 0, max = 0, mean = 0;
  int64_t nan = 0;
};
TensorStats tensor_stats(const Tensor& t);
// "y float32 [1,1000] min -3.1 max 4.2 mean 0.01 first [0.1, 0.2, ...]"
std::string tensor_summary(const std::string& name, const Tensor& t, int first = 8);
// Casts dtypes .npy cannot hold (bf16, fp8, 4- and 2-bit) to float32 / int8 for writing.
Tensor npy_compatible(const Tensor& t);

}  // namespace kiln::cli
