// CPU kernels of adagrad, rmsprop, lamb, adamax and clip_by_norm, float32 and float64. The update
// rules are plugins/common/optimizer_formulas.h, shared with the CUDA plugin.
//
// As in optimizer_kernels.cc, each loop reads element i of every input before writing element
// i of any output, so outputs may alias their inputs, and scalars are read before anything is
// written. The whole-tensor norms (lamb's trust ratio, clip_by_norm) are summed in double in
// index order: lamb makes one pass for the norms and a second that recomputes the direction
// and writes, so nothing is allocated at launch.
#include <cmath>
#include <string>

#include "kernels/kernel_util.h"
#include "optimizer_formulas.h"

namespace fleet_cpu {
namespace {

namespace fk = fleet::kernel;

bool ReadScalar(const FleetTensor* t, double* out) {
  if (t == nullptr || t->data == nullptr || Numel(t) < 1) return false;
  switch (t->dtype) {
    case FLEET_DTYPE_FLOAT32: *out = *static_cast<const float*>(t->data); return true;
    case FLEET_DTYPE_FLOAT64: *out = *static_cast<const double*>(t->data); return true;
    default: return false;
  }
}

void WriteScalar(const FleetTensor* t, double v) {
  if (t->dtype == FLEET_DTYPE_FLOAT64) {
    *static_cast<double*>(t->data) = v;
  } else {
    *static_cast<float*>(t->data) = static_cast<float>(v);
  }
}

std::string Op(const FleetKernelContext* kc) { return kc->op_type ? kc->op_type : "kernel"; }

FleetStatus* Missing(const FleetKernelContext* kc, const char* what) {
  return InvalidArgument(Op(kc) + ": " + what + " is missing");
}

// `t` must be present with `n` elements of T's dtype.
template <typename T>
FleetStatus* Like(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                  int64_t n) {
  if (t == nullptr) return Missing(kc, slot);
  const int32_t want = sizeof(T) == 8 ? FLEET_DTYPE_FLOAT64 : FLEET_DTYPE_FLOAT32;
  if (t->dtype != want || Numel(t) != n) {
    return InvalidArgument(Op(kc) + ": " + slot + " must hold " + std::to_string(n) +
                           " elements of Param's dtype, got " + std::to_string(Numel(t)) +
                           " of dtype " + std::to_string(t->dtype));
  }
  return nullptr;
}

template <typename T>
FleetStatus* Adagrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* m = Input(kc, "Moment");
    const FleetTensor* po = Output(kc, "ParamOut");
    const FleetTensor* mo = Output(kc, "MomentOut");
    if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
    if (FleetStatus* s = Like<T>(kc, m, "Moment", n)) return s;
    if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
    if (FleetStatus* s = Like<T>(kc, mo, "MomentOut", n)) return s;
    double lr = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr)) return Missing(kc, "LearningRate");
    const T rate = static_cast<T>(lr);
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-6));
    const T* ps = Data<T>(p);
    const T* gs = Data<T>(g);
    const T* ms = Data<T>(m);
    T* pw = Data<T>(po);
    T* mw = Data<T>(mo);
    for (int64_t i = 0; i < n; ++i) {
      const fk::AdagradOut<T> o = fk::AdagradStep(ps[i], gs[i], ms[i], rate, eps);
      pw[i] = o.param;
      mw[i] = o.moment;
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* Rmsprop(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    const bool centered = BoolAttr(kc, "centered", false);
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* mom = Input(kc, "Moment");
    const FleetTensor* ms = Input(kc, "MeanSquare");
    const FleetTensor* mg = Input(kc, "MeanGrad");
    const FleetTensor* po = Output(kc, "ParamOut");
    const FleetTensor* momo = Output(kc, "MomentOut");
    const FleetTensor* mso = Output(kc, "MeanSquareOut");
    const FleetTensor* mgo = Output(kc, "MeanGradOut");
    if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
    if (FleetStatus* s = Like<T>(kc, mom, "Moment", n)) return s;
    if (FleetStatus* s = Like<T>(kc, ms, "MeanSquare", n)) return s;
    if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
    if (FleetStatus* s = Like<T>(kc, momo, "MomentOut", n)) return s;
    if (FleetStatus* s = Like<T>(kc, mso, "MeanSquareOut", n)) return s;
    if (centered) {
      if (FleetStatus* s = Like<T>(kc, mg, "MeanGrad", n)) return s;
      if (FleetStatus* s = Like<T>(kc, mgo, "MeanGradOut", n)) return s;
    }
    double lr = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr)) return Missing(kc, "LearningRate");
    const T rate = static_cast<T>(lr);
    const T rho = static_cast<T>(FloatAttr(kc, "decay", 0.9));
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-10));
    const T momentum = static_cast<T>(FloatAttr(kc, "momentum", 0.0));
    const T* ps = Data<T>(p);
    const T* gs = Data<T>(g);
    const T* moms = Data<T>(mom);
    const T* mss = Data<T>(ms);
    const T* mgs = centered ? Data<T>(mg) : nullptr;
    T* pw = Data<T>(po);
    T* momw = Data<T>(momo);
    T* msw = Data<T>(mso);
    T* mgw = centered ? Data<T>(mgo) : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const fk::RmspropOut<T> o =
          fk::RmspropStep(ps[i], gs[i], moms[i], mss[i], centered ? mgs[i] : T(0), rate, rho,
                          eps, momentum, centered);
      pw[i] = o.param;
      momw[i] = o.moment;
      msw[i] = o.mean_square;
      if (centered) mgw[i] = o.mean_grad;
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* Lamb(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* m1 = Input(kc, "Moment1");
    const FleetTensor* m2 = Input(kc, "Moment2");
    const FleetTensor* po = Output(kc, "ParamOut");
    const FleetTensor* m1o = Output(kc, "Moment1Out");
    const FleetTensor* m2o = Output(kc, "Moment2Out");
    if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
    if (FleetStatus* s = Like<T>(kc, m1, "Moment1", n)) return s;
    if (FleetStatus* s = Like<T>(kc, m2, "Moment2", n)) return s;
    if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
    if (FleetStatus* s = Like<T>(kc, m1o, "Moment1Out", n)) return s;
    if (FleetStatus* s = Like<T>(kc, m2o, "Moment2Out", n)) return s;
    double lr_d = 0, b1p_d = 0, b2p_d = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr_d)) return Missing(kc, "LearningRate");
    if (!ReadScalar(Input(kc, "Beta1Pow"), &b1p_d)) return Missing(kc, "Beta1Pow");
    if (!ReadScalar(Input(kc, "Beta2Pow"), &b2p_d)) return Missing(kc, "Beta2Pow");
    const T beta1 = static_cast<T>(FloatAttr(kc, "beta1", 0.9));
    const T beta2 = static_cast<T>(FloatAttr(kc, "beta2", 0.999));
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-6));
    const T wd = static_cast<T>(FloatAttr(kc, "weight_decay", 0.01));
    const T b1p = static_cast<T>(b1p_d), b2p = static_cast<T>(b2p_d);
    const T* ps = Data<T>(p);
    const T* gs = Data<T>(g);
    const T* m1s = Data<T>(m1);
    const T* m2s = Data<T>(m2);
    auto direction = [&](int64_t i) {
      return fk::LambDirection(ps[i], gs[i], m1s[i], m2s[i], beta1, beta2, b1p, b2p, eps, wd);
    };
    double p_sq = 0, r_sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double r = static_cast<double>(direction(i).r);
      p_sq += static_cast<double>(ps[i]) * ps[i];
      r_sq += r * r;
    }
    const T step = static_cast<T>(lr_d * fk::LambTrustRatio(p_sq, r_sq));
    T* pw = Data<T>(po);
    T* m1w = Data<T>(m1o);
    T* m2w = Data<T>(m2o);
    for (int64_t i = 0; i < n; ++i) {
      const fk::LambMoments<T> o = direction(i);
      const T param = ps[i];
      m1w[i] = o.moment1;
      m2w[i] = o.moment2;
      pw[i] = param - step * o.r;
    }
    if (const FleetTensor* o = Output(kc, "Beta1PowOut")) WriteScalar(o, b1p_d * beta1);
    if (const FleetTensor* o = Output(kc, "Beta2PowOut")) WriteScalar(o, b2p_d * beta2);
    return nullptr;
  });
}

