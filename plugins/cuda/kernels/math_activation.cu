// Activations and their grads, sign, and softmax / log_softmax with their grads, with the CPU
// plugin's formulas. Element-wise ops run a thread per element. Softmax runs a team of threads
// per row (a warp for rows of up to 1024 elements, a whole block beyond): the team finds the
// row's maximum, sums exp(x - max) in double and writes the row; every reduction is a fixed tree
// of shuffles, so results do not vary from run to run.
#include <string>

#include "kernels/math_groups.h"

namespace fleet_cuda {
namespace math {
namespace {

enum class Act { kRelu, kTanh, kSigmoid, kSqrt, kExp, kGelu, kLeakyRelu, kSquare, kLog };

// The grad of these reads Out (slot "Out"); the others read X, as the schemas say.
constexpr bool GradReadsOut(Act a) {
  return a == Act::kRelu || a == Act::kTanh || a == Act::kSigmoid || a == Act::kSqrt ||
         a == Act::kExp;
}

// Precision-matched device math (no fast-math intrinsics).
__device__ inline float Exp(float v) { return expf(v); }
__device__ inline double Exp(double v) { return exp(v); }
__device__ inline float Log(float v) { return logf(v); }
__device__ inline double Log(double v) { return log(v); }
__device__ inline float Tanh(float v) { return tanhf(v); }
__device__ inline double Tanh(double v) { return tanh(v); }
__device__ inline float Sqrt(float v) { return sqrtf(v); }
__device__ inline double Sqrt(double v) { return sqrt(v); }
__device__ inline float Erf(float v) { return erff(v); }
__device__ inline double Erf(double v) { return erf(v); }

// Attributes the formulas read (approximate: gelu; alpha: leaky_relu).
template <typename T>
struct ActParams {
  bool approximate;
  T alpha;
};

template <Act a, typename T>
__device__ inline T Forward(T x, const ActParams<T>& p) {
  const T sqrt_2_over_pi = T(0.7978845608028654);
  const T gelu_coeff = T(0.044715);
  if constexpr (a == Act::kRelu) {
    return x > T(0) ? x : T(0);
  } else if constexpr (a == Act::kTanh) {
    return Tanh(x);
  } else if constexpr (a == Act::kSigmoid) {
    return T(1) / (T(1) + Exp(-x));
  } else if constexpr (a == Act::kSqrt) {
    return Sqrt(x);
  } else if constexpr (a == Act::kExp) {
    return Exp(x);
  } else if constexpr (a == Act::kGelu) {
    if (p.approximate) {
      return T(0.5) * x * (T(1) + Tanh(sqrt_2_over_pi * (x + gelu_coeff * x * x * x)));
    }
    return T(0.5) * x * (T(1) + Erf(x / Sqrt(T(2))));
  } else if constexpr (a == Act::kLeakyRelu) {
    return x > T(0) ? x : p.alpha * x;
  } else if constexpr (a == Act::kSquare) {
    return x * x;
  } else {
    return Log(x);
  }
}

// dX from `v` (Out where GradReadsOut, else X) and dOut.
template <Act a, typename T>
__device__ inline T Backward(T v, T g, const ActParams<T>& p) {
  const T sqrt_2_over_pi = T(0.7978845608028654);
  const T gelu_coeff = T(0.044715);
  if constexpr (a == Act::kRelu) {
    return v > T(0) ? g : T(0);
  } else if constexpr (a == Act::kTanh) {
    return g * (T(1) - v * v);
  } else if constexpr (a == Act::kSigmoid) {
    return g * v * (T(1) - v);
  } else if constexpr (a == Act::kSqrt) {
    return g * T(0.5) / v;
  } else if constexpr (a == Act::kExp) {
    return g * v;
  } else if constexpr (a == Act::kGelu) {
    if (p.approximate) {
      const T u = sqrt_2_over_pi * (v + gelu_coeff * v * v * v);
      const T t = Tanh(u);
      const T du = sqrt_2_over_pi * (T(1) + T(3) * gelu_coeff * v * v);
      return g * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
    }
    const T cdf = T(0.5) * (T(1) + Erf(v / Sqrt(T(2))));
    const T pdf = Exp(T(-0.5) * v * v) / Sqrt(T(2) * T(3.14159265358979323846));
    return g * (cdf + v * pdf);
  } else if constexpr (a == Act::kLeakyRelu) {
    return v > T(0) ? g : p.alpha * g;
  } else if constexpr (a == Act::kSquare) {
    return g * T(2) * v;
  } else {
    return g / v;
  }
}

template <Act a, typename T>
__global__ void ActKernel(const T* x, T* out, int64_t n, ActParams<T> p) {
  FLEET_CUDA_LOOP(i, n) { out[i] = Forward<a>(x[i], p); }
}

template <Act a, typename T>
__global__ void ActGradKernel(const T* v, const T* g, T* dx, int64_t n, ActParams<T> p) {
  FLEET_CUDA_LOOP(i, n) { dx[i] = Backward<a>(v[i], g[i], p); }
}

template <typename T>
ActParams<T> ReadParams(const FleetKernelContext* kc) {
  return ActParams<T>{BoolAttr(kc, "approximate", false),
                      static_cast<T>(FloatAttr(kc, "alpha", 0.02))};
}

template <Act a, typename T>
FleetStatus* ActLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if (n == 0) return nullptr;
    ActKernel<a, T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x), Data<T>(out), n,
                                                           ReadParams<T>(kc));
    return nullptr;
  });
}

