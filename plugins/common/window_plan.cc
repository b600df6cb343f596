#include "window_plan.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

// "<op>: <attr> needs <what>", with ", got N" when the plugin reports counts.
PlanStatus WrongCount(const FleetKernelContext* kc, const char* attr, const char* what,
                      size_t got, bool count_in_messages) {
  std::string m = OpName(kc) + ": " + attr + " needs " + what;
  if (count_in_messages) m += ", got " + std::to_string(got);
  return PlanInvalid(std::move(m));
}

}  // namespace

PlanStatus ResolveWindow2d(const FleetKernelContext* kc, const int64_t in[2], const int64_t k[2],
                           bool with_dilation, bool count_in_messages, Window2d* w) {
  const std::vector<int64_t> strides = IntsAttr(kc, "strides");
  std::vector<int64_t> pads = IntsAttr(kc, "paddings");
  const std::string_view algo = StringAttr(kc, "padding_algorithm");
  if (strides.size() != 2) {
    return WrongCount(kc, "strides", "2 values", strides.size(), count_in_messages);
  }
  // Two paddings mean [top = bottom, left = right]; four are [top, bottom, left, right].
  if (pads.size() == 2) pads = {pads[0], pads[0], pads[1], pads[1]};
  if (pads.size() != 4) {
    return WrongCount(kc, "paddings", "2 or 4 values", pads.size(), count_in_messages);
  }
  std::vector<int64_t> dil = {1, 1};
  if (with_dilation) {
    dil = IntsAttr(kc, "dilations");
    if (dil.size() != 2) {
      return WrongCount(kc, "dilations", "2 values", dil.size(), count_in_messages);
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (strides[i] <= 0 || dil[i] <= 0 || k[i] <= 0 || pads[2 * i] < 0 || pads[2 * i + 1] < 0) {
      return PlanInvalid(OpName(kc) + ": strides, dilations and kernel sizes must be "
                                      "positive and paddings non-negative");
    }
    w->kernel[i] = k[i];
    w->stride[i] = strides[i];
    w->dilation[i] = dil[i];
    w->pad_begin[i] = pads[2 * i];
    w->pad_end[i] = pads[2 * i + 1];
    if (algo == "SAME") {
      // Paddle: out = ceil(in / stride), the padding split with the odd one at the end, and
      // no dilation.
      w->dilation[i] = 1;
      const int64_t out = (in[i] + w->stride[i] - 1) / w->stride[i];
      const int64_t sum = std::max<int64_t>((out - 1) * w->stride[i] + k[i] - in[i], 0);
      w->pad_begin[i] = sum / 2;
      w->pad_end[i] = sum - sum / 2;
    } else if (algo == "VALID") {
      w->pad_begin[i] = w->pad_end[i] = 0;
    }
  }
  return PlanOk();
}

}  // namespace fleet::kernel
