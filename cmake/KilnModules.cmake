# One static library per module of src/, with its dependencies declared
# (docs/decisions/0030-module-targets.md). A module's headers are reachable only through its
# own include root, build/include_roots/<target>/, which holds symlinks to exactly the
# module's paths under src/ (src/ itself is no include directory), and a target sees the roots
# of the targets it links (PUBLIC, so transitively). So `#include "runtime/interpreter.h"` in a
# module that does not link kiln_runtime fails to compile: the build checks the layering.

set(KILN_INCLUDE_ROOTS ${CMAKE_BINARY_DIR}/include_roots)

# kiln_module(<target> SOURCES <files...> EXPOSE <paths under src/...> [DEPENDS <targets...>])
# EXPOSE lists the directories or files (relative to src/) the module's include root shows:
# "ir" gives `#include "ir/graph.h"`, "backends/kernel.h" exactly that header.
function(kiln_module target)
  cmake_parse_arguments(M "" "" "SOURCES;EXPOSE;DEPENDS" ${ARGN})
  set(root ${KILN_INCLUDE_ROOTS}/${target})
  file(REMOVE_RECURSE ${root})
  foreach(p IN LISTS M_EXPOSE)
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/src/${p})
      message(FATAL_ERROR "kiln_module(${target}): src/${p} does not exist")
    endif()
    get_filename_component(parent ${root}/${p} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${p} ${root}/${p} SYMBOLIC)
  endforeach()
  add_library(${target} STATIC ${M_SOURCES})
  target_include_directories(${target} PUBLIC ${root})
  if(M_DEPENDS)
    target_link_libraries(${target} PUBLIC ${M_DEPENDS})
  endif()
endfunction()

