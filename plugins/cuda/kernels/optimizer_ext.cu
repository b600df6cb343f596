// CUDA kernels of adagrad, rmsprop, lamb, adamax and clip_by_norm, float32 and float64, with
// the CPU plugin's semantics (plugins/cpu/kernels/optimizer_ext_kernels.cc) and the update
// rules both share (plugins/common/optimizer_formulas.h).
//
// Scalars (learning rate, beta powers) are one-element device tensors read by the kernels.
// Each update kernel reads element i of every input before writing element i of any output,
// so outputs may alias inputs. The whole-tensor norms of lamb and clip_by_norm are
// deterministic: per-block partial sums in a fixed pattern (the grid size depends only on the
// element count), then one block folds the partials in a fixed tree, in double; the result
// (trust ratio or scale) stays in scratch for the update kernel, so the host never waits.
#include <algorithm>
#include <string>

#include "kernels/optimizer_groups.h"
#include "optimizer_formulas.h"

namespace fleet_cuda {
namespace {

namespace fk = fleet::kernel;

constexpr int kParts = 512;  // most partial sums per reduction
// Scratch: two rows of partials and the folded result.
constexpr size_t kScratchBytes = (2 * kParts + 1) * sizeof(double);

std::string Op(const FleetKernelContext* kc) { return kc->op_type ? kc->op_type : "kernel"; }

FleetStatus* Missing(const FleetKernelContext* kc, const char* what) {
  return InvalidArgument(Op(kc) + ": " + what + " is missing");
}

template <typename T>
constexpr int32_t DtypeOf() {
  return sizeof(T) == 8 ? FLEET_DTYPE_FLOAT64 : FLEET_DTYPE_FLOAT32;
}

template <typename T>
FleetStatus* Like(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                  int64_t n) {
  if (t == nullptr) return Missing(kc, slot);
  if (t->dtype != DtypeOf<T>() || Numel(t) != n) {
    return InvalidArgument(Op(kc) + ": " + slot + " must hold " + std::to_string(n) +
                           " elements of Param's dtype, got " + std::to_string(Numel(t)) +
                           " of dtype " + std::to_string(t->dtype));
  }
  return nullptr;
}

// A one-element float32 or float64 tensor.
FleetStatus* CheckScalar(const FleetKernelContext* kc, const FleetTensor* t, const char* slot) {
  if (t == nullptr || t->data == nullptr || Numel(t) < 1) return Missing(kc, slot);
  if (t->dtype != FLEET_DTYPE_FLOAT32 && t->dtype != FLEET_DTYPE_FLOAT64) {
    return InvalidArgument(Op(kc) + ": " + slot + " must be float32 or float64, got dtype " +
                           std::to_string(t->dtype));
  }
  return nullptr;
}

FleetStatus* PrepareScratch(void*, const FleetKernelContext*, void**, size_t* scratch_bytes) {
  *scratch_bytes = kScratchBytes;
  return nullptr;
}

FleetStatus* ScratchOf(const FleetKernelContext* kc, double** out) {
  if (kc->scratch == nullptr) {
    return Error(FLEET_CODE_INTERNAL,
                 Op(kc) + ": launched without the scratch memory asked for at prepare");
  }
  *out = static_cast<double*>(kc->scratch);
  return nullptr;
}

// A fixed-order fold over one block of kThreads threads; thread 0 gets the total.
__device__ inline double BlockFold(double v) {
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

unsigned PartBlocks(int64_t n) { return std::min<unsigned>(Blocks(n), kParts); }

// ---- adagrad, rmsprop -------------------------------------------------------------------

template <typename T>
__global__ void AdagradKernel(const T* param, const T* grad, const T* moment, T* param_out,
                              T* moment_out, int64_t n, Scalar lr, T eps) {
  const T rate = static_cast<T>(LoadScalar(lr));
  FLEET_CUDA_LOOP(i, n) {
    const fk::AdagradOut<T> o = fk::AdagradStep(param[i], grad[i], moment[i], rate, eps);
    param_out[i] = o.param;
    moment_out[i] = o.moment;
  }
}

template <typename T>
FleetStatus* AdagradLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* p = Input(kc, "Param");
  if (p == nullptr) return Missing(kc, "Param");
  const int64_t n = Numel(p);
  const FleetTensor* g = Input(kc, "Grad");
  const FleetTensor* m = Input(kc, "Moment");
  const FleetTensor* lr = Input(kc, "LearningRate");
  const FleetTensor* po = Output(kc, "ParamOut");
  const FleetTensor* mo = Output(kc, "MomentOut");
  if (FleetStatus* s = Like<T>(kc, p, "Param", n)) return s;
  if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
  if (FleetStatus* s = Like<T>(kc, m, "Moment", n)) return s;
  if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
  if (FleetStatus* s = Like<T>(kc, mo, "MomentOut", n)) return s;
  if (FleetStatus* s = CheckScalar(kc, lr, "LearningRate")) return s;
  const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-6));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    AdagradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(p), Data<const T>(g), Data<const T>(m), Data<T>(po), Data<T>(mo), n,
        ScalarOf(lr), eps);
    return nullptr;
  });
}

