// CPU reference kernels for the signal-processing ops: HannWindow, HammingWindow,
// BlackmanWindow, DFT, STFT and MelWeightMatrix (all since opset 17; DFT-20 takes axis as an
// input). Transforms are plain O(n^2) DFTs in double with exact (k*n mod N) twiddles: slow
// but accurate, which is what a reference is for. Complex values are a trailing dim of 2.
#include <cmath>
#include <string>

#include "backends/cpu/ops_control.h"
#include "core/numerics.h"
#include "core/onnx_dtype.h"

namespace kiln::cpu {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Transform/window lengths past this are rejected: the O(n^2) reference would never finish.
constexpr int64_t kMaxLength = int64_t{1} << 24;

Status read_int_scalar(const KernelContext& ctx, int i, const char* what, int64_t* v) {
  const Tensor& t = ctx.in(i);
  if (t.numel() != 1 || !dtype_is_integer(t.dtype())) return ctx.fail(std::string(what) + " must be one integer");
  *v = load_as_int64(t.dtype(), t.raw(), 0);
  return Status::Ok();
}

Status output_dtype(const KernelContext& ctx, DataType* dt) {
  const int64_t code = ctx.attr_int("output_datatype", 1);
  *dt = dtype_from_onnx(static_cast<int>(code));
  if (*dt == DataType::kUndefined || *dt == DataType::kString || *dt == DataType::kBool || dtype_bits(*dt) < 8)
    return ctx.unsupported_here("output_datatype " + std::to_string(code));
  return Status::Ok();
}

// Generalised cosine windows w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), with
// N = size (periodic) or size - 1 (symmetric). Operators HannWindow (0.5, 0.5, 0),
// HammingWindow (25/46, 21/46, 0) and BlackmanWindow (0.42, 0.5, 0.08), since version 17.
Status cosine_window(KernelContext& ctx, double a0, double a1, double a2) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  int64_t size = 0;
  KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 0, "size", &size));
  if (size < 0) return ctx.fail("size must be non-negative, got " + std::to_string(size));
  if (size > kMaxLength) return ctx.unsupported_here("window size " + std::to_string(size) + " is too large");
  DataType dt;
  KILN_RETURN_IF_ERROR(output_dtype(ctx, &dt));
  const bool periodic = ctx.attr_int("periodic", 1) != 0;
  const double n_div = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(static_cast<size_t>(size), 1.0);
  if (n_div > 0)
    for (int64_t n = 0; n < size; ++n) {
      const double t = 2 * kPi * static_cast<double>(n) / n_div;
      w[n] = a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
    }
  ctx.set_output(0, control_tensor_from(dt, {size}, w));
  return Status::Ok();
}

Status hann_window(KernelContext& ctx) { return cosine_window(ctx, 0.5, 0.5, 0.0); }
Status hamming_window(KernelContext& ctx) { return cosine_window(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0); }
Status blackman_window(KernelContext& ctx) { return cosine_window(ctx, 0.42, 0.5, 0.08); }

// out[k] = sum_n in[n] exp(-+2 pi i k n / len) for k < out_len (len >= in.size(); missing
// input samples are zeros). Interleaved (re, im) arrays.
void naive_dft(const std::vector<double>& in, int64_t len, int64_t out_len, bool inverse, double* out) {
  const int64_t n_in = static_cast<int64_t>(in.size() / 2);
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < out_len; ++k) {
    double re = 0, im = 0;
    for (int64_t n = 0; n < n_in && n < len; ++n) {
      const double ang = sign * 2 * kPi * static_cast<double>((k * n) % len) / static_cast<double>(len);
      const double c = std::cos(ang), s = std::sin(ang);
      re += in[2 * n] * c - in[2 * n + 1] * s;
      im += in[2 * n] * s + in[2 * n + 1] * c;
    }
    if (inverse) {
      re /= static_cast<double>(len);
      im /= static_cast<double>(len);
    }
    out[2 * k] = re;
    out[2 * k + 1] = im;
  }
}

