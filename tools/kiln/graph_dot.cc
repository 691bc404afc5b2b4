// DOT output for `kiln inspect --graph` (see graph_dot.h).
#include "tools/kiln/graph_dot.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

namespace kiln::cli {
namespace {

// DOT string literal: quotes and backslashes escaped, newlines as DOT's centered line break.
std::string q(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r + "\"";
}

}  // namespace

std::string engine_dot(const Engine& e) {
  std::string dot = "digraph engine {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::map<std::string, std::string> producer;  // tensor name -> DOT node id
  for (const IOTensor& io : e.io_tensors()) {
    if (!io.is_input) continue;
    const std::string id = "in:" + io.desc.name;
    dot += "  " + q(id) + " [shape=ellipse, label=" + q(io.desc.name + "\n" + io.desc.shape_string()) + "];\n";
    producer[io.desc.name] = id;
  }
  const auto& layers = e.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerInfo& l = layers[i];
    const std::string id = "L" + std::to_string(i);
    const bool fused = l.origin.size() > 1;
    std::string label = l.name + "\n" + l.op + (fused ? " (" + std::to_string(l.origin.size()) + " nodes)" : "") + "\n" + l.tactic;
    dot += "  " + q(id) + " [shape=box" + std::string(fused ? ", style=filled, fillcolor=\"#ffe8b0\"" : "") +
           ", label=" + q(label) + "];\n";
    for (const TensorDesc& d : l.inputs) {
      auto it = producer.find(d.name);
      if (d.name.empty() || it == producer.end()) continue;  // weights and omitted inputs
      dot += "  " + q(it->second) + " -> " + q(id) + " [label=" + q(d.shape_string()) + ", fontsize=8];\n";
    }
    for (const TensorDesc& d : l.outputs)
      if (!d.name.empty()) producer[d.name] = id;
  }
  for (const IOTensor& io : e.io_tensors()) {
    if (io.is_input) continue;
    const std::string id = "out:" + io.desc.name;
    dot += "  " + q(id) + " [shape=ellipse, label=" + q(io.desc.name + "\n" + io.desc.shape_string()) + "];\n";
    auto it = producer.find(io.desc.name);
    if (it != producer.end()) dot += "  " + q(it->second) + " -> " + q(id) + ";\n";
  }
  return dot + "}\n";
}

Status write_graph(const Engine& e, const std::string& path) {
  const auto dotpos = path.find_last_of('.');
  const std::string ext = dotpos == std::string::npos ? "" : path.substr(dotpos + 1);
  const std::string dot_path = ext == "dot" ? path : path + ".dot";
  {
    std::ofstream f(dot_path);
    if (!f) return invalid_argument("--graph: cannot write '" + dot_path + "'");
    f << engine_dot(e);
  }
  if (ext == "dot") return Status::Ok();
  if (ext != "svg" && ext != "png" && ext != "pdf")
    return invalid_argument("--graph '" + path + "': use a .svg, .png, .pdf or .dot file name");
  const std::string cmd = "dot -T" + ext + " -o '" + path + "' '" + dot_path + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::remove(dot_path.c_str());
  if (rc != 0)
    return unsupported("--graph: Graphviz `dot` failed or is not installed (apt-get install graphviz); exit " +
                       std::to_string(rc));
  return Status::Ok();
}

}  // namespace kiln::cli