template <typename T>
struct RmspropArgs {
  T rho, eps, momentum;
  bool centered;
};

template <typename T>
__global__ void RmspropKernel(const T* param, const T* grad, const T* moment,
                              const T* mean_square, const T* mean_grad, T* param_out,
                              T* moment_out, T* mean_square_out, T* mean_grad_out, int64_t n,
                              Scalar lr, RmspropArgs<T> a) {
  const T rate = static_cast<T>(LoadScalar(lr));
  FLEET_CUDA_LOOP(i, n) {
    const fk::RmspropOut<T> o =
        fk::RmspropStep(param[i], grad[i], moment[i], mean_square[i],
                        a.centered ? mean_grad[i] : T(0), rate, a.rho, a.eps, a.momentum,
                        a.centered);
    param_out[i] = o.param;
    moment_out[i] = o.moment;
    mean_square_out[i] = o.mean_square;
    if (a.centered) mean_grad_out[i] = o.mean_grad;
  }
}

template <typename T>
FleetStatus* RmspropLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* p = Input(kc, "Param");
  if (p == nullptr) return Missing(kc, "Param");
  const int64_t n = Numel(p);
  RmspropArgs<T> a{};
  a.centered = BoolAttr(kc, "centered", false);
  a.rho = static_cast<T>(FloatAttr(kc, "decay", 0.9));
  a.eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-10));
  a.momentum = static_cast<T>(FloatAttr(kc, "momentum", 0.0));
  const FleetTensor* g = Input(kc, "Grad");
  const FleetTensor* mom = Input(kc, "Moment");
  const FleetTensor* ms = Input(kc, "MeanSquare");
  const FleetTensor* mg = Input(kc, "MeanGrad");
  const FleetTensor* lr = Input(kc, "LearningRate");
  const FleetTensor* po = Output(kc, "ParamOut");
  const FleetTensor* momo = Output(kc, "MomentOut");
  const FleetTensor* mso = Output(kc, "MeanSquareOut");
  const FleetTensor* mgo = Output(kc, "MeanGradOut");
  if (FleetStatus* s = Like<T>(kc, p, "Param", n)) return s;
  if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
  if (FleetStatus* s = Like<T>(kc, mom, "Moment", n)) return s;
  if (FleetStatus* s = Like<T>(kc, ms, "MeanSquare", n)) return s;
  if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
  if (FleetStatus* s = Like<T>(kc, momo, "MomentOut", n)) return s;
  if (FleetStatus* s = Like<T>(kc, mso, "MeanSquareOut", n)) return s;
  if (a.centered) {
    if (FleetStatus* s = Like<T>(kc, mg, "MeanGrad", n)) return s;
    if (FleetStatus* s = Like<T>(kc, mgo, "MeanGradOut", n)) return s;
  }
  if (FleetStatus* s = CheckScalar(kc, lr, "LearningRate")) return s;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    RmspropKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(p), Data<const T>(g), Data<const T>(mom), Data<const T>(ms),
        a.centered ? Data<const T>(mg) : nullptr, Data<T>(po), Data<T>(momo), Data<T>(mso),
        a.centered ? Data<T>(mgo) : nullptr, n, ScalarOf(lr), a);
    return nullptr;
  });
}

