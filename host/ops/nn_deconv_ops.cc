// conv2d_transpose (NCHW) and its gradient op. Paddle resolves SAME/VALID over the Input's
// spatial dims as conv2d does (ResolveWindow2d), then each Output dim is
// (in - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + 1, replaced by output_size
// when given (which must lie in [that, that + stride)) or else increased by output_padding
// (each in [0, max(stride, dilation))).
#include <algorithm>

#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

std::vector<AttrSpec> DeconvAttrs() {
  return {{"strides", std::vector<int32_t>{1, 1}},
          {"paddings", std::vector<int32_t>{0, 0}},
          {"output_padding", std::vector<int32_t>{}},
          {"output_size", std::vector<int32_t>{}},
          {"padding_algorithm", std::string("EXPLICIT")},
          {"dilations", std::vector<int32_t>{1, 1}},
          {"groups", int32_t{1}},
          {"data_format", std::string("NCHW")},
          {"use_cudnn", true},
          {"use_mkldnn", false}};
}

// One Output dim from the Input dim `in` (-1 stays -1). `size` / `extra` are output_size and
// output_padding at this dim, or -1 when the attribute is empty.
Status DeconvOutSize(const ShapeContext& c, int64_t in, const Window2d& w, int i, int64_t size,
                     int64_t extra, int64_t* out) {
  const int64_t base = in < 0 ? -1
                              : (in - 1) * w.stride[i] - w.pad_begin[i] - w.pad_end[i] +
                                    w.dilation[i] * (w.kernel[i] - 1) + 1;
  const std::string dim = i == 0 ? "height" : "width";
  if (size >= 0) {
    if (base >= 0 && (size < base || size >= base + w.stride[i])) {
      return c.Error("output_size " + dim + " " + std::to_string(size) + " must be in [" +
                     std::to_string(base) + ", " + std::to_string(base + w.stride[i]) +
                     ") for Input " + dim + " " + std::to_string(in));
    }
    *out = size;
  } else if (extra >= 0) {
    const int64_t bound = std::max(w.stride[i], w.dilation[i]);
    if (extra >= bound) {
      return c.Error("output_padding " + dim + " " + std::to_string(extra) +
                     " must be smaller than max(stride, dilation) = " + std::to_string(bound));
    }
    *out = base < 0 ? -1 : base + extra;
  } else {
    *out = base;
  }
  if (in >= 0 && *out <= 0) {
    return c.Error("Output " + dim + " would be " + std::to_string(*out) + " for Input " + dim +
                   " " + std::to_string(in) + " with the given paddings");
  }
  return OkStatus();
}

Status InferDeconv2d(ShapeContext& c) {
  const TensorInfo& x = c.Input("Input");
  const TensorInfo& f = c.Input("Filter");
  std::string layout = c.StringAttr("data_format");
  if (layout != "NCHW" && layout != "AnyLayout") {
    return c.Error("data_format '" + layout + "' is not supported (NCHW only)");
  }
  if (x.dims.size() != 4) return c.Error("Input must be 4-D NCHW, got " + ir::ShapeText(x.dims));
  if (f.dims.size() != 4) {
    return c.Error("Filter must be 4-D [in_channels, out_channels/groups, kh, kw], got " +
                   ir::ShapeText(f.dims));
  }
  if (f.dtype != x.dtype) {
    return c.Error("Filter dtype " + std::string(ir::DataTypeName(f.dtype)) +
                   " differs from Input dtype " + std::string(ir::DataTypeName(x.dtype)));
  }
  const int64_t groups = c.IntAttr("groups");
  if (groups < 1) return c.Error("groups must be >= 1, got " + std::to_string(groups));
  if (!DimsMatch(x.dims[1], f.dims[0])) {
    return c.Error("Input " + ir::ShapeText(x.dims) + " has " + std::to_string(x.dims[1]) +
                   " channels but Filter " + ir::ShapeText(f.dims) + " has dim 0 = " +
                   std::to_string(f.dims[0]) + " (it must equal the Input channels)");
  }
  if (x.dims[1] >= 0 && x.dims[1] % groups != 0) {
    return c.Error("Input channels " + std::to_string(x.dims[1]) +
                   " are not divisible by groups " + std::to_string(groups));
  }
  std::vector<int64_t> size = c.IntsAttr("output_size");
  std::vector<int64_t> extra = c.IntsAttr("output_padding");
  if (!size.empty() && size.size() != 2) {
    return c.Error("output_size needs 2 values or none, got " + ir::ShapeText(size));
  }
  if (!extra.empty() && extra.size() != 2) {
    return c.Error("output_padding needs 2 values or none, got " + ir::ShapeText(extra));
  }
  for (int64_t v : extra) {
    if (v < 0) return c.Error("output_padding must be >= 0, got " + ir::ShapeText(extra));
  }
  for (int64_t v : size) {
    if (v <= 0) return c.Error("output_size must be positive, got " + ir::ShapeText(size));
  }
  Window2d w;
  const int64_t in[2] = {x.dims[2], x.dims[3]};
  FLEET_RETURN_IF_ERROR(ResolveWindow2d(c, in, {f.dims[2], f.dims[3]}, &w));
  TensorInfo out = x;
  out.dims = {x.dims[0], f.dims[1] < 0 ? -1 : f.dims[1] * groups, -1, -1};
  for (int i = 0; i < 2; ++i) {
    FLEET_RETURN_IF_ERROR(DeconvOutSize(c, in[i], w, i, size.empty() ? -1 : size[i],
                                        extra.empty() ? -1 : extra[i], &out.dims[2 + i]));
  }
  c.Output("Output") = out;
  return OkStatus();
}

}  // namespace

void RegisterNnDeconvOps(OpRegistry& registry) {
  OpSchema s;
  s.type = "conv2d_transpose";
  s.summary = "2-D transposed convolution, NCHW input, [in, out/groups, kh, kw] filter";
  s.inputs = {{"Input"}, {"Filter"}};
  s.outputs = {{"Output"}};
  s.attrs = DeconvAttrs();
  s.infer_shape = InferDeconv2d;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "conv2d_transpose_grad", {"Input", "Filter"},
                                      {"Output"}, {"Input", "Filter"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "conv2d_transpose_grad";
  g.inputs = {{"Input"}, {"Filter"}, {"Output@GRAD"}};
  g.outputs = {{"Input@GRAD", true}, {"Filter@GRAD", true}};
  g.attrs = DeconvAttrs();
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("Input@GRAD")) c.Output("Input@GRAD") = c.Input("Input");
    if (c.HasOutput("Filter@GRAD")) c.Output("Filter@GRAD") = c.Input("Filter");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace fleet::ops
