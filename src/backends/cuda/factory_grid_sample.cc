// GridSample (ONNX opset 16; 20 renames bilinear / bicubic to linear / cubic) of a 4-D row-major
// X [N, C, H, W] at a grid [N, H_out, W_out, 2] (constant or activation, read in its own float
// storage),
// through Kiln's kernel (kernels_nn.h launch_grid_sample) with the CPU reference's sampling rules
// (backends/cpu/ops_control_vision.cc). Other ranks are refused (as the CPU reference does).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_nn.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_grid_sample(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& g = ctx.shape(n.inputs[1]);
  if (x.size() != 4) return unsupported(where + "GridSample of a rank-" + std::to_string(x.size()) + " input (4-D only)");
  if (g.size() != 4 || g[0] != x[0] || g[3] != 2)
    return invalid_argument(where + "grid must be [N, H_out, W_out, 2] matching X " + shape_str(x) + ", got " + shape_str(g));
  if (x[2] <= 0 || x[3] <= 0) return invalid_argument(where + "X has empty spatial dims " + shape_str(x));
  std::string mode = n.attr_string("mode", n.opset >= 20 ? "linear" : "bilinear");
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  const std::string pad = n.attr_string("padding_mode", "zeros");
  GridSampleDesc d;
  if (mode == "bilinear") d.mode = 0;
  else if (mode == "nearest") d.mode = 1;
  else if (mode == "bicubic") d.mode = 2;
  else return invalid_argument(where + "unknown mode '" + mode + "'");
  if (pad == "zeros") d.padding = 0;
  else if (pad == "border") d.padding = 1;
  else if (pad == "reflection") d.padding = 2;
  else return invalid_argument(where + "unknown padding_mode '" + pad + "'");
  d.align_corners = n.attr_int("align_corners", 0) != 0;
  d.n = x[0];
  d.c = x[1];
  d.h = x[2];
  d.w = x[3];
  d.ho = g[1];
  d.wo = g[2];
  const StorageType t = ctx.storage();
  KILN_ASSIGN_OR_RETURN(int xa, ctx.row_major_operand(n.inputs[0]));
  // The grid is read in its own float storage (float32 for a constant or a float32 graph input):
  // coordinates rounded to 16 bits would move nearest-mode taps across pixel boundaries.
  const StorageType gt = stored_float_type(ctx, n.inputs[1]);
  KILN_ASSIGN_OR_RETURN(int ga, ctx.operand_as(n.inputs[1], gt));
  d.grid_type = ctx.value_type(ga);
  auto layer = make_kernel_layer("GridSample", std::string("kiln.grid_sample ") + storage_name(t),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_grid_sample(s.ptr(l.ins[0]), s.ptr(l.ins[1]), s.ptr(l.outs[0]), t, d,
                                                             s.stream);
                                 });
  ctx.add_layer(std::move(layer), n.name, {xa, ga}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