template <typename T>
FleetStatus* Adamax(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* m = Input(kc, "Moment");
    const FleetTensor* u = Input(kc, "InfNorm");
    const FleetTensor* po = Output(kc, "ParamOut");
    const FleetTensor* mo = Output(kc, "MomentOut");
    const FleetTensor* uo = Output(kc, "InfNormOut");
    if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
    if (FleetStatus* s = Like<T>(kc, m, "Moment", n)) return s;
    if (FleetStatus* s = Like<T>(kc, u, "InfNorm", n)) return s;
    if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
    if (FleetStatus* s = Like<T>(kc, mo, "MomentOut", n)) return s;
    if (FleetStatus* s = Like<T>(kc, uo, "InfNormOut", n)) return s;
    double lr = 0, b1p = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr)) return Missing(kc, "LearningRate");
    if (!ReadScalar(Input(kc, "Beta1Pow"), &b1p)) return Missing(kc, "Beta1Pow");
    const T beta1 = static_cast<T>(FloatAttr(kc, "beta1", 0.9));
    const T beta2 = static_cast<T>(FloatAttr(kc, "beta2", 0.999));
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-8));
    const T* ps = Data<T>(p);
    const T* gs = Data<T>(g);
    const T* ms = Data<T>(m);
    const T* us = Data<T>(u);
    T* pw = Data<T>(po);
    T* mw = Data<T>(mo);
    T* uw = Data<T>(uo);
    for (int64_t i = 0; i < n; ++i) {
      const fk::AdamaxOut<T> o = fk::AdamaxStep(ps[i], gs[i], ms[i], us[i], static_cast<T>(lr),
                                                beta1, beta2, eps, static_cast<T>(b1p));
      pw[i] = o.param;
      mw[i] = o.moment;
      uw[i] = o.inf_norm;
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* ClipByNorm(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    if (x == nullptr) return Missing(kc, "X");
    const int64_t n = Numel(x);
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* s = Like<T>(kc, out, "Out", n)) return s;
    const T* xs = Data<T>(x);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(xs[i]) * xs[i];
    const T scale = static_cast<T>(fk::ClipByNormScale(sq, FloatAttr(kc, "max_norm", 1.0)));
    T* os = Data<T>(out);
    for (int64_t i = 0; i < n; ++i) os[i] = xs[i] * scale;
    return nullptr;
  });
}

}  // namespace

void AddOptimizerExtKernels(KernelList& list) {
  Add(list, "adagrad", FLEET_DTYPE_FLOAT32, Adagrad<float>);
  Add(list, "adagrad", FLEET_DTYPE_FLOAT64, Adagrad<double>);
  Add(list, "rmsprop", FLEET_DTYPE_FLOAT32, Rmsprop<float>);
  Add(list, "rmsprop", FLEET_DTYPE_FLOAT64, Rmsprop<double>);
  Add(list, "lamb", FLEET_DTYPE_FLOAT32, Lamb<float>);
  Add(list, "lamb", FLEET_DTYPE_FLOAT64, Lamb<double>);
  Add(list, "adamax", FLEET_DTYPE_FLOAT32, Adamax<float>);
  Add(list, "adamax", FLEET_DTYPE_FLOAT64, Adamax<double>);
  Add(list, "clip_by_norm", FLEET_DTYPE_FLOAT32, ClipByNorm<float>);
  Add(list, "clip_by_norm", FLEET_DTYPE_FLOAT64, ClipByNorm<double>);
}

}  // namespace fleet_cpu
