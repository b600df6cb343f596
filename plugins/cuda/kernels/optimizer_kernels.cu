// CUDA kernels of the optimizer ops (sgd, momentum, adam, adamw), squared_l2_norm and
// lr_schedule, with the CPU plugin's formulas (plugins/cpu/kernels/optimizer_kernels.cc).
//
// Scalars (learning rate, beta powers, the step counter) are one-element device tensors of
// float32, float64 or int64, read by the kernels themselves: the host never waits for them.
// Every update kernel reads element i of each input before it writes element i of each
// output, so an output may alias its input (ParamOut == Param), as the optimizers emit them.
// The beta powers are the exception: every thread reads them, so Beta1PowOut/Beta2PowOut
// (usually the same tensors) are written by a second, one-thread kernel queued behind the
// update.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/optimizer_groups.h"
#include "lr_formulas.h"
#include "optimizer_formulas.h"

namespace fleet_cuda {

FleetStatus* MissingSlot(const FleetKernelContext* kc, const char* what) {
  return InvalidArgument((kc->op_type != nullptr ? std::string(kc->op_type) : "kernel") + ": " +
                         what + " is missing");
}

FleetStatus* CheckScalarIn(const FleetKernelContext* kc, const FleetTensor* t, const char* slot) {
  if (t == nullptr || t->data == nullptr || Numel(t) < 1) return MissingSlot(kc, slot);
  if (t->dtype != FLEET_DTYPE_FLOAT32 && t->dtype != FLEET_DTYPE_FLOAT64 &&
      t->dtype != FLEET_DTYPE_INT64) {
    return InvalidArgument(std::string(kc->op_type) + ": " + slot +
                           " must be float32, float64 or int64, got dtype " +
                           std::to_string(t->dtype));
  }
  return nullptr;
}

namespace {

std::string Op(const FleetKernelContext* kc) {
  return kc->op_type != nullptr ? std::string(kc->op_type) : "kernel";
}

template <typename T>
constexpr int32_t DtypeOf() {
  return std::is_same_v<T, double> ? FLEET_DTYPE_FLOAT64 : FLEET_DTYPE_FLOAT32;
}

// `t` must be present with `n` elements of `dtype`, as Param is.
FleetStatus* CheckLike(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                       int32_t dtype, int64_t n) {
  if (t == nullptr) return MissingSlot(kc, slot);
  if (t->dtype != dtype) {
    return InvalidArgument(Op(kc) + ": " + slot + " has dtype " + std::to_string(t->dtype) +
                           " but Param has " + std::to_string(dtype));
  }
  if (Numel(t) != n) {
    return InvalidArgument(Op(kc) + ": " + slot + " has " + std::to_string(Numel(t)) +
                           " elements, Param has " + std::to_string(n));
  }
  return nullptr;
}

// Param decides the kernel's dtype; a mismatch means the host picked the wrong kernel.
FleetStatus* CheckParam(const FleetKernelContext* kc, const FleetTensor* p, int32_t dtype) {
  if (p == nullptr) return MissingSlot(kc, "Param");
  if (p->dtype == dtype) return nullptr;
  return InvalidArgument(Op(kc) + ": Param has dtype " + std::to_string(p->dtype) +
                         ", this kernel is for dtype " + std::to_string(dtype));
}

// A scalar output: one float32 or float64 element.
FleetStatus* CheckScalarOut(const FleetKernelContext* kc, const FleetTensor* t,
                            const char* slot) {
  if (t == nullptr || Numel(t) != 1) {
    return InvalidArgument(Op(kc) + ": " + slot + " is missing or does not hold one element");
  }
  if (t->dtype != FLEET_DTYPE_FLOAT32 && t->dtype != FLEET_DTYPE_FLOAT64) {
    return InvalidArgument(Op(kc) + ": " + slot + " must be float32 or float64, got dtype " +
                           std::to_string(t->dtype));
  }
  return nullptr;
}

__device__ inline float Sqrt(float v) { return sqrtf(v); }
__device__ inline double Sqrt(double v) { return sqrt(v); }

// ---- sgd ----------------------------------------------------------------------------------

template <typename T>
__global__ void SgdKernel(const T* param, const T* grad, T* param_out, int64_t n, Scalar lr) {
  const T rate = static_cast<T>(LoadScalar(lr.data, lr.dtype));
  FLEET_CUDA_LOOP(i, n) { param_out[i] = param[i] - rate * grad[i]; }
}

template <typename T>
FleetStatus* SgdLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* p = Input(kc, "Param");
  const FleetTensor* g = Input(kc, "Grad");
  const FleetTensor* lr = Input(kc, "LearningRate");
  const FleetTensor* out = Output(kc, "ParamOut");
  if (p == nullptr) return MissingSlot(kc, "Param");
  const int64_t n = Numel(p);
  if (FleetStatus* s = CheckParam(kc, p, DtypeOf<T>())) return s;
  if (FleetStatus* s = CheckLike(kc, g, "Grad", DtypeOf<T>(), n)) return s;
  if (FleetStatus* s = CheckLike(kc, out, "ParamOut", DtypeOf<T>(), n)) return s;
  if (FleetStatus* s = CheckScalarIn(kc, lr, "LearningRate")) return s;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    SgdKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(p), Data<const T>(g),
                                                         Data<T>(out), n, ScalarOf(lr));
    return nullptr;
  });
}

