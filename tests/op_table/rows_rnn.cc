// Rows for RNN, GRU and LSTM (issue 11 item 1: the ONNX backend's recurrent cases): forward,
// reverse and bidirectional; default and custom activations (with alpha / beta), clip, GRU's
// linear_before_reset, LSTM's peepholes and input_forget, initial states, sequence_lens from a
// graph input (int32) or a constant, layout 1 (opset 14), optional outputs. X and the initial
// states are graph inputs; W, R, B, P constants. All rows are named Rnn_*:
// `--gtest_filter='OpTable*/*Rnn_*'` runs them. Also Det's rows (Det_*: single, batched, 1x1 and
// singular matrices of multiples of 1/4) and DFT's (DFT_*: real / complex, inverse, onesided,
// zero-padded and truncated by a constant dft_length) and RoiAlign's (RoiAlign_*).
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

struct RnnArgs {
  const char* name;
  OpKind op;
  int64_t seq, batch, input, hidden;
  const char* direction;
  bool layout1;
  bool bias, h0, c0, peep;
  int seq_lens;  // 0: absent, 1: graph input (int32), 2: constant (int64)
  int outputs;   // 1: Y only; 2: Y, Y_h; 3: Y, Y_h, Y_c; -1: Y_h only (Y omitted)
  std::map<std::string, Attribute> attrs;
};

OpCase rnn_case(const RnnArgs& a, uint32_t seed) {
  TinyGraph t;
  OpCase c;
  const int64_t G = a.op == OpKind::kRNN ? 1 : a.op == OpKind::kGRU ? 3 : 4;
  const int64_t dirs = std::string(a.direction) == "bidirectional" ? 2 : 1;
  const int64_t S = a.seq, B = a.batch, I = a.input, H = a.hidden;
  const Shape xs = a.layout1 ? Shape{B, S, I} : Shape{S, B, I};
  const Shape state = a.layout1 ? Shape{B, dirs, H} : Shape{dirs, B, H};
  std::vector<ir::ValueId> in(a.op == OpKind::kLSTM ? 8 : 6, ir::kNoValue);
  in[0] = t.input("X", xs);
  c.inputs.push_back(nonzero(xs, seed));
  in[1] = t.constant("W", nonzero({dirs, G * H, I}, seed + 1, 0.5f));
  in[2] = t.constant("R", nonzero({dirs, G * H, H}, seed + 2, 0.5f));
  if (a.bias) in[3] = t.constant("B", nonzero({dirs, 2 * G * H}, seed + 3, 0.3f));
  if (a.seq_lens == 1) {
    in[4] = int_input(t, "sequence_lens", {B}, DataType::kInt32);
    c.inputs.push_back(int_tensor(DataType::kInt32, {B}, 0, S, seed + 4));
  } else if (a.seq_lens == 2) {
    in[4] = t.constant("sequence_lens", int_tensor(DataType::kInt64, {B}, 1, S, seed + 4));
  }
  if (a.h0) {
    in[5] = t.input("initial_h", state);
    c.inputs.push_back(nonzero(state, seed + 5));
  }
  if (a.c0) {
    in[6] = t.input("initial_c", state);
    c.inputs.push_back(nonzero(state, seed + 6));
  }
  if (a.peep) in[7] = t.constant("P", nonzero({dirs, 3 * H}, seed + 7, 0.4f));
  while (!in.empty() && in.back() == ir::kNoValue) in.pop_back();
  std::map<std::string, Attribute> attrs = a.attrs;
  attrs["hidden_size"] = Attribute::of_int(H);
  attrs["direction"] = Attribute::of_string(a.direction);
  if (a.layout1) attrs["layout"] = Attribute::of_int(1);
  const Shape ys = a.layout1 ? Shape{B, S, dirs, H} : Shape{S, dirs, B, H};
  const ir::ValueId y = t.node(a.op, "y", in, ys, std::move(attrs));
  ir::Node& n = t.g.nodes.back();
  if (a.layout1) {
    t.g.opset_imports[""] = 14;
    n.opset = 14;
  }
  std::vector<ir::ValueId> outs;
  if (a.outputs > 0) outs.push_back(y);
  else n.outputs[0] = ir::kNoValue;
  const int states = a.outputs < 0 ? 1 : a.outputs - 1;  // Y_h, then Y_c
  for (int k = 0; k < states; ++k) {
    const ir::ValueId v = t.g.add_value(k == 0 ? "Y_h" : "Y_c", DataType::kFloat32);
    t.g.value(v).shape = sym(state);
    t.g.nodes.back().outputs.push_back(v);
    outs.push_back(v);
  }
  t.g.outputs = outs;
  c.graph = t.g;
  return c;
}

}  // namespace

