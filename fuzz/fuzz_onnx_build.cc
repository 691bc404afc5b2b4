// libFuzzer harness: bytes -> ONNX import -> build (CPU target, default optimization level) ->
// the plan must load -> one run on small random inputs. Any crash, sanitizer report or a plan
// that Kiln built but cannot load is a bug. Dynamic dims get 2 in the profile.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "builder/build_from_graph.h"
#include "fuzz/fuzz_common.h"
#include "kiln/builder.h"
#include "onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  fuzz::set_limits();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // No directory: external data never resolves to a real file.
  auto g = onnx_import::import_model_bytes(bytes, "/nonexistent/kiln-fuzz");
  if (!g.ok()) return 0;
  BuilderConfig config;
  config.target = TargetDevice::kCpu;
  OptimizationProfile profile;
  for (ir::ValueId v : g->inputs) {
    const ir::Value& in = g->value(v);
    if (!in.shape) continue;
    Shape s;
    for (const ir::Dim& d : *in.shape) s.push_back(d.is_known() ? d.value : 2);
    if (!profile.set_dimensions(in.name, s, s, s).ok()) return 0;
  }
  config.profiles.push_back(profile);
  auto plan = build_from_graph(*g, config);
  if (!plan.ok()) return 0;
  auto engine = Runtime::deserialize_engine(*plan);
  if (!engine.ok()) {
    std::fprintf(stderr, "a plan Kiln built does not load: %s\n", engine.status().to_string().c_str());
    std::abort();
  }
  fuzz::run_small(**engine);
  return 0;
}
