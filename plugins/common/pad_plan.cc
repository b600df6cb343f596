// PlanPad3d and PlanPad (pad_plan.h): the attribute and shape checks of pad3d and pad, worded
// once for both plugins.
#include "pad_plan.h"

#include <string>
#include <string_view>
#include <vector>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

// Row-major strides of a 5-D tensor, reordered to the logical (n, c, d, h, w).
void LogicalStrides(const std::vector<int64_t>& dims, bool channels_last, int64_t* strides) {
  int64_t s[5];
  s[4] = 1;
  for (int i = 4; i > 0; --i) s[i - 1] = s[i] * dims[static_cast<size_t>(i)];
  if (channels_last) {  // memory order n, d, h, w, c
    strides[0] = s[0];
    strides[1] = s[4];
    strides[2] = s[1];
    strides[3] = s[2];
    strides[4] = s[3];
  } else {
    for (int i = 0; i < 5; ++i) strides[i] = s[i];
  }
}

}  // namespace

PlanStatus PlanPad3d(const FleetKernelContext* kc, bool grad, Pad3dPlan* plan) {
  const FleetTensor* x = Input(kc, "X");
  const char* out_slot = grad ? "Out@GRAD" : "Out";
  const FleetTensor* out = grad ? Input(kc, out_slot) : Output(kc, out_slot);
  if (x == nullptr) return PlanInvalid(OpName(kc) + ": X is missing");
  if (out == nullptr) return PlanInvalid(OpName(kc) + ": " + out_slot + " is missing");
  const std::vector<int64_t> xd = Dims(x), od = Dims(out);
  if (xd.size() != 5) {
    return PlanInvalid(OpName(kc) + ": X must be 5-D, got " + DimsText(xd));
  }
  const std::string_view format = StringAttr(kc, "data_format");
  if (format != "NCDHW" && format != "NDHWC") {
    return PlanInvalid(OpName(kc) + ": data_format must be NCDHW or NDHWC, got '" +
                       std::string(format) + "'");
  }
  const bool last = format == "NDHWC";
  const std::string_view mode = StringAttr(kc, "mode");
  *plan = Pad3dPlan{};
  if (mode == "constant") {
    plan->mode = kPadConstant;
  } else if (mode == "reflect") {
    plan->mode = kPadReflect;
  } else if (mode == "replicate") {
    plan->mode = kPadReplicate;
  } else if (mode == "circular") {
    plan->mode = kPadCircular;
  } else {
    return PlanInvalid(OpName(kc) + ": mode must be constant, reflect, replicate or circular, "
                       "got '" + std::string(mode) + "'");
  }
  const std::vector<int64_t> pads = IntsAttr(kc, "paddings");
  if (pads.size() != 6) {
    return PlanInvalid(OpName(kc) + ": paddings " + DimsText(pads) +
                       " must have 6 entries [left, right, top, bottom, front, back]");
  }
  plan->value = FloatAttr(kc, "value", 0.0);
  plan->n = xd[0];
  plan->c = last ? xd[4] : xd[1];
  std::vector<int64_t> want = xd;
  for (int k = 0; k < 3; ++k) {  // k: d, h, w; pads run w, h, d
    const size_t dim = static_cast<size_t>(last ? 1 + k : 2 + k);
    const int64_t before = pads[static_cast<size_t>(4 - 2 * k)];
    const int64_t after = pads[static_cast<size_t>(5 - 2 * k)];
    const int64_t n = xd[dim];
    if (before < 0 || after < 0) {
      return PlanInvalid(OpName(kc) + ": paddings " + DimsText(pads) + " must not be negative");
    }
    if (plan->mode != kPadConstant && n == 0 && before + after > 0) {
      return PlanInvalid(OpName(kc) + ": mode " + std::string(mode) +
                         " cannot pad an empty dim of X " + DimsText(xd));
    }
    if (plan->mode == kPadReflect && (before >= n || after >= n)) {
      return PlanInvalid(OpName(kc) + ": reflect paddings " + DimsText(pads) +
                         " must be smaller than the padded dims of X " + DimsText(xd));
    }
    plan->in[k] = n;
    plan->before[k] = before;
    plan->out[k] = n + before + after;
    want[dim] = plan->out[k];
  }
  if (od != want) {
    return PlanInvalid(OpName(kc) + ": " + out_slot + " is " + DimsText(od) + ", expected " +
                       DimsText(want));
  }
  LogicalStrides(xd, last, plan->in_strides);
  LogicalStrides(od, last, plan->out_strides);
  if (grad) {
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx != nullptr && Dims(dx) != xd) {
      return PlanInvalid(OpName(kc) + ": X@GRAD " + DimsText(Dims(dx)) + " differs from X " +
                         DimsText(xd));
    }
  }
  return PlanOk();
}

PlanStatus PlanPad(const FleetKernelContext* kc, bool grad, PadPlan* plan) {
  const char* in_slot = grad ? "X@GRAD" : "X";
  const char* out_slot = grad ? "Out@GRAD" : "Out";
  const FleetTensor* x = grad ? Output(kc, in_slot) : Input(kc, in_slot);
  const FleetTensor* out = grad ? Input(kc, out_slot) : Output(kc, out_slot);
  if (out == nullptr) return PlanInvalid(OpName(kc) + ": " + out_slot + " is missing");
  if (x == nullptr && !grad) return PlanInvalid(OpName(kc) + ": X is missing");
  const std::vector<int64_t> od = Dims(out);
  const std::vector<int64_t> pads = IntsAttr(kc, "paddings");
  const size_t rank = od.size();
  if (rank > static_cast<size_t>(kMaxPadRank) || pads.size() != 2 * rank) {
    return PlanInvalid(OpName(kc) + ": paddings " + DimsText(pads) + " must have 2 entries per "
                       "dim of " + out_slot + " " + DimsText(od) + " (rank <= " +
                       std::to_string(kMaxPadRank) + ")");
  }
  *plan = PadPlan{};
  plan->rank = static_cast<int>(rank);
  plan->value = FloatAttr(kc, "pad_value", 0.0);
  std::vector<int64_t> xd(rank);
  for (size_t k = 0; k < rank; ++k) {
    if (pads[2 * k] < 0 || pads[2 * k + 1] < 0) {
      return PlanInvalid(OpName(kc) + ": paddings " + DimsText(pads) + " must not be negative");
    }
    plan->before[k] = pads[2 * k];
    plan->out[k] = od[k];
    plan->in[k] = xd[k] = od[k] - pads[2 * k] - pads[2 * k + 1];
  }
  if (x != nullptr && Dims(x) != xd) {
    return PlanInvalid(OpName(kc) + ": " + in_slot + " " + DimsText(Dims(x)) + " padded by " +
                       DimsText(pads) + " does not give " + out_slot + " " + DimsText(od));
  }
  return PlanOk();
}

}  // namespace fleet::kernel