std::vector<Row> rnn_rows() {
  auto strs = [](std::vector<std::string> v) {
    Attribute a;
    a.kind = Attribute::Kind::kStrings;
    a.strings = std::move(v);
    return a;
  };
  auto floats = [](std::vector<float> v) {
    Attribute a;
    a.kind = Attribute::Kind::kFloats;
    a.floats = std::move(v);
    return a;
  };
  const RnnArgs args[] = {
      {"RNN_forward", OpKind::kRNN, 4, 2, 3, 5, "forward", false, true, false, false, false, 0, 2, {}},
      {"RNN_bidirectional_relu_tanh_h0", OpKind::kRNN, 3, 3, 2, 4, "bidirectional", false, true, true, false, false, 0, 2,
       {{"activations", strs({"Relu", "Tanh"})}}},
      {"RNN_reverse_no_bias_Y_h_only", OpKind::kRNN, 5, 1, 3, 3, "reverse", false, false, false, false, false, 0, -1, {}},
      {"GRU_forward", OpKind::kGRU, 3, 2, 4, 5, "forward", false, true, false, false, false, 0, 2, {}},
      {"GRU_bidirectional_linear_before_reset_h0", OpKind::kGRU, 4, 2, 3, 4, "bidirectional", false, true, true, false,
       false, 0, 2, {{"linear_before_reset", Attribute::of_int(1)}}},
      {"GRU_reverse_clip_seq_lens_input", OpKind::kGRU, 5, 3, 2, 3, "reverse", false, true, false, false, false, 1, 2,
       {{"clip", Attribute::of_float(0.6f)}}},
      {"LSTM_forward", OpKind::kLSTM, 3, 2, 3, 4, "forward", false, true, false, false, false, 0, 3, {}},
      {"LSTM_peepholes_h0_c0", OpKind::kLSTM, 4, 2, 3, 3, "forward", false, true, true, true, true, 0, 3, {}},
      {"LSTM_bidirectional_layout1_input_forget", OpKind::kLSTM, 3, 2, 2, 4, "bidirectional", true, true, true, true,
       false, 0, 3, {{"input_forget", Attribute::of_int(1)}}},
      {"LSTM_reverse_seq_lens_const_affine_hardsigmoid", OpKind::kLSTM, 5, 3, 2, 3, "reverse", false, true, false, false,
       false, 2, 3,
       {{"activations", strs({"HardSigmoid", "Affine", "ScaledTanh"})},
        {"activation_alpha", floats({0.3f, 0.8f, 1.2f})},
        {"activation_beta", floats({0.4f, 0.1f, 0.7f})}}},
  };
  std::vector<Row> r;
  uint32_t seed = 1300;
  for (const RnnArgs& a : args) {
    seed += 10;
    Row row;
    row.name = std::string("Rnn_") + a.name;
    row.make = [a, seed] { return rnn_case(a, seed); };
    row.tol = kArithTol;
    row.cpu_tol = 1e-5;
    r.push_back(std::move(row));
  }
  return r;
}

}  // namespace kiln::testing::op_table

