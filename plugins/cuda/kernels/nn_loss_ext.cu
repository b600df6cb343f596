// CUDA kernels of sigmoid_cross_entropy_with_logits, bce_loss, log_loss, margin_rank_loss,
// huber_loss, smooth_l1_loss, kldiv_loss and label_smooth (+ grads), float32 and float64, with
// the CPU plugin's semantics (plugins/cpu/kernels/nn_loss_ext_kernels.cc) and the per-element
// formulas both share (plugins/common/loss_formulas.h).
//
// Reductions are deterministic: a whole-tensor sum (kldiv_loss, the kept-element count of
// sigmoid_cross_entropy_with_logits with normalize) runs in one block, each thread striding in
// a fixed pattern and the block folding in a fixed tree, in double; smooth_l1_loss sums each
// row in one thread, in index order, like the CPU.
#include <string>

#include "kernels/nn_groups.h"
#include "loss_formulas.h"

namespace fleet_cuda {
namespace {

using namespace nn;
namespace fk = fleet::kernel;

// Bytes of scratch for the one double a reduction leaves for the next kernel.
constexpr size_t kReduceScratch = 256;

FleetStatus* PrepareReduce(void*, const FleetKernelContext*, void**, size_t* scratch_bytes) {
  *scratch_bytes = kReduceScratch;
  return nullptr;
}

FleetStatus* ScratchOf(const FleetKernelContext* kc, double** out) {
  if (kc->scratch == nullptr) {
    return Error(FLEET_CODE_INTERNAL,
                 OpName(kc) + ": launched without the scratch memory asked for at prepare");
  }
  *out = static_cast<double*>(kc->scratch);
  return nullptr;
}

// A fixed-order fold over one block of kThreads threads; every thread gets the total.
__device__ inline double BlockTotal(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();
  return total;
}

// An optional tensor: NULL, or `n` elements of T.
template <typename T>
FleetStatus* Optional(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                      int64_t n, const T** data) {
  *data = nullptr;
  if (t == nullptr) return nullptr;
  if (FleetStatus* st = RequireSized(kc, t, slot, DtypeOf<T>(), n)) return st;
  *data = Data<const T>(t);
  return nullptr;
}

// ---- sigmoid_cross_entropy_with_logits ------------------------------------------------------

template <typename T>
__global__ void KeptCountKernel(const T* label, int64_t n, int64_t ignore, double* norm) {
  double kept = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    kept += fk::SigmoidCeIgnored(label[i], ignore) ? 0.0 : 1.0;
  }
  const double total = BlockTotal(kept);
  if (threadIdx.x == 0) norm[0] = static_cast<double>(fk::SigmoidCeNorm<T>(total));
}

// norm: the divisor left by KeptCountKernel, or NULL for 1.
template <typename T>
__global__ void SigmoidCeKernel(const T* x, const T* label, T* out, int64_t n, int64_t ignore,
                                const double* norm) {
  const T div = norm != nullptr ? static_cast<T>(norm[0]) : T(1);
  FLEET_CUDA_LOOP(i, n) {
    out[i] = fk::SigmoidCeIgnored(label[i], ignore) ? T(0) : fk::SigmoidCe(x[i], label[i]) / div;
  }
}

template <typename T>
__global__ void SigmoidCeGradKernel(const T* x, const T* label, const T* dout, T* dx, int64_t n,
                                    int64_t ignore, const double* norm) {
  const T div = norm != nullptr ? static_cast<T>(norm[0]) : T(1);
  FLEET_CUDA_LOOP(i, n) {
    dx[i] = fk::SigmoidCeIgnored(label[i], ignore)
                ? T(0)
                : fk::SigmoidCeGrad(x[i], label[i]) * dout[i] / div;
  }
}

template <typename T, bool kGrad>
FleetStatus* SigmoidCeLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  const int64_t n = Numel(x);
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* out = Output(kc, kGrad ? "X@GRAD" : "Out");
  const FleetTensor* dout = kGrad ? Input(kc, "Out@GRAD") : nullptr;
  if (kGrad && out == nullptr) return nullptr;
  if (FleetStatus* st = RequireSized(kc, x, "X", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, label, "Label", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, out, kGrad ? "X@GRAD" : "Out", DtypeOf<T>(), n)) {
    return st;
  }
  if (kGrad) {
    if (FleetStatus* st = RequireSized(kc, dout, "Out@GRAD", DtypeOf<T>(), n)) return st;
  }
  double* norm = nullptr;
  if (BoolAttr(kc, "normalize", false)) {
    if (FleetStatus* st = ScratchOf(kc, &norm)) return st;
  }
  const int64_t ignore = IntAttr(kc, "ignore_index", -100);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (norm != nullptr) {
      KeptCountKernel<T><<<1, kThreads, 0, s->native>>>(Data<const T>(label), n, ignore, norm);
    }
    if constexpr (kGrad) {
      SigmoidCeGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
          Data<const T>(x), Data<const T>(label), Data<const T>(dout), Data<T>(out), n, ignore,
          norm);
    } else {
      SigmoidCeKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
          Data<const T>(x), Data<const T>(label), Data<T>(out), n, ignore, norm);
    }
    return nullptr;
  });
}