// Operator DFT, since version 17 (axis attribute, default 1) and 20 (axis input, default
// -2). Input [batch, n_1..n_k, 1|2]; the transform runs along `axis` with optional
// dft_length (zero-pad or truncate); onesided keeps floor(len/2)+1 bins.
Status dft(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& X = ctx.in(0);
  const int r = X.rank();
  if (r < 2 || (X.dim(-1) != 1 && X.dim(-1) != 2))
    return ctx.fail("input must end in a dim of 1 (real) or 2 (complex), got " + shape_str(X.shape()));
  if (!dtype_is_float(X.dtype())) return ctx.unsupported_here(std::string("input of dtype ") + dtype_name(X.dtype()));
  int64_t axis = ctx.attr_int("axis", 1);
  if (ctx.opset() >= 20) {
    axis = -2;
    if (ctx.has_input(2)) KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 2, "axis", &axis));
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) return ctx.fail("axis is out of range for input " + shape_str(X.shape()));
  const int64_t n_in = X.dim(static_cast<int>(axis));
  int64_t len = n_in;
  if (ctx.has_input(1) && ctx.in(1).numel() > 0) KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 1, "dft_length", &len));
  if (len <= 0) return ctx.fail("dft_length must be positive, got " + std::to_string(len));
  if (len > kMaxLength) return ctx.unsupported_here("dft_length " + std::to_string(len) + " is too large");
  const bool inverse = ctx.attr_int("inverse", 0) != 0;
  const bool onesided = ctx.attr_int("onesided", 0) != 0;
  const int64_t out_len = onesided ? len / 2 + 1 : len;
  const int64_t comps = X.dim(-1);

  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= X.dim(d);
  for (int d = static_cast<int>(axis) + 1; d < r - 1; ++d) inner *= X.dim(d);
  Shape out_shape = X.shape();
  out_shape[axis] = out_len;
  out_shape[r - 1] = 2;
  const std::vector<double> x = control_doubles(X);
  std::vector<double> y(static_cast<size_t>(outer * out_len * inner * 2));
  std::vector<double> line(static_cast<size_t>(std::min(n_in, len) * 2)), res(static_cast<size_t>(out_len * 2));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t n = 0; n < std::min(n_in, len); ++n) {
        const int64_t src = ((o * n_in + n) * inner + i) * comps;
        line[2 * n] = x[src];
        line[2 * n + 1] = comps == 2 ? x[src + 1] : 0.0;
      }
      naive_dft(line, len, out_len, inverse, res.data());
      for (int64_t k = 0; k < out_len; ++k) {
        const int64_t dst = ((o * out_len + k) * inner + i) * 2;
        y[dst] = res[2 * k];
        y[dst + 1] = res[2 * k + 1];
      }
    }
  }
  ctx.set_output(0, control_tensor_from(X.dtype(), out_shape, y));
  return Status::Ok();
}

// Operator STFT, since version 17: signal [batch, length, 1|2], frame_step, optional window
// [frame_length] and frame_length. Frames start every frame_step samples; each is windowed
// and transformed. Output [batch, frames, bins, 2], bins = frame_length/2+1 when onesided.
Status stft(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& S = ctx.in(0);
  if (S.rank() != 3 || (S.dim(2) != 1 && S.dim(2) != 2))
    return ctx.fail("signal must be [batch, length, 1|2], got " + shape_str(S.shape()));
  if (!dtype_is_float(S.dtype())) return ctx.unsupported_here(std::string("signal of dtype ") + dtype_name(S.dtype()));
  int64_t step = 0;
  KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 1, "frame_step", &step));
  if (step <= 0) return ctx.fail("frame_step must be positive, got " + std::to_string(step));
  const Tensor* win_t = ctx.input(2);
  if (win_t && win_t->rank() != 1) return ctx.fail("window must be 1-D, got " + shape_str(win_t->shape()));
  int64_t flen = win_t ? win_t->dim(0) : -1;
  if (ctx.has_input(3)) {
    int64_t fl = 0;
    KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 3, "frame_length", &fl));
    if (win_t && fl != flen) return ctx.fail("frame_length " + std::to_string(fl) + " differs from the window length " + std::to_string(flen));
    flen = fl;
  }
  if (flen < 0) return ctx.fail("either window or frame_length must be given");
  const int64_t B = S.dim(0), L = S.dim(1), comps = S.dim(2);
  if (flen == 0 || flen > L) return ctx.fail("frame_length " + std::to_string(flen) + " must be in [1, " + std::to_string(L) + "]");
  const bool onesided = ctx.attr_int("onesided", 1) != 0;
  const int64_t frames = 1 + (L - flen) / step;
  const int64_t bins = onesided ? flen / 2 + 1 : flen;
  const std::vector<double> s = control_doubles(S);
  const std::vector<double> win = win_t ? control_doubles(*win_t) : std::vector<double>(static_cast<size_t>(flen), 1.0);
  std::vector<double> y(static_cast<size_t>(B * frames * bins * 2)), line(static_cast<size_t>(flen * 2));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t n = 0; n < flen; ++n) {
        const int64_t src = (b * L + f * step + n) * comps;
        line[2 * n] = s[src] * win[n];
        line[2 * n + 1] = comps == 2 ? s[src + 1] * win[n] : 0.0;
      }
      naive_dft(line, flen, bins, false, &y[((b * frames + f) * bins) * 2]);
    }
  }
  ctx.set_output(0, control_tensor_from(S.dtype(), {B, frames, bins, 2}, y));
  return Status::Ok();
}

