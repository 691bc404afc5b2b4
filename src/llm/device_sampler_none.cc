// device_sampler.h without the CUDA backend: there is no GPU to sample on.
#include "llm/device_sampler.h"

namespace kiln::llm {

struct DeviceSampler::Buffers {};

StatusOr<std::unique_ptr<DeviceSampler>> DeviceSampler::create(int64_t, int64_t, int64_t) {
  return unsupported("GPU sampling: this build of Kiln has no CUDA backend");
}
DeviceSampler::~DeviceSampler() = default;
void DeviceSampler::set_row(int64_t, const SamplingOptions&, int64_t) {}
void DeviceSampler::clear_rows() {}
Status DeviceSampler::enqueue(const void*, const void*, const void*, const void*, int64_t, CudaStream, float*) {
  return unsupported("GPU sampling: this build of Kiln has no CUDA backend");
}
int32_t DeviceSampler::token(int64_t) const { return -1; }
int32_t DeviceSampler::nonfinite(int64_t) const { return -1; }

}  // namespace kiln::llm
