// conv2d and pool2d (NCHW), with their gradient ops. Window geometry follows Paddle: 2 or 4
// paddings, padding_algorithm EXPLICIT/SAME/VALID, dilations for conv, ceil_mode,
// global_pooling and adaptive windows (ksize = output size) for pools (see ResolveWindow2d).
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

Status CheckNchw(const ShapeContext& c, const TensorInfo& x, const char* slot,
                 const char* layout_attr) {
  std::string layout = c.StringAttr(layout_attr);
  if (layout != "NCHW" && layout != "AnyLayout") {
    return c.Error(std::string(layout_attr) + " '" + layout + "' is not supported (NCHW only)");
  }
  if (x.dims.size() != 4) {
    return c.Error(std::string(slot) + " must be 4-D NCHW, got " + ir::ShapeText(x.dims));
  }
  return OkStatus();
}

std::vector<AttrSpec> ConvAttrs() {
  return {{"strides", std::vector<int32_t>{1, 1}},
          {"paddings", std::vector<int32_t>{0, 0}},
          {"padding_algorithm", std::string("EXPLICIT")},
          {"dilations", std::vector<int32_t>{1, 1}},
          {"groups", int32_t{1}},
          {"data_format", std::string("NCHW")},
          {"use_cudnn", true},
          {"use_mkldnn", false}};
}

Status InferConv2d(ShapeContext& c) {
  const TensorInfo& x = c.Input("Input");
  const TensorInfo& f = c.Input("Filter");
  FLEET_RETURN_IF_ERROR(CheckNchw(c, x, "Input", "data_format"));
  if (f.dims.size() != 4) {
    return c.Error("Filter must be 4-D [out_channels, in_channels/groups, kh, kw], got " +
                   ir::ShapeText(f.dims));
  }
  if (f.dtype != x.dtype) {
    return c.Error("Filter dtype " + std::string(ir::DataTypeName(f.dtype)) +
                   " differs from Input dtype " + std::string(ir::DataTypeName(x.dtype)));
  }
  int64_t groups = c.IntAttr("groups");
  if (groups < 1) return c.Error("groups must be >= 1, got " + std::to_string(groups));
  if (x.dims[1] >= 0 && x.dims[1] % groups != 0) {
    return c.Error("Input channels " + std::to_string(x.dims[1]) +
                   " are not divisible by groups " + std::to_string(groups));
  }
  if (x.dims[1] >= 0 && f.dims[1] >= 0 && x.dims[1] / groups != f.dims[1]) {
    return c.Error("Input " + ir::ShapeText(x.dims) + " has " + std::to_string(x.dims[1]) +
                   " channels, so with groups=" + std::to_string(groups) + " Filter " +
                   ir::ShapeText(f.dims) + " needs dim 1 = " + std::to_string(x.dims[1] / groups));
  }
  if (f.dims[0] >= 0 && f.dims[0] % groups != 0) {
    return c.Error("Filter out channels " + std::to_string(f.dims[0]) +
                   " are not divisible by groups " + std::to_string(groups));
  }
  Window2d w;
  const int64_t in[2] = {x.dims[2], x.dims[3]};
  FLEET_RETURN_IF_ERROR(ResolveWindow2d(c, in, {f.dims[2], f.dims[3]}, &w));
  TensorInfo out = x;
  out.dims = {x.dims[0], f.dims[0], WindowOutSize(in[0], w, 0, false),
              WindowOutSize(in[1], w, 1, false)};
  if (out.dims[2] == 0 || out.dims[3] == 0) {
    return c.Error("Input " + ir::ShapeText(x.dims) + " is smaller than the dilated Filter " +
                   ir::ShapeText(f.dims) + " with the given paddings");
  }
  c.Output("Output") = out;
  return OkStatus();
}