// ---- momentum -----------------------------------------------------------------------------

template <typename T>
__global__ void MomentumKernel(const T* param, const T* grad, const T* velocity, T* param_out,
                               T* velocity_out, int64_t n, Scalar lr, T mu, bool nesterov,
                               T coeff, T rescale) {
  const T rate = static_cast<T>(LoadScalar(lr.data, lr.dtype));
  FLEET_CUDA_LOOP(i, n) {
    const T p = param[i];
    const T g = rescale * grad[i] + coeff * p;
    const T v = mu * velocity[i] + g;
    velocity_out[i] = v;
    param_out[i] = nesterov ? p - (g + mu * v) * rate : p - rate * v;
  }
}

}  // namespace

template <typename T>
FleetStatus* CheckMomentum(const FleetKernelContext* kc) {
  const FleetTensor* p = Input(kc, "Param");
  if (FleetStatus* s = CheckParam(kc, p, DtypeOf<T>())) return s;
  const int64_t n = Numel(p);
  if (FleetStatus* s = CheckLike(kc, Input(kc, "Velocity"), "Velocity", DtypeOf<T>(), n)) {
    return s;
  }
  if (FleetStatus* s = CheckLike(kc, Output(kc, "ParamOut"), "ParamOut", DtypeOf<T>(), n)) {
    return s;
  }
  if (FleetStatus* s =
          CheckLike(kc, Output(kc, "VelocityOut"), "VelocityOut", DtypeOf<T>(), n)) {
    return s;
  }
  return CheckScalarIn(kc, Input(kc, "LearningRate"), "LearningRate");
}

template <typename T>
void EnqueueMomentum(const FleetKernelContext* kc, FleetStream* stream, const T* grad) {
  const FleetTensor* p = Input(kc, "Param");
  const int64_t n = Numel(p);
  const T mu = static_cast<T>(FloatAttr(kc, "mu", 0.9));
  const bool nesterov = BoolAttr(kc, "use_nesterov", false);
  const bool l2 = StringAttr(kc, "regularization_method") == "l2_decay";
  const T coeff = l2 ? static_cast<T>(FloatAttr(kc, "regularization_coeff", 0.0)) : T(0);
  const T rescale = static_cast<T>(FloatAttr(kc, "rescale_grad", 1.0));
  MomentumKernel<T><<<Blocks(n), kThreads, 0, stream->native>>>(
      Data<const T>(p), grad, Data<const T>(Input(kc, "Velocity")), Data<T>(Output(kc, "ParamOut")),
      Data<T>(Output(kc, "VelocityOut")), n, ScalarOf(Input(kc, "LearningRate")), mu, nesterov,
      coeff, rescale);
}

