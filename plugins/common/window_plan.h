// Host-side resolution of Paddle's 2-D conv/pool window (strides, paddings, dilations and
// padding_algorithm), shared by the CPU and CUDA plugins. The host's shape function applies
// the same rules, so the output shapes the host allocated agree with these numbers.
//
// Contract: reads attributes only (it allocates, so it belongs in prepare, not in a launch);
// errors come back as a PlanStatus carrying the op's message. Plain C++17: CUDA sources
// include this header.
#pragma once

#include <cstdint>

#include "fleet/fleet_kernels.h"
#include "host_device.h"
#include "plan_status.h"

namespace fleet::kernel {

struct Window2d {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0};  // top, left
  int64_t pad_end[2] = {0, 0};    // bottom, right
};

// Reads strides/paddings/padding_algorithm (and dilations when `with_dilation`) for input
// spatial dims `in` and kernel sizes `k`, applying Paddle's SAME/VALID rules. With
// `count_in_messages`, a list attribute of the wrong length is reported with the count it had
// (", got N"), as the CUDA plugin words it.
PlanStatus ResolveWindow2d(const FleetKernelContext* kc, const int64_t in[2], const int64_t k[2],
                           bool with_dilation, bool count_in_messages, Window2d* w);

// Paddle's adaptive pooling windows: output position `o` of `out` along a dim of `in` inputs
// covers [floor(o * in / out), ceil((o + 1) * in / out)). Windows are never empty for
// 0 < out, and neighbouring ones may overlap when `in` is not a multiple of `out`.
FLEET_HOST_DEVICE inline int64_t AdaptiveBegin(int64_t o, int64_t in, int64_t out) {
  return o * in / out;
}
FLEET_HOST_DEVICE inline int64_t AdaptiveEnd(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}
// The output positions [*lo, *hi] whose adaptive windows contain input position `pos` (the
// inverse of the two functions above, for gather-style gradients).
FLEET_HOST_DEVICE inline void AdaptiveWindowsOf(int64_t pos, int64_t in, int64_t out,
                                                int64_t* lo, int64_t* hi) {
  // end(i) > pos iff i >= floor(pos * out / in); begin(i) <= pos iff i * in < (pos + 1) * out.
  *lo = pos * out / in;
  const int64_t last = ((pos + 1) * out + in - 1) / in - 1;
  *hi = last < out - 1 ? last : out - 1;
}

}  // namespace fleet::kernel
