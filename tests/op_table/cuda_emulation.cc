// Host emulation of the CUDA path's planned descriptors (backends/cuda/gpu_ops.h strided /
// gather / reduce / pad / resize plans, gpu_transformer.h's Attention plan): the kernels' index
// arithmetic replayed on the CPU, so the build-time planning is checked against the CPU
// reference on machines without a GPU (cuda_lowering_test.cc). CUDA builds only.
#ifdef KILN_HAVE_CUDA
#include "op_table/cuda_emulation.h"

#include <algorithm>
#include <cmath>

namespace kiln::testing::op_table {

using ir::OpKind;

namespace {

float at(const Tensor& t, int64_t i) { return t.data<float>()[i]; }

void strided(const cuda::StridedDesc& d, const Tensor& x, Tensor* y) {
  for (int64_t i = 0; i < y->numel(); ++i) {
    int64_t rem = i, off = d.src_offset;
    for (int k = d.rank - 1; k >= 0; --k) {
      off += (rem % d.out_dims[k]) * d.src_strides[k];
      rem /= d.out_dims[k];
    }
    y->data<float>()[i] = at(x, off);
  }
}

}  // namespace

StatusOr<std::vector<Tensor>> emulate_single_op(const ir::Graph& g, const cuda::ValueShapes& vs, const Tensor& x) {
  if (g.nodes.size() != 1) return unsupported("emulation covers single-node graphs");
  const ir::Node& n = g.nodes[0];
  const Shape& in = x.shape();
  std::vector<Tensor> out;
  for (ir::ValueId v : n.outputs) {
    if (v == ir::kNoValue) return unsupported("emulation covers nodes without omitted outputs");
    out.emplace_back(DataType::kFloat32, vs.shapes[v]);
  }
  Tensor& y = out[0];
  switch (n.op) {
    case OpKind::kTranspose: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_transpose(n, in));
      strided(d, x, &y);
      break;
    }
    case OpKind::kSlice: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_slice(n, g, in, y.shape()));
      strided(d, x, &y);
      break;
    }
    case OpKind::kExpand: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_expand(n, in, y.shape()));
      strided(d, x, &y);
      break;
    }
    case OpKind::kSplit: {
      std::vector<Shape> shapes;
      for (const Tensor& t : out) shapes.push_back(t.shape());
      KILN_ASSIGN_OR_RETURN(auto ds, cuda::plan_split(n, in, shapes));
      for (size_t k = 0; k < ds.size(); ++k) strided(ds[k], x, &out[k]);
      break;
    }
    case OpKind::kGather: {
      const auto& ic = g.value(n.inputs[1]).constant;
      if (!ic) return internal_error("the host emulation covers constant indices only");
      KILN_ASSIGN_OR_RETURN(auto p, cuda::plan_gather(n, g, in, ic->shape(), ic->dtype()));
      const int64_t ni = static_cast<int64_t>(p.indices.size());
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t inner = i % p.inner, j = (i / p.inner) % ni, o = i / (p.inner * ni);
        y.data<float>()[i] = at(x, (o * p.axis_dim + p.indices[j]) * p.inner + inner);
      }
      break;
    }
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd:
    case OpKind::kReduceL1:
    case OpKind::kReduceL2:
    case OpKind::kReduceSumSquare:
    case OpKind::kReduceLogSum:
    case OpKind::kReduceLogSumExp: {
      // The ONNX definitions (Operators.md Reduce*), in double, over the planned [outer, red, inner].
      KILN_ASSIGN_OR_RETURN(auto p, cuda::plan_reduce(n, g, in));
      if (p.outer * p.inner != y.numel()) return internal_error("reduce plan disagrees with the output size");
      Tensor moved(DataType::kFloat32, Shape{p.outer, p.red});
      if (p.transposed) strided(p.transpose, x, &moved);
      const Tensor& src = p.transposed ? moved : x;
      using K = cuda::ReduceKind;
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t o = i / p.inner, inner = i % p.inner;
        double acc = p.kind == K::kMax ? -INFINITY : (p.kind == K::kMin ? INFINITY : (p.kind == K::kProd ? 1.0 : 0.0));
        for (int64_t r = 0; r < p.red; ++r) {
          const double v = at(src, (o * p.red + r) * p.inner + inner);
          switch (p.kind) {
            case K::kMax: acc = std::max(acc, v); break;
            case K::kMin: acc = std::min(acc, v); break;
            case K::kProd: acc *= v; break;
            case K::kL1: acc += std::fabs(v); break;
            case K::kL2: case K::kSumSquare: acc += v * v; break;
            case K::kLogSumExp: acc += std::exp(v); break;
            default: acc += v; break;
          }
        }
        switch (p.kind) {
          case K::kMean: acc /= static_cast<double>(p.red); break;
          case K::kL2: acc = std::sqrt(acc); break;
          case K::kLogSum: case K::kLogSumExp: acc = std::log(acc); break;
          default: break;
        }
        y.data<float>()[i] = static_cast<float>(acc);
      }
      break;
    }
    case OpKind::kDepthToSpace:
    case OpKind::kSpaceToDepth: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_depth_space(n, in));
      int64_t count = 1;
      for (int k = 0; k < d.rank; ++k) count *= d.out_dims[k];
      if (count != y.numel()) return internal_error("the copy's dims disagree with the output size");
      strided(d, x, &y);
      break;
    }
    case OpKind::kTile: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_tile(n, g, in));
      int64_t count = 1;
      for (int k = 0; k < d.rank; ++k) count *= d.out_dims[k];
      if (count != y.numel()) return internal_error("the copy's dims disagree with the output size");
      strided(d, x, &y);
      break;
    }
    case OpKind::kPad: {
      KILN_ASSIGN_OR_RETURN(auto p, cuda::plan_pad(n, g, in, y.shape()));
      const auto& d = p.desc;
      for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t rem = i, off = 0, stride = 1;
        bool outside = false;
        for (int k = d.rank - 1; k >= 0; --k) {
          int64_t c = rem % d.out_dims[k] - d.begin[k];
          rem /= d.out_dims[k];
          const int64_t len = d.in_dims[k];
          if (c < 0 || c >= len) {
            if (p.mode == cuda::PadMode::kEdge) c = c < 0 ? 0 : len - 1;
            else if (p.mode == cuda::PadMode::kReflect) {
              const int64_t period = 2 * (len - 1);
              c = ((c % period) + period) % period;
              if (c >= len) c = period - c;
            } else outside = true;
          }
          off += c * stride;
          stride *= len;
        }
        y.data<float>()[i] = outside ? p.value : at(x, off);
      }
      break;
    }
    case OpKind::kResize: {
      KILN_ASSIGN_OR_RETURN(auto d, cuda::plan_resize(n, g, in, y.shape()));
      auto coord = [&](double o, double scale, double len, int64_t len_in) {
        switch (d.coord) {
          case 0: return (o + 0.5) / scale - 0.5;
          case 1: return o / scale;
          case 2: return len > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
          case 3: return len == 1 ? 0.0 : o * static_cast<double>(len_in - 1) / (len - 1);
          default: return (o + 0.5) / scale;
        }
      };
      auto nearest = [&](double f, int64_t len_in) {
        int64_t i = f == std::floor(f) ? static_cast<int64_t>(f)
                    : d.nearest == 0 ? static_cast<int64_t>(std::ceil(f - 0.5))
                    : d.nearest == 1 ? static_cast<int64_t>(std::floor(f + 0.5))
                    : d.nearest == 2 ? static_cast<int64_t>(std::floor(f)) : static_cast<int64_t>(std::ceil(f));
        return std::clamp<int64_t>(i, 0, len_in - 1);
      };
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t ox = i % d.ow, oy = (i / d.ow) % d.oh, pl = i / (d.ow * d.oh);
        const double fy = coord(static_cast<double>(oy), d.scale_h, d.len_h, d.ih);
        const double fx = coord(static_cast<double>(ox), d.scale_w, d.len_w, d.iw);
        const int64_t base = pl * d.ih * d.iw;
        float v;
        if (!d.linear) {
          v = at(x, base + nearest(fy, d.ih) * d.iw + nearest(fx, d.iw));
        } else {
          const double y0 = std::floor(fy), x0 = std::floor(fx);
          const float ry = static_cast<float>(fy - y0), rx = static_cast<float>(fx - x0);
          auto cl = [](int64_t c, int64_t len) { return std::clamp<int64_t>(c, 0, len - 1); };
          const int64_t ya = cl(static_cast<int64_t>(y0), d.ih), yb = cl(static_cast<int64_t>(y0) + 1, d.ih);
          const int64_t xa = cl(static_cast<int64_t>(x0), d.iw), xb = cl(static_cast<int64_t>(x0) + 1, d.iw);
          const float top = (1.f - rx) * at(x, base + ya * d.iw + xa) + rx * at(x, base + ya * d.iw + xb);
          const float bot = (1.f - rx) * at(x, base + yb * d.iw + xa) + rx * at(x, base + yb * d.iw + xb);
          v = (1.f - ry) * top + ry * bot;
        }
        y.data<float>()[i] = v;
      }
      break;
    }
    default: return unsupported("no emulation for this op");
  }
  return out;
}

