// group_norm and instance_norm (+ grads), float32 and float64, as loops: oneDNN 2.7 has no group
// normalisation, and both ops share one row view (plugins/common/group_norm_plan.h), instance
// norm being groups = C. Statistics accumulate in double in element order; instance_norm's
// SavedVariance is the inverse standard deviation, group_norm's Variance the variance.
#include <algorithm>
#include <cmath>

#include "group_norm_plan.h"
#include "kernels/nn_kernels.h"

namespace fleet_cpu {
namespace {

using fleet::kernel::GroupNormView;
using fleet::kernel::NormDataGrad;
using fleet::kernel::NormInvStd;

// Slot names and statistics convention of one of the two ops.
struct NormSlots {
  const char* mean;
  const char* var;
  bool saves_inv_std;
};

NormSlots SlotsOf(const FleetKernelContext* kc) {
  if (OpName(kc).rfind("instance_norm", 0) == 0) return {"SavedMean", "SavedVariance", true};
  return {"Mean", "Variance", false};
}

FleetStatus* ExpectNumel(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                         int64_t numel) {
  if (t == nullptr || Numel(t) == numel) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot + " must have " + std::to_string(numel) +
                         " elements, got " + std::to_string(Numel(t)));
}

FleetStatus* View(const FleetKernelContext* kc, const FleetTensor* x, GroupNormView* v) {
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  if (x->ndim < 2) return InvalidArgument(OpName(kc) + ": X must have at least 2 dims");
  v->n = x->dims[0];
  v->c = x->dims[1];
  v->s = 1;
  for (int32_t i = 2; i < x->ndim; ++i) v->s *= x->dims[i];
  v->groups = SlotsOf(kc).saves_inv_std ? std::max<int64_t>(v->c, 1) : IntAttr(kc, "groups", 1);
  if (v->groups < 1 || (v->c > 0 && v->c % v->groups != 0)) {
    return InvalidArgument(OpName(kc) + ": " + std::to_string(v->c) +
                           " channels are not divisible by groups " + std::to_string(v->groups));
  }
  for (const char* slot : {"Scale", "Bias"}) {
    if (FleetStatus* st = ExpectNumel(kc, Input(kc, slot), slot, v->c)) return st;
  }
  return nullptr;
}

template <typename T>
const T* OptionalData(const FleetTensor* t) {
  return t != nullptr ? Data<T>(t) : nullptr;
}

template <typename T>
FleetStatus* GroupNorm(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    GroupNormView v;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = View(kc, xt, &v)) return st;
    const NormSlots slots = SlotsOf(kc);
    const FleetTensor* yt = Output(kc, "Y");
    if (FleetStatus* st = Require(kc, yt, "Y")) return st;
    const FleetTensor* mean_t = Output(kc, slots.mean);
    const FleetTensor* var_t = Output(kc, slots.var);
    if (FleetStatus* st = ExpectNumel(kc, mean_t, slots.mean, v.Rows())) return st;
    if (FleetStatus* st = ExpectNumel(kc, var_t, slots.var, v.Rows())) return st;
    const T* x = Data<T>(xt);
    const T* scale = OptionalData<T>(Input(kc, "Scale"));
    const T* bias = OptionalData<T>(Input(kc, "Bias"));
    T* y = Data<T>(yt);
    T* mean_out = mean_t != nullptr ? Data<T>(mean_t) : nullptr;
    T* var_out = var_t != nullptr ? Data<T>(var_t) : nullptr;
    const double eps = FloatAttr(kc, "epsilon", 1e-5);
    const int64_t width = v.Width();
    ParallelForEach(kc, v.Rows(), width, [&](int64_t r) {
      const T* xs = x + r * width;
      T* ys = y + r * width;
      double sum = 0;
      for (int64_t k = 0; k < width; ++k) sum += xs[k];
      const double mean = width > 0 ? sum / static_cast<double>(width) : 0.0;
      double sq = 0;
      for (int64_t k = 0; k < width; ++k) sq += (xs[k] - mean) * (xs[k] - mean);
      const double var = width > 0 ? sq / static_cast<double>(width) : 0.0;
      const double inv_std = NormInvStd(var, eps);
      for (int64_t k = 0; k < width; ++k) {
        const int64_t ch = v.Channel(r, k);
        double out = (xs[k] - mean) * inv_std;
        if (scale != nullptr) out *= scale[ch];
        if (bias != nullptr) out += bias[ch];
        ys[k] = static_cast<T>(out);
      }
      if (mean_out != nullptr) mean_out[r] = static_cast<T>(mean);
      if (var_out != nullptr) var_out[r] = static_cast<T>(slots.saves_inv_std ? inv_std : var);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* GroupNormGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    GroupNormView v;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = View(kc, xt, &v)) return st;
    const NormSlots slots = SlotsOf(kc);
    const FleetTensor* dyt = Input(kc, "Y@GRAD");
    const FleetTensor* mean_t = Input(kc, slots.mean);
    const FleetTensor* var_t = Input(kc, slots.var);
    if (FleetStatus* st = Require(kc, dyt, "Y@GRAD")) return st;
    if (FleetStatus* st = Require(kc, mean_t, slots.mean)) return st;
    if (FleetStatus* st = Require(kc, var_t, slots.var)) return st;
    if (FleetStatus* st = ExpectNumel(kc, dyt, "Y@GRAD", Numel(xt))) return st;
    if (FleetStatus* st = ExpectNumel(kc, mean_t, slots.mean, v.Rows())) return st;
    if (FleetStatus* st = ExpectNumel(kc, var_t, slots.var, v.Rows())) return st;
    const T* x = Data<T>(xt);
    const T* dy = Data<T>(dyt);
    const T* scale = OptionalData<T>(Input(kc, "Scale"));
    const T* mean = Data<T>(mean_t);
    const T* var = Data<T>(var_t);
    const double eps = FloatAttr(kc, "epsilon", 1e-5);
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    const FleetTensor* dscale_t = Output(kc, "Scale@GRAD");
    const FleetTensor* dbias_t = Output(kc, "Bias@GRAD");
    const int64_t width = v.Width();
    auto inv_std_of = [&](int64_t r) {
      return slots.saves_inv_std ? static_cast<double>(var[r]) : NormInvStd(var[r], eps);
    };
    // The parameter gradients first: X@GRAD may share Y@GRAD's buffer.
    if (dscale_t != nullptr || dbias_t != nullptr) {
      T* dscale = dscale_t != nullptr ? Data<T>(dscale_t) : nullptr;
      T* dbias = dbias_t != nullptr ? Data<T>(dbias_t) : nullptr;
      ParallelForEach(kc, v.c, v.n * v.s, [&](int64_t ch) {
        double ds_acc = 0, db_acc = 0;
        for (int64_t b = 0; b < v.n; ++b) {
          const int64_t r = v.RowOf(b, ch);
          const double inv_std = inv_std_of(r);
          for (int64_t i = 0; i < v.s; ++i) {
            const int64_t o = v.OffsetOf(b, ch, i);
            db_acc += dy[o];
            ds_acc += dy[o] * (x[o] - mean[r]) * inv_std;
          }
        }
        if (dscale != nullptr) dscale[ch] = static_cast<T>(ds_acc);
        if (dbias != nullptr) dbias[ch] = static_cast<T>(db_acc);
      });
    }
    if (dxt != nullptr) {
      T* dx = Data<T>(dxt);
      ParallelForEach(kc, v.Rows(), width, [&](int64_t r) {
        const T* xs = x + r * width;
        const T* ds = dy + r * width;
        const double inv_std = inv_std_of(r);
        double sum_g = 0, sum_gx = 0;
        for (int64_t k = 0; k < width; ++k) {
          const double g = scale != nullptr ? ds[k] * scale[v.Channel(r, k)] : ds[k];
          sum_g += g;
          sum_gx += g * (xs[k] - mean[r]) * inv_std;
        }
        // Each element's gradient is computed before it is written, so dx may alias dy.
        for (int64_t k = 0; k < width; ++k) {
          const double g = scale != nullptr ? ds[k] * scale[v.Channel(r, k)] : ds[k];
          const double xhat = (xs[k] - mean[r]) * inv_std;
          dx[r * width + k] = static_cast<T>(
              NormDataGrad(g, xhat, inv_std, sum_g, sum_gx, static_cast<double>(width)));
        }
      });
    }
    return nullptr;
  });
}

}  // namespace

void AddNnExtKernels(KernelList& list) {
  for (const char* type : {"group_norm", "instance_norm"}) {
    Add(list, type, FLEET_DTYPE_FLOAT32, GroupNorm<float>);
    Add(list, type, FLEET_DTYPE_FLOAT64, GroupNorm<double>);
  }
  for (const char* type : {"group_norm_grad", "instance_norm_grad"}) {
    Add(list, type, FLEET_DTYPE_FLOAT32, GroupNormGrad<float>);
    Add(list, type, FLEET_DTYPE_FLOAT64, GroupNormGrad<double>);
  }
}

}  // namespace fleet_cpu
