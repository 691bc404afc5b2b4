// libFuzzer harness: bytes -> .npy reader (format 1.0/2.0/3.0 header, dtype, shape, data size).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::set_limits();
  auto t = kiln::io::parse_npy(data, size, "fuzz.npy");
  if (t.ok() && t->numel() > 0 && t->dtype() != kiln::DataType::kString) (void)kiln::tensor_to_doubles(*t);
  return 0;
}