// ---- lamb ---------------------------------------------------------------------------------

template <typename T>
struct LambArgs {
  T beta1, beta2, eps, weight_decay;
};

template <typename T>
__device__ inline fk::LambMoments<T> LambAt(const T* param, const T* grad, const T* m1,
                                            const T* m2, int64_t i, T b1p, T b2p,
                                            const LambArgs<T>& a) {
  return fk::LambDirection(param[i], grad[i], m1[i], m2[i], a.beta1, a.beta2, b1p, b2p, a.eps,
                           a.weight_decay);
}

// partials[b] = this block's sum of Param^2, partials[kParts + b] = of r^2.
template <typename T>
__global__ void LambNormKernel(const T* param, const T* grad, const T* m1, const T* m2,
                               int64_t n, Scalar b1p, Scalar b2p, LambArgs<T> a,
                               double* partials) {
  const T bp1 = static_cast<T>(LoadScalar(b1p)), bp2 = static_cast<T>(LoadScalar(b2p));
  double p_sq = 0.0, r_sq = 0.0;
  FLEET_CUDA_LOOP(i, n) {
    const double r = static_cast<double>(LambAt(param, grad, m1, m2, i, bp1, bp2, a).r);
    const double p = static_cast<double>(param[i]);
    p_sq += p * p;
    r_sq += r * r;
  }
  const double ps = BlockFold(p_sq);
  const double rs = BlockFold(r_sq);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = ps;
    partials[kParts + blockIdx.x] = rs;
  }
}

// Folds the partials: result[0] = trust ratio (lamb) or clip scale (clip_by_norm).
__global__ void FoldKernel(const double* partials, int count, bool lamb, double max_norm,
                           double* result) {
  double a = 0.0, b = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += kThreads) {
    a += partials[i];
    if (lamb) b += partials[kParts + i];
  }
  const double sa = BlockFold(a);
  const double sb = BlockFold(b);
  if (threadIdx.x == 0) {
    result[0] = lamb ? fk::LambTrustRatio(sa, sb) : fk::ClipByNormScale(sa, max_norm);
  }
}

template <typename T>
__global__ void LambUpdateKernel(const T* param, const T* grad, const T* m1, const T* m2,
                                 T* param_out, T* m1_out, T* m2_out, int64_t n, Scalar lr,
                                 Scalar b1p, Scalar b2p, LambArgs<T> a, const double* trust) {
  const T bp1 = static_cast<T>(LoadScalar(b1p)), bp2 = static_cast<T>(LoadScalar(b2p));
  const T step = static_cast<T>(LoadScalar(lr) * trust[0]);
  FLEET_CUDA_LOOP(i, n) {
    const fk::LambMoments<T> o = LambAt(param, grad, m1, m2, i, bp1, bp2, a);
    const T p = param[i];
    m1_out[i] = o.moment1;
    m2_out[i] = o.moment2;
    param_out[i] = p - step * o.r;
  }
}

