// bilinear_interp_v2 and nearest_interp_v2 (4-D NCHW), with their gradient ops. The output size
// is int(in * scale) per dim when the `scale` attribute holds two positive values, else the
// out_h/out_w attributes; the OutSize, SizeTensor and Scale input tensors are refused (their
// values are only known at run time). The coordinate rules are in
// plugins/common/interp_plan.h.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

std::vector<AttrSpec> InterpAttrs(const char* method) {
  return {{"data_layout", std::string("NCHW")},
          {"out_d", int32_t{-1}},
          {"out_h", int32_t{-1}},
          {"out_w", int32_t{-1}},
          {"scale", std::vector<float>{}},
          {"interp_method", std::string(method)},
          {"align_corners", true},
          {"align_mode", int32_t{1}}};
}

Status CheckInterpAttrs(const ShapeContext& c, const std::string& method) {
  const std::string layout = c.StringAttr("data_layout");
  if (layout != "NCHW" && layout != "AnyLayout") {
    return c.Error("data_layout '" + layout + "' is not supported (NCHW only)");
  }
  if (c.StringAttr("interp_method") != method) {
    return c.Error("interp_method must be '" + method + "' for this op, got '" +
                   c.StringAttr("interp_method") + "'");
  }
  const int64_t mode = c.IntAttr("align_mode");
  if (mode != 0 && mode != 1) {
    return c.Error("align_mode must be 0 or 1, got " + std::to_string(mode));
  }
  for (const char* slot : {"OutSize", "SizeTensor", "Scale"}) {
    if (c.HasInput(slot)) {
      return c.Error(std::string("input ") + slot +
                     " is not supported; give the size with out_h/out_w or the scale attribute");
    }
  }
  return OkStatus();
}

Status InferInterp(ShapeContext& c, const std::string& method) {
  const TensorInfo& x = c.Input("X");
  FLEET_RETURN_IF_ERROR(CheckInterpAttrs(c, method));
  if (x.dims.size() != 4) {
    return c.Error("X must be 4-D NCHW, got " + ir::ShapeText(x.dims));
  }
  if (x.dtype != ir::DataType::kFloat32 && x.dtype != ir::DataType::kFloat64) {
    return c.Error("X must be float32 or float64, got " +
                   std::string(ir::DataTypeName(x.dtype)));
  }
  const std::vector<double> scale = c.FloatsAttr("scale");
  if (!scale.empty() && scale.size() != 2) {
    return c.Error("scale needs 2 values (h, w) or none, got " + std::to_string(scale.size()));
  }
  const bool scaled = scale.size() == 2 && scale[0] > 0 && scale[1] > 0;
  if (!scale.empty() && !scaled) {
    return c.Error("scale values must be positive, got [" + std::to_string(scale[0]) + ", " +
                   std::to_string(scale[1]) + "]");
  }
  TensorInfo out = x;
  const char* names[2] = {"out_h", "out_w"};
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.dims[2 + i];
    int64_t size = c.IntAttr(names[i]);
    if (scaled) size = in < 0 ? -1 : static_cast<int64_t>(static_cast<double>(in) * scale[i]);
    if (size == 0 || (size < 0 && !(scaled && in < 0))) {
      return c.Error(std::string("output size must be positive: ") +
                     (scaled ? "X " + ir::ShapeText(x.dims) + " times scale gives " +
                                   std::to_string(size) + " for " + names[i]
                             : std::string(names[i]) + " is " + std::to_string(size)));
    }
    out.dims[2 + i] = size;
  }
  c.Output("Out") = out;
  return OkStatus();
}

void RegisterInterp(OpRegistry& registry, const std::string& type, const char* method) {
  OpSchema s;
  s.type = type;
  s.summary = std::string(method) + " resize of NCHW input (Paddle's interp_v2 coordinates)";
  s.inputs = {{"X"}, {"OutSize", true}, {"SizeTensor", true}, {"Scale", true}};
  s.outputs = {{"Out"}};
  s.attrs = InterpAttrs(method);
  const std::string m = method;
  s.infer_shape = [m](ShapeContext& c) { return InferInterp(c, m); };
  s.grad = [type](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, type + "_grad", {"X"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = type + "_grad";
  g.inputs = {{"X"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = InterpAttrs(method);
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnInterpOps(OpRegistry& registry) {
  RegisterInterp(registry, "bilinear_interp_v2", "bilinear");
  RegisterInterp(registry, "nearest_interp_v2", "nearest");
}

}  // namespace fleet::ops