// conv2d, and Paddle's depthwise_conv2d: the same op under its own type (meant for groups ==
// input channels), with the same schema, shape rule and kernels.
void RegisterConv2d(OpRegistry& registry, const std::string& type) {
  OpSchema s;
  s.type = type;
  s.summary = type == "conv2d"
                  ? "2-D convolution, NCHW input, OIHW filter, with groups and dilations"
                  : "depthwise 2-D convolution (conv2d with groups = input channels), NCHW";
  s.inputs = {{"Input"}, {"Filter"}};
  s.outputs = {{"Output"}};
  s.attrs = ConvAttrs();
  s.infer_shape = InferConv2d;
  s.grad = [type](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        GradOp(fwd, type + "_grad", {"Input", "Filter"}, {"Output"}, {"Input", "Filter"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = type + "_grad";
  g.inputs = {{"Input"}, {"Filter"}, {"Output@GRAD"}};
  g.outputs = {{"Input@GRAD", true}, {"Filter@GRAD", true}};
  g.attrs = ConvAttrs();
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("Input@GRAD")) c.Output("Input@GRAD") = c.Input("Input");
    if (c.HasOutput("Filter@GRAD")) c.Output("Filter@GRAD") = c.Input("Filter");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

std::vector<AttrSpec> PoolAttrs() {
  return {{"pooling_type", std::string("max")},
          {"ksize", std::vector<int32_t>{}},
          {"global_pooling", false},
          {"strides", std::vector<int32_t>{1, 1}},
          {"paddings", std::vector<int32_t>{0, 0}},
          {"exclusive", true},
          {"adaptive", false},
          {"ceil_mode", false},
          {"data_format", std::string("NCHW")},
          {"padding_algorithm", std::string("EXPLICIT")},
          {"use_cudnn", false},
          {"use_mkldnn", false}};
}

Status InferPool2d(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_RETURN_IF_ERROR(CheckNchw(c, x, "X", "data_format"));
  std::string type = c.StringAttr("pooling_type");
  if (type != "max" && type != "avg") {
    return c.Error("pooling_type must be 'max' or 'avg', got '" + type + "'");
  }
  TensorInfo out = x;
  if (c.BoolAttr("adaptive")) {
    // Paddle: ksize is the output size (global_pooling first resets it to the input's).
    std::vector<int64_t> ksize = c.IntsAttr("ksize");
    const bool global = c.BoolAttr("global_pooling");
    if (global) ksize = {x.dims[2], x.dims[3]};
    if (ksize.size() != 2) {
      return c.Error("adaptive pooling expects 2 output sizes in ksize, got " +
                     ir::ShapeText(ksize));
    }
    for (int i = 0; i < 2; ++i) {
      if (!global && ksize[i] <= 0) {
        return c.Error("adaptive pooling needs positive output sizes in ksize, got " +
                       ir::ShapeText(ksize));
      }
      out.dims[2 + i] = ksize[i];
    }
  } else if (c.BoolAttr("global_pooling")) {
    out.dims[2] = out.dims[3] = 1;
  } else {
    Window2d w;
    const int64_t in[2] = {x.dims[2], x.dims[3]};
    FLEET_RETURN_IF_ERROR(ResolveWindow2d(c, in, c.IntsAttr("ksize"), &w));
    for (int i = 0; i < 2; ++i) {
      if (w.pad_begin[i] >= w.kernel[i] || w.pad_end[i] >= w.kernel[i]) {
        return c.Error("paddings must be smaller than ksize " +
                       ir::ShapeText(c.IntsAttr("ksize")));
      }
      out.dims[2 + i] = WindowOutSize(in[i], w, i, c.BoolAttr("ceil_mode"));
    }
    if (out.dims[2] == 0 || out.dims[3] == 0) {
      return c.Error("X " + ir::ShapeText(x.dims) + " is smaller than ksize " +
                     ir::ShapeText(c.IntsAttr("ksize")));
    }
  }
  c.Output("Out") = out;
  return OkStatus();
}

void RegisterPool2d(OpRegistry& registry) {
  OpSchema s;
  s.type = "pool2d";
  s.summary = "2-D max or average pooling over NCHW input";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = PoolAttrs();
  s.infer_shape = InferPool2d;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "pool2d_grad", {"X", "Out"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "pool2d_grad";
  g.inputs = {{"X"}, {"Out"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = PoolAttrs();
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnConvOps(OpRegistry& registry) {
  RegisterConv2d(registry, "conv2d");
  RegisterConv2d(registry, "depthwise_conv2d");
  RegisterPool2d(registry);
}

}  // namespace fleet::ops
