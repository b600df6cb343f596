// Kernels of sigmoid_cross_entropy_with_logits, bce_loss, log_loss, huber_loss, smooth_l1_loss,
// margin_rank_loss, kldiv_loss and label_smooth (+ grads), float32 and float64. The per-element
// formulas are plugins/common/loss_formulas.h, shared with the CUDA plugin; the loops here only
// lay them out and reduce. Sums run in double in index order, so a result does not depend on threads.
#include <cmath>
#include <string>

#include "kernels/nn_kernels.h"
#include "loss_formulas.h"

namespace fleet_cpu {
namespace {

namespace fk = fleet::kernel;

// `t` must be present with `n` elements (the host checked dtypes and shapes already; this
// guards against a tensor bound to the wrong slot).
FleetStatus* Sized(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                   int64_t n) {
  if (FleetStatus* st = Require(kc, t, slot)) return st;
  if (Numel(t) == n) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot + " has " + std::to_string(Numel(t)) +
                         " elements, expected " + std::to_string(n));
}

// ---- sigmoid_cross_entropy_with_logits -----------------------------------------------------

template <typename T>
T SigmoidCeDivisor(const FleetKernelContext* kc, const T* label, int64_t n, int64_t ignore) {
  if (!BoolAttr(kc, "normalize", false)) return T(1);
  double kept = 0;
  for (int64_t i = 0; i < n; ++i) kept += fk::SigmoidCeIgnored(label[i], ignore) ? 0.0 : 1.0;
  return fk::SigmoidCeNorm<T>(kept);
}

template <typename T>
FleetStatus* SigmoidCe(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* st = Require(kc, x, "X")) return st;
    const int64_t n = Numel(x);
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* st = Sized(kc, label, "Label", n)) return st;
    if (FleetStatus* st = Sized(kc, out, "Out", n)) return st;
    const int64_t ignore = IntAttr(kc, "ignore_index", -100);
    const T* xs = Data<T>(x);
    const T* ls = Data<T>(label);
    T* os = Data<T>(out);
    const T div = SigmoidCeDivisor(kc, ls, n, ignore);
    for (int64_t i = 0; i < n; ++i) {
      os[i] = fk::SigmoidCeIgnored(ls[i], ignore) ? T(0) : fk::SigmoidCe(xs[i], ls[i]) / div;
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* SigmoidCeGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* st = Require(kc, x, "X")) return st;
    const int64_t n = Numel(x);
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (FleetStatus* st = Sized(kc, label, "Label", n)) return st;
    if (FleetStatus* st = Sized(kc, dout, "Out@GRAD", n)) return st;
    if (FleetStatus* st = Sized(kc, dx, "X@GRAD", n)) return st;
    const int64_t ignore = IntAttr(kc, "ignore_index", -100);
    const T* xs = Data<T>(x);
    const T* ls = Data<T>(label);
    const T* ds = Data<T>(dout);
    T* gs = Data<T>(dx);
    const T div = SigmoidCeDivisor(kc, ls, n, ignore);
    for (int64_t i = 0; i < n; ++i) {
      gs[i] = fk::SigmoidCeIgnored(ls[i], ignore) ? T(0)
                                                  : fk::SigmoidCeGrad(xs[i], ls[i]) * ds[i] / div;
    }
    return nullptr;
  });
}

// ---- bce_loss, log_loss ------------------------------------------------------------------------

// kLog selects log_loss (slots Predicted, Labels, Loss; attribute epsilon), else bce_loss.
template <typename T, bool kLog>
FleetStatus* ProbLoss(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const char* xslot = kLog ? "Predicted" : "X";
    const FleetTensor* x = Input(kc, xslot);
    if (FleetStatus* st = Require(kc, x, xslot)) return st;
    const int64_t n = Numel(x);
    const char* lslot = kLog ? "Labels" : "Label";
    const char* oslot = kLog ? "Loss" : "Out";
    const FleetTensor* label = Input(kc, lslot);
    const FleetTensor* out = Output(kc, oslot);
    if (FleetStatus* st = Sized(kc, label, lslot, n)) return st;
    if (FleetStatus* st = Sized(kc, out, oslot, n)) return st;
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-4));
    const T* xs = Data<T>(x);
    const T* ls = Data<T>(label);
    T* os = Data<T>(out);
    for (int64_t i = 0; i < n; ++i) {
      os[i] = kLog ? fk::LogLoss(xs[i], ls[i], eps) : fk::Bce(xs[i], ls[i]);
    }
    return nullptr;
  });
}

