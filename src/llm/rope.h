// Rotary position embedding (RoPE) frequencies of the Llama family, as transformers computes them
// (src/transformers/modeling_rope_utils.py: _compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters, _compute_llama3_parameters). The rotation itself is
// emitted into the decoder graph (decoder_graph.h: the "rotate_half" form of modeling_llama.py,
// which pairs element j with element j + head_dim/2, not adjacent elements).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/status.h"
#include "llm/model_config.h"

namespace kiln::llm {

// inv_freq[i], i in [0, head_dim/2): the angle of pair i advances by inv_freq[i] radians per
// position. Computed in double, rounded to float32 once (transformers computes in float32; the
// two differ by < 1 ulp of float32 per element).
//   default:  inv_freq[i] = theta^(-2i / head_dim)           (RoFormer, Su et al. 2021, eq. 15)
//   linear:   default / factor
//   dynamic:  default (transformers changes the base only for sequences longer than
//             max_position_embeddings, which the runner refuses)
//   llama3:   with wavelen_i = 2π / inv_freq[i], L = original_max_position_embeddings,
//             lo = L / low_freq_factor, hi = L / high_freq_factor:
//               wavelen_i < hi            -> inv_freq[i]              (high frequencies kept)
//               wavelen_i > lo            -> inv_freq[i] / factor     (low frequencies scaled)
//               otherwise, s = (L / wavelen_i - low_freq_factor) / (high_freq_factor - low_freq_factor):
//                 (1 - s) · inv_freq[i] / factor + s · inv_freq[i]  (smooth interpolation)
//             (transformers _compute_llama3_parameters; Meta's llama-models apply_scaling).
// InvalidArgument for an odd or non-positive head_dim.
StatusOr<std::vector<float>> rope_inv_freq(const RopeConfig& rope, int64_t head_dim);

}  // namespace kiln::llm