template FleetStatus* CheckMomentum<float>(const FleetKernelContext*);
template FleetStatus* CheckMomentum<double>(const FleetKernelContext*);
template void EnqueueMomentum<float>(const FleetKernelContext*, FleetStream*, const float*);
template void EnqueueMomentum<double>(const FleetKernelContext*, FleetStream*, const double*);

namespace {

template <typename T>
FleetStatus* MomentumLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* p = Input(kc, "Param");
  const FleetTensor* g = Input(kc, "Grad");
  if (FleetStatus* s = CheckMomentum<T>(kc)) return s;
  if (FleetStatus* s = CheckLike(kc, g, "Grad", DtypeOf<T>(), Numel(p))) return s;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    EnqueueMomentum<T>(kc, s, Data<const T>(g));
    return nullptr;
  });
}

// ---- adam / adamw -------------------------------------------------------------------------

template <typename T>
struct AdamAttrs {
  T beta1, beta2, epsilon;
  T lr_ratio;       // adamw only
  T coeff;          // adamw only
  bool with_decay;  // adamw only
};

template <typename T, bool kAdamW>
__global__ void AdamKernel(const T* param, const T* grad, const T* moment1, const T* moment2,
                           T* param_out, T* moment1_out, T* moment2_out, int64_t n, Scalar lr_in,
                           Scalar beta1_pow, Scalar beta2_pow, AdamAttrs<T> a) {
  T lr = static_cast<T>(LoadScalar(lr_in.data, lr_in.dtype));
  const T b1p = static_cast<T>(LoadScalar(beta1_pow.data, beta1_pow.dtype));
  const T b2p = static_cast<T>(LoadScalar(beta2_pow.data, beta2_pow.dtype));
  // adamw: decoupled decay with the (ratio-scaled) rate before bias correction.
  T decay = T(0);
  if constexpr (kAdamW) {
    lr *= a.lr_ratio;
    if (a.with_decay) decay = lr * a.coeff;
  }
  const auto [lr_t, eps_t] = fleet::kernel::AdamRatesOf(lr, a.epsilon, b1p, b2p);
  FLEET_CUDA_LOOP(i, n) {
    const T g = grad[i];
    T p = param[i];
    if constexpr (kAdamW) p -= decay * p;
    const T m1 = a.beta1 * moment1[i] + (T(1) - a.beta1) * g;
    const T m2 = a.beta2 * moment2[i] + (T(1) - a.beta2) * g * g;
    moment1_out[i] = m1;
    moment2_out[i] = m2;
    param_out[i] = p - lr_t * (m1 / (Sqrt(m2) + eps_t));
  }
}

// Reads both powers before writing either, so any aliasing among the four is harmless.
__global__ void BetaPowKernel(Scalar beta1_pow, Scalar beta2_pow, void* beta1_pow_out,
                              int32_t beta1_pow_out_dtype, void* beta2_pow_out,
                              int32_t beta2_pow_out_dtype, double beta1, double beta2) {
  const double b1 = LoadScalar(beta1_pow) * beta1;
  const double b2 = LoadScalar(beta2_pow) * beta2;
  if (beta1_pow_out != nullptr) StoreScalar(beta1_pow_out, beta1_pow_out_dtype, b1);
  if (beta2_pow_out != nullptr) StoreScalar(beta2_pow_out, beta2_pow_out_dtype, b2);
}

