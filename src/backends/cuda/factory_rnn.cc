// RNN, GRU and LSTM (ONNX Operators.md; versions 7 and 14, layout 0 / 1): one layer running
// Kiln's recurrent kernel (kernels_rnn.h). The checks and attribute handling mirror the CPU
// reference (src/backends/cpu/ops_control_rnn.cc) with errors naming the node; float operands are
// read in float32 (constants converted on the host, activations through a cast layer when stored
// in 16 bits), sequence_lens as int64, and the outputs are written in the layer's storage.
#include <algorithm>
#include <cctype>

#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_rnn.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {
namespace {

// The spec's activation `name` (case-insensitive) with alpha / beta taken in order from the
// attribute lists, else each function's default (the CPU reference's parse_activation).
bool parse_activation(std::string name, const std::vector<float>& alphas, size_t* ai, const std::vector<float>& betas,
                      size_t* bi, RnnActivation* out) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Info { const char* name; RnnActivation::Kind kind; int uses; float a, b; };
  static const Info kInfos[] = {
      {"relu", RnnActivation::kRelu, 0, 0, 0},
      {"tanh", RnnActivation::kTanh, 0, 0, 0},
      {"sigmoid", RnnActivation::kSigmoid, 0, 0, 0},
      {"affine", RnnActivation::kAffine, 2, 1, 0},
      {"leakyrelu", RnnActivation::kLeakyRelu, 1, 0.01f, 0},
      {"thresholdedrelu", RnnActivation::kThresholdedRelu, 1, 1, 0},
      {"scaledtanh", RnnActivation::kScaledTanh, 2, 1, 1},
      {"hardsigmoid", RnnActivation::kHardSigmoid, 2, 0.2f, 0.5f},
      {"elu", RnnActivation::kElu, 1, 1, 0},
      {"softsign", RnnActivation::kSoftsign, 0, 0, 0},
      {"softplus", RnnActivation::kSoftplus, 0, 0, 0},
  };
  for (const Info& in : kInfos) {
    if (name != in.name) continue;
    out->kind = in.kind;
    out->alpha = in.a;
    out->beta = in.b;
    if (in.uses >= 1 && *ai < alphas.size()) out->alpha = alphas[(*ai)++];
    if (in.uses >= 2 && *bi < betas.size()) out->beta = betas[(*bi)++];
    return true;
  }
  return false;
}

bool present(const ir::Node& n, size_t k) { return k < n.inputs.size() && n.inputs[k] != ir::kNoValue; }

}  // namespace

