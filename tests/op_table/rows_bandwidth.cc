// Rows of the bandwidth-bound kernels' fast paths (docs/decisions/0082) and the general paths
// beside them: binary pointwise and FusedPointwise programs with row ([.., S, H] + [S, H]) and
// channel ([.., H]) broadcasts — periods that are multiples of 8 (the 16-byte path in every
// storage type), of 4 only (the 16-byte path in fp32, the general one in fp16 / bf16) and odd —,
// a broadcast that is not periodic ([B, 1, H]), Gelu over its erf tails, LayerNormalization and
// Softmax rows the one-warp kernels mask (widths not a multiple of 256) or leave to the block
// kernels (odd widths, past their limit), Gather rows of 16-byte multiples and of less, and a
// Transpose of attention heads with an odd head size.
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

std::string dims(const Shape& s) {
  std::string r;
  for (int64_t d : s) {
    if (!r.empty()) r.push_back('x');
    r.append(std::to_string(d));
  }
  return r;
}

// y = x op b, both graph inputs, b broadcast onto x (or x onto b).
Row broadcast_binary(OpKind op, const Shape& as, const Shape& bs, const Shape& ys, uint32_t seed) {
  Row r;
  r.name = std::string("Bandwidth_") + ir::op_name(op) + "_" + dims(as) + "_by_" + dims(bs);
  r.make = [=] {
    TinyGraph t;
    auto a = t.input("a", as);
    auto b = t.input("b", bs);
    t.g.outputs = {t.node(op, "y", {a, b}, ys)};
    return OpCase{t.g, {random_tensor(as, seed, -2.f, 2.f), random_tensor(bs, seed + 1, 0.5f, 2.f)}};
  };
  return r;
}

// BERT's embeddings sum: (word + token type) + position, position [S, H] (a constant or an input)
// broadcast over the batch: one FusedPointwise program of 2 instructions on 3 inputs.
Row embeddings_sum(const Shape& full, const Shape& pos, bool pos_const, uint32_t seed) {
  Row r;
  r.name = "Bandwidth_FusedPointwise_sum_" + dims(full) + "_by_" + dims(pos) + (pos_const ? "_const" : "_input");
  r.expect_ops = {"FusedPointwise"};
  r.absent_ops = {"Add"};
  r.make = [=] {
    TinyGraph t;
    auto w = t.input("word", full);
    auto tt = t.input("token_type", full);
    std::vector<Tensor> in = {random_tensor(full, seed, -1.f, 1.f), random_tensor(full, seed + 1, -1.f, 1.f)};
    ir::ValueId p;
    if (pos_const) {
      p = t.constant("position", random_tensor(pos, seed + 2, -1.f, 1.f));
    } else {
      p = t.input("position", pos);
      in.push_back(random_tensor(pos, seed + 2, -1.f, 1.f));
    }
    auto s = t.node(OpKind::kAdd, "add0", {w, tt}, full);
    t.g.outputs = {t.node(OpKind::kAdd, "add1", {s, p}, full)};
    return OpCase{t.g, in};
  };
  return r;
}

Row gelu_wide(const std::string& approx, const Shape& s) {
  Row r;
  r.name = "Bandwidth_Gelu_" + approx + "_tails_" + dims(s);
  r.make = [=] {
    OpCase c = one_op(OpKind::kGelu, s, s, nullptr, {{"approximate", Attribute::of_string(approx)}},
                      random_tensor(s, 41, -7.f, 7.f));
    c.graph.nodes[0].opset = 20;
    return c;
  };
  return r;
}

Row layer_norm(const Shape& in, bool bias) {
  Row r;
  r.name = "Bandwidth_LayerNormalization_" + dims(in) + (bias ? "" : "_nobias");
  r.make = [=] {
    TinyGraph t;
    auto x = t.input("x", in);
    const Shape ns = {in.back()};
    std::vector<ir::ValueId> ins = {x, t.constant("scale", nonzero(ns, 2))};
    if (bias) ins.push_back(t.constant("bias", nonzero(ns, 3)));
    t.g.outputs = {t.node(OpKind::kLayerNormalization, "ln", ins, in,
                          {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-5f)}})};
    return OpCase{t.g, {nonzero(in, 1, 1.f, 3.f)}};  // a mean far from zero
  };
  return r;
}

Row softmax(OpKind op, const Shape& in) {
  Row r;
  r.name = std::string("Bandwidth_") + ir::op_name(op) + "_" + dims(in);
  r.make = [=] {
    return one_op(op, in, in, nullptr, {{"axis", Attribute::of_int(-1)}}, random_tensor(in, 51, -6.f, 6.f));
  };
  return r;
}