// ---- bce_loss, log_loss ---------------------------------------------------------------------

template <typename T, bool kLog>
__global__ void ProbLossKernel(const T* x, const T* label, T* out, int64_t n, T eps) {
  FLEET_CUDA_LOOP(i, n) {
    out[i] = kLog ? fk::LogLoss(x[i], label[i], eps) : fk::Bce(x[i], label[i]);
  }
}

template <typename T, bool kLog>
__global__ void ProbLossGradKernel(const T* x, const T* label, const T* dout, T* dx, int64_t n,
                                   T eps) {
  FLEET_CUDA_LOOP(i, n) {
    const T d = kLog ? fk::LogLossGrad(x[i], label[i], eps) : fk::BceGrad(x[i], label[i]);
    dx[i] = d * dout[i];
  }
}

// kLog: log_loss (Predicted, Labels, Loss, epsilon), else bce_loss (X, Label, Out).
template <typename T, bool kLog, bool kGrad>
FleetStatus* ProbLossLaunch(void*, const FleetKernelContext* kc, void*) {
  const char* xslot = kLog ? "Predicted" : "X";
  const char* lslot = kLog ? "Labels" : "Label";
  const char* oslot = kGrad ? (kLog ? "Predicted@GRAD" : "X@GRAD") : (kLog ? "Loss" : "Out");
  const char* dslot = kLog ? "Loss@GRAD" : "Out@GRAD";
  const FleetTensor* x = Input(kc, xslot);
  if (FleetStatus* st = Require(kc, x, xslot)) return st;
  const int64_t n = Numel(x);
  const FleetTensor* label = Input(kc, lslot);
  const FleetTensor* out = Output(kc, oslot);
  if (kGrad && out == nullptr) return nullptr;
  if (FleetStatus* st = RequireSized(kc, x, xslot, DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, label, lslot, DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, out, oslot, DtypeOf<T>(), n)) return st;
  const FleetTensor* dout = kGrad ? Input(kc, dslot) : nullptr;
  if (kGrad) {
    if (FleetStatus* st = RequireSized(kc, dout, dslot, DtypeOf<T>(), n)) return st;
  }
  const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-4));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if constexpr (kGrad) {
      ProbLossGradKernel<T, kLog><<<Blocks(n), kThreads, 0, s->native>>>(
          Data<const T>(x), Data<const T>(label), Data<const T>(dout), Data<T>(out), n, eps);
    } else {
      ProbLossKernel<T, kLog><<<Blocks(n), kThreads, 0, s->native>>>(
          Data<const T>(x), Data<const T>(label), Data<T>(out), n, eps);
    }
    return nullptr;
  });
}

// ---- margin_rank_loss -----------------------------------------------------------------------