namespace kiln::testing::op_table {
namespace {

// Multiples of 1/4 in [-2, 2]: exact in fp16 and bf16, so every precision's plan sees the same
// matrices and only the determinant's rounding to the output storage differs.
Tensor quarters(const Shape& s, uint32_t seed) {
  const Tensor q = int_tensor(DataType::kInt32, s, -8, 8, seed);
  Tensor t(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(q.data<int32_t>()[i]) / 4.f;
  return t;
}

}  // namespace

std::vector<Row> det_rows() {
  struct A {
    const char* name;
    Shape x;
    bool singular;  // row 1 = row 0 (exactly zero after one elimination step)
  };
  const A args[] = {{"3x3", {3, 3}, false}, {"batched_2x4_5x5", {2, 4, 5, 5}, false}, {"1x1", {3, 1, 1}, false},
                    {"singular_4x4", {2, 4, 4}, true}};
  std::vector<Row> r;
  uint32_t seed = 1400;
  for (const A& a : args) {
    seed += 3;
    Row row;
    row.name = std::string("Det_") + a.name;
    row.make = [a, seed] {
      Tensor x = quarters(a.x, seed);
      if (a.singular) {
        const int64_t m = a.x.back();
        for (int64_t b = 0; b < x.numel() / (m * m); ++b)
          for (int64_t j = 0; j < m; ++j) x.data<float>()[b * m * m + m + j] = x.data<float>()[b * m * m + j];
      }
      const Shape out(a.x.begin(), a.x.end() - 2);
      return one_op(OpKind::kDet, a.x, out, [](TinyGraph&) { return std::vector<ir::ValueId>{}; }, {}, std::move(x));
    };
    row.tol = kArithTol;
    r.push_back(std::move(row));
  }
  return r;
}

}  // namespace kiln::testing::op_table

namespace kiln::testing::op_table {

std::vector<Row> dft_rows() {
  struct A {
    const char* name;
    Shape x;
    int64_t axis;
    bool inverse, onesided;
    int64_t length;  // dft_length constant; 0: absent
  };
  const A args[] = {
      {"real_axis1", {2, 8, 3, 1}, 1, false, false, 0},
      {"complex_inverse_axis2", {1, 4, 6, 2}, 2, true, false, 0},
      {"real_onesided_zero_padded", {2, 10, 1}, 1, false, true, 12},
      {"complex_truncated", {3, 9, 2}, 1, false, false, 6},
  };
  std::vector<Row> r;
  uint32_t seed = 1450;
  for (const A& a : args) {
    seed += 2;
    Row row;
    row.name = std::string("DFT_") + a.name;
    row.make = [a, seed] {
      const int64_t len = a.length > 0 ? a.length : a.x[a.axis];
      Shape y = a.x;
      y[a.axis] = a.onesided ? len / 2 + 1 : len;
      y.back() = 2;
      std::map<std::string, ir::Attribute> attrs = {{"axis", ir::Attribute::of_int(a.axis)},
                                                    {"inverse", ir::Attribute::of_int(a.inverse ? 1 : 0)},
                                                    {"onesided", ir::Attribute::of_int(a.onesided ? 1 : 0)}};
      const int64_t length = a.length;
      return one_op(ir::OpKind::kDFT, a.x, y,
                    [length](TinyGraph& t) {
                      std::vector<ir::ValueId> v;
                      if (length > 0) v.push_back(t.constant("dft_length", ints({length})));
                      return v;
                    },
                    std::move(attrs), nonzero(a.x, seed));
    };
    row.tol = kArithTol;
    r.push_back(std::move(row));
  }
  // STFT (constant frame_step; a run-time window, or frame_length only; real and complex
  // signals; onesided or not). frames = 1 + (length - flen) / step.
  struct S {
    const char* name;
    Shape x;
    int64_t step, flen;
    bool window, onesided;
  };
  const S sargs[] = {
      {"real_window_onesided", {2, 20, 1}, 4, 8, true, true},
      {"complex_frame_length", {1, 17, 2}, 3, 6, false, false},
  };
  for (const S& a : sargs) {
    seed += 2;
    Row row;
    row.name = std::string("STFT_") + a.name;
    row.make = [a, seed] {
      const int64_t frames = 1 + (a.x[1] - a.flen) / a.step, bins = a.onesided ? a.flen / 2 + 1 : a.flen;
      TinyGraph t;
      OpCase c;
      const ir::ValueId x = t.input("signal", a.x);
      c.inputs.push_back(nonzero(a.x, seed));
      std::vector<ir::ValueId> ins = {x, t.constant("frame_step", scalar_index(a.step, DataType::kInt64))};
      if (a.window) {
        ins.push_back(t.input("window", {a.flen}));
        c.inputs.push_back(nonzero({a.flen}, seed + 1, 1.f, 1.5f));
      } else {
        ins.push_back(ir::kNoValue);
        ins.push_back(t.constant("frame_length", scalar_index(a.flen, DataType::kInt64)));
      }
      const ir::ValueId y = t.node(ir::OpKind::kSTFT, "y", ins, {a.x[0], frames, bins, 2},
                                   {{"onesided", ir::Attribute::of_int(a.onesided ? 1 : 0)}});
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    };
    row.tol = kArithTol;
    r.push_back(std::move(row));
  }
  return r;
}

}  // namespace kiln::testing::op_table

namespace kiln::testing::op_table {

std::vector<Row> roi_align_rows() {
  struct A {
    const char* name;
    const char* mode;
    const char* ctm;  // "" = the opset's default
    int64_t ratio, out_h, out_w;
    float scale;
    bool batch_input;  // batch_indices a graph input (else a constant)
  };
  const A args[] = {
      {"avg_half_pixel_adaptive", "avg", "half_pixel", 0, 3, 4, 0.5f, true},
      {"avg_output_half_pixel_ratio2", "avg", "output_half_pixel", 2, 2, 2, 1.f, false},
      {"max_half_pixel_ratio3", "max", "half_pixel", 3, 3, 3, 0.25f, true},
  };
  std::vector<Row> r;
  uint32_t seed = 1470;
  for (const A& a : args) {
    seed += 2;
    Row row;
    row.name = std::string("RoiAlign_") + a.name;
    row.make = [a, seed] {
      TinyGraph t;
      OpCase c;
      const Shape xs = {2, 3, 8, 9};
      const ir::ValueId x = t.input("x", xs);
      c.inputs.push_back(nonzero(xs, seed));
      // rois in input pixels (x1, y1, x2, y2), some reaching past the map (scale 0.25 / 0.5 / 1).
      const float box[] = {0, 0, 6, 5, 1.5f, 2.f, 9.f, 7.5f, 4, 3, 20, 18, 2.5f, 0.5f, 3.f, 1.f};
      Tensor rois(DataType::kFloat32, {4, 4});
      for (int i = 0; i < 16; ++i) rois.data<float>()[i] = box[i];
      const ir::ValueId rv = t.input("rois", {4, 4});
      c.inputs.push_back(std::move(rois));
      Tensor bi = ints({1, 0, 1, 0});
      ir::ValueId bv;
      if (a.batch_input) {
        bv = int_input(t, "batch_indices", {4}, DataType::kInt64);
        c.inputs.push_back(std::move(bi));
      } else {
        bv = t.constant("batch_indices", std::move(bi));
      }
      std::map<std::string, ir::Attribute> attrs = {{"mode", ir::Attribute::of_string(a.mode)},
                                                    {"sampling_ratio", ir::Attribute::of_int(a.ratio)},
                                                    {"output_height", ir::Attribute::of_int(a.out_h)},
                                                    {"output_width", ir::Attribute::of_int(a.out_w)},
                                                    {"spatial_scale", ir::Attribute::of_float(a.scale)}};
      if (a.ctm[0] != '\0') attrs["coordinate_transformation_mode"] = ir::Attribute::of_string(a.ctm);
      auto y = t.node(ir::OpKind::kRoiAlign, "y", {x, rv, bv}, {4, 3, a.out_h, a.out_w}, std::move(attrs));
      t.g.outputs = {y};
      c.graph = t.g;
      return c;
    };
    row.tol = kArithTol;
    r.push_back(std::move(row));
  }
  return r;
}

}  // namespace kiln::testing::op_table
