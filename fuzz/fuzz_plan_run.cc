// libFuzzer harness: bytes -> plan reader -> Engine -> one run on small random inputs. Each input
// is read twice: as given (the checksum stops most mutations) and with its checksum recomputed, so
// the mutations reach the reader's per-field validation and the engine behind it. Seeds are valid
// plans (fuzz/seed_corpus.cc).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "kiln/plan.h"
#include "plan/plan_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  fuzz::set_limits();
  auto engine = Runtime::deserialize_engine(data, size);
  if (engine.ok()) fuzz::run_small(**engine);
  if (size < plan::kOffChecksum + 8) return 0;
  std::vector<uint8_t> sealed(data, data + size);
  const uint64_t sum = plan_checksum(sealed.data(), sealed.size());
  for (int i = 0; i < 8; ++i) sealed[plan::kOffChecksum + i] = static_cast<uint8_t>(sum >> (8 * i));
  engine = Runtime::deserialize_engine(sealed);
  if (engine.ok()) fuzz::run_small(**engine);
  return 0;
}