template <typename T>
__global__ void MarginRankKernel(const T* x1, const T* x2, const T* label, T* out, T* act,
                                 int64_t n, T margin) {
  FLEET_CUDA_LOOP(i, n) {
    const T v = fk::MarginRank(x1[i], x2[i], label[i], margin);
    out[i] = v;
    act[i] = v > T(0) ? T(1) : T(0);
  }
}

// dX1 = -Label * Activated * dOut, dX2 = -dX1; either may be absent.
template <typename T>
__global__ void MarginRankGradKernel(const T* label, const T* act, const T* dout, T* dx1, T* dx2,
                                     int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    const T g = label[i] * act[i] * dout[i];
    if (dx1 != nullptr) dx1[i] = -g;
    if (dx2 != nullptr) dx2[i] = g;
  }
}

template <typename T>
FleetStatus* MarginRankLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x1 = Input(kc, "X1");
  if (FleetStatus* st = Require(kc, x1, "X1")) return st;
  const int64_t n = Numel(x1);
  const FleetTensor* x2 = Input(kc, "X2");
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* out = Output(kc, "Out");
  const FleetTensor* act = Output(kc, "Activated");
  for (auto [t, slot] : {std::pair{x1, "X1"}, std::pair{x2, "X2"}, std::pair{label, "Label"},
                         std::pair{out, "Out"}, std::pair{act, "Activated"}}) {
    if (FleetStatus* st = RequireSized(kc, t, slot, DtypeOf<T>(), n)) return st;
  }
  const T margin = static_cast<T>(FloatAttr(kc, "margin", 0.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    MarginRankKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(x1), Data<const T>(x2), Data<const T>(label), Data<T>(out), Data<T>(act),
        n, margin);
    return nullptr;
  });
}

template <typename T>
FleetStatus* MarginRankGradLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (FleetStatus* st = Require(kc, dout, "Out@GRAD")) return st;
  const int64_t n = Numel(dout);
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* act = Input(kc, "Activated");
  const FleetTensor* dx1 = Output(kc, "X1@GRAD");
  const FleetTensor* dx2 = Output(kc, "X2@GRAD");
  if (dx1 == nullptr && dx2 == nullptr) return nullptr;
  for (auto [t, slot] : {std::pair{dout, "Out@GRAD"}, std::pair{label, "Label"},
                         std::pair{act, "Activated"}}) {
    if (FleetStatus* st = RequireSized(kc, t, slot, DtypeOf<T>(), n)) return st;
  }
  for (auto [t, slot] : {std::pair{dx1, "X1@GRAD"}, std::pair{dx2, "X2@GRAD"}}) {
    if (t == nullptr) continue;
    if (FleetStatus* st = RequireSized(kc, t, slot, DtypeOf<T>(), n)) return st;
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    MarginRankGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(label), Data<const T>(act), Data<const T>(dout),
        dx1 != nullptr ? Data<T>(dx1) : nullptr, dx2 != nullptr ? Data<T>(dx2) : nullptr, n);
    return nullptr;
  });
}

// ---- huber_loss -----------------------------------------------------------------------------

template <typename T>
__global__ void HuberKernel(const T* x, const T* y, T* out, T* residual, int64_t n, T delta) {
  FLEET_CUDA_LOOP(i, n) {
    const T r = y[i] - x[i];
    if (residual != nullptr) residual[i] = r;
    out[i] = fk::Huber(r, delta);
  }
}

template <typename T>
__global__ void HuberGradKernel(const T* residual, const T* dout, T* dx, T* dy, int64_t n,
                                T delta) {
  FLEET_CUDA_LOOP(i, n) {
    const T g = fk::HuberGrad(residual[i], delta) * dout[i];
    if (dx != nullptr) dx[i] = -g;
    if (dy != nullptr) dy[i] = g;
  }
}