template <typename T, bool kLog>
FleetStatus* ProbLossGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const char* xslot = kLog ? "Predicted" : "X";
    const FleetTensor* dx = Output(kc, kLog ? "Predicted@GRAD" : "X@GRAD");
    if (dx == nullptr) return nullptr;
    const FleetTensor* x = Input(kc, xslot);
    if (FleetStatus* st = Require(kc, x, xslot)) return st;
    const int64_t n = Numel(x);
    const char* lslot = kLog ? "Labels" : "Label";
    const char* dslot = kLog ? "Loss@GRAD" : "Out@GRAD";
    const FleetTensor* label = Input(kc, lslot);
    const FleetTensor* dout = Input(kc, dslot);
    if (FleetStatus* st = Sized(kc, label, lslot, n)) return st;
    if (FleetStatus* st = Sized(kc, dout, dslot, n)) return st;
    if (FleetStatus* st = Sized(kc, dx, "the input gradient", n)) return st;
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-4));
    const T* xs = Data<T>(x);
    const T* ls = Data<T>(label);
    const T* ds = Data<T>(dout);
    T* gs = Data<T>(dx);
    for (int64_t i = 0; i < n; ++i) {
      const T d = kLog ? fk::LogLossGrad(xs[i], ls[i], eps) : fk::BceGrad(xs[i], ls[i]);
      gs[i] = d * ds[i];
    }
    return nullptr;
  });
}

// ---- huber_loss ------------------------------------------------------------------------------

template <typename T>
FleetStatus* Huber(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* st = Require(kc, x, "X")) return st;
    const int64_t n = Numel(x);
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* out = Output(kc, "Out");
    const FleetTensor* res = Output(kc, "Residual");
    if (FleetStatus* st = Sized(kc, y, "Y", n)) return st;
    if (FleetStatus* st = Sized(kc, out, "Out", n)) return st;
    if (res != nullptr) {
      if (FleetStatus* st = Sized(kc, res, "Residual", n)) return st;
    }
    const T delta = static_cast<T>(FloatAttr(kc, "delta", 1.0));
    const T* xs = Data<T>(x);
    const T* ys = Data<T>(y);
    T* os = Data<T>(out);
    T* rs = res != nullptr ? Data<T>(res) : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const T r = ys[i] - xs[i];
      if (rs != nullptr) rs[i] = r;
      os[i] = fk::Huber(r, delta);
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* HuberGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* res = Input(kc, "Residual");
    if (FleetStatus* st = Require(kc, res, "Residual")) return st;
    const int64_t n = Numel(res);
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (FleetStatus* st = Sized(kc, dout, "Out@GRAD", n)) return st;
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    if (dx != nullptr) {
      if (FleetStatus* st = Sized(kc, dx, "X@GRAD", n)) return st;
    }
    if (dy != nullptr) {
      if (FleetStatus* st = Sized(kc, dy, "Y@GRAD", n)) return st;
    }
    const T delta = static_cast<T>(FloatAttr(kc, "delta", 1.0));
    const T* rs = Data<T>(res);
    const T* ds = Data<T>(dout);
    T* gx = dx != nullptr ? Data<T>(dx) : nullptr;
    T* gy = dy != nullptr ? Data<T>(dy) : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const T g = fk::HuberGrad(rs[i], delta) * ds[i];
      if (gx != nullptr) gx[i] = -g;
      if (gy != nullptr) gy[i] = g;
    }
    return nullptr;
  });
}

// ---- smooth_l1_loss --------------------------------------------------------------------------

// Optional InsideWeight / OutsideWeight: NULL data means all ones.
template <typename T>
FleetStatus* OptionalWeight(const FleetKernelContext* kc, const char* slot, int64_t n,
                            const T** w) {
  const FleetTensor* t = Input(kc, slot);
  *w = nullptr;
  if (t == nullptr) return nullptr;
  if (FleetStatus* st = Sized(kc, t, slot, n)) return st;
  *w = Data<T>(t);
  return nullptr;
}

template <typename T>
T Sigma2(const FleetKernelContext* kc) {
  const T sigma = static_cast<T>(FloatAttr(kc, "sigma", 1.0));
  return sigma * sigma;
}

