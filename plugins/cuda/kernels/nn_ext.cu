// group_norm and instance_norm (+ grads), float32 and float64, with the CPU plugin's definitions
// (plugins/cpu/kernels/nn_ext_kernels.cc) and its row view (plugins/common/group_norm_plan.h):
// instance_norm is groups = C and saves the inverse standard deviation, group_norm the
// variance.
//
// One block per row for the statistics and for X@GRAD, one block per channel for Scale@GRAD and
// Bias@GRAD; every sum is accumulated in double per thread and the threads' partials are added
// by the fixed tree of dense::BlockSum, so runs give the same bits and nothing uses atomics.
#include <algorithm>
#include <string>

#include "group_norm_plan.h"
#include "kernels/dense_groups.h"
#include "kernels/nn_groups.h"

namespace fleet_cuda {
namespace {

using dense::BlockSum;
using fleet::kernel::GroupNormView;
using fleet::kernel::NormDataGrad;
using fleet::kernel::NormInvStd;
using nn::OpName;
using nn::Require;

unsigned Grid(int64_t units) {
  return static_cast<unsigned>(std::clamp<int64_t>(units, 1, 65535));
}

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
const T* OptionalIn(const FleetTensor* t) {
  return t != nullptr ? Data<const T>(t) : nullptr;
}

template <typename T>
T* OptionalOut(const FleetTensor* t) {
  return t != nullptr ? Data<T>(t) : nullptr;
}

template <typename T>
struct ForwardArgs {
  GroupNormView v;
  const T* x;
  const T* scale;  // may be NULL, as may bias, mean and var
  const T* bias;
  T* y;
  T* mean;
  T* var;
  double eps;
  bool saves_inv_std;
};

template <typename T>
__global__ void GroupNormForward(ForwardArgs<T> p) {
  __shared__ double buf[kThreads];
  const int64_t width = p.v.Width();
  const double w = static_cast<double>(width);
  for (int64_t r = blockIdx.x; r < p.v.Rows(); r += gridDim.x) {
    const T* xs = p.x + r * width;
    T* ys = p.y + r * width;
    double sum = 0;
    for (int64_t k = threadIdx.x; k < width; k += blockDim.x) sum += xs[k];
    sum = BlockSum(sum, buf);
    const double mean = width > 0 ? sum / w : 0.0;
    double sq = 0;
    for (int64_t k = threadIdx.x; k < width; k += blockDim.x) {
      const double d = xs[k] - mean;
      sq += d * d;
    }
    sq = BlockSum(sq, buf);
    const double var = width > 0 ? sq / w : 0.0;
    const double inv_std = NormInvStd(var, p.eps);
    for (int64_t k = threadIdx.x; k < width; k += blockDim.x) {
      const int64_t ch = p.v.Channel(r, k);
      double out = (xs[k] - mean) * inv_std;
      if (p.scale != nullptr) out *= p.scale[ch];
      if (p.bias != nullptr) out += p.bias[ch];
      ys[k] = static_cast<T>(out);
    }
    if (threadIdx.x == 0) {
      if (p.mean != nullptr) p.mean[r] = static_cast<T>(mean);
      if (p.var != nullptr) p.var[r] = static_cast<T>(p.saves_inv_std ? inv_std : var);
    }
  }
}

template <typename T>
FleetStatus* GroupNormLaunch(void*, const FleetKernelContext* kc, void*) {
  GroupNormView v;
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = View(kc, x, &v)) return st;
  const NormSlots slots = SlotsOf(kc);
  const FleetTensor* y = Output(kc, "Y");
  const FleetTensor* mean = Output(kc, slots.mean);
  const FleetTensor* var = Output(kc, slots.var);
  if (FleetStatus* st = Require(kc, y, "Y")) return st;
  if (FleetStatus* st = ExpectNumel(kc, y, "Y", Numel(x))) return st;
  if (FleetStatus* st = ExpectNumel(kc, mean, slots.mean, v.Rows())) return st;
  if (FleetStatus* st = ExpectNumel(kc, var, slots.var, v.Rows())) return st;
  ForwardArgs<T> p;
  p.v = v;
  p.x = Data<const T>(x);
  p.scale = OptionalIn<T>(Input(kc, "Scale"));
  p.bias = OptionalIn<T>(Input(kc, "Bias"));
  p.y = Data<T>(y);
  p.mean = OptionalOut<T>(mean);
  p.var = OptionalOut<T>(var);
  p.eps = FloatAttr(kc, "epsilon", 1e-5);
  p.saves_inv_std = slots.saves_inv_std;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (v.Rows() > 0) GroupNormForward<T><<<Grid(v.Rows()), kThreads, 0, s->native>>>(p);
    return nullptr;
  });
}

template <typename T>
struct GradArgs {
  GroupNormView v;
  const T* x;
  const T* dy;
  const T* scale;  // may be NULL
  const T* mean;
  const T* var;    // the variance, or the inverse standard deviation when saves_inv_std
  T* dx;           // each output may be NULL
  T* dscale;
  T* dbias;
  double eps;
  bool saves_inv_std;
};

template <typename T>
__device__ inline double InvStdOf(const GradArgs<T>& p, int64_t r) {
  return p.saves_inv_std ? static_cast<double>(p.var[r]) : NormInvStd(p.var[r], p.eps);
}