template <typename T>
FleetStatus* HuberLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  const int64_t n = Numel(x);
  const FleetTensor* y = Input(kc, "Y");
  const FleetTensor* out = Output(kc, "Out");
  const FleetTensor* res = Output(kc, "Residual");
  if (FleetStatus* st = RequireSized(kc, x, "X", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, y, "Y", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, out, "Out", DtypeOf<T>(), n)) return st;
  if (res != nullptr) {
    if (FleetStatus* st = RequireSized(kc, res, "Residual", DtypeOf<T>(), n)) return st;
  }
  const T delta = static_cast<T>(FloatAttr(kc, "delta", 1.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    HuberKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(x), Data<const T>(y), Data<T>(out), res != nullptr ? Data<T>(res) : nullptr,
        n, delta);
    return nullptr;
  });
}

template <typename T>
FleetStatus* HuberGradLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* res = Input(kc, "Residual");
  if (FleetStatus* st = Require(kc, res, "Residual")) return st;
  const int64_t n = Numel(res);
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dy = Output(kc, "Y@GRAD");
  if (FleetStatus* st = RequireSized(kc, res, "Residual", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, dout, "Out@GRAD", DtypeOf<T>(), n)) return st;
  if (dx != nullptr) {
    if (FleetStatus* st = RequireSized(kc, dx, "X@GRAD", DtypeOf<T>(), n)) return st;
  }
  if (dy != nullptr) {
    if (FleetStatus* st = RequireSized(kc, dy, "Y@GRAD", DtypeOf<T>(), n)) return st;
  }
  if (dx == nullptr && dy == nullptr) return nullptr;
  const T delta = static_cast<T>(FloatAttr(kc, "delta", 1.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    HuberGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(res), Data<const T>(dout), dx != nullptr ? Data<T>(dx) : nullptr,
        dy != nullptr ? Data<T>(dy) : nullptr, n, delta);
    return nullptr;
  });
}

// ---- smooth_l1_loss -------------------------------------------------------------------------

// One thread per row, columns in index order (the CPU's order).
template <typename T>
__global__ void SmoothL1Kernel(const T* x, const T* y, const T* win, const T* wout, T* diff,
                               T* out, int64_t rows, int64_t cols, T sigma2) {
  FLEET_CUDA_LOOP(r, rows) {
    T sum = T(0);
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t i = r * cols + j;
      T d = x[i] - y[i];
      if (win != nullptr) d *= win[i];
      if (diff != nullptr) diff[i] = d;
      T v = fk::SmoothL1(d, sigma2);
      if (wout != nullptr) v *= wout[i];
      sum += v;
    }
    out[r] = sum;
  }
}

template <typename T>
__global__ void SmoothL1GradKernel(const T* diff, const T* win, const T* wout, const T* dout,
                                   T* dx, T* dy, int64_t n, int64_t cols, T sigma2) {
  FLEET_CUDA_LOOP(i, n) {
    T g = fk::SmoothL1Grad(diff[i], sigma2) * dout[cols > 0 ? i / cols : 0];
    if (win != nullptr) g *= win[i];
    if (wout != nullptr) g *= wout[i];
    if (dx != nullptr) dx[i] = g;
    if (dy != nullptr) dy[i] = -g;
  }
}

