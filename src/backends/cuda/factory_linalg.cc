// Det (ONNX Operators.md "Det", version 11): input [..., m, m] read in float32 (a 16-bit activation
// through a cast layer), one determinant per matrix in the layer's storage; DFT (versions 17 / 20)
// with a constant dft_length and axis; STFT (version 17) with constant frame_step / frame_length;
// RoiAlign (versions 10 / 16; kernels_linalg.h); Einsum of float64 operands (docs/decisions/0075).
#include <algorithm>
#include <cctype>
#include <map>

#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_linalg.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {

Status lower_det(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs.at(0));
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
    return invalid_argument(where + "input must be [..., M, M], got " + shape_str(x));
  const int64_t m = x.back();
  if (m < 1 || m > kDetMaxDim)
    return unsupported(where + "matrices of " + std::to_string(m) + " x " + std::to_string(m) + " (1 to " +
                       std::to_string(kDetMaxDim) + " rows on the GPU)");
  const int64_t count = dims_product(x, 0, x.size() - 2);
  KILN_ASSIGN_OR_RETURN(int xa, ctx.operand_as(n.inputs[0], StorageType::kF32));
  const int xv = ctx.as_layout(xa, false);  // row-major (a 4-D activation may be stored NHWC)
  const StorageType t = ctx.storage();
  auto layer = make_kernel_layer("Det", "kiln.det", [=](ExecState& s, const Layer& l) {
    return launch_det(static_cast<const float*>(s.ptr(l.ins[0])), s.ptr(l.outs[0]), count, m, t, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

namespace {

// Optional scalar input `k` of `n`: a constant's value into `*v` (kept when absent or empty);
// Unsupported when it is computed at run time.
Status const_scalar(LowerContext& ctx, const ir::Node& n, size_t k, const std::string& what, const std::string& where,
                    int64_t* v) {
  if (k >= n.inputs.size() || n.inputs[k] == ir::kNoValue) return Status::Ok();
  const auto& c = ctx.graph().value(n.inputs[k]).constant;
  if (!c) return unsupported(where + what + " must be a constant on the GPU path");
  if (c->numel() == 0) return Status::Ok();
  if (c->numel() != 1) return invalid_argument(where + what + " must hold one value");
  *v = load_as_int64(c->dtype(), c->raw(), 0);
  return Status::Ok();
}

}  // namespace

Status lower_dft(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs.at(0));
  const int64_t r = static_cast<int64_t>(x.size());
  if (r < 2 || (x.back() != 1 && x.back() != 2))
    return invalid_argument(where + "input must end in a dim of 1 (real) or 2 (complex), got " + shape_str(x));
  int64_t axis = n.attr_int("axis", 1);
  if (n.opset >= 20) {
    axis = -2;
    KILN_RETURN_IF_ERROR(const_scalar(ctx, n, 2, "axis", where, &axis));
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) return invalid_argument(where + "axis is out of range for input " + shape_str(x));
  const int64_t n_in = x[axis];
  int64_t len = n_in;
  KILN_RETURN_IF_ERROR(const_scalar(ctx, n, 1, "dft_length", where, &len));
  if (len <= 0) return invalid_argument(where + "dft_length must be positive, got " + std::to_string(len));
  const bool inverse = n.attr_int("inverse", 0) != 0;
  const bool onesided = n.attr_int("onesided", 0) != 0;
  const int64_t out_len = onesided ? len / 2 + 1 : len;
  const int64_t outer = dims_product(x, 0, static_cast<size_t>(axis));
  const int64_t inner = dims_product(x, static_cast<size_t>(axis) + 1, x.size() - 1);
  const int comps = static_cast<int>(x.back());
  KILN_ASSIGN_OR_RETURN(int xa, ctx.operand_as(n.inputs[0], StorageType::kF32));
  const int xv = ctx.as_layout(xa, false);  // row-major (a 4-D activation may be stored NHWC)
  const StorageType t = ctx.storage();
  auto layer = make_kernel_layer("DFT", "kiln.dft", [=](ExecState& s, const Layer& l) {
    return launch_dft(static_cast<const float*>(s.ptr(l.ins[0])), s.ptr(l.outs[0]), outer, n_in, inner, comps, len,
                      out_len, inverse, t, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// STFT: frame_step and frame_length must be constants (graph inputs are bound as shape operands,
// docs/decisions/0073); the window is any float operand.
Status lower_stft(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "signal and frame_step are required");
  const Shape& sig = ctx.shape(n.inputs.at(0));
  if (sig.size() != 3 || (sig[2] != 1 && sig[2] != 2))
    return invalid_argument(where + "signal must be [batch, length, 1|2], got " + shape_str(sig));
  int64_t step = 0;
  if (!ctx.graph().value(n.inputs[1]).constant) return unsupported(where + "frame_step must be a constant on the GPU path");
  KILN_RETURN_IF_ERROR(const_scalar(ctx, n, 1, "frame_step", where, &step));
  if (step <= 0) return invalid_argument(where + "frame_step must be positive, got " + std::to_string(step));
  const bool has_win = n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue;
  int64_t flen = -1;
  if (has_win) {
    const Shape& w = ctx.shape(n.inputs[2]);
    if (w.size() != 1) return invalid_argument(where + "window must be 1-D, got " + shape_str(w));
    flen = w[0];
  }
  if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue) {
    int64_t fl = -1;
    if (!ctx.graph().value(n.inputs[3]).constant) return unsupported(where + "frame_length must be a constant on the GPU path");
    KILN_RETURN_IF_ERROR(const_scalar(ctx, n, 3, "frame_length", where, &fl));
    if (has_win && fl != flen) return invalid_argument(where + "frame_length differs from the window length");
    flen = fl;
  }
  const int64_t batch = sig[0], length = sig[1];
  if (flen < 1 || flen > length)
    return invalid_argument(where + "frame_length " + std::to_string(flen) + " must be in [1, " + std::to_string(length) + "]");
  const bool onesided = n.attr_int("onesided", 1) != 0;
  const int64_t frames = 1 + (length - flen) / step, bins = onesided ? flen / 2 + 1 : flen;
  if (ctx.shape(n.outputs[0]) != Shape{batch, frames, bins, 2})
    return invalid_argument(where + "output shape " + shape_str(ctx.shape(n.outputs[0])) + " differs from [batch, frames, bins, 2]");
  KILN_ASSIGN_OR_RETURN(int sa, ctx.operand_as(n.inputs[0], StorageType::kF32));
  std::vector<int> ins = {sa};
  if (has_win) {
    KILN_ASSIGN_OR_RETURN(int wa, ctx.operand_as(n.inputs[2], StorageType::kF32));
    ins.push_back(wa);
  }
  const int comps = static_cast<int>(sig[2]);
  const StorageType t = ctx.storage();
  auto layer = make_kernel_layer("STFT", "kiln.stft", [=](ExecState& s, const Layer& l) {
    return launch_stft(static_cast<const float*>(s.ptr(l.ins[0])), has_win ? static_cast<const float*>(s.ptr(l.ins[1])) : nullptr,
                       s.ptr(l.outs[0]), batch, length, comps, step, flen, frames, bins, t, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_roi_align(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 3 || n.inputs[1] == ir::kNoValue || n.inputs[2] == ir::kNoValue)
    return invalid_argument(where + "X, rois and batch_indices are required");
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& rois = ctx.shape(n.inputs[1]);
  if (x.size() != 4) return invalid_argument(where + "X must be [N, C, H, W], got " + shape_str(x));
  if (rois.size() != 2 || rois[1] != 4)
    return invalid_argument(where + "rois must be [num_rois, 4], got " + shape_str(rois));
  if (shape_numel(ctx.shape(n.inputs[2])) != rois[0])
    return invalid_argument(where + "batch_indices must hold one integer per roi");
  if (x[2] <= 0 || x[3] <= 0) return invalid_argument(where + "X has empty spatial dims " + shape_str(x));
  RoiAlignDesc d;
  const std::string mode = n.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return invalid_argument(where + "unknown mode '" + mode + "'");
  d.max_mode = mode == "max";
  const std::string ctm =
      n.attr_string("coordinate_transformation_mode", n.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return invalid_argument(where + "unknown coordinate_transformation_mode '" + ctm + "'");
  d.half_pixel = ctm == "half_pixel";
  d.out_h = n.attr_int("output_height", 1);
  d.out_w = n.attr_int("output_width", 1);
  d.ratio = n.attr_int("sampling_ratio", 0);
  d.scale = n.attr_float("spatial_scale", 1.0f);
  if (d.out_h <= 0 || d.out_w <= 0) return invalid_argument(where + "output_height/output_width must be positive");
  d.n = x[0];
  d.c = x[1];
  d.h = x[2];
  d.w = x[3];
  d.rois = rois[0];
  KILN_ASSIGN_OR_RETURN(int xv, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int rv, ctx.operand_as(n.inputs[1], StorageType::kF32));
  KILN_ASSIGN_OR_RETURN(int bv, ctx.operand_as(n.inputs[2], StorageType::kI64));
  const StorageType t = ctx.storage();
  auto layer = make_kernel_layer("RoiAlign", std::string("kiln.roi_align ") + mode, [=](ExecState& s, const Layer& l) {
    return launch_roi_align(s.ptr(l.ins[0]), static_cast<const float*>(s.ptr(l.ins[1])),
                            static_cast<const int64_t*>(s.ptr(l.ins[2])), s.ptr(l.outs[0]), t, d, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv, rv, bv}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda

namespace kiln::cuda {

// Einsum on float64 operands (docs/decisions/0075): the equation parsed as the CPU reference does
// (ops_nn_linalg.cc: letters, one ellipsis per term, implicit output = ellipsis dims then the
// letters seen once, in alphabetical order; gpu_ops.h plan_einsum), then one direct-sum kernel
// (kernels_linalg.h).
StatusOr<EinsumDesc> plan_einsum(const ir::Node& n, const std::vector<Shape>& in_shapes, const Shape& out_shape_want) {
  const std::string where = n.describe() + ": ";
  if (n.inputs.empty() || n.inputs.size() > 2 || in_shapes.size() != n.inputs.size())
    return unsupported(where + std::to_string(n.inputs.size()) + " inputs (1 or 2 on the GPU)");
  std::string eq;
  for (char ch : n.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != n.inputs.size())
    return invalid_argument(where + "equation '" + eq + "' has " + std::to_string(terms.size()) + " terms for " +
                            std::to_string(n.inputs.size()) + " inputs");
  constexpr int kEll = 52;  // labels: 'A'..'Z' 0..25, 'a'..'z' 26..51, ellipsis dims from 52
  // A term's labels with -1 for its ellipsis, and its ellipsis rank (`rank` < 0: the output's).
  auto parse = [&](const std::string& term, int rank, std::vector<int>* labels, int* erank) -> Status {
    labels->clear();
    int letters = 0;
    bool ell = false;
    for (size_t i = 0; i < term.size(); ++i) {
      const char ch = term[i];
      if (ch == '.') {
        if (ell || term.compare(i, 3, "...") != 0) return invalid_argument(where + "malformed ellipsis in '" + term + "'");
        ell = true;
        i += 2;
        labels->push_back(-1);
      } else if (std::isalpha(static_cast<unsigned char>(ch))) {
        labels->push_back(ch <= 'Z' ? ch - 'A' : ch - 'a' + 26);
        ++letters;
      } else {
        return invalid_argument(where + "invalid character '" + std::string(1, ch) + "' in the equation");
      }
    }
    *erank = ell ? rank - letters : 0;
    if ((ell && rank >= 0 && *erank < 0) || (!ell && rank >= 0 && letters != rank))
      return invalid_argument(where + "term '" + term + "' does not match operand rank " + std::to_string(rank));
    return Status::Ok();
  };
  auto expand = [&](const std::vector<int>& raw, int erank, int emax) {
    std::vector<int> out;
    for (int l : raw) {
      if (l >= 0) out.push_back(l);
      else
        for (int t = 0; t < erank; ++t) out.push_back(kEll + (emax - erank) + t);
    }
    return out;
  };
  std::vector<std::vector<int>> labels(terms.size());
  std::vector<int> eranks(terms.size());
  int emax = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> raw;
    KILN_RETURN_IF_ERROR(parse(terms[i], static_cast<int>(in_shapes[i].size()), &raw, &eranks[i]));
    labels[i] = raw;
    emax = std::max(emax, eranks[i]);
  }
  std::map<int, int64_t> extent;
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    labels[i] = expand(labels[i], eranks[i], emax);
    const Shape& s = in_shapes[i];
    for (size_t j = 0; j < labels[i].size(); ++j) {
      const int l = labels[i][j];
      ++count[l];
      auto it = extent.find(l);
      if (it == extent.end() || it->second == 1) extent[l] = s[j];
      else if (s[j] != it->second && !(l >= kEll && s[j] == 1))
        return invalid_argument(where + "operands disagree on the extent of a label");
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    std::vector<int> raw;
    int erank = 0;
    KILN_RETURN_IF_ERROR(parse(eq.substr(arrow + 2), -1, &raw, &erank));
    out_labels = expand(raw, emax, emax);
    for (int l : out_labels)
      if (!extent.count(l)) return invalid_argument(where + "an output label is in no input");
  } else {
    for (int t = 0; t < emax; ++t) out_labels.push_back(kEll + t);
    for (const auto& [l, c] : count)
      if (l < kEll && c == 1) out_labels.push_back(l);
  }
  std::vector<int> summed;
  for (const auto& [l, e] : extent)
    if (std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) summed.push_back(l);
  if (out_labels.size() > static_cast<size_t>(kEinsumMaxLabels) || summed.size() > static_cast<size_t>(kEinsumMaxLabels))
    return unsupported(where + "more than " + std::to_string(kEinsumMaxLabels) + " output or summed labels");
  EinsumDesc d;
  d.inputs = static_cast<int>(n.inputs.size());
  d.n_out = static_cast<int>(out_labels.size());
  d.n_sum = static_cast<int>(summed.size());
  Shape out_shape;
  for (int k = 0; k < d.n_out; ++k) {
    d.out_ext[k] = extent[out_labels[k]];
    out_shape.push_back(d.out_ext[k]);
  }
  for (int k = 0; k < d.n_sum; ++k) d.sum_ext[k] = extent[summed[k]];
  if (out_shape != out_shape_want)
    return invalid_argument(where + "output shape " + shape_str(out_shape) + " differs from the inferred " +
                            shape_str(out_shape_want));
  for (size_t i = 0; i < terms.size(); ++i) {
    const Shape& s = in_shapes[i];
    const std::vector<int64_t> rs = row_strides(s);
    int64_t* so = i == 0 ? d.a_out : d.b_out;
    int64_t* ss = i == 0 ? d.a_sum : d.b_sum;
    for (size_t j = 0; j < labels[i].size(); ++j) {
      const int l = labels[i][j];
      if (s[j] == 1 && extent[l] != 1) continue;  // a broadcast ellipsis dim
      for (int k = 0; k < d.n_out; ++k)
        if (out_labels[k] == l) so[k] += rs[j];
      for (int k = 0; k < d.n_sum; ++k)
        if (summed[k] == l) ss[k] += rs[j];
    }
  }
  return d;
}

Status lower_einsum(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (ctx.storage() != StorageType::kF64)
    return unsupported(where + "Einsum runs on the GPU for float64 operands only");
  std::vector<Shape> shapes;
  for (ir::ValueId v : n.inputs) {
    if (v == ir::kNoValue) return invalid_argument(where + "an input is omitted");
    shapes.push_back(ctx.shape(v));
  }
  KILN_ASSIGN_OR_RETURN(EinsumDesc d, plan_einsum(n, shapes, ctx.shape(n.outputs[0])));
  std::vector<int> ins;
  for (ir::ValueId v : n.inputs) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(v, StorageType::kF64));
    ins.push_back(a);
  }
  const bool two = d.inputs == 2;
  auto layer = make_kernel_layer("Einsum", "kiln.einsum_f64", [=](ExecState& s, const Layer& l) {
    return launch_einsum_f64(static_cast<const double*>(s.ptr(l.ins[0])),
                             two ? static_cast<const double*>(s.ptr(l.ins[1])) : nullptr,
                             static_cast<double*>(s.ptr(l.outs[0])), d, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