// X@GRAD, a block per row.
template <typename T>
__global__ void GroupNormDataGrad(GradArgs<T> p) {
  __shared__ double buf[kThreads];
  const int64_t width = p.v.Width();
  for (int64_t r = blockIdx.x; r < p.v.Rows(); r += gridDim.x) {
    const T* xs = p.x + r * width;
    const T* ds = p.dy + r * width;
    const double inv_std = InvStdOf(p, r);
    const double mean = p.mean[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t k = threadIdx.x; k < width; k += blockDim.x) {
      const double g = p.scale != nullptr ? ds[k] * p.scale[p.v.Channel(r, k)] : ds[k];
      sum_g += g;
      sum_gx += g * (xs[k] - mean) * inv_std;
    }
    sum_g = BlockSum(sum_g, buf);
    sum_gx = BlockSum(sum_gx, buf);
    for (int64_t k = threadIdx.x; k < width; k += blockDim.x) {
      const double g = p.scale != nullptr ? ds[k] * p.scale[p.v.Channel(r, k)] : ds[k];
      const double xhat = (xs[k] - mean) * inv_std;
      p.dx[r * width + k] = static_cast<T>(
          NormDataGrad(g, xhat, inv_std, sum_g, sum_gx, static_cast<double>(width)));
    }
  }
}

// Scale@GRAD and Bias@GRAD, a block per channel summing over samples and spatial positions.
template <typename T>
__global__ void GroupNormParamGrad(GradArgs<T> p) {
  __shared__ double buf[kThreads];
  const int64_t per_channel = p.v.n * p.v.s;
  for (int64_t ch = blockIdx.x; ch < p.v.c; ch += gridDim.x) {
    double ds_acc = 0, db_acc = 0;
    for (int64_t t = threadIdx.x; t < per_channel; t += blockDim.x) {
      const int64_t b = t / p.v.s, i = t % p.v.s;
      const int64_t r = p.v.RowOf(b, ch);
      const int64_t o = p.v.OffsetOf(b, ch, i);
      const double d = p.dy[o];
      db_acc += d;
      ds_acc += d * (p.x[o] - p.mean[r]) * InvStdOf(p, r);
    }
    ds_acc = BlockSum(ds_acc, buf);
    db_acc = BlockSum(db_acc, buf);
    if (threadIdx.x == 0) {
      if (p.dscale != nullptr) p.dscale[ch] = static_cast<T>(ds_acc);
      if (p.dbias != nullptr) p.dbias[ch] = static_cast<T>(db_acc);
    }
  }
}

template <typename T>
FleetStatus* GroupNormGradLaunch(void*, const FleetKernelContext* kc, void*) {
  GroupNormView v;
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = View(kc, x, &v)) return st;
  const NormSlots slots = SlotsOf(kc);
  const FleetTensor* dy = Input(kc, "Y@GRAD");
  const FleetTensor* mean = Input(kc, slots.mean);
  const FleetTensor* var = Input(kc, slots.var);
  if (FleetStatus* st = Require(kc, dy, "Y@GRAD")) return st;
  if (FleetStatus* st = Require(kc, mean, slots.mean)) return st;
  if (FleetStatus* st = Require(kc, var, slots.var)) return st;
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dscale = Output(kc, "Scale@GRAD");
  const FleetTensor* dbias = Output(kc, "Bias@GRAD");
  if (FleetStatus* st = ExpectNumel(kc, dy, "Y@GRAD", Numel(x))) return st;
  if (FleetStatus* st = ExpectNumel(kc, dx, "X@GRAD", Numel(x))) return st;
  if (FleetStatus* st = ExpectNumel(kc, mean, slots.mean, v.Rows())) return st;
  if (FleetStatus* st = ExpectNumel(kc, var, slots.var, v.Rows())) return st;
  if (FleetStatus* st = ExpectNumel(kc, dscale, "Scale@GRAD", v.c)) return st;
  if (FleetStatus* st = ExpectNumel(kc, dbias, "Bias@GRAD", v.c)) return st;
  GradArgs<T> p;
  p.v = v;
  p.x = Data<const T>(x);
  p.dy = Data<const T>(dy);
  p.scale = OptionalIn<T>(Input(kc, "Scale"));
  p.mean = Data<const T>(mean);
  p.var = Data<const T>(var);
  p.dx = OptionalOut<T>(dx);
  p.dscale = OptionalOut<T>(dscale);
  p.dbias = OptionalOut<T>(dbias);
  p.eps = FloatAttr(kc, "epsilon", 1e-5);
  p.saves_inv_std = slots.saves_inv_std;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    // The parameter gradients go first: they read dY everywhere, and X@GRAD may share dY's
    // buffer.
    if ((p.dscale != nullptr || p.dbias != nullptr) && v.c > 0) {
      GroupNormParamGrad<T><<<Grid(v.c), kThreads, 0, s->native>>>(p);
    }
    if (p.dx != nullptr && v.Rows() > 0) {
      GroupNormDataGrad<T><<<Grid(v.Rows()), kThreads, 0, s->native>>>(p);
    }
    return nullptr;
  });
}

template <typename T>
void AddNorms(KernelList& list, int32_t dtype) {
  for (const char* type : {"group_norm", "instance_norm"}) {
    Add(list, type, dtype, GroupNormLaunch<T>);
  }
  for (const char* type : {"group_norm_grad", "instance_norm_grad"}) {
    Add(list, type, dtype, GroupNormGradLaunch<T>);
  }
}

}  // namespace

void AddNnExtKernels(KernelList& list) {
  AddNorms<float>(list, FLEET_DTYPE_FLOAT32);
  AddNorms<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