Status lower_rnn(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!present(n, 0) || !present(n, 1) || !present(n, 2)) return invalid_argument(where + "X, W and R are required");
  RnnDesc d;
  d.cell = n.op == ir::OpKind::kRNN ? RnnCell::kRnn : n.op == ir::OpKind::kGRU ? RnnCell::kGru : RnnCell::kLstm;
  d.gates = d.cell == RnnCell::kRnn ? 1 : d.cell == RnnCell::kGru ? 3 : 4;
  const Shape &X = ctx.shape(n.inputs[0]), &W = ctx.shape(n.inputs[1]), &R = ctx.shape(n.inputs[2]);
  if (X.size() != 3 || W.size() != 3 || R.size() != 3)
    return invalid_argument(where + "X, W and R must have rank 3, got " + shape_str(X) + ", " + shape_str(W) + ", " +
                            shape_str(R));
  d.batch_major = n.opset >= 14 && n.attr_int("layout", 0) != 0;
  d.seq = d.batch_major ? X[1] : X[0];
  d.batch = d.batch_major ? X[0] : X[1];
  d.input = X[2];
  d.hidden = n.attr_int("hidden_size", R[2]);
  const std::string direction = n.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return invalid_argument(where + "direction '" + direction + "' is not forward, reverse or bidirectional");
  d.dirs = direction == "bidirectional" ? 2 : 1;
  d.reverse_only = direction == "reverse";
  const int64_t H = d.hidden, G = d.gates;
  if (H <= 0) return invalid_argument(where + "hidden_size must be positive");
  const Shape state = d.batch_major ? Shape{d.batch, d.dirs, H} : Shape{d.dirs, d.batch, H};
  auto check = [&](size_t k, const char* what, const Shape& want) -> Status {
    if (present(n, k) && ctx.shape(n.inputs[k]) != want)
      return invalid_argument(where + what + " has shape " + shape_str(ctx.shape(n.inputs[k])) + ", expected " +
                              shape_str(want));
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(check(1, "W", {d.dirs, G * H, d.input}));
  KILN_RETURN_IF_ERROR(check(2, "R", {d.dirs, G * H, H}));
  KILN_RETURN_IF_ERROR(check(3, "B", {d.dirs, 2 * G * H}));
  KILN_RETURN_IF_ERROR(check(4, "sequence_lens", {d.batch}));
  KILN_RETURN_IF_ERROR(check(5, "initial_h", state));
  if (d.cell == RnnCell::kLstm) {
    KILN_RETURN_IF_ERROR(check(6, "initial_c", state));
    KILN_RETURN_IF_ERROR(check(7, "P", {d.dirs, 3 * H}));
  }
  if (rnn_shared_bytes(d) > kRnnMaxSharedBytes)
    return unsupported(where + "hidden_size " + std::to_string(H) + " needs more shared memory than the recurrent "
                       "kernel's one block per sequence has");

  // Activations: per direction f (RNN), f g (GRU), f g h (LSTM); one direction's list serves both.
  d.acts_per_dir = d.cell == RnnCell::kRnn ? 1 : d.cell == RnnCell::kGru ? 2 : 3;
  const size_t per_dir = static_cast<size_t>(d.acts_per_dir);
  std::vector<std::string> names;
  if (auto it = n.attrs.find("activations"); it != n.attrs.end()) names = it->second.strings;
  if (names.empty()) {
    for (int64_t k = 0; k < d.dirs; ++k) {
      if (d.cell == RnnCell::kRnn) names.push_back("Tanh");
      if (d.cell == RnnCell::kGru) names.insert(names.end(), {"Sigmoid", "Tanh"});
      if (d.cell == RnnCell::kLstm) names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
    }
  }
  if (names.size() == per_dir && d.dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per_dir * static_cast<size_t>(d.dirs))
    return invalid_argument(where + "expected " + std::to_string(per_dir * d.dirs) + " activations, got " +
                            std::to_string(names.size()));
  const std::vector<float> alphas = n.attr_floats("activation_alpha"), betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  for (size_t k = 0; k < names.size(); ++k)
    if (!parse_activation(names[k], alphas, &ai, betas, &bi, &d.acts[k]))
      return unsupported(where + "activation '" + names[k] + "'");
  d.has_clip = n.has_attr("clip");
  d.clip = n.attr_float("clip", 0);
  d.linear_before_reset = d.cell == RnnCell::kGru && n.attr_int("linear_before_reset", 0) != 0;
  d.input_forget = d.cell == RnnCell::kLstm && n.attr_int("input_forget", 0) != 0;

  // Constant sequence lengths are checked here (the kernel clamps run-time ones).
  if (present(n, 4)) {
    if (const auto& c = ctx.graph().value(n.inputs[4]).constant) {
      for (int64_t b = 0; b < c->numel(); ++b) {
        const int64_t v = load_as_int64(c->dtype(), c->raw(), b);
        if (v < 0 || v > d.seq)
          return invalid_argument(where + "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(v) +
                                  " is out of range [0, " + std::to_string(d.seq) + "]");
      }
    }
  }

  std::vector<int> ins(8, -1);
  const size_t n_in = d.cell == RnnCell::kLstm ? 8 : 6;
  for (size_t k = 0; k < n_in; ++k) {
    if (!present(n, k)) continue;
    KILN_ASSIGN_OR_RETURN(ins[k], ctx.operand_as(n.inputs[k], k == 4 ? StorageType::kI64 : StorageType::kF32));
  }
  // Outputs Y, Y_h (and Y_c): the present ones, in order; `slot` maps each to its position.
  std::vector<int> outs;
  int slot[3] = {-1, -1, -1};
  const size_t n_out = d.cell == RnnCell::kLstm ? 3 : 2;
  for (size_t k = 0; k < std::min(n_out, n.outputs.size()); ++k) {
    if (n.outputs[k] == ir::kNoValue) continue;
    slot[k] = static_cast<int>(outs.size());
    outs.push_back(ctx.new_output(n, k));
  }
  const StorageType t = ctx.storage();
  const std::string op = ir::op_name(n.op);
  auto layer = make_kernel_layer(op, "kiln.rnn", [d, t, slot](ExecState& s, const Layer& l) {
    auto in = [&](int k) -> void* { return l.ins[k] < 0 ? nullptr : s.ptr(l.ins[k]); };
    auto out = [&](int k) -> void* { return slot[k] < 0 ? nullptr : s.ptr(l.outs[slot[k]]); };
    return launch_rnn(d, static_cast<const float*>(in(0)), static_cast<const float*>(in(1)),
                      static_cast<const float*>(in(2)), static_cast<const float*>(in(3)),
                      static_cast<const int64_t*>(in(4)), static_cast<const float*>(in(5)),
                      static_cast<const float*>(in(6)), static_cast<const float*>(in(7)), out(0), out(1), out(2), t,
                      s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, ins, outs, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
