// libFuzzer harness: bytes -> plan reader -> Engine -> one run on small random inputs. The reader
// validates every field and the checksum, so mutated plans mostly stop there; seeds are valid
// plans (fuzz/seed_corpus.cc), and -use_value_profile helps past the checksum comparison.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  fuzz::set_limits();
  auto engine = Runtime::deserialize_engine(data, size);
  if (!engine.ok()) return 0;
  fuzz::run_small(**engine);
  return 0;
}