template <typename T>
FleetStatus* SmoothL1Launch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  if (x->ndim < 2) return InvalidArgument(OpName(kc) + ": X must have rank >= 2");
  const int64_t n = Numel(x);
  const int64_t rows = x->dims[0];
  const int64_t cols = rows > 0 ? n / rows : 0;
  const FleetTensor* y = Input(kc, "Y");
  const FleetTensor* diff = Output(kc, "Diff");
  const FleetTensor* out = Output(kc, "Out");
  if (FleetStatus* st = RequireSized(kc, x, "X", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, y, "Y", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, out, "Out", DtypeOf<T>(), rows)) return st;
  if (diff != nullptr) {
    if (FleetStatus* st = RequireSized(kc, diff, "Diff", DtypeOf<T>(), n)) return st;
  }
  const T *win = nullptr, *wout = nullptr;
  if (FleetStatus* st = Optional(kc, Input(kc, "InsideWeight"), "InsideWeight", n, &win)) {
    return st;
  }
  if (FleetStatus* st = Optional(kc, Input(kc, "OutsideWeight"), "OutsideWeight", n, &wout)) {
    return st;
  }
  const T sigma = static_cast<T>(FloatAttr(kc, "sigma", 1.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    SmoothL1Kernel<T><<<Blocks(rows), kThreads, 0, s->native>>>(
        Data<const T>(x), Data<const T>(y), win, wout, diff != nullptr ? Data<T>(diff) : nullptr,
        Data<T>(out), rows, cols, sigma * sigma);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SmoothL1GradLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* diff = Input(kc, "Diff");
  if (FleetStatus* st = Require(kc, diff, "Diff")) return st;
  if (diff->ndim < 2) return InvalidArgument(OpName(kc) + ": Diff must have rank >= 2");
  const int64_t n = Numel(diff);
  const int64_t rows = diff->dims[0];
  const int64_t cols = rows > 0 ? n / rows : 0;
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dy = Output(kc, "Y@GRAD");
  if (FleetStatus* st = RequireSized(kc, diff, "Diff", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, dout, "Out@GRAD", DtypeOf<T>(), rows)) return st;
  if (dx != nullptr) {
    if (FleetStatus* st = RequireSized(kc, dx, "X@GRAD", DtypeOf<T>(), n)) return st;
  }
  if (dy != nullptr) {
    if (FleetStatus* st = RequireSized(kc, dy, "Y@GRAD", DtypeOf<T>(), n)) return st;
  }
  const T *win = nullptr, *wout = nullptr;
  if (FleetStatus* st = Optional(kc, Input(kc, "InsideWeight"), "InsideWeight", n, &win)) {
    return st;
  }
  if (FleetStatus* st = Optional(kc, Input(kc, "OutsideWeight"), "OutsideWeight", n, &wout)) {
    return st;
  }
  if (dx == nullptr && dy == nullptr) return nullptr;
  const T sigma = static_cast<T>(FloatAttr(kc, "sigma", 1.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    SmoothL1GradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(diff), win, wout, Data<const T>(dout),
        dx != nullptr ? Data<T>(dx) : nullptr, dy != nullptr ? Data<T>(dy) : nullptr, n, cols,
        sigma * sigma);
    return nullptr;
  });
}

// ---- kldiv_loss -----------------------------------------------------------------------------

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

double ReductionDivisor(Reduction r, const FleetTensor* x) {
  double d = 1.0;
  if (r == Reduction::kMean) d = static_cast<double>(Numel(x));
  if (r == Reduction::kBatchMean && x->ndim > 0) d = static_cast<double>(x->dims[0]);
  return d > 0 ? d : 1.0;
}

template <typename T>
__global__ void KlDivKernel(const T* x, const T* target, T* loss, int64_t n) {
  FLEET_CUDA_LOOP(i, n) { loss[i] = fk::KlDiv(x[i], target[i]); }
}

template <typename T>
__global__ void KlDivSumKernel(const T* x, const T* target, T* loss, int64_t n, double div) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    acc += static_cast<double>(fk::KlDiv(x[i], target[i]));
  }
  const double total = BlockTotal(acc);
  if (threadIdx.x == 0) loss[0] = static_cast<T>(total / div);
}

// reduced: dloss holds one value, scaled by `scale`; otherwise one per element.
template <typename T>
__global__ void KlDivGradKernel(const T* target, const T* dloss, T* dx, int64_t n, bool reduced,
                                T scale) {
  FLEET_CUDA_LOOP(i, n) {
    const T g = reduced ? dloss[0] * scale : dloss[i];
    dx[i] = fk::KlDivGrad(target[i]) * g;
  }
}