template <typename T, bool kAdamW>
AdamAttrs<T> AdamAttrsOf(const FleetKernelContext* kc) {
  AdamAttrs<T> a{};
  a.beta1 = static_cast<T>(FloatAttr(kc, "beta1", 0.9));
  a.beta2 = static_cast<T>(FloatAttr(kc, "beta2", 0.999));
  a.epsilon = static_cast<T>(FloatAttr(kc, "epsilon", 1e-8));
  a.lr_ratio = T(1);
  a.coeff = T(0);
  a.with_decay = false;
  if constexpr (kAdamW) {
    a.lr_ratio = static_cast<T>(FloatAttr(kc, "lr_ratio", 1.0));
    a.coeff = static_cast<T>(FloatAttr(kc, "coeff", 0.01));
    a.with_decay = BoolAttr(kc, "with_decay", false);
  }
  return a;
}

}  // namespace

void EnqueueBetaPows(const FleetKernelContext* kc, FleetStream* stream, double beta1,
                     double beta2) {
  const FleetTensor* b1p_out = Output(kc, "Beta1PowOut");
  const FleetTensor* b2p_out = Output(kc, "Beta2PowOut");
  if (b1p_out == nullptr && b2p_out == nullptr) return;
  BetaPowKernel<<<1, 1, 0, stream->native>>>(
      ScalarOf(Input(kc, "Beta1Pow")), ScalarOf(Input(kc, "Beta2Pow")),
      b1p_out != nullptr ? b1p_out->data : nullptr,
      b1p_out != nullptr ? b1p_out->dtype : FLEET_DTYPE_FLOAT32,
      b2p_out != nullptr ? b2p_out->data : nullptr,
      b2p_out != nullptr ? b2p_out->dtype : FLEET_DTYPE_FLOAT32, beta1, beta2);
}

template <typename T, bool kAdamW>
FleetStatus* CheckAdam(const FleetKernelContext* kc) {
  const FleetTensor* p = Input(kc, "Param");
  if (FleetStatus* s = CheckParam(kc, p, DtypeOf<T>())) return s;
  const int64_t n = Numel(p);
  for (const char* slot : {"Moment1", "Moment2"}) {
    if (FleetStatus* s = CheckLike(kc, Input(kc, slot), slot, DtypeOf<T>(), n)) return s;
  }
  for (const char* slot : {"ParamOut", "Moment1Out", "Moment2Out"}) {
    if (FleetStatus* s = CheckLike(kc, Output(kc, slot), slot, DtypeOf<T>(), n)) return s;
  }
  for (const char* slot : {"LearningRate", "Beta1Pow", "Beta2Pow"}) {
    if (FleetStatus* s = CheckScalarIn(kc, Input(kc, slot), slot)) return s;
  }
  for (const char* slot : {"Beta1PowOut", "Beta2PowOut"}) {
    if (const FleetTensor* t = Output(kc, slot)) {
      if (FleetStatus* s = CheckScalarOut(kc, t, slot)) return s;
    }
  }
  return nullptr;
}

template <typename T, bool kAdamW>
void EnqueueAdam(const FleetKernelContext* kc, FleetStream* stream, const T* grad) {
  const FleetTensor* p = Input(kc, "Param");
  const int64_t n = Numel(p);
  const AdamAttrs<T> a = AdamAttrsOf<T, kAdamW>(kc);
  AdamKernel<T, kAdamW><<<Blocks(n), kThreads, 0, stream->native>>>(
      Data<const T>(p), grad, Data<const T>(Input(kc, "Moment1")),
      Data<const T>(Input(kc, "Moment2")), Data<T>(Output(kc, "ParamOut")),
      Data<T>(Output(kc, "Moment1Out")), Data<T>(Output(kc, "Moment2Out")), n,
      ScalarOf(Input(kc, "LearningRate")), ScalarOf(Input(kc, "Beta1Pow")),
      ScalarOf(Input(kc, "Beta2Pow")), a);
  // The CPU multiplies by beta as T widened to double; so does this.
  EnqueueBetaPows(kc, stream, static_cast<double>(a.beta1), static_cast<double>(a.beta2));
}

template FleetStatus* CheckAdam<float, false>(const FleetKernelContext*);
template FleetStatus* CheckAdam<double, false>(const FleetKernelContext*);
template void EnqueueAdam<float, false>(const FleetKernelContext*, FleetStream*, const float*);
template void EnqueueAdam<double, false>(const FleetKernelContext*, FleetStream*, const double*);

