// strided_slice, pad3d and pad with their gradient ops: the layout ops whose output is a window
// of the input (or the input inside a border), with Paddle's clamping and padding rules.
#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/tensor_ops_util.h"

namespace fleet::ops {
namespace {

using tensor_ops::InferGradLikeX;
using tensor_ops::NormalizeAxis;

std::string Str(int64_t v) { return std::to_string(v); }

// ---- strided_slice --------------------------------------------------------------------------

std::vector<AttrSpec> StridedSliceAttrs() {
  return {{"axes", std::vector<int32_t>{}},          {"starts", std::vector<int32_t>{}},
          {"ends", std::vector<int32_t>{}},          {"strides", std::vector<int32_t>{}},
          {"infer_flags", std::vector<int32_t>{}},   {"decrease_axis", std::vector<int32_t>{}}};
}

// Paddle's rules: negative starts/ends count from the end and clamp at 0, except that end -1
// with a negative stride means "through index 0"; a start on the wrong side of its end for the
// stride's sign is an error; the count is ceil(span / |stride|). The kernels' plan
// (plugins/common/shape_plan.cc) applies the same rules to place the first element.
Status InferStridedSlice(ShapeContext& c) {
  const TensorInfo& in = c.Input("Input");
  const int64_t rank = static_cast<int64_t>(in.dims.size());
  const std::vector<int64_t> axes = c.IntsAttr("axes"), starts = c.IntsAttr("starts"),
                             ends = c.IntsAttr("ends"), strides = c.IntsAttr("strides"),
                             flags = c.IntsAttr("infer_flags"),
                             decrease = c.IntsAttr("decrease_axis");
  if (starts.size() != axes.size() || ends.size() != axes.size() ||
      strides.size() != axes.size()) {
    return c.Error("axes " + ir::ShapeText(axes) + ", starts " + ir::ShapeText(starts) +
                   ", ends " + ir::ShapeText(ends) + " and strides " + ir::ShapeText(strides) +
                   " must have the same length");
  }
  std::vector<int64_t> out = in.dims;
  std::set<int64_t> used;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = 0;
    if (!NormalizeAxis(axes[i], rank, &axis)) {
      return c.Error("axes[" + Str(static_cast<int64_t>(i)) + "] = " + Str(axes[i]) +
                     " is out of range for Input of shape " + ir::ShapeText(in.dims));
    }
    if (!used.insert(axis).second) {
      return c.Error("axes " + ir::ShapeText(axes) + " repeats an axis");
    }
    const int64_t st = strides[i];
    if (st == 0) return c.Error("strides[" + Str(static_cast<int64_t>(i)) + "] is 0");
    const int64_t n = in.dims[static_cast<size_t>(axis)];
    if (n < 0) continue;
    const bool last = starts[i] == -1 && ends[i] == 0 && i < flags.size() && flags[i] == -1 &&
                      std::find(decrease.begin(), decrease.end(), axes[i]) != decrease.end();
    if (last) {
      out[static_cast<size_t>(axis)] = 1;
      continue;
    }
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b = std::max<int64_t>(b + n, 0);
    if (e < 0 && !(e == -1 && st < 0)) e = std::max<int64_t>(e + n, 0);
    if (st < 0) {
      ++b;
      ++e;
    }
    if ((st > 0 && b > e) || (st < 0 && b < e)) {
      return c.Error("along axis " + Str(axis) + " start " + Str(starts[i]) + " and end " +
                     Str(ends[i]) + " are on the wrong sides of each other for stride " +
                     Str(st));
    }
    const int64_t left = std::max<int64_t>(0, std::min(b, e));
    const int64_t right = std::min(n, std::max(b, e));
    const int64_t step = st < 0 ? -st : st;
    out[static_cast<size_t>(axis)] = right > left ? (right - left + step - 1) / step : 0;
  }
  if (!decrease.empty()) {
    std::vector<bool> drop(out.size(), false);
    for (int64_t d : decrease) {
      int64_t axis = 0;
      if (!NormalizeAxis(d, rank, &axis)) {
        return c.Error("decrease_axis " + ir::ShapeText(decrease) + " is out of range for rank " +
                       Str(rank));
      }
      if (out[static_cast<size_t>(axis)] != 1 && out[static_cast<size_t>(axis)] >= 0) {
        return c.Error("decrease_axis removes dim " + Str(axis) + ", but the slice has size " +
                       Str(out[static_cast<size_t>(axis)]) + " there (must be 1)");
      }
      drop[static_cast<size_t>(axis)] = true;
    }
    std::vector<int64_t> kept;
    for (size_t k = 0; k < out.size(); ++k) {
      if (!drop[k]) kept.push_back(out[k]);
    }
    if (kept.empty()) kept.push_back(1);
    out = std::move(kept);
  }
  c.Output("Out") = {in.dtype, std::move(out)};
  return OkStatus();
}

void RegisterStridedSlice(OpRegistry& registry) {
  OpSchema s;
  s.type = "strided_slice";
  s.summary = "Out = Input[starts:ends:strides] along axes (Paddle's clamping; negative "
              "strides walk backwards), decrease_axis dims removed";
  s.inputs = {{"Input"}};
  s.outputs = {{"Out"}};
  s.attrs = StridedSliceAttrs();
  s.infer_shape = InferStridedSlice;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "strided_slice_grad", {"Input"}, {"Out"}, {"Input"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "strided_slice_grad";
  g.summary = "Input@GRAD = zeros with Out@GRAD placed where the slice was taken";
  g.inputs = {{"Input", false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"Input@GRAD", true}};
  g.attrs = StridedSliceAttrs();
  g.kernel_dtype_slot = "Out@GRAD";
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("Input@GRAD")) {
      c.Output("Input@GRAD") = {c.Input("Out@GRAD").dtype, c.Input("Input").dims};
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// ---- pad3d ----------------------------------------------------------------------------------

std::vector<AttrSpec> Pad3dAttrs() {
  return {{"paddings", std::vector<int32_t>{0, 0, 0, 0, 0, 0}},
          {"mode", std::string("constant")},
          {"value", 0.0f},
          {"data_format", std::string("NCDHW")}};
}

// paddings are [left, right, top, bottom, front, back]: W's first, then H's, then D's.
Status InferPad3d(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  if (x.dims.size() != 5) return c.Error("X must be 5-D, got " + ir::ShapeText(x.dims));
  const std::string format = c.StringAttr("data_format");
  const std::string mode = c.StringAttr("mode");
  if (format != "NCDHW" && format != "NDHWC") {
    return c.Error("data_format must be NCDHW or NDHWC, got '" + format + "'");
  }
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular") {
    return c.Error("mode must be constant, reflect, replicate or circular, got '" + mode + "'");
  }
  const std::vector<int64_t> pads = c.IntsAttr("paddings");
  if (pads.size() != 6) {
    return c.Error("paddings " + ir::ShapeText(pads) +
                   " must have 6 entries [left, right, top, bottom, front, back]");
  }
  std::vector<int64_t> out = x.dims;
  for (size_t k = 0; k < 3; ++k) {  // d, h, w
    const size_t dim = format == "NDHWC" ? 1 + k : 2 + k;
    const int64_t before = pads[4 - 2 * k], after = pads[5 - 2 * k];
    const int64_t n = x.dims[dim];
    if (before < 0 || after < 0) {
      return c.Error("paddings " + ir::ShapeText(pads) + " must not be negative");
    }
    if (mode == "reflect" && n >= 0 && (before >= n || after >= n)) {
      return c.Error("reflect paddings " + ir::ShapeText(pads) +
                     " must be smaller than the padded dims of X " + ir::ShapeText(x.dims));
    }
    out[dim] = n < 0 ? -1 : n + before + after;
  }
  c.Output("Out") = {x.dtype, std::move(out)};
  return OkStatus();
}

void RegisterPad3d(OpRegistry& registry) {
  OpSchema s;
  s.type = "pad3d";
  s.summary = "Out = X padded on D, H and W (constant value, reflect, replicate or circular)";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = Pad3dAttrs();
  s.infer_shape = InferPad3d;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "pad3d_grad", {"X"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "pad3d_grad";
  g.summary = "X@GRAD = the sum of Out@GRAD over every output element that copied X's";
  g.inputs = {{"X", false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = Pad3dAttrs();
  g.kernel_dtype_slot = "Out@GRAD";
  g.infer_shape = InferGradLikeX;
  RegisterBuiltin(registry, std::move(g));
}

// ---- pad ------------------------------------------------------------------------------------

// paddings = [before_0, after_0, before_1, after_1, ...], one pair per dim of `t`.
Status CheckPaddings(ShapeContext& c, const TensorInfo& t, const std::string& slot) {
  const std::vector<int64_t> pads = c.IntsAttr("paddings");
  if (pads.size() != 2 * t.dims.size()) {
    return c.Error("paddings " + ir::ShapeText(pads) + " must have 2 entries per dim of " + slot +
                   " " + ir::ShapeText(t.dims));
  }
  for (int64_t p : pads) {
    if (p < 0) return c.Error("paddings " + ir::ShapeText(pads) + " must not be negative");
  }
  return OkStatus();
}

void RegisterPad(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"paddings", std::vector<int32_t>{}},
                                       {"pad_value", 0.0f}};
  OpSchema s;
  s.type = "pad";
  s.summary = "Out = X with paddings[2k] / paddings[2k + 1] entries of pad_value before / after "
              "dim k";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = attrs;
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    FLEET_RETURN_IF_ERROR(CheckPaddings(c, x, "X"));
    const std::vector<int64_t> pads = c.IntsAttr("paddings");
    std::vector<int64_t> out = x.dims;
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k] >= 0) out[k] += pads[2 * k] + pads[2 * k + 1];
    }
    c.Output("Out") = {x.dtype, std::move(out)};
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "pad_grad", {}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "pad_grad";
  g.summary = "X@GRAD = the part of Out@GRAD that X filled";
  g.inputs = {{"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = attrs;
  g.kernel_dtype_slot = "Out@GRAD";
  g.infer_shape = [](ShapeContext& c) {
    const TensorInfo& dout = c.Input("Out@GRAD");
    FLEET_RETURN_IF_ERROR(CheckPaddings(c, dout, "Out@GRAD"));
    const std::vector<int64_t> pads = c.IntsAttr("paddings");
    std::vector<int64_t> x = dout.dims;
    for (size_t k = 0; k < x.size(); ++k) {
      if (x[k] >= 0) x[k] -= pads[2 * k] + pads[2 * k + 1];
      if (x[k] < -1) {
        return c.Error("Out@GRAD " + ir::ShapeText(dout.dims) + " is smaller than paddings " +
                       ir::ShapeText(pads));
      }
    }
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = {dout.dtype, std::move(x)};
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

namespace tensor_ops {

void RegisterTensorSlicePadOps(OpRegistry& registry) {
  RegisterStridedSlice(registry);
  RegisterPad3d(registry);
  RegisterPad(registry);
}

}  // namespace tensor_ops
}  // namespace fleet::ops