template <typename T>
FleetStatus* LambLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* p = Input(kc, "Param");
  if (p == nullptr) return Missing(kc, "Param");
  const int64_t n = Numel(p);
  const FleetTensor* g = Input(kc, "Grad");
  const FleetTensor* m1 = Input(kc, "Moment1");
  const FleetTensor* m2 = Input(kc, "Moment2");
  const FleetTensor* lr = Input(kc, "LearningRate");
  const FleetTensor* b1p = Input(kc, "Beta1Pow");
  const FleetTensor* b2p = Input(kc, "Beta2Pow");
  const FleetTensor* po = Output(kc, "ParamOut");
  const FleetTensor* m1o = Output(kc, "Moment1Out");
  const FleetTensor* m2o = Output(kc, "Moment2Out");
  const FleetTensor* b1po = Output(kc, "Beta1PowOut");
  const FleetTensor* b2po = Output(kc, "Beta2PowOut");
  if (FleetStatus* s = Like<T>(kc, p, "Param", n)) return s;
  if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
  if (FleetStatus* s = Like<T>(kc, m1, "Moment1", n)) return s;
  if (FleetStatus* s = Like<T>(kc, m2, "Moment2", n)) return s;
  if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
  if (FleetStatus* s = Like<T>(kc, m1o, "Moment1Out", n)) return s;
  if (FleetStatus* s = Like<T>(kc, m2o, "Moment2Out", n)) return s;
  if (FleetStatus* s = CheckScalar(kc, lr, "LearningRate")) return s;
  if (FleetStatus* s = CheckScalar(kc, b1p, "Beta1Pow")) return s;
  if (FleetStatus* s = CheckScalar(kc, b2p, "Beta2Pow")) return s;
  if (b1po != nullptr) {
    if (FleetStatus* s = CheckScalar(kc, b1po, "Beta1PowOut")) return s;
  }
  if (b2po != nullptr) {
    if (FleetStatus* s = CheckScalar(kc, b2po, "Beta2PowOut")) return s;
  }
  double* scratch = nullptr;
  if (FleetStatus* s = ScratchOf(kc, &scratch)) return s;
  LambArgs<T> a{};
  a.beta1 = static_cast<T>(FloatAttr(kc, "beta1", 0.9));
  a.beta2 = static_cast<T>(FloatAttr(kc, "beta2", 0.999));
  a.eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-6));
  a.weight_decay = static_cast<T>(FloatAttr(kc, "weight_decay", 0.01));
  const unsigned parts = PartBlocks(n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    LambNormKernel<T><<<parts, kThreads, 0, s->native>>>(
        Data<const T>(p), Data<const T>(g), Data<const T>(m1), Data<const T>(m2), n,
        ScalarOf(b1p), ScalarOf(b2p), a, scratch);
    FoldKernel<<<1, kThreads, 0, s->native>>>(scratch, static_cast<int>(parts), true, 0.0,
                                              scratch + 2 * kParts);
    LambUpdateKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(p), Data<const T>(g), Data<const T>(m1), Data<const T>(m2), Data<T>(po),
        Data<T>(m1o), Data<T>(m2o), n, ScalarOf(lr), ScalarOf(b1p), ScalarOf(b2p), a,
        scratch + 2 * kParts);
    // The CPU multiplies by beta as T widened to double; so does this.
    EnqueueBetaPows(kc, s, static_cast<double>(a.beta1), static_cast<double>(a.beta2));
    return nullptr;
  });
}

// ---- adamax -------------------------------------------------------------------------------

template <typename T>
struct AdamaxArgs {
  T beta1, beta2, eps;
};

template <typename T>
__global__ void AdamaxKernel(const T* param, const T* grad, const T* moment, const T* inf_norm,
                             T* param_out, T* moment_out, T* inf_norm_out, int64_t n, Scalar lr,
                             Scalar b1p, AdamaxArgs<T> a) {
  const T rate = static_cast<T>(LoadScalar(lr));
  const T bp1 = static_cast<T>(LoadScalar(b1p));
  FLEET_CUDA_LOOP(i, n) {
    const fk::AdamaxOut<T> o = fk::AdamaxStep(param[i], grad[i], moment[i], inf_norm[i], rate,
                                              a.beta1, a.beta2, a.eps, bp1);
    param_out[i] = o.param;
    moment_out[i] = o.moment;
    inf_norm_out[i] = o.inf_norm;
  }
}