template <typename T>
FleetStatus* SmoothL1(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* st = Require(kc, x, "X")) return st;
    if (x->ndim < 2) return InvalidArgument(OpName(kc) + ": X must have rank >= 2");
    const int64_t n = Numel(x);
    const int64_t rows = x->dims[0];
    const int64_t cols = rows > 0 ? n / rows : 0;
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* diff = Output(kc, "Diff");
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* st = Sized(kc, y, "Y", n)) return st;
    if (FleetStatus* st = Sized(kc, out, "Out", rows)) return st;
    if (diff != nullptr) {
      if (FleetStatus* st = Sized(kc, diff, "Diff", n)) return st;
    }
    const T *win = nullptr, *wout = nullptr;
    if (FleetStatus* st = OptionalWeight(kc, "InsideWeight", n, &win)) return st;
    if (FleetStatus* st = OptionalWeight(kc, "OutsideWeight", n, &wout)) return st;
    const T sigma2 = Sigma2<T>(kc);
    const T* xs = Data<T>(x);
    const T* ys = Data<T>(y);
    T* os = Data<T>(out);
    T* dd = diff != nullptr ? Data<T>(diff) : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      T sum = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t i = r * cols + j;
        T d = xs[i] - ys[i];
        if (win != nullptr) d *= win[i];
        if (dd != nullptr) dd[i] = d;
        T v = fk::SmoothL1(d, sigma2);
        if (wout != nullptr) v *= wout[i];
        sum += v;
      }
      os[r] = sum;
    }
    return nullptr;
  });
}

// The true derivative, InsideWeight included (Paddle's kernel leaves it out, which agrees for
// the 0/1 weights it is used with, since Diff is 0 where the weight is).
template <typename T>
FleetStatus* SmoothL1Grad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* diff = Input(kc, "Diff");
    if (FleetStatus* st = Require(kc, diff, "Diff")) return st;
    if (diff->ndim < 2) return InvalidArgument(OpName(kc) + ": Diff must have rank >= 2");
    const int64_t n = Numel(diff);
    const int64_t rows = diff->dims[0];
    const int64_t cols = rows > 0 ? n / rows : 0;
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (FleetStatus* st = Sized(kc, dout, "Out@GRAD", rows)) return st;
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    if (dx != nullptr) {
      if (FleetStatus* st = Sized(kc, dx, "X@GRAD", n)) return st;
    }
    if (dy != nullptr) {
      if (FleetStatus* st = Sized(kc, dy, "Y@GRAD", n)) return st;
    }
    const T *win = nullptr, *wout = nullptr;
    if (FleetStatus* st = OptionalWeight(kc, "InsideWeight", n, &win)) return st;
    if (FleetStatus* st = OptionalWeight(kc, "OutsideWeight", n, &wout)) return st;
    const T sigma2 = Sigma2<T>(kc);
    const T* ds = Data<T>(diff);
    const T* go = Data<T>(dout);
    T* gx = dx != nullptr ? Data<T>(dx) : nullptr;
    T* gy = dy != nullptr ? Data<T>(dy) : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      T g = fk::SmoothL1Grad(ds[i], sigma2) * go[cols > 0 ? i / cols : 0];
      if (win != nullptr) g *= win[i];
      if (wout != nullptr) g *= wout[i];
      if (gx != nullptr) gx[i] = g;
      if (gy != nullptr) gy[i] = -g;
    }
    return nullptr;
  });
}

// ---- kldiv_loss -------------------------------------------------------------------------------

enum class Reduction { kNone, kMean, kBatchMean, kSum };

FleetStatus* ReadReduction(const FleetKernelContext* kc, Reduction* r) {
  const std::string s(StringAttr(kc, "reduction"));
  if (s == "none") {
    *r = Reduction::kNone;
  } else if (s == "mean" || s.empty()) {
    *r = Reduction::kMean;
  } else if (s == "batchmean") {
    *r = Reduction::kBatchMean;
  } else if (s == "sum") {
    *r = Reduction::kSum;
  } else {
    return InvalidArgument(OpName(kc) + ": reduction must be none, batchmean, mean or sum, got '" +
                           s + "'");
  }
  return nullptr;
}

// What the summed loss is divided by.
double ReductionDivisor(Reduction r, const FleetTensor* x) {
  if (r == Reduction::kMean) return static_cast<double>(Numel(x));
  if (r == Reduction::kBatchMean) return x->ndim > 0 ? static_cast<double>(x->dims[0]) : 1.0;
  return 1.0;
}

