// The sync_batch_norm ops (host/ops/nn_norm_ops.cc), float32 and float64, with the CPU plugin's
// definitions (plugins/cpu/kernels/nn_sync_norm_kernels.cc; shapes and formulas shared in
// plugins/common/sync_norm_plan.h). X is viewed as [N, C, S].
//
// The sums run one block per channel, accumulate in double and add the threads' partial sums
// with the fixed tree of BlockSum, as batch_norm's do here, so every run gives the same bits.
// The element-wise passes (Y, X@GRAD) run one block per channel too: the channel's constants
// are computed once per block, and a channel is S * N elements, enough to fill a block.
#include <algorithm>
#include <cmath>

#include "kernels/dense_groups.h"
#include "sync_norm_plan.h"

namespace fleet_cuda {
namespace {

using dense::BlockSum;
using fleet::kernel::SyncNormOp;
using fleet::kernel::SyncNormPlan;

unsigned Grid(int64_t channels) {
  return static_cast<unsigned>(std::clamp<int64_t>(channels, 1, 65535));
}

// The flat index of element q (0 <= q < N * S) of channel ch.
__device__ inline int64_t At(const SyncNormPlan& p, int64_t ch, int64_t q) {
  const int64_t n = q / p.s, k = q - n * p.s;
  return (n * p.c + ch) * p.s + k;
}

template <typename T>
__global__ void StatsKernel(SyncNormPlan p, const T* x, double* stats) {
  __shared__ double buf[kThreads];
  const int64_t per_channel = p.n * p.s;
  if (blockIdx.x == 0 && threadIdx.x == 0) stats[2 * p.c] = static_cast<double>(per_channel);
  for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
    double sum = 0, sq = 0;
    for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
      const double v = x[At(p, ch, q)];
      sum += v;
      sq += v * v;
    }
    sum = BlockSum(sum, buf);
    sq = BlockSum(sq, buf);
    if (threadIdx.x == 0) {
      stats[ch] = sum;
      stats[p.c + ch] = sq;
    }
  }
}

template <typename T>
struct ForwardArgs {
  SyncNormPlan p;
  const T *x, *scale, *bias, *mean_in, *var_in;
  const double* stats;
  T* y;
  T *mean_out, *var_out, *saved_mean, *saved_var;  // each may be NULL
  double eps, momentum;
};

template <typename T>
__global__ void ForwardKernel(ForwardArgs<T> a) {
  const SyncNormPlan& p = a.p;
  const int64_t per_channel = p.n * p.s;
  for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
    const fleet::kernel::SyncMoments m = fleet::kernel::SyncNormMoments(a.stats, p.c, ch);
    const double inv_std = 1.0 / sqrt(m.var + a.eps);
    const T scale = static_cast<T>(a.scale[ch] * inv_std);
    const T shift = static_cast<T>(a.bias[ch] - m.mean * a.scale[ch] * inv_std);
    // MeanOut/VarianceOut may be the buffers of Mean/Variance: every thread reads the old
    // values before the barrier, thread 0 writes after it.
    const double old_mean = a.mean_in[ch], old_var = a.var_in[ch];
    for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
      const int64_t i = At(p, ch, q);
      a.y[i] = a.x[i] * scale + shift;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const double keep = a.momentum, take = 1 - a.momentum;
      if (a.mean_out) a.mean_out[ch] = static_cast<T>(old_mean * keep + m.mean * take);
      if (a.var_out) a.var_out[ch] = static_cast<T>(old_var * keep + m.var * take);
      if (a.saved_mean) a.saved_mean[ch] = static_cast<T>(m.mean);
      if (a.saved_var) a.saved_var[ch] = static_cast<T>(inv_std);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void GradStatsKernel(SyncNormPlan p, const T* x, const T* dy, const T* mean,
                                const T* inv_std, double* stats, T* dscale, T* dbias) {
  __shared__ double buf[kThreads];
  const int64_t per_channel = p.n * p.s;
  for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
    const double m = mean[ch], is = inv_std[ch];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
      const int64_t i = At(p, ch, q);
      sum_dy += dy[i];
      sum_dy_xhat += dy[i] * (x[i] - m) * is;
    }
    sum_dy = BlockSum(sum_dy, buf);
    sum_dy_xhat = BlockSum(sum_dy_xhat, buf);
    if (threadIdx.x == 0) {
      stats[ch] = sum_dy;
      stats[p.c + ch] = sum_dy_xhat;
      if (dscale != nullptr) dscale[ch] = static_cast<T>(sum_dy_xhat);
      if (dbias != nullptr) dbias[ch] = static_cast<T>(sum_dy);
    }
  }
}

template <typename T>
__global__ void GradKernel(SyncNormPlan p, const T* x, const T* dy, const T* scale,
                           const T* mean, const T* inv_std, const double* stats,
                           const double* grad_stats, T* dx) {
  const int64_t per_channel = p.n * p.s;
  const double count = stats[2 * p.c];
  for (int64_t ch = blockIdx.x; ch < p.c; ch += gridDim.x) {
    const double m = mean[ch], is = inv_std[ch], k0 = scale[ch] * is;
    const double sum_dy = grad_stats[ch], sum_dy_xhat = grad_stats[p.c + ch];
    for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
      const int64_t i = At(p, ch, q);
      const double xhat = (x[i] - m) * is;
      dx[i] = static_cast<T>(
          fleet::kernel::SyncNormDx(k0, dy[i], xhat, sum_dy, sum_dy_xhat, count));
    }
  }
}

