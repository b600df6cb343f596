// The nn op group: losses, conv2d/pool2d, batch/layer norm, dropout, embedding lookup, accuracy
// and top-k. Each family lives in its own nn_*.cc; this file holds what they share.
#include <algorithm>
#include <cassert>
#include <cstdio>

#include "ops/nn_util.h"

namespace fleet::ops {




Status ResolveWindow2d(const ShapeContext& c, const int64_t in[2],
                       const std::vector<int64_t>& ksize, Window2d* w) {
  if (ksize.size() != 2) {
    return c.Error("expects 2 kernel sizes (kh, kw), got " + ir::ShapeText(ksize));
  }
  std::vector<int64_t> strides = c.IntsAttr("strides");
  std::vector<int64_t> paddings = c.IntsAttr("paddings");
  std::string algo = c.StringAttr("padding_algorithm");
  if (strides.size() != 2) {
    return c.Error("attribute strides needs 2 values, got " + ir::ShapeText(strides));
  }
  for (int i = 0; i < 2; ++i) {
    if (ksize[i] <= 0) return c.Error("kernel sizes must be positive, got " + ir::ShapeText(ksize));
    if (strides[i] <= 0) return c.Error("strides must be positive, got " + ir::ShapeText(strides));
    w->kernel[i] = ksize[i];
    w->stride[i] = strides[i];
  }
  if (paddings.size() == 2) {
    paddings = {paddings[0], paddings[0], paddings[1], paddings[1]};
  } else if (paddings.size() != 4) {
    return c.Error("attribute paddings needs 2 or 4 values, got " + ir::ShapeText(paddings));
  }
  for (int64_t p : paddings) {
    if (p < 0) return c.Error("paddings must be >= 0, got " + ir::ShapeText(paddings));
  }
  for (int i = 0; i < 2; ++i) {
    w->pad_begin[i] = paddings[2 * i];
    w->pad_end[i] = paddings[2 * i + 1];
  }
  if (c.op().type.find("conv2d") != std::string::npos) {  // conv2d, depthwise_conv2d (+ grads)
    std::vector<int64_t> dil = c.IntsAttr("dilations");
    if (dil.size() != 2 || dil[0] <= 0 || dil[1] <= 0) {
      return c.Error("attribute dilations needs 2 positive values, got " + ir::ShapeText(dil));
    }
    w->dilation[0] = dil[0];
    w->dilation[1] = dil[1];
  }
  if (algo == "SAME") {
    for (int i = 0; i < 2; ++i) {
      w->dilation[i] = 1;
      w->pad_begin[i] = w->pad_end[i] = 0;
      if (in[i] < 0) continue;
      int64_t out = (in[i] + w->stride[i] - 1) / w->stride[i];
      int64_t sum = std::max<int64_t>((out - 1) * w->stride[i] + w->kernel[i] - in[i], 0);
      w->pad_begin[i] = sum / 2;
      w->pad_end[i] = sum - sum / 2;
    }
  } else if (algo == "VALID") {
    for (int i = 0; i < 2; ++i) w->pad_begin[i] = w->pad_end[i] = 0;
  } else if (algo != "EXPLICIT" && !algo.empty()) {
    return c.Error("padding_algorithm must be EXPLICIT, SAME or VALID, got '" + algo + "'");
  }
  return OkStatus();
}

int64_t WindowOutSize(int64_t in, const Window2d& w, int dim, bool ceil_mode) {
  if (in < 0) return -1;
  int64_t span = w.dilation[dim] * (w.kernel[dim] - 1) + 1;
  int64_t padded = in + w.pad_begin[dim] + w.pad_end[dim] - span;
  if (padded < 0) return 0;
  if (ceil_mode) return (padded + w.stride[dim] - 1) / w.stride[dim] + 1;
  return padded / w.stride[dim] + 1;
}

ir::Op GradOp(const ir::Op& fwd, std::string type, const std::vector<std::string>& reads,
              const std::vector<std::string>& out_grads, const std::vector<std::string>& in_grads) {
  ir::Op g;
  g.type = std::move(type);
  g.attrs = fwd.attrs;
  for (const auto& slot : reads) {
    const auto& in = fwd.Input(slot);
    const auto& vars = in.empty() ? fwd.Output(slot) : in;
    if (!vars.empty()) g.inputs[slot] = vars;
  }
  auto grads = [](const std::vector<std::string>& vars) {
    std::vector<std::string> out;
    for (const auto& v : vars) out.push_back(ir::GradVarName(v));
    return out;
  };
  for (const auto& slot : out_grads) {
    const auto& vars = fwd.Output(slot);
    if (!vars.empty()) g.inputs[ir::GradVarName(slot)] = grads(vars);
  }
  for (const auto& slot : in_grads) {
    const auto& vars = fwd.Input(slot);
    if (!vars.empty()) g.outputs[ir::GradVarName(slot)] = grads(vars);
  }
  return g;
}

bool DimsMatch(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

void RegisterNnOps(OpRegistry& registry) {
  RegisterNnLossOps(registry);
  RegisterNnLossExtOps(registry);
  RegisterNnConvOps(registry);
  RegisterNnNormOps(registry);
  RegisterNnMiscOps(registry);
  RegisterNnExtOps(registry);
  RegisterNnInterpOps(registry);
  RegisterNnDeconvOps(registry);
  RegisterNnSampledOps(registry);
  RegisterNnRnnOps(registry);
  RegisterSequenceOps(registry);
  RegisterSequenceOffsetOps(registry);
  RegisterNnMetricOps(registry);
}

}  // namespace fleet::ops
