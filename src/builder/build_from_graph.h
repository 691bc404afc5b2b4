// Building from an already imported ir::Graph (tests, the conformance runner): internal, so the
// public kiln/builder.h names no ir:: type.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/status.h"

namespace kiln {

// Builder::build without the import: profiles -> kernel check -> passes -> tactics -> plan
// bytes. `graph` is copied, not changed. Errors as Builder::build's.
StatusOr<std::vector<uint8_t>> build_from_graph(const ir::Graph& graph, const BuilderConfig& config);

}  // namespace kiln