namespace {

template <typename T, bool kAdamW>
FleetStatus* AdamLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* p = Input(kc, "Param");
  const FleetTensor* g = Input(kc, "Grad");
  if (FleetStatus* s = CheckAdam<T, kAdamW>(kc)) return s;
  if (FleetStatus* s = CheckLike(kc, g, "Grad", DtypeOf<T>(), Numel(p))) return s;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    EnqueueAdam<T, kAdamW>(kc, s, Data<const T>(g));
    return nullptr;
  });
}

// ---- squared_l2_norm ----------------------------------------------------------------------

// Partial sums per block, then one block sums the partials: a fixed order for a given size,
// in double like the CPU, so a large float32 gradient does not lose small terms.
constexpr int kNormPartials = 512;

__device__ inline double BlockSum(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  return part[0];
}

template <typename T>
__global__ void SquaredSumPartialKernel(const T* x, int64_t n, double* partials) {
  double acc = 0.0;
  FLEET_CUDA_LOOP(i, n) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
  }
  const double sum = BlockSum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

template <typename T>
__global__ void SquaredSumFinalKernel(const double* partials, int count, T* out) {
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) {
    acc += partials[i];
  }
  const double sum = BlockSum(acc);
  if (threadIdx.x == 0) out[0] = static_cast<T>(sum);
}

FleetStatus* SquaredL2NormPrepare(void*, const FleetKernelContext*, void**,
                                  size_t* scratch_bytes) {
  *scratch_bytes = kNormPartials * sizeof(double);
  return nullptr;
}

template <typename T>
FleetStatus* SquaredL2NormLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  if (x == nullptr) return MissingSlot(kc, "X");
  const int64_t n = Numel(x);
  if (x->dtype != DtypeOf<T>()) {
    return InvalidArgument(Op(kc) + ": X has dtype " + std::to_string(x->dtype) +
                           ", this kernel is for dtype " + std::to_string(DtypeOf<T>()));
  }
  if (out == nullptr || Numel(out) != 1 || out->dtype != DtypeOf<T>()) {
    return InvalidArgument(Op(kc) + ": Out must be one element of X's dtype");
  }
  if (kc->scratch == nullptr) {
    return Error(FLEET_CODE_INTERNAL,
                 Op(kc) + ": launched without the scratch memory asked for at prepare");
  }
  auto* partials = static_cast<double*>(kc->scratch);
  const unsigned blocks = std::min<unsigned>(Blocks(n), kNormPartials);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    SquaredSumPartialKernel<T><<<blocks, kThreads, 0, s->native>>>(Data<const T>(x), n,
                                                                   partials);
    SquaredSumFinalKernel<T><<<1, kThreads, 0, s->native>>>(partials, static_cast<int>(blocks),
                                                            Data<T>(out));
    return nullptr;
  });
}

// ---- lr_schedule ------------------------------------------------------------------------------

// The schedule's parameters and formula are plugins/common/lr_formulas.h, shared with the CPU
// plugin. The parameters go to the kernel by value; the piecewise table they point at lives in
// device memory made at prepare.
struct LrState {
  fleet::kernel::LrSchedule params;
  void* table = nullptr;  // device memory behind params.boundaries / params.values
  int32_t ordinal = 0;
};

__global__ void LrKernel(fleet::kernel::LrSchedule params, Scalar step, void* out,
                         int32_t out_dtype) {
  StoreScalar(out, out_dtype, fleet::kernel::LrAt(params, LoadScalar(step.data, step.dtype)));
}

void LrRelease(void*, void* state) {
  auto* s = static_cast<LrState*>(state);
  if (s == nullptr) return;
  if (s->table != nullptr && cudaSetDevice(s->ordinal) == cudaSuccess) cudaFree(s->table);
  delete s;
}

