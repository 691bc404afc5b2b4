// CPU reference kernels for the recurrent layers RNN, GRU and LSTM (ONNX Operators.md,
// "Operator RNN/GRU/LSTM, since version 1/3/7/14"). One shared driver walks directions,
// batch entries and time steps in double precision; the cells differ only in their gate
// equations. Layout 1 (batch-major X/Y/states, opset 14) is handled through index maps.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "backends/cpu/ops_control.h"
#include "core/numerics.h"

namespace kiln::cpu {
namespace {

enum class Cell { kRnn, kGru, kLstm };

// One activation function with its alpha/beta (the spec's list of RNN activations).
struct Activation {
  enum Kind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus };
  Kind kind = kTanh;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    switch (kind) {
      case kRelu: return std::max(0.0, x);
      case kTanh: return std::tanh(x);
      case kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case kAffine: return alpha * x + beta;
      case kLeakyRelu: return x >= 0 ? x : alpha * x;
      case kThresholdedRelu: return x > alpha ? x : 0.0;
      case kScaledTanh: return alpha * std::tanh(beta * x);
      case kHardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
      case kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case kSoftsign: return x / (1.0 + std::fabs(x));
      case kSoftplus: return std::log1p(std::exp(x));
    }
    return x;
  }
};

// Parses `name` (case-insensitive); alpha/beta are taken in order from the attribute lists
// by the functions that use them, falling back to each function's usual default.
bool parse_activation(std::string name, const std::vector<float>& alphas, size_t* ai, const std::vector<float>& betas,
                      size_t* bi, Activation* out) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Info { const char* name; Activation::Kind kind; int uses; double a, b; };  // uses: 0, 1 (alpha), 2 (alpha, beta)
  static const Info kInfos[] = {
      {"relu", Activation::kRelu, 0, 0, 0},         {"tanh", Activation::kTanh, 0, 0, 0},
      {"sigmoid", Activation::kSigmoid, 0, 0, 0},   {"affine", Activation::kAffine, 2, 1, 0},
      {"leakyrelu", Activation::kLeakyRelu, 1, 0.01, 0}, {"thresholdedrelu", Activation::kThresholdedRelu, 1, 1, 0},
      {"scaledtanh", Activation::kScaledTanh, 2, 1, 1}, {"hardsigmoid", Activation::kHardSigmoid, 2, 0.2, 0.5},
      {"elu", Activation::kElu, 1, 1, 0},           {"softsign", Activation::kSoftsign, 0, 0, 0},
      {"softplus", Activation::kSoftplus, 0, 0, 0},
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

// Shapes and index maps shared by the three cells.
struct RnnDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  bool batch_major = false;  // layout == 1
  int64_t x(int64_t s, int64_t b, int64_t i) const { return (batch_major ? b * seq + s : s * batch + b) * input + i; }
  // initial_h / initial_c / Y_h / Y_c
  int64_t state(int64_t d, int64_t b, int64_t j) const { return (batch_major ? b * dirs + d : d * batch + b) * hidden + j; }
  int64_t y(int64_t s, int64_t d, int64_t b, int64_t j) const {
    return (batch_major ? (b * seq + s) * dirs + d : (s * dirs + d) * batch + b) * hidden + j;
  }
  Shape state_shape() const { return batch_major ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden}; }
  Shape y_shape() const { return batch_major ? Shape{batch, seq, dirs, hidden} : Shape{seq, dirs, batch, hidden}; }
};

Status check_shape(const KernelContext& ctx, const Tensor* t, const char* what, const Shape& want) {
  if (t && t->shape() != want)
    return ctx.fail(std::string(what) + " has shape " + shape_str(t->shape()) + ", expected " + shape_str(want));
  return Status::Ok();
}