template <typename T>
FleetStatus* KlDiv(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* st = Require(kc, x, "X")) return st;
    const int64_t n = Numel(x);
    const FleetTensor* target = Input(kc, "Target");
    const FleetTensor* loss = Output(kc, "Loss");
    Reduction red;
    if (FleetStatus* st = ReadReduction(kc, &red)) return st;
    if (FleetStatus* st = Sized(kc, target, "Target", n)) return st;
    if (FleetStatus* st = Sized(kc, loss, "Loss", red == Reduction::kNone ? n : 1)) return st;
    const T* xs = Data<T>(x);
    const T* ts = Data<T>(target);
    T* ls = Data<T>(loss);
    if (red == Reduction::kNone) {
      for (int64_t i = 0; i < n; ++i) ls[i] = fk::KlDiv(xs[i], ts[i]);
      return nullptr;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fk::KlDiv(xs[i], ts[i]));
    const double div = ReductionDivisor(red, x);
    ls[0] = static_cast<T>(div > 0 ? sum / div : sum);
    return nullptr;
  });
}

template <typename T>
FleetStatus* KlDivGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* st = Require(kc, x, "X")) return st;
    const int64_t n = Numel(x);
    const FleetTensor* target = Input(kc, "Target");
    const FleetTensor* dloss = Input(kc, "Loss@GRAD");
    Reduction red;
    if (FleetStatus* st = ReadReduction(kc, &red)) return st;
    if (FleetStatus* st = Sized(kc, target, "Target", n)) return st;
    if (FleetStatus* st = Sized(kc, dloss, "Loss@GRAD", red == Reduction::kNone ? n : 1)) {
      return st;
    }
    if (FleetStatus* st = Sized(kc, dx, "X@GRAD", n)) return st;
    const T* ts = Data<T>(target);
    const T* gl = Data<T>(dloss);
    T* gs = Data<T>(dx);
    const double div = ReductionDivisor(red, x);
    const T scale = static_cast<T>(div > 0 ? 1.0 / div : 1.0);
    for (int64_t i = 0; i < n; ++i) {
      const T g = red == Reduction::kNone ? gl[i] : gl[0] * scale;
      gs[i] = fk::KlDivGrad(ts[i]) * g;
    }
    return nullptr;
  });
}

// ---- label_smooth -----------------------------------------------------------------------------

template <typename T>
FleetStatus* LabelSmooth(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* st = Require(kc, x, "X")) return st;
    if (x->ndim < 1) return InvalidArgument(OpName(kc) + ": X needs a class dim");
    const int64_t n = Numel(x);
    const int64_t k = x->dims[x->ndim - 1];
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* st = Sized(kc, out, "Out", n)) return st;
    const FleetTensor* prior = Input(kc, "PriorDist");
    if (prior != nullptr) {
      if (FleetStatus* st = Sized(kc, prior, "PriorDist", k)) return st;
    }
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 0.0));
    const T* xs = Data<T>(x);
    const T* ps = prior != nullptr ? Data<T>(prior) : nullptr;
    T* os = Data<T>(out);
    const T uniform = k > 0 ? eps / static_cast<T>(k) : T(0);
    for (int64_t i = 0; i < n; ++i) {
      const T add = ps != nullptr ? eps * ps[i % k] : uniform;
      os[i] = (T(1) - eps) * xs[i] + add;
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* LabelSmoothGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (FleetStatus* st = Require(kc, dout, "Out@GRAD")) return st;
    const int64_t n = Numel(dout);
    if (FleetStatus* st = Sized(kc, dx, "X@GRAD", n)) return st;
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 0.0));
    const T* ds = Data<T>(dout);
    T* gs = Data<T>(dx);
    for (int64_t i = 0; i < n; ++i) gs[i] = (T(1) - eps) * ds[i];
    return nullptr;
  });
}

#define FLEET_LOSS_PAIR(op, fn) \
  Add(list, op, FLEET_DTYPE_FLOAT32, fn<float>); \
  Add(list, op, FLEET_DTYPE_FLOAT64, fn<double>)

// ---- margin_rank_loss -------------------------------------------------------------------------