template <typename T>
FleetStatus* KlDivLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  const int64_t n = Numel(x);
  const FleetTensor* target = Input(kc, "Target");
  const FleetTensor* loss = Output(kc, "Loss");
  Reduction red;
  if (FleetStatus* st = ReadReduction(kc, &red)) return st;
  const bool none = red == Reduction::kNone;
  if (FleetStatus* st = RequireSized(kc, x, "X", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, target, "Target", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, loss, "Loss", DtypeOf<T>(), none ? n : 1)) return st;
  const double div = ReductionDivisor(red, x);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (none) {
      KlDivKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x),
                                                            Data<const T>(target), Data<T>(loss),
                                                            n);
    } else {
      KlDivSumKernel<T><<<1, kThreads, 0, s->native>>>(Data<const T>(x), Data<const T>(target),
                                                       Data<T>(loss), n, div);
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* KlDivGradLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  const int64_t n = Numel(x);
  const FleetTensor* target = Input(kc, "Target");
  const FleetTensor* dloss = Input(kc, "Loss@GRAD");
  Reduction red;
  if (FleetStatus* st = ReadReduction(kc, &red)) return st;
  const bool none = red == Reduction::kNone;
  if (FleetStatus* st = RequireSized(kc, target, "Target", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, dloss, "Loss@GRAD", DtypeOf<T>(), none ? n : 1)) {
    return st;
  }
  if (FleetStatus* st = RequireSized(kc, dx, "X@GRAD", DtypeOf<T>(), n)) return st;
  const T scale = static_cast<T>(1.0 / ReductionDivisor(red, x));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    KlDivGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(target), Data<const T>(dloss), Data<T>(dx), n, !none, scale);
    return nullptr;
  });
}

// ---- label_smooth ---------------------------------------------------------------------------

template <typename T>
__global__ void LabelSmoothKernel(const T* x, const T* prior, T* out, int64_t n, int64_t k,
                                  T eps) {
  const T uniform = k > 0 ? eps / static_cast<T>(k) : T(0);
  FLEET_CUDA_LOOP(i, n) {
    const T add = prior != nullptr ? eps * prior[i % k] : uniform;
    out[i] = (T(1) - eps) * x[i] + add;
  }
}

template <typename T>
__global__ void ScaleKernel(const T* in, T* out, int64_t n, T factor) {
  FLEET_CUDA_LOOP(i, n) { out[i] = factor * in[i]; }
}

template <typename T>
FleetStatus* LabelSmoothLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  if (x->ndim < 1) return InvalidArgument(OpName(kc) + ": X needs a class dim");
  const int64_t n = Numel(x);
  const int64_t k = x->dims[x->ndim - 1];
  const FleetTensor* out = Output(kc, "Out");
  if (FleetStatus* st = RequireSized(kc, x, "X", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, out, "Out", DtypeOf<T>(), n)) return st;
  const T* prior = nullptr;
  if (FleetStatus* st = Optional(kc, Input(kc, "PriorDist"), "PriorDist", k, &prior)) return st;
  const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 0.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    LabelSmoothKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x), prior,
                                                                 Data<T>(out), n, k, eps);
    return nullptr;
  });
}

template <typename T>
FleetStatus* LabelSmoothGradLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (FleetStatus* st = Require(kc, dout, "Out@GRAD")) return st;
  const int64_t n = Numel(dout);
  if (FleetStatus* st = RequireSized(kc, dout, "Out@GRAD", DtypeOf<T>(), n)) return st;
  if (FleetStatus* st = RequireSized(kc, dx, "X@GRAD", DtypeOf<T>(), n)) return st;
  const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 0.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    ScaleKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(dout), Data<T>(dx), n,
                                                           T(1) - eps);
    return nullptr;
  });
}

}  // namespace

