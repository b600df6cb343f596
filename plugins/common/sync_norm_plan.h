// The sync_batch_norm ops (host/ops/nn_norm_ops.cc) as both device plugins see them: X viewed
// as [N, C, S] (S the product of the dims after C), every tensor's size checked against that
// view, and the per-channel formulas, so the CPU and CUDA kernels compute the same numbers.
//
// Contract: PlanSyncNorm reads shapes only (never data) and is safe from any thread; its errors
// name the op and the slot. The formulas are plain arithmetic on doubles, callable from host
// and device code (host_device.h).
#pragma once

#include <cstdint>

#include "fleet/fleet_kernels.h"
#include "host_device.h"
#include "plan_status.h"

namespace fleet::kernel {

enum class SyncNormOp { kStats, kForward, kGradStats, kGrad };

struct SyncNormPlan {
  int64_t n = 1, c = 1, s = 1;  // X as [N, C, S]
  // Stats: [0, C) sums, [C, 2C) sums of squares, [2C] the per-channel count (of every rank
  // once all-reduced). GradStats: [0, C) sums of dY, [C, 2C) sums of dY * xhat.
  int64_t StatsSize() const { return 2 * c + 1; }
  int64_t GradStatsSize() const { return 2 * c; }
};

// Checks the slots `op` reads and writes against X's view.
PlanStatus PlanSyncNorm(const FleetKernelContext* kc, SyncNormOp op, SyncNormPlan* plan);

// The batch mean and biased variance of channel `ch` from all-reduced Stats; zero for an
// empty batch, as batch_norm gives. The variance is clamped at zero: E[x^2] - E[x]^2 can round
// below it for a constant channel.
struct SyncMoments {
  double mean, var;
};
FLEET_HOST_DEVICE inline SyncMoments SyncNormMoments(const double* stats, int64_t c,
                                                      int64_t ch) {
  const double count = stats[2 * c];
  if (!(count > 0)) return {0.0, 0.0};
  const double mean = stats[ch] / count;
  const double var = stats[c + ch] / count - mean * mean;
  return {mean, var > 0 ? var : 0.0};
}

// dX of one element: batch_norm_grad's formula with the sums and count of every rank.
// `k0` = Scale * inv_std, `xhat` = (x - mean) * inv_std.
FLEET_HOST_DEVICE inline double SyncNormDx(double k0, double dy, double xhat, double sum_dy,
                                           double sum_dy_xhat, double count) {
  return k0 * (dy - sum_dy / count - xhat * sum_dy_xhat / count);
}

}  // namespace fleet::kernel
