// The sync_batch_norm ops (host/ops/nn_norm_ops.cc), float32 and float64: per-channel loops
// over X viewed as [N, C, S], parallel over channels like batch_norm's, with the shapes checked
// and the formulas shared with the CUDA plugin (plugins/common/sync_norm_plan.h). Sums
// accumulate in double, in the same order batch_norm's do, so that one rank reproduces
// batch_norm up to its two-pass variance.
#include <cmath>

#include "kernels/nn_kernels.h"
#include "sync_norm_plan.h"

namespace fleet_cpu {
namespace {

using fleet::kernel::SyncNormOp;
using fleet::kernel::SyncNormPlan;

FleetStatus* Plan(const FleetKernelContext* kc, SyncNormOp op, SyncNormPlan* p) {
  return FromPlan(fleet::kernel::PlanSyncNorm(kc, op, p));
}

// Calls f(row) with the S-long row of channel `ch` in sample n, for every n.
template <typename F>
void ForRows(const SyncNormPlan& p, int64_t ch, F&& f) {
  for (int64_t n = 0; n < p.n; ++n) f((n * p.c + ch) * p.s);
}

template <typename T>
FleetStatus* Stats(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SyncNormPlan p;
    if (FleetStatus* st = Plan(kc, SyncNormOp::kStats, &p)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    double* stats = Data<double>(Output(kc, "Stats"));
    ParallelForEach(kc, p.c, p.n * p.s, [&](int64_t ch) {
      double sum = 0, sq = 0;
      ForRows(p, ch, [&](int64_t at) {
        for (int64_t k = 0; k < p.s; ++k) sum += x[at + k];
      });
      ForRows(p, ch, [&](int64_t at) {
        for (int64_t k = 0; k < p.s; ++k) sq += double(x[at + k]) * double(x[at + k]);
      });
      stats[ch] = sum;
      stats[p.c + ch] = sq;
    });
    stats[2 * p.c] = static_cast<double>(p.n * p.s);
    return nullptr;
  });
}

template <typename T>
FleetStatus* Forward(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SyncNormPlan p;
    if (FleetStatus* st = Plan(kc, SyncNormOp::kForward, &p)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    const T* scale = Data<T>(Input(kc, "Scale"));
    const T* bias = Data<T>(Input(kc, "Bias"));
    const T* mean_in = Data<T>(Input(kc, "Mean"));
    const T* var_in = Data<T>(Input(kc, "Variance"));
    const double* stats = Data<double>(Input(kc, "Stats"));
    T* y = Data<T>(Output(kc, "Y"));
    T* outs[4] = {nullptr, nullptr, nullptr, nullptr};
    const char* slots[4] = {"MeanOut", "VarianceOut", "SavedMean", "SavedVariance"};
    for (int i = 0; i < 4; ++i) {
      if (const FleetTensor* t = Output(kc, slots[i])) outs[i] = Data<T>(t);
    }
    const double eps = FloatAttr(kc, "epsilon", 1e-5);
    const double momentum = FloatAttr(kc, "momentum", 0.9);
    ParallelForEach(kc, p.c, p.n * p.s, [&](int64_t ch) {
      const fleet::kernel::SyncMoments m = fleet::kernel::SyncNormMoments(stats, p.c, ch);
      const double inv_std = 1.0 / std::sqrt(m.var + eps);
      const T a = static_cast<T>(scale[ch] * inv_std);
      const T b = static_cast<T>(bias[ch] - m.mean * scale[ch] * inv_std);
      ForRows(p, ch, [&](int64_t at) {
        for (int64_t k = 0; k < p.s; ++k) y[at + k] = x[at + k] * a + b;
      });
      // MeanOut/VarianceOut may be the buffers of Mean/Variance: read before written.
      const double old_mean = mean_in[ch], old_var = var_in[ch];
      if (outs[0]) outs[0][ch] = static_cast<T>(old_mean * momentum + m.mean * (1 - momentum));
      if (outs[1]) outs[1][ch] = static_cast<T>(old_var * momentum + m.var * (1 - momentum));
      if (outs[2]) outs[2][ch] = static_cast<T>(m.mean);
      if (outs[3]) outs[3][ch] = static_cast<T>(inv_std);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* GradStats(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SyncNormPlan p;
    if (FleetStatus* st = Plan(kc, SyncNormOp::kGradStats, &p)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    const T* dy = Data<T>(Input(kc, "Y@GRAD"));
    const T* mean = Data<T>(Input(kc, "SavedMean"));
    const T* inv_std = Data<T>(Input(kc, "SavedVariance"));
    double* stats = Data<double>(Output(kc, "GradStats"));
    const FleetTensor* dscale_t = Output(kc, "Scale@GRAD");
    const FleetTensor* dbias_t = Output(kc, "Bias@GRAD");
    ParallelForEach(kc, p.c, p.n * p.s, [&](int64_t ch) {
      const double m = mean[ch], is = inv_std[ch];
      double dbias = 0, dscale = 0;
      ForRows(p, ch, [&](int64_t at) {
        for (int64_t k = 0; k < p.s; ++k) {
          dbias += dy[at + k];
          dscale += dy[at + k] * (x[at + k] - m) * is;
        }
      });
      stats[ch] = dbias;
      stats[p.c + ch] = dscale;
      if (dscale_t != nullptr) Data<T>(dscale_t)[ch] = static_cast<T>(dscale);
      if (dbias_t != nullptr) Data<T>(dbias_t)[ch] = static_cast<T>(dbias);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* Grad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SyncNormPlan p;
    if (FleetStatus* st = Plan(kc, SyncNormOp::kGrad, &p)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    const T* dy = Data<T>(Input(kc, "Y@GRAD"));
    const T* scale = Data<T>(Input(kc, "Scale"));
    const T* mean = Data<T>(Input(kc, "SavedMean"));
    const T* inv_std = Data<T>(Input(kc, "SavedVariance"));
    const double* stats = Data<double>(Input(kc, "Stats"));
    const double* grad_stats = Data<double>(Input(kc, "GradStats"));
    T* dx = Data<T>(Output(kc, "X@GRAD"));
    const double count = stats[2 * p.c];
    ParallelForEach(kc, p.c, p.n * p.s, [&](int64_t ch) {
      const double m = mean[ch], is = inv_std[ch], k0 = scale[ch] * is;
      const double sum_dy = grad_stats[ch], sum_dy_xhat = grad_stats[p.c + ch];
      ForRows(p, ch, [&](int64_t at) {
        for (int64_t k = 0; k < p.s; ++k) {
          const double xhat = (x[at + k] - m) * is;
          dx[at + k] = static_cast<T>(
              fleet::kernel::SyncNormDx(k0, dy[at + k], xhat, sum_dy, sum_dy_xhat, count));
        }
      });
    });
    return nullptr;
  });
}

template <typename T>
void AddSyncNorms(KernelList& list, int32_t dtype) {
  Add(list, "sync_batch_norm_stats", dtype, Stats<T>);
  Add(list, "sync_batch_norm", dtype, Forward<T>);
  Add(list, "sync_batch_norm_grad_stats", dtype, GradStats<T>);
  Add(list, "sync_batch_norm_grad", dtype, Grad<T>);
}

}  // namespace

void AddNnSyncNormKernels(KernelList& list) {
  AddSyncNorms<float>(list, FLEET_DTYPE_FLOAT32);
  AddSyncNorms<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cpu