void AddNnLossExtKernels(KernelList& list) {
  Add(list, "sigmoid_cross_entropy_with_logits", FLEET_DTYPE_FLOAT32,
      SigmoidCeLaunch<float, false>, PrepareReduce);
  Add(list, "sigmoid_cross_entropy_with_logits", FLEET_DTYPE_FLOAT64,
      SigmoidCeLaunch<double, false>, PrepareReduce);
  Add(list, "sigmoid_cross_entropy_with_logits_grad", FLEET_DTYPE_FLOAT32,
      SigmoidCeLaunch<float, true>, PrepareReduce);
  Add(list, "sigmoid_cross_entropy_with_logits_grad", FLEET_DTYPE_FLOAT64,
      SigmoidCeLaunch<double, true>, PrepareReduce);
  Add(list, "bce_loss", FLEET_DTYPE_FLOAT32, ProbLossLaunch<float, false, false>);
  Add(list, "bce_loss", FLEET_DTYPE_FLOAT64, ProbLossLaunch<double, false, false>);
  Add(list, "bce_loss_grad", FLEET_DTYPE_FLOAT32, ProbLossLaunch<float, false, true>);
  Add(list, "bce_loss_grad", FLEET_DTYPE_FLOAT64, ProbLossLaunch<double, false, true>);
  Add(list, "margin_rank_loss", FLEET_DTYPE_FLOAT32, MarginRankLaunch<float>);
  Add(list, "margin_rank_loss", FLEET_DTYPE_FLOAT64, MarginRankLaunch<double>);
  Add(list, "margin_rank_loss_grad", FLEET_DTYPE_FLOAT32, MarginRankGradLaunch<float>);
  Add(list, "margin_rank_loss_grad", FLEET_DTYPE_FLOAT64, MarginRankGradLaunch<double>);
  Add(list, "log_loss", FLEET_DTYPE_FLOAT32, ProbLossLaunch<float, true, false>);
  Add(list, "log_loss", FLEET_DTYPE_FLOAT64, ProbLossLaunch<double, true, false>);
  Add(list, "log_loss_grad", FLEET_DTYPE_FLOAT32, ProbLossLaunch<float, true, true>);
  Add(list, "log_loss_grad", FLEET_DTYPE_FLOAT64, ProbLossLaunch<double, true, true>);
  Add(list, "huber_loss", FLEET_DTYPE_FLOAT32, HuberLaunch<float>);
  Add(list, "huber_loss", FLEET_DTYPE_FLOAT64, HuberLaunch<double>);
  Add(list, "huber_loss_grad", FLEET_DTYPE_FLOAT32, HuberGradLaunch<float>);
  Add(list, "huber_loss_grad", FLEET_DTYPE_FLOAT64, HuberGradLaunch<double>);
  Add(list, "smooth_l1_loss", FLEET_DTYPE_FLOAT32, SmoothL1Launch<float>);
  Add(list, "smooth_l1_loss", FLEET_DTYPE_FLOAT64, SmoothL1Launch<double>);
  Add(list, "smooth_l1_loss_grad", FLEET_DTYPE_FLOAT32, SmoothL1GradLaunch<float>);
  Add(list, "smooth_l1_loss_grad", FLEET_DTYPE_FLOAT64, SmoothL1GradLaunch<double>);
  Add(list, "kldiv_loss", FLEET_DTYPE_FLOAT32, KlDivLaunch<float>);
  Add(list, "kldiv_loss", FLEET_DTYPE_FLOAT64, KlDivLaunch<double>);
  Add(list, "kldiv_loss_grad", FLEET_DTYPE_FLOAT32, KlDivGradLaunch<float>);
  Add(list, "kldiv_loss_grad", FLEET_DTYPE_FLOAT64, KlDivGradLaunch<double>);
  Add(list, "label_smooth", FLEET_DTYPE_FLOAT32, LabelSmoothLaunch<float>);
  Add(list, "label_smooth", FLEET_DTYPE_FLOAT64, LabelSmoothLaunch<double>);
  Add(list, "label_smooth_grad", FLEET_DTYPE_FLOAT32, LabelSmoothGradLaunch<float>);
  Add(list, "label_smooth_grad", FLEET_DTYPE_FLOAT64, LabelSmoothGradLaunch<double>);
}

}  // namespace fleet_cuda