FleetStatus* Plan(const FleetKernelContext* kc, SyncNormOp op, SyncNormPlan* p) {
  return FromPlan(fleet::kernel::PlanSyncNorm(kc, op, p));
}

template <typename T>
T* OutputOrNull(const FleetKernelContext* kc, const char* slot) {
  const FleetTensor* t = Output(kc, slot);
  return t != nullptr ? Data<T>(t) : nullptr;
}

template <typename T>
FleetStatus* StatsLaunch(void*, const FleetKernelContext* kc, void*) {
  SyncNormPlan p;
  if (FleetStatus* st = Plan(kc, SyncNormOp::kStats, &p)) return st;
  const T* x = Data<const T>(Input(kc, "X"));
  double* stats = Data<double>(Output(kc, "Stats"));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    // Launched even without channels: block 0 writes the count.
    StatsKernel<T><<<Grid(p.c), kThreads, 0, s->native>>>(p, x, stats);
    return nullptr;
  });
}

template <typename T>
FleetStatus* ForwardLaunch(void*, const FleetKernelContext* kc, void*) {
  ForwardArgs<T> a;
  if (FleetStatus* st = Plan(kc, SyncNormOp::kForward, &a.p)) return st;
  a.x = Data<const T>(Input(kc, "X"));
  a.scale = Data<const T>(Input(kc, "Scale"));
  a.bias = Data<const T>(Input(kc, "Bias"));
  a.mean_in = Data<const T>(Input(kc, "Mean"));
  a.var_in = Data<const T>(Input(kc, "Variance"));
  a.stats = Data<const double>(Input(kc, "Stats"));
  a.y = Data<T>(Output(kc, "Y"));
  a.mean_out = OutputOrNull<T>(kc, "MeanOut");
  a.var_out = OutputOrNull<T>(kc, "VarianceOut");
  a.saved_mean = OutputOrNull<T>(kc, "SavedMean");
  a.saved_var = OutputOrNull<T>(kc, "SavedVariance");
  a.eps = FloatAttr(kc, "epsilon", 1e-5);
  a.momentum = FloatAttr(kc, "momentum", 0.9);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (a.p.c > 0) ForwardKernel<T><<<Grid(a.p.c), kThreads, 0, s->native>>>(a);
    return nullptr;
  });
}

template <typename T>
FleetStatus* GradStatsLaunch(void*, const FleetKernelContext* kc, void*) {
  SyncNormPlan p;
  if (FleetStatus* st = Plan(kc, SyncNormOp::kGradStats, &p)) return st;
  const T* x = Data<const T>(Input(kc, "X"));
  const T* dy = Data<const T>(Input(kc, "Y@GRAD"));
  const T* mean = Data<const T>(Input(kc, "SavedMean"));
  const T* inv_std = Data<const T>(Input(kc, "SavedVariance"));
  double* stats = Data<double>(Output(kc, "GradStats"));
  T* dscale = OutputOrNull<T>(kc, "Scale@GRAD");
  T* dbias = OutputOrNull<T>(kc, "Bias@GRAD");
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (p.c > 0) {
      GradStatsKernel<T><<<Grid(p.c), kThreads, 0, s->native>>>(p, x, dy, mean, inv_std, stats,
                                                                  dscale, dbias);
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* GradLaunch(void*, const FleetKernelContext* kc, void*) {
  SyncNormPlan p;
  if (FleetStatus* st = Plan(kc, SyncNormOp::kGrad, &p)) return st;
  const T* x = Data<const T>(Input(kc, "X"));
  const T* dy = Data<const T>(Input(kc, "Y@GRAD"));
  const T* scale = Data<const T>(Input(kc, "Scale"));
  const T* mean = Data<const T>(Input(kc, "SavedMean"));
  const T* inv_std = Data<const T>(Input(kc, "SavedVariance"));
  const double* stats = Data<const double>(Input(kc, "Stats"));
  const double* grad_stats = Data<const double>(Input(kc, "GradStats"));
  T* dx = Data<T>(Output(kc, "X@GRAD"));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (p.c > 0) {
      GradKernel<T><<<Grid(p.c), kThreads, 0, s->native>>>(p, x, dy, scale, mean, inv_std,
                                                             stats, grad_stats, dx);
    }
    return nullptr;
  });
}

template <typename T>
void AddSyncNorms(KernelList& list, int32_t dtype) {
  Add(list, "sync_batch_norm_stats", dtype, StatsLaunch<T>);
  Add(list, "sync_batch_norm", dtype, ForwardLaunch<T>);
  Add(list, "sync_batch_norm_grad_stats", dtype, GradStatsLaunch<T>);
  Add(list, "sync_batch_norm_grad", dtype, GradLaunch<T>);
}

}  // namespace

void AddDenseSyncNormKernels(KernelList& list) {
  AddSyncNorms<float>(list, FLEET_DTYPE_FLOAT32);
  AddSyncNorms<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