FleetStatus* LrPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  std::unique_ptr<LrState> s(new (std::nothrow) LrState());
  if (s == nullptr) return Error(FLEET_CODE_INTERNAL, "lr_schedule: out of memory");
  using fleet::kernel::LrScheduleType;
  fleet::kernel::LrSchedule& p = s->params;
  std::string_view type = StringAttr(kc, "type");
  if (type == "constant") {
    p.type = LrScheduleType::kConstant;
  } else if (type == "piecewise") {
    p.type = LrScheduleType::kPiecewise;
  } else if (type == "exponential") {
    p.type = LrScheduleType::kExponential;
  } else if (type == "cosine") {
    p.type = LrScheduleType::kCosine;
  } else if (type == "polynomial") {
    p.type = LrScheduleType::kPolynomial;
  } else if (type == "noam") {
    p.type = LrScheduleType::kNoam;
  } else if (type == "natural_exp") {
    p.type = LrScheduleType::kNaturalExp;
  } else if (type == "inverse_time") {
    p.type = LrScheduleType::kInverseTime;
  } else {
    return InvalidArgument("lr_schedule: unknown schedule type \"" + std::string(type) +
                           "\" (expected constant, piecewise, exponential, cosine, "
                           "polynomial, noam, natural_exp or inverse_time)");
  }
  p.learning_rate = FloatAttr(kc, "learning_rate", 0.01);
  p.gamma = FloatAttr(kc, "gamma", 1.0);
  p.decay_steps = static_cast<double>(IntAttr(kc, "decay_steps", 1));
  p.staircase = BoolAttr(kc, "staircase", false);
  p.t_max = static_cast<double>(IntAttr(kc, "T_max", 1));
  p.eta_min = FloatAttr(kc, "eta_min", 0.0);
  p.warmup_steps = static_cast<double>(IntAttr(kc, "warmup_steps", 0));
  p.start_lr = FloatAttr(kc, "start_lr", 0.0);
  p.end_lr = FloatAttr(kc, "end_lr", 0.0);
  p.end_learning_rate = FloatAttr(kc, "end_learning_rate", 0.0001);
  p.power = FloatAttr(kc, "power", 1.0);
  p.cycle = BoolAttr(kc, "cycle", false);
  p.d_model = FloatAttr(kc, "d_model", 1.0);
  p.noam_warmup_steps = static_cast<double>(IntAttr(kc, "noam_warmup_steps", 1));
  p.decay_rate = FloatAttr(kc, "decay_rate", 0.0);
  if (p.noam_warmup_steps <= 0 || p.d_model <= 0) {
    return InvalidArgument("lr_schedule: noam_warmup_steps and d_model must be positive");
  }
  if (p.decay_steps <= 0 || p.t_max <= 0) {
    return InvalidArgument("lr_schedule: decay_steps and T_max must be positive");
  }
  if (p.type == LrScheduleType::kPiecewise) {
    const std::vector<int64_t> boundaries = IntsAttr(kc, "boundaries");
    const std::vector<double> values = FloatsAttr(kc, "values");
    if (values.size() != boundaries.size() + 1) {
      return InvalidArgument("lr_schedule: piecewise needs one more value than boundaries, got " +
                             std::to_string(boundaries.size()) + " boundaries and " +
                             std::to_string(values.size()) + " values");
    }
    // One upload at prepare; launches then pass only pointers.
    const size_t bound_bytes = boundaries.size() * sizeof(int64_t);
    const size_t value_bytes = values.size() * sizeof(double);
    std::vector<unsigned char> host(bound_bytes + value_bytes);
    if (bound_bytes > 0) std::memcpy(host.data(), boundaries.data(), bound_bytes);
    std::memcpy(host.data() + bound_bytes, values.data(), value_bytes);
    s->ordinal = kc->device_ordinal;
    if (FleetStatus* st = CudaStatus(cudaSetDevice(s->ordinal), "lr_schedule: cudaSetDevice")) {
      return st;
    }
    if (FleetStatus* st = CudaStatus(cudaMalloc(&s->table, host.size()),
                                     "lr_schedule: allocating the piecewise table")) {
      s->table = nullptr;
      return st;
    }
    // Not a plain cudaMemcpy: from pageable memory it may return before the DMA lands, and it
    // runs on the legacy default stream, which the plugin's non-blocking streams do not wait
    // for. The copy goes through this thread's stream (idle: every call that uses it waits for
    // its work) and is waited for, so the table is in place for a launch on any stream.
    FleetStream* upload = StreamOrDefault(nullptr, s->ordinal);
    if (upload == nullptr) {
      LrRelease(nullptr, s.release());
      return Error(FLEET_CODE_INTERNAL,
                   "lr_schedule: no stream to upload the piecewise table on cuda:" +
                       std::to_string(kc->device_ordinal));
    }
    cudaError_t err = cudaMemcpyAsync(s->table, host.data(), host.size(),
                                      cudaMemcpyHostToDevice, upload->native);
    if (err == cudaSuccess) err = cudaStreamSynchronize(upload->native);
    if (FleetStatus* st = CudaStatus(err, "lr_schedule: uploading the piecewise table")) {
      LrRelease(nullptr, s.release());
      return st;
    }
    auto* base = static_cast<unsigned char*>(s->table);
    p.num_boundaries = static_cast<int64_t>(boundaries.size());
    p.boundaries = reinterpret_cast<const int64_t*>(base);
    p.values = reinterpret_cast<const double*>(base + bound_bytes);
  }
  *state = s.release();
  return nullptr;
}