// Operators RNN (gates: 1), GRU (z, r, h) and LSTM (i, o, f, c). Inputs: X, W, R, B,
// sequence_lens, initial_h, then for LSTM initial_c and P (peepholes i, o, f).
Status recurrent(KernelContext& ctx, Cell cell) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const Tensor& X = ctx.in(0);
  const Tensor& W = ctx.in(1);
  const Tensor& R = ctx.in(2);
  if (!dtype_is_float(X.dtype())) return ctx.unsupported_here(std::string("X of dtype ") + dtype_name(X.dtype()));
  if (X.rank() != 3 || W.rank() != 3 || R.rank() != 3)
    return ctx.fail("X, W and R must have rank 3, got " + shape_str(X.shape()) + ", " + shape_str(W.shape()) + ", " + shape_str(R.shape()));
  RnnDims d;
  d.gates = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4;
  d.batch_major = ctx.opset() >= 14 && ctx.attr_int("layout", 0) != 0;
  d.seq = d.batch_major ? X.dim(1) : X.dim(0);
  d.batch = d.batch_major ? X.dim(0) : X.dim(1);
  d.input = X.dim(2);
  d.hidden = ctx.attr_int("hidden_size", R.dim(2));
  const std::string direction = ctx.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return ctx.fail("direction '" + direction + "' is not forward, reverse or bidirectional");
  d.dirs = direction == "bidirectional" ? 2 : 1;
  const int64_t H = d.hidden, G = d.gates;
  if (H <= 0) return ctx.fail("hidden_size must be positive");
  KILN_RETURN_IF_ERROR(check_shape(ctx, &W, "W", {d.dirs, G * H, d.input}));
  KILN_RETURN_IF_ERROR(check_shape(ctx, &R, "R", {d.dirs, G * H, H}));
  KILN_RETURN_IF_ERROR(check_shape(ctx, ctx.input(3), "B", {d.dirs, 2 * G * H}));
  KILN_RETURN_IF_ERROR(check_shape(ctx, ctx.input(4), "sequence_lens", {d.batch}));
  KILN_RETURN_IF_ERROR(check_shape(ctx, ctx.input(5), "initial_h", d.state_shape()));
  if (cell == Cell::kLstm) {
    KILN_RETURN_IF_ERROR(check_shape(ctx, ctx.input(6), "initial_c", d.state_shape()));
    KILN_RETURN_IF_ERROR(check_shape(ctx, ctx.input(7), "P", {d.dirs, 3 * H}));
  }

  // Activations: per direction f (RNN), f g (GRU) or f g h (LSTM).
  const size_t per_dir = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3;
  std::vector<std::string> names;
  if (auto it = ctx.node().attrs.find("activations"); it != ctx.node().attrs.end()) names = it->second.strings;
  if (names.empty()) {
    for (int64_t k = 0; k < d.dirs; ++k) {
      if (cell == Cell::kRnn) names.push_back("Tanh");
      if (cell == Cell::kGru) names.insert(names.end(), {"Sigmoid", "Tanh"});
      if (cell == Cell::kLstm) names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
    }
  }
  if (names.size() == per_dir && d.dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per_dir * d.dirs)
    return ctx.fail("expected " + std::to_string(per_dir * d.dirs) + " activations, got " + std::to_string(names.size()));
  const std::vector<float> alphas = ctx.attr_floats("activation_alpha"), betas = ctx.attr_floats("activation_beta");
  std::vector<Activation> acts(names.size());
  size_t ai = 0, bi = 0;
  for (size_t k = 0; k < names.size(); ++k)
    if (!parse_activation(names[k], alphas, &ai, betas, &bi, &acts[k]))
      return ctx.unsupported_here("activation '" + names[k] + "'");
  const bool has_clip = ctx.has_attr("clip");
  const double clip = ctx.attr_float("clip", 0);
  const auto clipped = [&](double v) { return has_clip ? std::clamp(v, -clip, clip) : v; };
  const bool lbr = cell == Cell::kGru && ctx.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = cell == Cell::kLstm && ctx.attr_int("input_forget", 0) != 0;

  const std::vector<double> x = control_doubles(X), w = control_doubles(W), r = control_doubles(R);
  const std::vector<double> bias = ctx.has_input(3) ? control_doubles(ctx.in(3)) : std::vector<double>(d.dirs * 2 * G * H, 0.0);
  const std::vector<double> h_init = ctx.has_input(5) ? control_doubles(ctx.in(5)) : std::vector<double>(d.dirs * d.batch * H, 0.0);
  const Tensor* c_in = cell == Cell::kLstm ? ctx.input(6) : nullptr;
  const Tensor* p_in = cell == Cell::kLstm ? ctx.input(7) : nullptr;
  const std::vector<double> c_init = c_in ? control_doubles(*c_in) : std::vector<double>(d.dirs * d.batch * H, 0.0);
  const std::vector<double> peep = p_in ? control_doubles(*p_in) : std::vector<double>(d.dirs * 3 * H, 0.0);
  std::vector<int64_t> lens(static_cast<size_t>(d.batch), d.seq);
  if (ctx.has_input(4)) {
    const Tensor& sl = ctx.in(4);
    if (!dtype_is_integer(sl.dtype())) return ctx.fail("sequence_lens must be an integer tensor");
    for (int64_t b = 0; b < d.batch; ++b) {
      lens[b] = load_as_int64(sl.dtype(), sl.raw(), b);
      if (lens[b] < 0 || lens[b] > d.seq) return ctx.fail("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens[b]) + " is out of range");
    }
  }

  std::vector<double> y(static_cast<size_t>(d.seq * d.dirs * d.batch * H), 0.0);
  std::vector<double> y_h(static_cast<size_t>(d.dirs * d.batch * H)), y_c(y_h.size());
  std::vector<double> xw(G * H), hr(G * H), h(H), c(H), hn(H), rh(H);
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    const bool reverse = direction == "reverse" || dir == 1;
    const double* wd = &w[dir * G * H * d.input];
    const double* rd = &r[dir * G * H * H];
    const double* wb = &bias[dir * 2 * G * H];
    const double* rb = wb + G * H;
    const double* pd = &peep[dir * 3 * H];
    const Activation* fa = &acts[dir * per_dir];
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        h[j] = h_init[d.state(dir, b, j)];
        c[j] = c_init[d.state(dir, b, j)];
      }
      for (int64_t step = 0; step < lens[b]; ++step) {
        const int64_t s = reverse ? lens[b] - 1 - step : step;
        // xw = W x + Wb and hr = R h + Rb for every gate row.
        for (int64_t gj = 0; gj < G * H; ++gj) {
          double a = wb[gj], e = rb[gj];
          for (int64_t i = 0; i < d.input; ++i) a += wd[gj * d.input + i] * x[d.x(s, b, i)];
          for (int64_t k = 0; k < H; ++k) e += rd[gj * H + k] * h[k];
          xw[gj] = a;
          hr[gj] = e;
        }
        if (cell == Cell::kRnn) {
          for (int64_t j = 0; j < H; ++j) hn[j] = fa[0](clipped(xw[j] + hr[j]));
        } else if (cell == Cell::kGru) {
          // GRU: z = f(.), r = f(.), h~ = g(x Wh + (r*h) Rh + Rbh + Wbh) or, with
          // linear_before_reset, g(x Wh + r*(h Rh + Rbh) + Wbh); H = (1-z) h~ + z h.
          for (int64_t j = 0; j < H; ++j) rh[j] = fa[0](clipped(xw[H + j] + hr[H + j])) * h[j];
          for (int64_t j = 0; j < H; ++j) {
            const double z = fa[0](clipped(xw[j] + hr[j]));
            double pre;
            if (lbr) {
              pre = xw[2 * H + j] + fa[0](clipped(xw[H + j] + hr[H + j])) * hr[2 * H + j];
            } else {
              pre = xw[2 * H + j] + rb[2 * H + j];
              for (int64_t k = 0; k < H; ++k) pre += rd[(2 * H + j) * H + k] * rh[k];
            }
            hn[j] = (1 - z) * fa[1](clipped(pre)) + z * h[j];
          }
        } else {
          // LSTM (gate rows i, o, f, c; peepholes i, o, f): C = f*C + i*g(.), H = o*h(C).
          for (int64_t j = 0; j < H; ++j) {
            const double ig = fa[0](clipped(xw[j] + hr[j] + pd[j] * c[j]));
            const double fg = input_forget ? 1 - ig : fa[0](clipped(xw[2 * H + j] + hr[2 * H + j] + pd[2 * H + j] * c[j]));
            const double cc = fa[1](clipped(xw[3 * H + j] + hr[3 * H + j]));
            c[j] = fg * c[j] + ig * cc;
            const double og = fa[0](clipped(xw[H + j] + hr[H + j] + pd[H + j] * c[j]));
            hn[j] = og * fa[2](c[j]);
          }
        }
        h = hn;
        for (int64_t j = 0; j < H; ++j) y[d.y(s, dir, b, j)] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        y_h[d.state(dir, b, j)] = h[j];
        y_c[d.state(dir, b, j)] = c[j];
      }
    }
  }
  if (ctx.output_wanted(0)) ctx.set_output(0, control_tensor_from(X.dtype(), d.y_shape(), y));
  if (ctx.output_wanted(1)) ctx.set_output(1, control_tensor_from(X.dtype(), d.state_shape(), y_h));
  if (cell == Cell::kLstm && ctx.output_wanted(2)) ctx.set_output(2, control_tensor_from(X.dtype(), d.state_shape(), y_c));
  return Status::Ok();
}

Status rnn(KernelContext& ctx) { return recurrent(ctx, Cell::kRnn); }
Status gru(KernelContext& ctx) { return recurrent(ctx, Cell::kGru); }
Status lstm(KernelContext& ctx) { return recurrent(ctx, Cell::kLstm); }

}  // namespace

void register_control_rnn_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kRNN, rnn);
  r.add(ir::OpKind::kGRU, gru);
  r.add(ir::OpKind::kLSTM, lstm);
}

}  // namespace kiln::cpu
