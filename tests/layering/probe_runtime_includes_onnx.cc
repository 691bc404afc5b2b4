// Must NOT compile (test layering.probe_runtime_onnx): linked to kiln_runtime alone, it includes
// the ONNX importer, which the runtime does not link. If this compiles, the per-module include
// roots (cmake/KilnModules.cmake) no longer enforce the layering.
#include "onnx/importer.h"

int main() { return 0; }
