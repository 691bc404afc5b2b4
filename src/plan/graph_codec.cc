// Graph <-> bytes for the plan's "graph" section (see graph_codec.h). Every decoded id is
// range-checked, every value must be defined before a node reads it, and no value is
// produced twice, so the interpreter can trust a decoded graph as it trusts an imported one.
#include "plan/graph_codec.h"

#include <sys/mman.h>

#include <algorithm>
#include <limits>
#include <map>
#include <string_view>

#include "plan/plan_format.h"

namespace kiln::plan {
namespace {

// Attribute kinds on disk (stable codes; the enum in graph.h may be reordered freely).
uint8_t attr_code(ir::Attribute::Kind k) {
  switch (k) {
    case ir::Attribute::Kind::kInt: return 1;
    case ir::Attribute::Kind::kFloat: return 2;
    case ir::Attribute::Kind::kString: return 3;
    case ir::Attribute::Kind::kInts: return 4;
    case ir::Attribute::Kind::kFloats: return 5;
    case ir::Attribute::Kind::kStrings: return 6;
    case ir::Attribute::Kind::kTensor: return 7;
    case ir::Attribute::Kind::kGraph: return 8;
    case ir::Attribute::Kind::kType: return 9;
  }
  return 0;
}

constexpr uint8_t kHasShape = 1, kHasConstant = 2;
// Value kinds other than a plain tensor (sequence/optional values), in flag bits 2..3.
constexpr uint8_t kKindShift = 2, kKindMask = 3u << kKindShift;
// Format 6: the value carries QuantParams (after its constant, see encode_quant).
constexpr uint8_t kHasQuant = 16;

uint8_t kind_code(ir::ValueKind k) {
  switch (k) {
    case ir::ValueKind::kTensor: return 0;
    case ir::ValueKind::kSequence: return 1;
    case ir::ValueKind::kOptionalTensor: return 2;
    case ir::ValueKind::kOptionalSequence: return 3;
  }
  return 0;
}
ir::ValueKind kind_from_code(uint8_t c) {
  return c == 1 ? ir::ValueKind::kSequence : c == 2 ? ir::ValueKind::kOptionalTensor
                                           : c == 3 ? ir::ValueKind::kOptionalSequence : ir::ValueKind::kTensor;
}

std::optional<ir::OpKind> op_by_name(std::string_view name) {
  static const std::map<std::string, ir::OpKind, std::less<>> by_name = [] {
    std::map<std::string, ir::OpKind, std::less<>> m;
    for (int i = 0; i < ir::kNumOps; ++i) m[ir::op_name(static_cast<ir::OpKind>(i))] = static_cast<ir::OpKind>(i);
    return m;
  }();
  auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

void encode_tensor(const Tensor& t, ByteWriter& w, WeightsWriter& weights, bool elided = false) {
  w.str(dtype_name(t.dtype()));
  w.u32(static_cast<uint32_t>(t.rank()));
  for (int64_t d : t.shape()) w.i64(d);
  w.u64(elided ? kElidedOffset : weights.add(t));
  w.u64(t.nbytes());
}

void encode_ids(const std::vector<ir::ValueId>& ids, ByteWriter& w) {
  w.u32(static_cast<uint32_t>(ids.size()));
  for (ir::ValueId v : ids) w.i32(v);
}

void encode_attr(const ir::Attribute& a, ByteWriter& w, WeightsWriter& weights) {
  w.u8(attr_code(a.kind));
  switch (a.kind) {
    case ir::Attribute::Kind::kInt: w.i64(a.i); break;
    case ir::Attribute::Kind::kFloat: w.f32(a.f); break;
    case ir::Attribute::Kind::kString: w.str(a.s); break;
    case ir::Attribute::Kind::kInts:
      w.u32(static_cast<uint32_t>(a.ints.size()));
      for (int64_t v : a.ints) w.i64(v);
      break;
    case ir::Attribute::Kind::kFloats:
      w.u32(static_cast<uint32_t>(a.floats.size()));
      for (float v : a.floats) w.f32(v);
      break;
    case ir::Attribute::Kind::kStrings:
      w.u32(static_cast<uint32_t>(a.strings.size()));
      for (const auto& s : a.strings) w.str(s);
      break;
    case ir::Attribute::Kind::kTensor:
      KILN_CHECK(a.t != nullptr);
      encode_tensor(*a.t, w, weights);
      break;
    case ir::Attribute::Kind::kGraph:
      KILN_CHECK(a.g != nullptr);
      encode_graph(*a.g, w, weights);
      break;
    case ir::Attribute::Kind::kType:
      w.u8(kind_code(a.type_kind));
      w.str(dtype_name(a.type_dtype));
      break;
  }
}

// QuantParams on disk: str type, u8 granularity, i64 axis, i64 block_size, u32 scale rank +
// i64 dims, u32 count + f32 scales, u32 count + i32 zero points, u8 saturate.
void encode_quant(const QuantParams& q, ByteWriter& w) {
  w.str(dtype_name(q.type));
  w.u8(static_cast<uint8_t>(q.granularity));
  w.i64(q.axis);
  w.i64(q.block_size);
  w.u32(static_cast<uint32_t>(q.scale_shape.size()));
  for (int64_t d : q.scale_shape) w.i64(d);
  w.u32(static_cast<uint32_t>(q.scale.size()));
  for (float f : q.scale) w.f32(f);
  w.u32(static_cast<uint32_t>(q.zero_point.size()));
  for (int32_t z : q.zero_point) w.i32(z);
  w.u8(q.saturate ? 1 : 0);
}

// ---- decoding ----

// Reads and validates one QuantParams of value `v` (validate_quant_params against its shape, and
// the value's dtype must be the quantized type).
std::optional<QuantParams> decode_quant(ByteReader& r, const ir::Value& v, const std::string& who) {
  QuantParams q;
  const std::string tname = r.str("value.quant.type");
  const uint8_t gran = r.u8("value.quant.granularity");
  q.axis = r.i64("value.quant.axis");
  q.block_size = r.i64("value.quant.block_size");
  const uint32_t rank = r.count("value.quant.scale_shape", 8);
  if (r.ok() && rank > kMaxRank) r.fail("value.quant.scale_shape", who + ": rank " + std::to_string(rank));
  for (uint32_t i = 0; i < rank && r.ok(); ++i) q.scale_shape.push_back(r.i64("value.quant.scale_shape"));
  const uint32_t ns = r.count("value.quant.scale", 4);
  for (uint32_t i = 0; i < ns && r.ok(); ++i) q.scale.push_back(r.f32("value.quant.scale"));
  const uint32_t nz = r.count("value.quant.zero_point", 4);
  for (uint32_t i = 0; i < nz && r.ok(); ++i) q.zero_point.push_back(r.i32("value.quant.zero_point"));
  const uint8_t sat = r.u8("value.quant.saturate");
  if (!r.ok()) return std::nullopt;
  q.type = dtype_from_name(tname);
  if (gran > static_cast<uint8_t>(QuantGranularity::kPerBlock)) {
    r.fail("value.quant.granularity", who + ": unknown granularity code " + std::to_string(gran));
    return std::nullopt;
  }
  q.granularity = static_cast<QuantGranularity>(gran);
  if (sat > 1) {
    r.fail("value.quant.saturate", who + ": " + std::to_string(sat) + ", expected 0 or 1");
    return std::nullopt;
  }
  q.saturate = sat == 1;
  if (q.type == DataType::kUndefined) {
    r.fail("value.quant.type", who + ": unknown dtype '" + tname + "'");
    return std::nullopt;
  }
  std::vector<int64_t> dims;
  if (v.shape)
    for (const ir::Dim& d : *v.shape) dims.push_back(d.is_known() ? d.value : -1);
  if (Status s = validate_quant_params(q, v.shape ? &dims : nullptr, who); !s.ok()) {
    r.fail("value.quant", s.message());
    return std::nullopt;
  }
  if (v.dtype != q.type) {
    r.fail("value.quant.type", who + ": quantized type " + tname + ", but the value's dtype is " + dtype_name(v.dtype));
    return std::nullopt;
  }
  return q;
}

// A read-only, zero-reading mapping of `bytes` (no memory behind it until read, and then
// the kernel's shared zero page): the tensor of a constant the plan stores only packed.
std::shared_ptr<const Tensor> zero_tensor(DataType dt, Shape shape, uint64_t bytes) {
  const size_t len = std::max<uint64_t>(bytes, 1);
  void* p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  std::shared_ptr<void> owner(p, [len](void* q) { munmap(q, len); });
  return std::make_shared<Tensor>(Tensor::wrap(dt, std::move(shape), std::move(owner), p));
}

std::shared_ptr<const Tensor> decode_tensor(ByteReader& r, const WeightsView& wv, bool* elided = nullptr) {
  const std::string dname = r.str("tensor.dtype");
  const uint32_t rank = r.count("tensor.rank", 8);
  if (!r.ok()) return nullptr;
  const DataType dt = dtype_from_name(dname);
  if (dt == DataType::kUndefined || dt == DataType::kString) {
    r.fail("tensor.dtype", "unknown or non-numeric dtype '" + dname + "'");
    return nullptr;
  }
  if (rank > kMaxRank) {
    r.fail("tensor.rank", "rank " + std::to_string(rank) + " exceeds " + std::to_string(kMaxRank));
    return nullptr;
  }
  Shape shape(rank);
  int64_t numel = 1;
  constexpr int64_t kMaxNumel = int64_t{1} << 56;  // keeps numel * bits far from overflow
  for (uint32_t i = 0; i < rank; ++i) {
    shape[i] = r.i64("tensor.dims");
    if (!r.ok()) return nullptr;
    if (shape[i] < 0 || (shape[i] > 0 && numel > kMaxNumel / shape[i])) {
      r.fail("tensor.dims", "dim " + std::to_string(i) + " is " + std::to_string(shape[i]) + " (negative or too large)");
      return nullptr;
    }
    numel *= shape[i];
  }
  const uint64_t offset = r.u64("tensor.offset");
  const uint64_t nbytes = r.u64("tensor.nbytes");
  if (!r.ok()) return nullptr;
  if (nbytes != dtype_storage_bytes(dt, numel)) {
    r.fail("tensor.nbytes", std::to_string(nbytes) + " bytes, but " + dname + shape_str(shape) + " needs " +
                                std::to_string(dtype_storage_bytes(dt, numel)));
    return nullptr;
  }
  if (offset == kElidedOffset) {
    if (!elided) {
      r.fail("tensor.offset", "only constants of the top-level graph may be stored packed");
      return nullptr;
    }
    auto t = zero_tensor(dt, std::move(shape), nbytes);
    if (!t) r.fail("tensor.offset", "cannot map " + std::to_string(nbytes) + " bytes for a constant stored packed");
    *elided = true;
    return t;
  }
  if (offset % kAlign != 0 || offset > wv.size || nbytes > wv.size - offset) {
    r.fail("tensor.offset", "bytes [" + std::to_string(offset) + ", +" + std::to_string(nbytes) +
                                ") are not a 64-byte aligned range of the " + std::to_string(wv.size) +
                                "-byte weights section");
    return nullptr;
  }
  return std::make_shared<Tensor>(Tensor::wrap(dt, std::move(shape), wv.owner, wv.data + offset));
}

// Reads a list of value ids, each in [0, num_values) (or kNoValue when `allow_none`).
std::vector<ir::ValueId> decode_ids(ByteReader& r, const char* field, size_t num_values, bool allow_none) {
  const uint32_t n = r.count(field, 4);
  std::vector<ir::ValueId> ids;
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    const ir::ValueId v = r.i32(field);
    if (!r.ok()) break;
    if (v == ir::kNoValue && allow_none) {
      ids.push_back(v);
      continue;
    }
    if (v < 0 || static_cast<size_t>(v) >= num_values) {
      r.fail(field, "value id " + std::to_string(v) + " is outside [0, " + std::to_string(num_values) + ")");
      break;
    }
    ids.push_back(v);
  }
  return ids;
}

bool decode_attr(ByteReader& r, const WeightsView& wv, int depth, ir::Attribute* a) {
  const uint8_t code = r.u8("attr.kind");
  if (!r.ok()) return false;
  switch (code) {
    case 1: a->kind = ir::Attribute::Kind::kInt; a->i = r.i64("attr.i"); break;
    case 2: a->kind = ir::Attribute::Kind::kFloat; a->f = r.f32("attr.f"); break;
    case 3: a->kind = ir::Attribute::Kind::kString; a->s = r.str("attr.s"); break;
    case 4: {
      a->kind = ir::Attribute::Kind::kInts;
      const uint32_t n = r.count("attr.ints", 8);
      for (uint32_t i = 0; i < n && r.ok(); ++i) a->ints.push_back(r.i64("attr.ints"));
      break;
    }
    case 5: {
      a->kind = ir::Attribute::Kind::kFloats;
      const uint32_t n = r.count("attr.floats", 4);
      for (uint32_t i = 0; i < n && r.ok(); ++i) a->floats.push_back(r.f32("attr.floats"));
      break;
    }
    case 6: {
      a->kind = ir::Attribute::Kind::kStrings;
      const uint32_t n = r.count("attr.strings", 4);
      for (uint32_t i = 0; i < n && r.ok(); ++i) a->strings.push_back(r.str("attr.strings"));
      break;
    }
    case 7:
      a->kind = ir::Attribute::Kind::kTensor;
      a->t = decode_tensor(r, wv);
      break;
    case 8:
      a->kind = ir::Attribute::Kind::kGraph;
      if (depth + 1 > kMaxSubgraphDepth) {
        r.fail("attr.g", "subgraphs nested deeper than " + std::to_string(kMaxSubgraphDepth));
        return false;
      }
      a->g = decode_graph(r, wv, depth + 1);
      break;
    case 9: {
      a->kind = ir::Attribute::Kind::kType;
      const uint8_t k = r.u8("attr.type.kind");
      const std::string dn = r.str("attr.type.dtype");
      if (!r.ok()) return false;
      if (k > 3) {
        r.fail("attr.type.kind", "unknown value kind " + std::to_string(k));
        return false;
      }
      a->type_kind = kind_from_code(k);
      a->type_dtype = dtype_from_name(dn);
      break;
    }
    default:
      r.fail("attr.kind", "unknown attribute kind " + std::to_string(code));
      return false;
  }
  return r.ok();
}

}  // namespace

uint64_t WeightsWriter::place(const uint8_t* data, size_t bytes) {
  const uint64_t offset = (size_ + kAlign - 1) / kAlign * kAlign;
  if (bytes) chunks_.push_back(Chunk{data, bytes, offset});
  size_ = offset + bytes;
  return offset;
}

uint64_t WeightsWriter::add_bytes(const uint8_t* data, size_t bytes) { return place(data, bytes); }

uint64_t WeightsWriter::add(const Tensor& t) {
  const auto key = std::make_pair(t.raw(), t.nbytes());
  auto it = seen_.find(key);
  if (it != seen_.end()) return it->second;
  const uint64_t offset = place(static_cast<const uint8_t*>(t.raw()), t.nbytes());
  seen_[key] = offset;
  return offset;
}

void WeightsWriter::write_to(ByteWriter& out) const {
  const size_t base = out.size();
  for (const Chunk& c : chunks_) {
    out.zeros(base + c.offset - out.size());
    out.raw(c.data, c.bytes);
  }
  out.zeros(base + size_ - out.size());
}

void encode_graph(const ir::Graph& g, ByteWriter& w, WeightsWriter& weights, const std::vector<ir::ValueId>* elided) {
  w.str(g.name);
  w.u32(static_cast<uint32_t>(g.opset_imports.size()));
  for (const auto& [domain, version] : g.opset_imports) {
    w.str(domain);
    w.i64(version);
  }
  w.u32(static_cast<uint32_t>(g.values.size()));
  for (const ir::Value& v : g.values) {
    w.str(v.name);
    w.str(dtype_name(v.dtype));
    w.u8(static_cast<uint8_t>((v.shape ? kHasShape : 0) | (v.constant ? kHasConstant : 0) |
                              (kind_code(v.kind) << kKindShift) | (v.quant ? kHasQuant : 0)));
    if (v.shape) {
      w.u32(static_cast<uint32_t>(v.shape->size()));
      for (const ir::Dim& d : *v.shape) {
        w.i64(d.value);
        w.str(d.symbol);
      }
    }
    if (v.constant)
      encode_tensor(*v.constant, w, weights, elided && std::binary_search(elided->begin(), elided->end(), v.id));
    if (v.quant) encode_quant(*v.quant, w);
  }
  encode_ids(g.inputs, w);
  encode_ids(g.outputs, w);
  encode_ids(g.outer_refs, w);
  w.u32(static_cast<uint32_t>(g.nodes.size()));
  for (const ir::Node& n : g.nodes) {
    KILN_CHECK(!n.removed);  // the builder compacts before serializing
    w.str(n.name);
    w.str(ir::op_name(n.op));
    w.i32(n.opset);
    encode_ids(n.inputs, w);
    encode_ids(n.outputs, w);
    w.u32(static_cast<uint32_t>(n.attrs.size()));
    for (const auto& [key, a] : n.attrs) {
      w.str(key);
      encode_attr(a, w, weights);
    }
    w.u32(static_cast<uint32_t>(n.origin.size()));
    for (const auto& o : n.origin) w.str(o);
  }
}

std::shared_ptr<ir::Graph> decode_graph(ByteReader& r, const WeightsView& wv, int depth,
                                        std::vector<ir::ValueId>* elided, uint64_t* elided_bytes) {
  auto g = std::make_shared<ir::Graph>();
  g->name = r.str("graph.name");
  const std::string where = "graph '" + g->name + "'";
  const uint32_t num_opsets = r.count("graph.opset_imports", 12);
  for (uint32_t i = 0; i < num_opsets && r.ok(); ++i) {
    std::string domain = r.str("opset_import.domain");
    g->opset_imports[domain] = r.i64("opset_import.version");
  }
  // A value needs at least: two string lengths and a flags byte.
  const uint32_t num_values = r.count("graph.values", 9);
  for (uint32_t i = 0; i < num_values && r.ok(); ++i) {
    const std::string name = r.str("value.name");
    const std::string dname = r.str("value.dtype");
    const uint8_t flags = r.u8("value.flags");
    if (!r.ok()) break;
    const DataType dt = dtype_from_name(dname);
    if (dt == DataType::kUndefined && dname != dtype_name(DataType::kUndefined)) {
      r.fail("value.dtype", where + " value '" + name + "': unknown dtype '" + dname + "'");
      break;
    }
    if (flags & ~(kHasShape | kHasConstant | kKindMask | kHasQuant)) {
      r.fail("value.flags", where + " value '" + name + "': unknown flags " + std::to_string(flags));
      break;
    }
    const ir::ValueId id = g->add_value(name, dt);
    g->value(id).kind = kind_from_code(static_cast<uint8_t>((flags & kKindMask) >> kKindShift));
    if (flags & kHasShape) {
      const uint32_t rank = r.count("value.shape.rank", 12);
      if (rank > kMaxRank) r.fail("value.shape.rank", where + " value '" + name + "': rank " + std::to_string(rank));
      ir::SymShape shape;
      for (uint32_t k = 0; k < rank && r.ok(); ++k) {
        ir::Dim d;
        d.value = r.i64("value.shape.dim");
        d.symbol = r.str("value.shape.symbol");
        if (r.ok() && d.value < -1) r.fail("value.shape.dim", where + " value '" + name + "': dim " + std::to_string(d.value));
        shape.push_back(std::move(d));
      }
      g->value(id).shape = std::move(shape);
    }
    if (flags & kHasConstant) {
      bool packed_only = false;
      g->value(id).constant = decode_tensor(r, wv, elided ? &packed_only : nullptr);
      if (packed_only) {
        elided->push_back(id);
        if (elided_bytes && g->value(id).constant) *elided_bytes += g->value(id).constant->nbytes();
      }
    }
    if (flags & kHasQuant) g->value(id).quant = decode_quant(r, g->value(id), where + " value '" + name + "'");
  }
  if (!r.ok()) return g;
  g->inputs = decode_ids(r, "graph.inputs", num_values, false);
  g->outputs = decode_ids(r, "graph.outputs", num_values, false);
  g->outer_refs = decode_ids(r, "graph.outer_refs", num_values, false);
  if (!r.ok()) return g;

  // Values readable before any node runs: constants, graph inputs, outer-scope values.
  std::vector<bool> defined(num_values, false);
  for (const ir::Value& v : g->values) defined[v.id] = v.constant != nullptr;
  for (ir::ValueId v : g->inputs) defined[v] = true;
  for (ir::ValueId v : g->outer_refs) defined[v] = true;

  // A node needs at least: two string lengths, opset, four counts.
  const uint32_t num_nodes = r.count("graph.nodes", 28);
  for (uint32_t i = 0; i < num_nodes && r.ok(); ++i) {
    ir::Node n;
    n.name = r.str("node.name");
    const std::string op = r.str("node.op");
    n.opset = r.i32("node.opset");
    if (!r.ok()) break;
    const std::string who = where + " node " + std::to_string(i) + " '" + n.name + "'";
    auto kind = op_by_name(op);
    if (!kind) {
      r.fail("node.op", who + ": unknown op name '" + op + "' (written by a newer Kiln?)");
      break;
    }
    n.op = *kind;
    n.inputs = decode_ids(r, "node.inputs", num_values, true);
    n.outputs = decode_ids(r, "node.outputs", num_values, true);
    if (!r.ok()) break;
    for (ir::ValueId v : n.inputs) {
      if (v != ir::kNoValue && !defined[v]) {
        r.fail("node.inputs", who + " reads value '" + g->value(v).name + "' before it is produced");
        break;
      }
    }
    for (ir::ValueId v : n.outputs) {
      if (v == ir::kNoValue || !r.ok()) continue;
      if (defined[v]) r.fail("node.outputs", who + ": value '" + g->value(v).name + "' is produced twice");
      defined[v] = true;
    }
    const uint32_t num_attrs = r.count("node.attrs", 5);
    for (uint32_t k = 0; k < num_attrs && r.ok(); ++k) {
      std::string key = r.str("attr.name");
      ir::Attribute a;
      if (!decode_attr(r, wv, depth, &a)) break;
      n.attrs[std::move(key)] = std::move(a);
    }
    const uint32_t num_origin = r.count("node.origin", 4);
    for (uint32_t k = 0; k < num_origin && r.ok(); ++k) n.origin.push_back(r.str("node.origin"));
    if (!r.ok()) break;
    g->add_node(std::move(n));
  }
  if (!r.ok()) return g;
  for (ir::ValueId v : g->outputs) {
    if (!defined[v]) {
      r.fail("graph.outputs", where + ": output '" + g->value(v).name + "' is never produced");
      break;
    }
  }
  return g;
}

}  // namespace kiln::plan