template <Act a, typename T>
FleetStatus* ActGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const char* v_slot = GradReadsOut(a) ? "Out" : "X";
    if (FleetStatus* e = RequireSlots(kc, {v_slot, "Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* v = Input(kc, v_slot);
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const int64_t n = Numel(dout);
    if (FleetStatus* e = ExpectNumel(kc, v, v_slot, n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", n)) return e;
    if (n == 0) return nullptr;
    ActGradKernel<a, T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(v), Data<const T>(dout), Data<T>(dx), n, ReadParams<T>(kc));
    return nullptr;
  });
}

template <Act a>
void AddActivation(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, ActLaunch<a, float>);
  Add(list, name, FLEET_DTYPE_FLOAT64, ActLaunch<a, double>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, ActGradLaunch<a, float>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, ActGradLaunch<a, double>);
}

// ---- sign -----------------------------------------------------------------------------------

template <typename T>
__global__ void SignKernel(const T* x, T* out, int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    const T v = x[i];
    out[i] = static_cast<T>((v > T(0)) - (v < T(0)));
  }
}

template <typename T>
FleetStatus* SignLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if (n == 0) return nullptr;
    SignKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x), Data<T>(out), n);
    return nullptr;
  });
}

// ---- softmax / log_softmax ------------------------------------------------------------------

// The tensor as [outer, dim, inner] around the normalised axis; a row is one (outer, inner)
// pair, its elements `inner` apart.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};

FleetStatus* SplitAxis(const FleetKernelContext* kc, const FleetTensor* t, AxisSplit* s) {
  const int64_t rank = t->ndim;
  const int64_t attr = IntAttr(kc, "axis", -1);
  const int64_t axis = attr < 0 ? attr + rank : attr;
  if (axis < 0 || axis >= rank) {
    return InvalidArgument(OpName(kc) + ": axis " + std::to_string(attr) +
                           " is out of range for rank " + std::to_string(rank));
  }
  s->outer = s->inner = 1;
  for (int64_t i = 0; i < axis; ++i) s->outer *= t->dims[i];
  s->dim = t->dims[axis];
  for (int64_t i = axis + 1; i < rank; ++i) s->inner *= t->dims[i];
  return nullptr;
}

struct MaxOp {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a > b ? a : b;
  }
};
struct SumOp {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};