# The .cc files directly in src/<dir> (no subdirectories).
function(kiln_sources out dir)
  file(GLOB files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${dir}/*.cc)
  set(${out} ${files} PARENT_SCOPE)
endfunction()

kiln_sources(CORE_SOURCES core)
kiln_module(kiln_core SOURCES ${CORE_SOURCES} EXPOSE core)
# The public API (include/kiln/) is visible to every module.
target_include_directories(kiln_core PUBLIC ${CMAKE_SOURCE_DIR}/include)
target_compile_definitions(kiln_core PUBLIC KILN_VERSION_STRING="${PROJECT_VERSION}")
target_link_libraries(kiln_core PUBLIC Threads::Threads)

kiln_sources(IR_SOURCES ir)
kiln_module(kiln_ir SOURCES ${IR_SOURCES} EXPOSE ir DEPENDS kiln_core)

kiln_sources(ONNX_SOURCES onnx)
kiln_module(kiln_onnx SOURCES ${ONNX_SOURCES} EXPOSE onnx
  DEPENDS kiln_ir kiln_io ${ONNX_PROTO_LIB} protobuf::libprotobuf)
target_compile_definitions(kiln_onnx PUBLIC ONNX_ML=1 ONNX_NAMESPACE=onnx)

kiln_sources(PASSES_SOURCES passes)
kiln_module(kiln_passes SOURCES ${PASSES_SOURCES} EXPOSE passes DEPENDS kiln_ir)

# The tactic contract (backends/kernel.h, docs/decisions/0014): ids, sources, budget, TunableLayer.
# Quantization (issue 12, docs/decisions/0043): calibration statistics and methods.
kiln_sources(QUANT_SOURCES quant)
kiln_module(kiln_quant SOURCES ${QUANT_SOURCES} EXPOSE quant DEPENDS kiln_core kiln_onnx kiln_cpu kiln_io kiln_plan ${ONNX_LIB})

kiln_module(kiln_backend SOURCES ${CMAKE_SOURCE_DIR}/src/backends/tactics.cc EXPOSE backends/kernel.h
  DEPENDS kiln_core)

kiln_sources(CPU_SOURCES backends/cpu)
kiln_module(kiln_cpu SOURCES ${CPU_SOURCES} EXPOSE backends/cpu
  DEPENDS kiln_ir kiln_backend ${BLAS_LIBRARIES})
target_include_directories(kiln_cpu PRIVATE ${OPENBLAS_INCLUDE_DIR})

kiln_sources(PLAN_SOURCES plan)
kiln_module(kiln_plan SOURCES ${PLAN_SOURCES} EXPOSE plan DEPENDS kiln_ir)

# Tactic selection and the timing cache file (docs/decisions/0007, 0014) on their own: the
# runtime's CUDA build glue (gpu_engine.cc) hands the selector to the CUDA backend, and neither
# may link the builder (which imports ONNX). The CUDA backend itself includes neither.
kiln_module(kiln_timing_cache
  SOURCES ${CMAKE_SOURCE_DIR}/src/builder/timing_cache.cc ${CMAKE_SOURCE_DIR}/src/builder/tactic_selector.cc
  EXPOSE builder/timing_cache.h builder/tactic_selector.h DEPENDS kiln_core kiln_backend nlohmann_json::nlohmann_json)

# LLM checkpoints and tokenizers (issue 13, docs/decisions/0048): safetensors (mmap), config.json,
# the weight spec per architecture, byte-level BPE from tokenizer.json (NFC through ICU if found);
# the decoder step as an ir::Graph and the CPU generation loop on the reference interpreter
# (docs/decisions/0053); the packed-token step graph over a paged KV cache (0059). No builder,
# importer or protobuf.
kiln_sources(LLM_SOURCES llm)
list(FILTER LLM_SOURCES EXCLUDE REGEX "/sentencepiece_tokenizer\\.cc$")
# The runner's files (kv_cache, kv_pool_device_*, device_sampler_*, runner, engine_info) are kiln_llm_runner's below.
set(KILN_LLM_RUNNER_FILES kv_cache kv_pool_device_cuda kv_pool_device_none device_sampler_cuda device_sampler_none runner
  engine_info)
foreach(f IN LISTS KILN_LLM_RUNNER_FILES)
  list(FILTER LLM_SOURCES EXCLUDE REGEX "/llm/${f}\\.cc$")
endforeach()
kiln_module(kiln_llm SOURCES ${LLM_SOURCES} EXPOSE llm DEPENDS kiln_core kiln_ir kiln_cpu nlohmann_json::nlohmann_json)
if(KILN_HAVE_ICU)
  target_link_libraries(kiln_llm PRIVATE ICU::uc ICU::data)
  target_compile_definitions(kiln_llm PRIVATE KILN_HAVE_ICU=1)
endif()
# tokenizer.model through libsentencepiece: not part of `kiln` (its bundled protobuf-lite crashes
# processes that also load libprotobuf); programs link it and call register_sentencepiece().
if(KILN_HAVE_SENTENCEPIECE)
  kiln_module(kiln_llm_sentencepiece SOURCES ${CMAKE_SOURCE_DIR}/src/llm/sentencepiece_tokenizer.cc
    EXPOSE llm/sentencepiece_tokenizer.h DEPENDS kiln_llm)
  target_include_directories(kiln_llm_sentencepiece PRIVATE ${SENTENCEPIECE_INCLUDE_DIR})
  target_link_libraries(kiln_llm_sentencepiece PUBLIC ${SENTENCEPIECE_LIB})
endif()

kiln_sources(IO_SOURCES io)
kiln_module(kiln_io SOURCES ${IO_SOURCES} EXPOSE io DEPENDS kiln_core PkgConfig::LIBZIP)

set(KILN_CUDA_TARGET)
if(KILN_HAVE_CUDA)
  file(GLOB CUDA_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/src/backends/cuda/*.cc ${CMAKE_SOURCE_DIR}/src/backends/cuda/*.cu)
  kiln_module(kiln_cuda SOURCES ${CUDA_SOURCES} EXPOSE backends/cuda
    DEPENDS kiln_cpu kiln_plan
    CUDA::cudart CUDA::cublasLt ${CUDNN_LIB})
  set_target_properties(kiln_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  # cuDNN's legacy convolution API is deprecated in cuDNN 9 but still the simplest fused call.
  target_compile_options(kiln_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-deprecated-declarations>)
  target_compile_definitions(kiln_cuda PUBLIC KILN_HAVE_CUDA=1)
  set(KILN_CUDA_TARGET kiln_cuda)
  # The FusedPointwise kernels NVRTC compiles (backends/cuda/pw_jit.cc, docs/decisions/0091) start
  # with the text of ir/pointwise_opcode.h, embedded here as a string; NVRTC itself is dlopen'ed.
  file(READ ${CMAKE_SOURCE_DIR}/src/ir/pointwise_opcode.h KILN_PW_OPCODE_TEXT)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/ir/pointwise_opcode.h)
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/kiln_generated/pw_opcode_text.h
    CONTENT "// Generated by cmake/KilnModules.cmake from src/ir/pointwise_opcode.h: do not edit.\n#pragma once\nnamespace kiln::cuda {\ninline constexpr const char kPwOpcodeSource[] = R\"kiln_src(@KILN_PW_OPCODE_TEXT@)kiln_src\";\n}\n"
    @ONLY)
  target_include_directories(kiln_cuda PRIVATE ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(kiln_cuda PRIVATE ${CMAKE_DL_LIBS})
  target_compile_definitions(kiln_cuda PRIVATE KILN_CUDA_LIB_DIR="${CUDAToolkit_LIBRARY_DIR}")
  # Hopper's wgmma needs the arch-specific sm_90a target: its kernels (backends/cuda/sm90a/) are a
  # library of their own compiled for sm_90a only, linked in when the architectures include 90
  # (docs/decisions/0080).
  if("90" IN_LIST CMAKE_CUDA_ARCHITECTURES OR "90-real" IN_LIST CMAKE_CUDA_ARCHITECTURES)
    file(GLOB KILN_SM90A_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backends/cuda/sm90a/*.cu)
    add_library(kiln_cuda_sm90a STATIC ${KILN_SM90A_SOURCES})
    set_target_properties(kiln_cuda_sm90a PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
    target_compile_options(kiln_cuda_sm90a PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-gencode=arch=compute_90a,code=sm_90a>)
    target_include_directories(kiln_cuda_sm90a PRIVATE ${KILN_INCLUDE_ROOTS}/kiln_cuda ${CMAKE_SOURCE_DIR}/include)
    target_link_libraries(kiln_cuda_sm90a PUBLIC CUDA::cudart PRIVATE kiln_cpu kiln_plan)  # their include roots (kernels.h)
    target_link_libraries(kiln_cuda PUBLIC kiln_cuda_sm90a)
    target_compile_definitions(kiln_cuda PRIVATE KILN_HAVE_SM90A=1)
  endif()
endif()

kiln_sources(RUNTIME_SOURCES runtime)
kiln_module(kiln_runtime SOURCES ${RUNTIME_SOURCES} EXPOSE runtime
  DEPENDS kiln_plan kiln_cpu kiln_io ${KILN_CUDA_TARGET} kiln_timing_cache)

# The LLM runner (issue 13 item 4, docs/decisions/0060): the paged KV cache (host memory for CPU
# plans, device memory through the CUDA backend for CUDA plans) and in-flight batching over an
# Engine of the step graph. Links the runtime, not the builder (no protobuf: SentencePiece may join).
set(LLM_RUNNER_SOURCES ${CMAKE_SOURCE_DIR}/src/llm/kv_cache.cc ${CMAKE_SOURCE_DIR}/src/llm/engine_info.cc
  ${CMAKE_SOURCE_DIR}/src/llm/runner.cc)
if(KILN_HAVE_CUDA)
  list(APPEND LLM_RUNNER_SOURCES ${CMAKE_SOURCE_DIR}/src/llm/kv_pool_device_cuda.cc
    ${CMAKE_SOURCE_DIR}/src/llm/device_sampler_cuda.cc)
else()
  list(APPEND LLM_RUNNER_SOURCES ${CMAKE_SOURCE_DIR}/src/llm/kv_pool_device_none.cc
    ${CMAKE_SOURCE_DIR}/src/llm/device_sampler_none.cc)
endif()
add_library(kiln_llm_runner STATIC ${LLM_RUNNER_SOURCES})
target_link_libraries(kiln_llm_runner PUBLIC kiln_llm kiln_runtime)

kiln_sources(BUILDER_SOURCES builder)
list(FILTER BUILDER_SOURCES EXCLUDE REGEX "/(timing_cache|tactic_selector)\\.cc$")
kiln_module(kiln_builder SOURCES ${BUILDER_SOURCES} EXPOSE builder
  DEPENDS kiln_onnx kiln_passes kiln_quant kiln_plan kiln_cpu kiln_runtime kiln_timing_cache)

kiln_sources(CONFORMANCE_SOURCES conformance)
kiln_module(kiln_conformance SOURCES ${CONFORMANCE_SOURCES} EXPOSE conformance
  DEPENDS kiln_builder kiln_runtime kiln_onnx ${KILN_CUDA_TARGET})

# Everything: what tools/, tests/ and bench/ link.
add_library(kiln INTERFACE)
target_link_libraries(kiln INTERFACE kiln_core kiln_ir kiln_onnx kiln_passes kiln_quant kiln_llm kiln_llm_runner kiln_backend kiln_cpu kiln_plan
  kiln_io kiln_timing_cache ${KILN_CUDA_TARGET} kiln_runtime kiln_builder kiln_conformance fmt::fmt)
