// Planning and per-element arithmetic of pad3d, pad3d_grad and pad (constant padding of any
// rank; its grad is a copy plan, shape_plan.h), shared by the CPU and CUDA plugins so both
// accept the same shapes and compute every element with the same code.
//
// Contract:
//   - PlanPad3d reads shapes and attributes only, once, at prepare; errors are the op's
//     message.
//   - Tensors are walked in the logical order (n, c, d, h, w) whatever the data_format; the
//     plan's strides place each logical element in memory.
//   - Pad3dValue is output element (n, c, od, oh, ow); Pad3dGradSum is input element
//     (n, c, d, h, w)'s gradient: the sum of Out@GRAD over every output element that copied it,
//     in increasing (od, oh, ow) order, in double. Both plugins call these, so they agree.
// Pad3dPlan is trivially copyable; plain C++17, so CUDA sources include this header.
#pragma once

#include <cstdint>

#include "fleet/fleet_kernels.h"
#include "host_device.h"
#include "plan_status.h"

namespace fleet::kernel {

enum PadMode : int32_t { kPadConstant = 0, kPadReflect = 1, kPadReplicate = 2, kPadCircular = 3 };

struct Pad3dPlan {
  int64_t n = 1, c = 1;
  int64_t in[3] = {};      // D, H, W of X
  int64_t out[3] = {};     // D, H, W of Out
  int64_t before[3] = {};  // front, top, left
  int64_t in_strides[5] = {};   // n, c, d, h, w
  int64_t out_strides[5] = {};  // n, c, d, h, w
  int32_t mode = kPadConstant;
  double value = 0;
};

// `grad`: pad3d_grad (reads X and Out@GRAD, writes X@GRAD) instead of pad3d (X -> Out).
PlanStatus PlanPad3d(const FleetKernelContext* kc, bool grad, Pad3dPlan* plan);

// The input index output index `o` of a dim copies, or -1 for a constant pad.
FLEET_HOST_DEVICE inline int64_t PadSource(int64_t o, int64_t before, int64_t n, int32_t mode) {
  int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case kPadReflect:
      if (i < 0) i = -i;
      if (i >= n) i = 2 * (n - 1) - i;
      return i;
    case kPadReplicate:
      return i < 0 ? 0 : n - 1;
    case kPadCircular:
      return ((i % n) + n) % n;
    default:
      return -1;
  }
}

// Output element `e` (logical row-major over n, c, od, oh, ow).
template <typename T>
FLEET_HOST_DEVICE inline void Pad3dValue(const Pad3dPlan& p, int64_t e, const T* x, T* out) {
  const int64_t ow = e % p.out[2];
  int64_t r = e / p.out[2];
  const int64_t oh = r % p.out[1];
  r /= p.out[1];
  const int64_t od = r % p.out[0];
  r /= p.out[0];
  const int64_t c = r % p.c;
  const int64_t n = r / p.c;
  const int64_t o = n * p.out_strides[0] + c * p.out_strides[1] + od * p.out_strides[2] +
                    oh * p.out_strides[3] + ow * p.out_strides[4];
  const int64_t d = PadSource(od, p.before[0], p.in[0], p.mode);
  const int64_t h = PadSource(oh, p.before[1], p.in[1], p.mode);
  const int64_t w = PadSource(ow, p.before[2], p.in[2], p.mode);
  if (d < 0 || h < 0 || w < 0) {
    out[o] = static_cast<T>(p.value);
    return;
  }
  out[o] = x[n * p.in_strides[0] + c * p.in_strides[1] + d * p.in_strides[2] +
             h * p.in_strides[3] + w * p.in_strides[4]];
}

// Input element `e` (logical row-major over n, c, d, h, w) of X@GRAD.
template <typename T>
FLEET_HOST_DEVICE inline void Pad3dGradValue(const Pad3dPlan& p, int64_t e, const T* dout,
                                             T* dx) {
  const int64_t w = e % p.in[2];
  int64_t r = e / p.in[2];
  const int64_t h = r % p.in[1];
  r /= p.in[1];
  const int64_t d = r % p.in[0];
  r /= p.in[0];
  const int64_t c = r % p.c;
  const int64_t n = r / p.c;
  const int64_t base = n * p.out_strides[0] + c * p.out_strides[1];
  double acc = 0;
  for (int64_t od = 0; od < p.out[0]; ++od) {
    if (PadSource(od, p.before[0], p.in[0], p.mode) != d) continue;
    for (int64_t oh = 0; oh < p.out[1]; ++oh) {
      if (PadSource(oh, p.before[1], p.in[1], p.mode) != h) continue;
      for (int64_t ow = 0; ow < p.out[2]; ++ow) {
        if (PadSource(ow, p.before[2], p.in[2], p.mode) != w) continue;
        acc += static_cast<double>(dout[base + od * p.out_strides[2] + oh * p.out_strides[3] +
                                        ow * p.out_strides[4]]);
      }
    }
  }
  dx[n * p.in_strides[0] + c * p.in_strides[1] + d * p.in_strides[2] + h * p.in_strides[3] +
     w * p.in_strides[4]] = static_cast<T>(acc);
}

// pad: Out (rank <= kMaxPadRank) is X with before[k] / after entries of `value` around dim k.
inline constexpr int kMaxPadRank = 8;

struct PadPlan {
  int rank = 0;
  int64_t in[kMaxPadRank] = {};
  int64_t out[kMaxPadRank] = {};
  int64_t before[kMaxPadRank] = {};
  double value = 0;
};

// Reads X, Out (or, with `grad`, Out@GRAD and X@GRAD) and paddings = [before_0, after_0, ...].
PlanStatus PlanPad(const FleetKernelContext* kc, bool grad, PadPlan* plan);

// Output element `e` (row-major) of pad.
template <typename T>
FLEET_HOST_DEVICE inline void PadValue(const PadPlan& p, int64_t e, const T* x, T* out) {
  int64_t src = 0, scale = 1, rem = e;
  bool inside = true;
  for (int k = p.rank - 1; k >= 0; --k) {
    const int64_t i = rem % p.out[k] - p.before[k];
    rem /= p.out[k];
    if (i < 0 || i >= p.in[k]) inside = false;
    src += i * scale;
    scale *= p.in[k];
  }
  out[e] = inside ? x[src] : static_cast<T>(p.value);
}

}  // namespace fleet::kernel