// Reduces `v` over a team of kTeam threads (32: a warp; kThreads: the block). The xor butterfly
// leaves the same bits in every lane (each pairing adds the same two values), and the block
// combines its warps in warp order, so every thread gets the identical result. `shared` holds a
// value per warp and is only touched when kTeam is the block.
template <int kTeam, typename V, typename Op>
__device__ V TeamReduce(V v, Op op, V* shared) {
  for (int m = 16; m > 0; m /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
  if constexpr (kTeam == 32) {
    return v;
  } else {
    static_assert(kTeam == kThreads, "a team is a warp or the whole block");
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // an earlier reduction may still be reading `shared`
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    V r = shared[0];
    for (int w = 1; w < kThreads / 32; ++w) r = op(r, shared[w]);
    return r;
  }
}

template <int kTeam>
struct RowTeam {
  static constexpr int kRowsPerBlock = kThreads / kTeam;
  // A block's teams take consecutive rows; the loop bound is uniform across a team, and, when
  // the team is the block, across the block, so every thread meets every barrier.
  __device__ static int64_t First() {
    return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kTeam;
  }
  __device__ static int64_t Step() { return static_cast<int64_t>(gridDim.x) * kRowsPerBlock; }
  __device__ static int Lane() { return static_cast<int>(threadIdx.x % kTeam); }
};

template <bool kLog, int kTeam, typename T>
__global__ void SoftmaxKernel(const T* x, T* out, int64_t rows, int64_t dim, int64_t inner) {
  __shared__ T shared_max[kThreads / 32];
  __shared__ double shared_sum[kThreads / 32];
  using Team = RowTeam<kTeam>;
  for (int64_t row = Team::First(); row < rows; row += Team::Step()) {
    const int64_t base = (row / inner) * dim * inner + row % inner;
    T mx = static_cast<T>(-INFINITY);
    for (int64_t d = Team::Lane(); d < dim; d += kTeam) mx = MaxOp()(mx, x[base + d * inner]);
    mx = TeamReduce<kTeam>(mx, MaxOp(), shared_max);
    double sum = 0;
    for (int64_t d = Team::Lane(); d < dim; d += kTeam) {
      sum += static_cast<double>(Exp(x[base + d * inner] - mx));
    }
    sum = TeamReduce<kTeam>(sum, SumOp(), shared_sum);
    const T log_sum = static_cast<T>(log(sum));
    for (int64_t d = Team::Lane(); d < dim; d += kTeam) {
      const int64_t i = base + d * inner;
      if constexpr (kLog) {
        out[i] = x[i] - mx - log_sum;
      } else {
        out[i] = static_cast<T>(static_cast<double>(Exp(x[i] - mx)) / sum);
      }
    }
  }
}

// softmax: dX = Out * (dOut - sum(dOut * Out)); log_softmax: dX = dOut - exp(Out) * sum(dOut).
template <bool kLog, int kTeam, typename T>
__global__ void SoftmaxGradKernel(const T* out, const T* g, T* dx, int64_t rows, int64_t dim,
                                  int64_t inner) {
  __shared__ double shared_sum[kThreads / 32];
  using Team = RowTeam<kTeam>;
  for (int64_t row = Team::First(); row < rows; row += Team::Step()) {
    const int64_t base = (row / inner) * dim * inner + row % inner;
    double dot = 0;
    for (int64_t d = Team::Lane(); d < dim; d += kTeam) {
      const int64_t i = base + d * inner;
      dot += kLog ? static_cast<double>(g[i]) : static_cast<double>(g[i]) * out[i];
    }
    dot = TeamReduce<kTeam>(dot, SumOp(), shared_sum);
    for (int64_t d = Team::Lane(); d < dim; d += kTeam) {
      const int64_t i = base + d * inner;
      const double o = out[i];
      const double gv = g[i];
      dx[i] = static_cast<T>(kLog ? gv - static_cast<double>(Exp(out[i])) * dot : o * (gv - dot));
    }
  }
}

// A warp per row for short rows, the block for long ones (so one long row still spreads over
// many threads).
constexpr int64_t kWarpRowLimit = 1024;

unsigned RowBlocks(int64_t rows, int rows_per_block) {
  const int64_t b = (rows + rows_per_block - 1) / rows_per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

template <bool kLog, typename T>
FleetStatus* SoftmaxLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    AxisSplit sp;
    if (FleetStatus* e = SplitAxis(kc, x, &sp)) return e;
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", Numel(x))) return e;
    const int64_t rows = sp.outer * sp.inner;
    if (rows == 0 || sp.dim == 0) return nullptr;
    const T* xs = Data<const T>(x);
    T* os = Data<T>(out);
    if (sp.dim <= kWarpRowLimit) {
      SoftmaxKernel<kLog, 32, T><<<RowBlocks(rows, kThreads / 32), kThreads, 0, s->native>>>(
          xs, os, rows, sp.dim, sp.inner);
    } else {
      SoftmaxKernel<kLog, kThreads, T><<<RowBlocks(rows, 1), kThreads, 0, s->native>>>(
          xs, os, rows, sp.dim, sp.inner);
    }
    return nullptr;
  });
}