// Gather of rows of `table` by runtime ids [2, 5] (int64, some negative) or constant ones.
Row gather_rows(const Shape& table, bool runtime, int64_t axis) {
  Row r;
  r.name = std::string("Bandwidth_Gather_") + (runtime ? "runtime_" : "const_") + dims(table) + "_axis" +
           std::to_string(axis);
  r.tol = kMoveTol;
  r.make = [=] {
    TinyGraph t;
    auto x = t.input("table", table);
    const int64_t n = table[axis];
    Shape out(table.begin(), table.begin() + axis);
    out.push_back(2);
    out.push_back(5);
    out.insert(out.end(), table.begin() + axis + 1, table.end());
    std::vector<Tensor> in = {random_tensor(table, 61, -2.f, 2.f)};
    ir::ValueId idx;
    if (runtime) {
      idx = int_input(t, "ids", {2, 5}, DataType::kInt64);
      in.push_back(int_tensor(DataType::kInt64, {2, 5}, -n, n - 1, 62));
    } else {
      idx = t.constant("ids", int_tensor(DataType::kInt64, {2, 5}, -n, n - 1, 63));
    }
    t.g.outputs = {t.node(OpKind::kGather, "g", {x, idx}, out, {{"axis", Attribute::of_int(axis)}})};
    return OpCase{t.g, in};
  };
  return r;
}

Row heads_transpose(const Shape& bshd) {
  Row r;
  r.name = "Bandwidth_Transpose_heads_" + dims(bshd);
  r.tol = kMoveTol;
  r.make = [=] {
    const Shape out = {bshd[0], bshd[2], bshd[1], bshd[3]};
    return one_op(OpKind::kTranspose, bshd, out, nullptr, {{"perm", Attribute::of_ints({0, 2, 1, 3})}},
                  nonzero(bshd, 71));
  };
  return r;
}

}  // namespace

std::vector<Row> bandwidth_rows() {
  return {
      // periodic b: period 384 (x8), 60 (x4 only), 7 (odd); channel 24; periodic a; not periodic
      broadcast_binary(OpKind::kAdd, {3, 16, 24}, {16, 24}, {3, 16, 24}, 401),
      broadcast_binary(OpKind::kAdd, {3, 16, 24}, {24}, {3, 16, 24}, 403),
      broadcast_binary(OpKind::kMul, {3, 5, 12}, {5, 12}, {3, 5, 12}, 405),
      broadcast_binary(OpKind::kSub, {4, 3, 7}, {7}, {4, 3, 7}, 407),
      broadcast_binary(OpKind::kDiv, {16, 24}, {3, 16, 24}, {3, 16, 24}, 409),
      broadcast_binary(OpKind::kAdd, {3, 1, 24}, {3, 16, 24}, {3, 16, 24}, 411),
      broadcast_binary(OpKind::kMul, {2, 3, 8}, {1}, {2, 3, 8}, 413),
      embeddings_sum({2, 16, 24}, {16, 24}, true, 421),
      embeddings_sum({2, 16, 24}, {1, 16, 24}, false, 424),
      embeddings_sum({2, 5, 12}, {5, 12}, false, 427),
      embeddings_sum({3, 4, 7}, {7}, true, 430),
      gelu_wide("none", {4, 8, 24}), gelu_wide("none", {3, 37}), gelu_wide("tanh", {4, 8, 24}),
      layer_norm({6, 40}, true), layer_norm({3, 1000}, true), layer_norm({3, 1000}, false), layer_norm({2, 1544}, true),
      layer_norm({2, 2048}, true), layer_norm({2, 2056}, true), layer_norm({4, 37}, true),
      softmax(OpKind::kSoftmax, {4, 6, 128}), softmax(OpKind::kSoftmax, {3, 200}), softmax(OpKind::kSoftmax, {2, 1000}),
      softmax(OpKind::kSoftmax, {2, 1024}), softmax(OpKind::kSoftmax, {2, 1032}), softmax(OpKind::kLogSoftmax, {5, 136}),
      gather_rows({11, 24}, true, 0), gather_rows({11, 12}, true, 0), gather_rows({3, 9, 16}, true, 1),
      gather_rows({11, 24}, false, 0), gather_rows({3, 9, 8}, false, 1), gather_rows({9, 5}, false, 0),
      heads_transpose({2, 8, 3, 64}), heads_transpose({2, 5, 3, 7}),
  };
}

}  // namespace kiln::testing::op_table
