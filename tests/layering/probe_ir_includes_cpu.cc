// Must NOT compile (test layering.probe_ir_cpu): linked to kiln_ir alone, it includes the CPU
// backend's interpreter; ir sits below the backends (it gets a ConstantEvaluator instead).
#include "backends/cpu/interpreter.h"

int main() { return 0; }