template <typename T>
FleetStatus* MarginRank(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x1 = Input(kc, "X1");
    if (FleetStatus* st = Require(kc, x1, "X1")) return st;
    const int64_t n = Numel(x1);
    const FleetTensor* x2 = Input(kc, "X2");
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* out = Output(kc, "Out");
    const FleetTensor* act = Output(kc, "Activated");
    for (auto [t, slot] : {std::pair{x2, "X2"}, std::pair{label, "Label"}, std::pair{out, "Out"},
                           std::pair{act, "Activated"}}) {
      if (FleetStatus* st = Sized(kc, t, slot, n)) return st;
    }
    const T margin = static_cast<T>(FloatAttr(kc, "margin", 0.0));
    const T *a = Data<T>(x1), *b = Data<T>(x2), *l = Data<T>(label);
    T *o = Data<T>(out), *on = Data<T>(act);
    for (int64_t i = 0; i < n; ++i) {
      o[i] = fk::MarginRank(a[i], b[i], l[i], margin);
      on[i] = o[i] > T(0) ? T(1) : T(0);
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* MarginRankGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (FleetStatus* st = Require(kc, dout, "Out@GRAD")) return st;
    const int64_t n = Numel(dout);
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* act = Input(kc, "Activated");
    if (FleetStatus* st = Sized(kc, label, "Label", n)) return st;
    if (FleetStatus* st = Sized(kc, act, "Activated", n)) return st;
    const T *d = Data<T>(dout), *l = Data<T>(label), *on = Data<T>(act);
    for (auto [slot, sign] : {std::pair{"X1@GRAD", T(-1)}, std::pair{"X2@GRAD", T(1)}}) {
      const FleetTensor* g = Output(kc, slot);
      if (g == nullptr) continue;
      if (FleetStatus* st = Sized(kc, g, slot, n)) return st;
      T* gs = Data<T>(g);
      for (int64_t i = 0; i < n; ++i) gs[i] = sign * l[i] * on[i] * d[i];
    }
    return nullptr;
  });
}

}  // namespace

void AddNnLossExtKernels(KernelList& list) {
  FLEET_LOSS_PAIR("sigmoid_cross_entropy_with_logits", SigmoidCe);
  FLEET_LOSS_PAIR("sigmoid_cross_entropy_with_logits_grad", SigmoidCeGrad);
  Add(list, "bce_loss", FLEET_DTYPE_FLOAT32, ProbLoss<float, false>);
  Add(list, "bce_loss", FLEET_DTYPE_FLOAT64, ProbLoss<double, false>);
  Add(list, "bce_loss_grad", FLEET_DTYPE_FLOAT32, ProbLossGrad<float, false>);
  Add(list, "bce_loss_grad", FLEET_DTYPE_FLOAT64, ProbLossGrad<double, false>);
  Add(list, "margin_rank_loss", FLEET_DTYPE_FLOAT32, MarginRank<float>);
  Add(list, "margin_rank_loss", FLEET_DTYPE_FLOAT64, MarginRank<double>);
  Add(list, "margin_rank_loss_grad", FLEET_DTYPE_FLOAT32, MarginRankGrad<float>);
  Add(list, "margin_rank_loss_grad", FLEET_DTYPE_FLOAT64, MarginRankGrad<double>);
  Add(list, "log_loss", FLEET_DTYPE_FLOAT32, ProbLoss<float, true>);
  Add(list, "log_loss", FLEET_DTYPE_FLOAT64, ProbLoss<double, true>);
  Add(list, "log_loss_grad", FLEET_DTYPE_FLOAT32, ProbLossGrad<float, true>);
  Add(list, "log_loss_grad", FLEET_DTYPE_FLOAT64, ProbLossGrad<double, true>);
  FLEET_LOSS_PAIR("huber_loss", Huber);
  FLEET_LOSS_PAIR("huber_loss_grad", HuberGrad);
  FLEET_LOSS_PAIR("smooth_l1_loss", SmoothL1);
  FLEET_LOSS_PAIR("smooth_l1_loss_grad", SmoothL1Grad);
  FLEET_LOSS_PAIR("kldiv_loss", KlDiv);
  FLEET_LOSS_PAIR("kldiv_loss_grad", KlDivGrad);
  FLEET_LOSS_PAIR("label_smooth", LabelSmooth);
  FLEET_LOSS_PAIR("label_smooth_grad", LabelSmoothGrad);
}

#undef FLEET_LOSS_PAIR

}  // namespace fleet_cpu
