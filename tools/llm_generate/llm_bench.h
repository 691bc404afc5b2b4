// `kiln bench-llm` (= `kiln_llm_generate bench-llm`): generation benchmark of an engine directory.
#pragma once

// argv[0] is "bench-llm". Returns the exit status (0 ok, 1 error, 2 usage).
int llm_bench_main(int argc, char** argv);