template <bool kLog, typename T>
FleetStatus* SoftmaxGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Out", "Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* out = Input(kc, "Out");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    AxisSplit sp;
    if (FleetStatus* e = SplitAxis(kc, out, &sp)) return e;
    if (FleetStatus* e = ExpectNumel(kc, dout, "Out@GRAD", Numel(out))) return e;
    if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", Numel(out))) return e;
    const int64_t rows = sp.outer * sp.inner;
    if (rows == 0 || sp.dim == 0) return nullptr;
    const T* os = Data<const T>(out);
    const T* gs = Data<const T>(dout);
    T* dxs = Data<T>(dx);
    if (sp.dim <= kWarpRowLimit) {
      SoftmaxGradKernel<kLog, 32, T><<<RowBlocks(rows, kThreads / 32), kThreads, 0, s->native>>>(
          os, gs, dxs, rows, sp.dim, sp.inner);
    } else {
      SoftmaxGradKernel<kLog, kThreads, T><<<RowBlocks(rows, 1), kThreads, 0, s->native>>>(
          os, gs, dxs, rows, sp.dim, sp.inner);
    }
    return nullptr;
  });
}

template <bool kLog>
void AddSoftmax(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, SoftmaxLaunch<kLog, float>);
  Add(list, name, FLEET_DTYPE_FLOAT64, SoftmaxLaunch<kLog, double>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, SoftmaxGradLaunch<kLog, float>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, SoftmaxGradLaunch<kLog, double>);
}

}  // namespace
}  // namespace math

void AddMathActivationKernels(KernelList& list) {
  using math::Act;
  Add(list, "sign", FLEET_DTYPE_FLOAT32, math::SignLaunch<float>);
  Add(list, "sign", FLEET_DTYPE_FLOAT64, math::SignLaunch<double>);
  math::AddActivation<Act::kRelu>(list, "relu", "relu_grad");
  math::AddActivation<Act::kTanh>(list, "tanh", "tanh_grad");
  math::AddActivation<Act::kSigmoid>(list, "sigmoid", "sigmoid_grad");
  math::AddActivation<Act::kSqrt>(list, "sqrt", "sqrt_grad");
  math::AddActivation<Act::kExp>(list, "exp", "exp_grad");
  math::AddActivation<Act::kGelu>(list, "gelu", "gelu_grad");
  math::AddActivation<Act::kLeakyRelu>(list, "leaky_relu", "leaky_relu_grad");
  math::AddActivation<Act::kSquare>(list, "square", "square_grad");
  math::AddActivation<Act::kLog>(list, "log", "log_grad");
  math::AddSoftmax<false>(list, "softmax", "softmax_grad");
  math::AddSoftmax<true>(list, "log_softmax", "log_softmax_grad");
}

}  // namespace fleet_cuda