Tensor emulate_strided_copy(const cuda::StridedDesc& d, const Tensor& x) {
  Tensor y(DataType::kFloat32, Shape(d.out_dims, d.out_dims + d.rank));
  strided(d, x, &y);
  return y;
}

// Host emulation of the Attention layer as planned: per chunk of units, S = scale Q Kᵀ for each
// unit's M = group·Sq rows, the softmax rows through the kernels' index helpers, O = P V. Inputs
// are float32; a bool mask is given as 0/1 floats (as the lowering uploads it).
std::vector<Tensor> emulate_attention(const cuda::AttentionPlan& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor* mask, const Shape& out_shape) {
  Tensor o(DataType::kFloat32, out_shape);
  const int64_t m = p.m, sk = p.sk, d = p.d, dv = p.dv;
  std::vector<float> s(static_cast<size_t>(p.chunk * m * sk));
  for (int64_t u0 = 0; u0 < p.units; u0 += p.chunk) {
    for (int64_t c = 0; c < p.chunk; ++c) {
      const int64_t u = u0 + c;
      const float* qu = q.data<float>() + u * m * d;
      const float* ku = k.data<float>() + u * sk * d;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < sk; ++j) {
          double acc = 0;
          for (int64_t x = 0; x < d; ++x) acc += double(qu[i * d + x]) * ku[j * d + x];
          s[(c * m + i) * sk + j] = static_cast<float>(p.scale * acc);
        }
    }
    for (int64_t lr = 0; lr < p.chunk * m; ++lr) {
      const int64_t row = u0 * m + lr;
      float* sr = s.data() + lr * sk;
      const int64_t lim = cuda::attention_key_limit(p.softmax, row);
      const int64_t moff = mask ? cuda::attention_mask_row_offset(p.softmax, row) : 0;
      float mx = -INFINITY;
      for (int64_t j = 0; j < sk; ++j) {
        float val = sr[j];
        if (mask) {
          const float mv = mask->data<float>()[moff + j * p.softmax.mask_key_stride];
          if (p.softmax.mask == cuda::AttentionMask::kAdditive) val += mv;
          else if (mv == 0.f) val = -INFINITY;
        }
        if (j > lim) val = -INFINITY;
        sr[j] = val;
        mx = std::max(mx, val);
      }
      double sum = 0;
      for (int64_t j = 0; j < sk; ++j) sum += (sr[j] = mx == -INFINITY ? 0.f : std::exp(sr[j] - mx));
      for (int64_t j = 0; j < sk; ++j) sr[j] = sum > 0 ? static_cast<float>(sr[j] / sum) : 0.f;
    }
    for (int64_t c = 0; c < p.chunk; ++c) {
      const int64_t u = u0 + c;
      const float* vu = v.data<float>() + u * sk * dv;
      float* ou = o.data<float>() + u * m * dv;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t y = 0; y < dv; ++y) {
          double acc = 0;
          for (int64_t j = 0; j < sk; ++j) acc += double(s[(c * m + i) * sk + j]) * vu[j * dv + y];
          ou[i * dv + y] = static_cast<float>(acc);
        }
    }
  }
  return {o};
}

}  // namespace kiln::testing::op_table
#endif  // KILN_HAVE_CUDA