// Operator MelWeightMatrix, since version 17: [dft_length/2+1, num_mel_bins] triangular
// filters whose edges are num_mel_bins+2 points spaced evenly on the mel scale
// (mel = 2595 log10(1 + hz/700)) and snapped to spectrogram bins.
Status mel_weight_matrix(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(5));
  int64_t n_mel = 0, dft_len = 0, rate = 0;
  KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 0, "num_mel_bins", &n_mel));
  KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 1, "dft_length", &dft_len));
  KILN_RETURN_IF_ERROR(read_int_scalar(ctx, 2, "sample_rate", &rate));
  if (ctx.in(3).numel() != 1 || ctx.in(4).numel() != 1) return ctx.fail("lower/upper_edge_hertz must be scalars");
  const double lo_hz = load_as_double(ctx.in(3).dtype(), ctx.in(3).raw(), 0);
  const double hi_hz = load_as_double(ctx.in(4).dtype(), ctx.in(4).raw(), 0);
  if (n_mel <= 0 || dft_len <= 0 || rate <= 0) return ctx.fail("num_mel_bins, dft_length and sample_rate must be positive");
  if (n_mel > kMaxLength || dft_len > kMaxLength) return ctx.unsupported_here("num_mel_bins or dft_length is too large");
  if (!std::isfinite(lo_hz) || !std::isfinite(hi_hz) || lo_hz < 0 || hi_hz < lo_hz) return ctx.fail("need 0 <= lower_edge_hertz <= upper_edge_hertz");
  DataType dt;
  KILN_RETURN_IF_ERROR(output_dtype(ctx, &dt));
  const int64_t n_spec = dft_len / 2 + 1;
  const double lo_mel = 2595 * std::log10(1 + lo_hz / 700), hi_mel = 2595 * std::log10(1 + hi_hz / 700);
  const double mel_step = (hi_mel - lo_mel) / static_cast<double>(n_mel + 2);
  std::vector<int64_t> edge(static_cast<size_t>(n_mel + 2));
  for (int64_t i = 0; i < n_mel + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + lo_mel) / 2595) - 1);
    const double bin = std::floor(static_cast<double>(dft_len + 1) * hz / static_cast<double>(rate));
    if (!(bin >= 0 && bin < static_cast<double>(n_spec))) return ctx.fail("upper_edge_hertz maps past the last spectrogram bin");
    edge[i] = static_cast<int64_t>(bin);
  }
  std::vector<double> w(static_cast<size_t>(n_spec * n_mel), 0.0);
  for (int64_t m = 0; m < n_mel; ++m) {
    const int64_t lo = edge[m], mid = edge[m + 1], hi = edge[m + 2];
    if (mid == lo) {
      w[mid * n_mel + m] = 1;
    } else {
      for (int64_t j = lo; j <= mid; ++j) w[j * n_mel + m] = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    }
    for (int64_t j = mid; j < hi; ++j) w[j * n_mel + m] = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
  }
  ctx.set_output(0, control_tensor_from(dt, {n_spec, n_mel}, w));
  return Status::Ok();
}

}  // namespace

void register_control_signal_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kHannWindow, hann_window);
  r.add(ir::OpKind::kHammingWindow, hamming_window);
  r.add(ir::OpKind::kBlackmanWindow, blackman_window);
  r.add(ir::OpKind::kDFT, dft);
  r.add(ir::OpKind::kSTFT, stft);
  r.add(ir::OpKind::kMelWeightMatrix, mel_weight_matrix);
}

}  // namespace kiln::cpu