FleetStatus* LrLaunch(void*, const FleetKernelContext* kc, void* state) {
  if (state == nullptr) return InvalidArgument("lr_schedule: launched without prepare");
  const FleetTensor* step = Input(kc, "Step");
  const FleetTensor* out = Output(kc, "Out");
  if (FleetStatus* s = CheckScalarIn(kc, step, "Step")) return s;
  if (FleetStatus* s = CheckScalarOut(kc, out, "Out")) return s;
  const fleet::kernel::LrSchedule params = static_cast<const LrState*>(state)->params;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    LrKernel<<<1, 1, 0, s->native>>>(params, ScalarOf(step), out->data, out->dtype);
    return nullptr;
  });
}

}  // namespace

void AddOptimizerKernels(KernelList& list) {
  Add(list, "sgd", FLEET_DTYPE_FLOAT32, SgdLaunch<float>);
  Add(list, "sgd", FLEET_DTYPE_FLOAT64, SgdLaunch<double>);
  Add(list, "momentum", FLEET_DTYPE_FLOAT32, MomentumLaunch<float>);
  Add(list, "momentum", FLEET_DTYPE_FLOAT64, MomentumLaunch<double>);
  Add(list, "adam", FLEET_DTYPE_FLOAT32, AdamLaunch<float, false>);
  Add(list, "adam", FLEET_DTYPE_FLOAT64, AdamLaunch<double, false>);
  Add(list, "adamw", FLEET_DTYPE_FLOAT32, AdamLaunch<float, true>);
  Add(list, "adamw", FLEET_DTYPE_FLOAT64, AdamLaunch<double, true>);
  Add(list, "squared_l2_norm", FLEET_DTYPE_FLOAT32, SquaredL2NormLaunch<float>,
      SquaredL2NormPrepare);
  Add(list, "squared_l2_norm", FLEET_DTYPE_FLOAT64, SquaredL2NormLaunch<double>,
      SquaredL2NormPrepare);
  for (int32_t dtype : {FLEET_DTYPE_INT64, FLEET_DTYPE_FLOAT32, FLEET_DTYPE_FLOAT64}) {
    Add(list, "lr_schedule", dtype, LrLaunch, LrPrepare, LrRelease);
  }
  AddOptimizerExtKernels(list);
}

}  // namespace fleet_cuda