template <typename T>
FleetStatus* AdamaxLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* p = Input(kc, "Param");
  if (p == nullptr) return Missing(kc, "Param");
  const int64_t n = Numel(p);
  const FleetTensor* g = Input(kc, "Grad");
  const FleetTensor* m = Input(kc, "Moment");
  const FleetTensor* u = Input(kc, "InfNorm");
  const FleetTensor* lr = Input(kc, "LearningRate");
  const FleetTensor* b1p = Input(kc, "Beta1Pow");
  const FleetTensor* po = Output(kc, "ParamOut");
  const FleetTensor* mo = Output(kc, "MomentOut");
  const FleetTensor* uo = Output(kc, "InfNormOut");
  if (FleetStatus* s = Like<T>(kc, p, "Param", n)) return s;
  if (FleetStatus* s = Like<T>(kc, g, "Grad", n)) return s;
  if (FleetStatus* s = Like<T>(kc, m, "Moment", n)) return s;
  if (FleetStatus* s = Like<T>(kc, u, "InfNorm", n)) return s;
  if (FleetStatus* s = Like<T>(kc, po, "ParamOut", n)) return s;
  if (FleetStatus* s = Like<T>(kc, mo, "MomentOut", n)) return s;
  if (FleetStatus* s = Like<T>(kc, uo, "InfNormOut", n)) return s;
  if (FleetStatus* s = CheckScalar(kc, lr, "LearningRate")) return s;
  if (FleetStatus* s = CheckScalar(kc, b1p, "Beta1Pow")) return s;
  AdamaxArgs<T> a{};
  a.beta1 = static_cast<T>(FloatAttr(kc, "beta1", 0.9));
  a.beta2 = static_cast<T>(FloatAttr(kc, "beta2", 0.999));
  a.eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-8));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    AdamaxKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(p), Data<const T>(g), Data<const T>(m), Data<const T>(u), Data<T>(po),
        Data<T>(mo), Data<T>(uo), n, ScalarOf(lr), ScalarOf(b1p), a);
    return nullptr;
  });
}

// ---- clip_by_norm -------------------------------------------------------------------------

template <typename T>
__global__ void SquarePartialKernel(const T* x, int64_t n, double* partials) {
  double acc = 0.0;
  FLEET_CUDA_LOOP(i, n) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
  }
  const double sum = BlockFold(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

template <typename T>
__global__ void ScaleByKernel(const T* x, T* out, int64_t n, const double* scale) {
  const T f = static_cast<T>(scale[0]);
  FLEET_CUDA_LOOP(i, n) { out[i] = x[i] * f; }
}

template <typename T>
FleetStatus* ClipByNormLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  if (x == nullptr) return Missing(kc, "X");
  const int64_t n = Numel(x);
  const FleetTensor* out = Output(kc, "Out");
  if (FleetStatus* s = Like<T>(kc, x, "X", n)) return s;
  if (FleetStatus* s = Like<T>(kc, out, "Out", n)) return s;
  double* scratch = nullptr;
  if (FleetStatus* s = ScratchOf(kc, &scratch)) return s;
  const double max_norm = FloatAttr(kc, "max_norm", 1.0);
  const unsigned parts = PartBlocks(n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    SquarePartialKernel<T><<<parts, kThreads, 0, s->native>>>(Data<const T>(x), n, scratch);
    FoldKernel<<<1, kThreads, 0, s->native>>>(scratch, static_cast<int>(parts), false, max_norm,
                                              scratch + 2 * kParts);
    ScaleByKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x), Data<T>(out), n,
                                                             scratch + 2 * kParts);
    return nullptr;
  });
}

}  // namespace

void AddOptimizerExtKernels(KernelList& list) {
  Add(list, "adagrad", FLEET_DTYPE_FLOAT32, AdagradLaunch<float>);
  Add(list, "adagrad", FLEET_DTYPE_FLOAT64, AdagradLaunch<double>);
  Add(list, "rmsprop", FLEET_DTYPE_FLOAT32, RmspropLaunch<float>);
  Add(list, "rmsprop", FLEET_DTYPE_FLOAT64, RmspropLaunch<double>);
  Add(list, "lamb", FLEET_DTYPE_FLOAT32, LambLaunch<float>, PrepareScratch);
  Add(list, "lamb", FLEET_DTYPE_FLOAT64, LambLaunch<double>, PrepareScratch);
  Add(list, "adamax", FLEET_DTYPE_FLOAT32, AdamaxLaunch<float>);
  Add(list, "adamax", FLEET_DTYPE_FLOAT64, AdamaxLaunch<double>);
  Add(list, "clip_by_norm", FLEET_DTYPE_FLOAT32, ClipByNormLaunch<float>, PrepareScratch);
  Add(list, "clip_by_norm", FLEET_DTYPE_FLOAT64, ClipByNormLaunch<double>, PrepareScratch);
}

}  // namespace fleet_cuda
