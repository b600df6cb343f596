// Creation and conversion kernels: cast (+ cast_grad), fill_constant, fill_any_like,
// fill_zeros_like, range, increment, uniform_random, gaussian_random, truncated_gaussian_random, with
// the semantics, dtypes and random streams of the CPU plugin's
// (plugins/cpu/kernels/tensor_create_kernels.cc, whose header comment specifies the streams).
//
// The random kernels compute element i from the seed and i alone, with the CPU's arithmetic in
// double precision, so a model initialised here starts from the CPU's weights: both plugins call
// the same functions (plugins/common/random_draws.h). On the device every multiply and add of
// that arithmetic goes through the round-to-nearest intrinsics (__dmul_rn,
// __dadd_rn, __dsub_rn): nvcc would otherwise fuse a multiply and an add into one FMA, which
// rounds once instead of twice and so differs from the CPU (built without FMA contraction) in
// the last bit. sqrt is correctly rounded on both; log, sin and cos agree with glibc to an ulp
// or two, which a float32 result almost never shows.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/tensor_groups.h"
#include "random_draws.h"

namespace fleet_cuda {
namespace {

// An element type; bool tensors are stored one byte per element and read as "nonzero".
template <typename T, bool kBool = false>
struct Elem {
  using type = T;
  static constexpr bool is_bool = kBool;
};

using B8 = Elem<uint8_t, true>;
using I32 = Elem<int32_t>;
using I64 = Elem<int64_t>;
using F32 = Elem<float>;
using F64 = Elem<double>;

// Calls f(Elem<...>{}) for the dtypes the creation kernels support (bool, int32, int64,
// float32, float64); false for any other.
template <typename F>
bool VisitNumeric(int32_t dtype, F&& f) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL: f(B8{}); return true;
    case FLEET_DTYPE_INT32: f(I32{}); return true;
    case FLEET_DTYPE_INT64: f(I64{}); return true;
    case FLEET_DTYPE_FLOAT32: f(F32{}); return true;
    case FLEET_DTYPE_FLOAT64: f(F64{}); return true;
    default: return false;
  }
}

bool IsNumeric(int32_t dtype) {
  return VisitNumeric(dtype, [](auto) {});
}

template <typename E, typename V>
__host__ __device__ typename E::type Convert(V v) {
  using T = typename E::type;
  if constexpr (E::is_bool) {
    return static_cast<T>(v != V(0) ? 1 : 0);
  } else {
    return static_cast<T>(v);
  }
}

std::string OpName(const FleetKernelContext* kc) {
  return kc->op_type != nullptr ? kc->op_type : "kernel";
}

FleetStatus* NoData(const FleetKernelContext* kc, const char* slot, int64_t n) {
  return InvalidArgument(OpName(kc) + ": " + slot + " has no data for its " + std::to_string(n) +
                         " elements");
}

// ---- cast ---------------------------------------------------------------------------------

template <typename InE, typename OutE>
__global__ void CastKernel(const typename InE::type* x, typename OutE::type* y, int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    if constexpr (InE::is_bool) {
      y[i] = static_cast<typename OutE::type>(x[i] != 0 ? 1 : 0);
    } else {
      y[i] = Convert<OutE>(x[i]);
    }
  }
}

template <typename InE>
FleetStatus* CastImpl(const FleetKernelContext* kc, const char* in_slot, const char* out_slot) {
  const FleetTensor* x = Input(kc, in_slot);
  const FleetTensor* y = Output(kc, out_slot);
  if (x == nullptr || y == nullptr) {
    return InvalidArgument(OpName(kc) + ": " + in_slot + " or " + out_slot + " is missing");
  }
  const int64_t n = Numel(x);
  if (Numel(y) != n) {
    return InvalidArgument(OpName(kc) + ": " + in_slot + " and " + out_slot +
                           " differ in element count");
  }
  if (n == 0) return nullptr;
  if (!IsNumeric(y->dtype)) {
    return Unimplemented(OpName(kc) + ": no conversion to dtype " + std::to_string(y->dtype));
  }
  if (x->data == nullptr) return NoData(kc, in_slot, n);
  if (y->data == nullptr) return NoData(kc, out_slot, n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    VisitNumeric(y->dtype, [&](auto out_e) {
      using OutE = decltype(out_e);
      CastKernel<InE, OutE><<<Blocks(n), kThreads, 0, s->native>>>(
          static_cast<const typename InE::type*>(x->data),
          static_cast<typename OutE::type*>(y->data), n);
    });
    return nullptr;
  });
}

template <typename InE>
FleetStatus* CastLaunch(void*, const FleetKernelContext* kc, void*) {
  return CastImpl<InE>(kc, "X", "Out");
}

template <typename InE>
FleetStatus* CastGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return CastImpl<InE>(kc, "Out@GRAD", "X@GRAD");
}

// ---- fills --------------------------------------------------------------------------------

template <typename T>
__global__ void FillKernel(T* y, int64_t n, T value) {
  FLEET_CUDA_LOOP(i, n) y[i] = value;
}

template <typename E>
FleetStatus* Fill(const FleetKernelContext* kc, const FleetTensor* out, typename E::type value) {
  using T = typename E::type;
  const int64_t n = Numel(out);
  if (n == 0) return nullptr;
  if (out->data == nullptr) return NoData(kc, "Out", n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    FillKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(static_cast<T*>(out->data), n, value);
    return nullptr;
  });
}

// fill_constant's value: str_value when set (parsed as an integer for integer dtypes, so large
// int64 values stay exact), else `value`. The attribute's text is NUL-terminated (fleet_abi.h),
// so it is parsed in place: fill_constant runs every step (the loss gradient's seed), and a
// launch allocates nothing.
template <typename E>
typename E::type ConstantValue(const FleetKernelContext* kc) {
  const FleetAttr* a = FindAttr(kc, "str_value");
  if (a != nullptr && a->type == FLEET_ATTR_STRING && a->s != nullptr && a->s_len > 0) {
    const char* text = a->s;
    if constexpr (std::is_integral_v<typename E::type> && !E::is_bool) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(text, &end, 10);
      if (end != text && *end == '\0' && errno == 0) return static_cast<typename E::type>(v);
    }
    return Convert<E>(std::strtod(text, nullptr));
  }
  return Convert<E>(FloatAttr(kc, "value", 0.0));
}

template <typename E>
FleetStatus* FillConstantLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
  if (Numel(out) == 0) return nullptr;
  return Fill<E>(kc, out, ConstantValue<E>(kc));
}

template <typename E>
FleetStatus* FillAnyLikeLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
  return Fill<E>(kc, out, Convert<E>(FloatAttr(kc, "value", 0.0)));
}

// Zero is all bits clear in every supported dtype, so a memset does it.
template <typename E>
FleetStatus* FillZerosLikeLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
  const int64_t n = Numel(out);
  if (n == 0) return nullptr;
  if (out->data == nullptr) return NoData(kc, "Out", n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const size_t bytes = static_cast<size_t>(n) * sizeof(typename E::type);
    const cudaError_t err = cudaMemsetAsync(out->data, 0, bytes, s->native);
    if (err != cudaSuccess) return CudaStatus(err, OpName(kc) + ": clearing Out");
    return nullptr;
  });
}

// ---- range --------------------------------------------------------------------------------

// Start + i * Step with one rounding per operation, as the CPU plugin computes it (no FMA).
__device__ inline float RangeAt(float start, float step, int64_t i) {
  return __fadd_rn(start, __fmul_rn(static_cast<float>(i), step));
}
__device__ inline double RangeAt(double start, double step, int64_t i) {
  return __dadd_rn(start, __dmul_rn(static_cast<double>(i), step));
}
template <typename T>
__device__ inline T RangeAt(T start, T step, int64_t i) {
  return start + static_cast<T>(i) * step;
}

template <typename T>
__global__ void RangeKernel(const T* start, const T* step, T* y, int64_t n) {
  const T first = start[0], delta = step[0];
  FLEET_CUDA_LOOP(i, n) { y[i] = RangeAt(first, delta, i); }
}

template <typename T>
FleetStatus* RangeLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* start = Input(kc, "Start");
  const FleetTensor* step = Input(kc, "Step");
  const FleetTensor* out = Output(kc, "Out");
  if (start == nullptr || step == nullptr || out == nullptr) {
    return InvalidArgument(OpName(kc) + ": Start, Step or Out is missing");
  }
  if (Numel(start) != 1 || Numel(step) != 1 || out->ndim != 1) {
    return InvalidArgument(OpName(kc) + ": Start and Step must hold one value, Out be 1-D");
  }
  const int64_t n = Numel(out);
  if (n == 0) return nullptr;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    RangeKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        static_cast<const T*>(start->data), static_cast<const T*>(step->data),
        static_cast<T*>(out->data), n);
    return nullptr;
  });
}

// ---- increment ----------------------------------------------------------------------------

// One thread: the counter stays on the device, and X may be Out (an in-place step counter).
template <typename T>
__global__ void IncrementKernel(const T* x, T* out, T step) {
  out[0] = x[0] + step;
}

template <typename E>
FleetStatus* IncrementLaunch(void*, const FleetKernelContext* kc, void*) {
  using T = typename E::type;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  if (x == nullptr || out == nullptr) {
    return InvalidArgument(OpName(kc) + ": X or Out is missing");
  }
  if (Numel(x) != 1 || Numel(out) != 1) {
    return InvalidArgument(OpName(kc) + ": X must hold exactly one element");
  }
  if (x->data == nullptr) return NoData(kc, "X", 1);
  if (out->data == nullptr) return NoData(kc, "Out", 1);
  const T step = static_cast<T>(FloatAttr(kc, "step", 1.0));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    IncrementKernel<T><<<1, 1, 0, s->native>>>(static_cast<const T*>(x->data),
                                                static_cast<T*>(out->data), step);
    return nullptr;
  });
}

// ---- random -------------------------------------------------------------------------------

// The streams' arithmetic (SplitMix64, u(i), Box-Muller, the truncation loop) is the CPU's own
// code from plugins/common/random_draws.h, which uses the _rn intrinsics on the device.

uint64_t SeedOf(const FleetKernelContext* kc) {
  const int64_t attr = IntAttr(kc, "seed", 0);
  return attr != 0 ? static_cast<uint64_t>(attr) : kc->seed;
}

// min + (max - min) * u(i) in double, rounded to T; with `clamp`, a value that rounded up to
// max becomes `below_hi`, the largest T below it.
template <typename T>
__global__ void UniformKernel(T* y, int64_t n, uint64_t seed, double lo, double range, T hi_t,
                              T below_hi, bool clamp) {
  FLEET_CUDA_LOOP(i, n) {
    const double draw = fleet::kernel::UniformAt(seed, static_cast<uint64_t>(i), lo, range);
    const T v = static_cast<T>(draw);
    y[i] = (clamp && v >= hi_t) ? below_hi : v;
  }
}

// Entry k of the diagonal is element k * step + k (checked to lie inside the tensor).
template <typename T>
__global__ void DiagonalKernel(T* y, int64_t count, int64_t step, T value) {
  FLEET_CUDA_LOOP(k, count) y[k * step + k] = value;
}

template <typename T>
FleetStatus* UniformLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
  const double lo = FloatAttr(kc, "min", -1.0), hi = FloatAttr(kc, "max", 1.0);
  const T lo_t = static_cast<T>(lo), hi_t = static_cast<T>(hi);
  const T below_hi = std::max(lo_t, std::nextafter(hi_t, lo_t));
  const uint64_t seed = SeedOf(kc);
  const int64_t n = Numel(out);
  const int64_t diag_num = IntAttr(kc, "diag_num", 0);
  const int64_t diag_step = IntAttr(kc, "diag_step", 0);
  const T diag_val = static_cast<T>(FloatAttr(kc, "diag_val", 1.0));
  // Diagonal positions grow linearly with the entry, so the first and the last bound them all;
  // the entry named in the error is the first one outside, as on the CPU.
  if (diag_num > 0) {
    const int64_t last = (diag_num - 1) * diag_step + (diag_num - 1);
    if (n == 0 || last < 0 || last >= n) {
      for (int64_t i = 0; i < diag_num; ++i) {
        const int64_t pos = i * diag_step + i;
        if (pos < 0 || pos >= n) {
          return InvalidArgument(OpName(kc) + ": diagonal entry " + std::to_string(i) +
                                 " lies outside Out (" + std::to_string(n) + " elements)");
        }
      }
    }
  }
  if (n == 0) return nullptr;
  if (out->data == nullptr) return NoData(kc, "Out", n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    T* y = static_cast<T*>(out->data);
    UniformKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(y, n, seed, lo, hi - lo, hi_t,
                                                             below_hi, lo_t < hi_t);
    if (diag_num > 0) {
      DiagonalKernel<T><<<Blocks(diag_num), kThreads, 0, s->native>>>(y, diag_num, diag_step,
                                                                        diag_val);
    }
    return nullptr;
  });
}

// Box-Muller on the pair (u(2k), u(2k+1)) gives elements 2k (cos) and 2k+1 (sin).
template <typename T>
__global__ void GaussianKernel(T* y, int64_t n, uint64_t seed, double mean, double stddev) {
  const int64_t pairs = (n + 1) / 2;
  FLEET_CUDA_LOOP(k, pairs) {
    const fleet::kernel::GaussianPair g =
        fleet::kernel::GaussianPairAt(seed, static_cast<uint64_t>(k), stddev);
    y[2 * k] = static_cast<T>(fleet::kernel::GaussianFirst(g, mean));
    if (2 * k + 1 < n) y[2 * k + 1] = static_cast<T>(fleet::kernel::GaussianSecond(g, mean));
  }
}

template <typename T>
FleetStatus* GaussianLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
  const double mean = FloatAttr(kc, "mean", 0.0), stddev = FloatAttr(kc, "std", 1.0);
  const uint64_t seed = SeedOf(kc);
  const int64_t n = Numel(out);
  if (n == 0) return nullptr;
  if (out->data == nullptr) return NoData(kc, "Out", n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    GaussianKernel<T><<<Blocks((n + 1) / 2), kThreads, 0, s->native>>>(
        static_cast<T*>(out->data), n, seed, mean, stddev);
    return nullptr;
  });
}

// Element i draws from its own stream, key(i) = SplitMix64 output i for the seed, and takes the
// cos value of Box-Muller on (u_key(2a), u_key(2a + 1)) for attempts a = 0, 1, ... until it lies
// within 2 std (about 95% of first attempts do).
template <typename T>
__global__ void TruncatedGaussianKernel(T* y, int64_t n, uint64_t seed, double mean,
                                        double stddev) {
  FLEET_CUDA_LOOP(i, n) {
    y[i] = static_cast<T>(
        fleet::kernel::TruncatedGaussianAt(seed, static_cast<uint64_t>(i), mean, stddev));
  }
}

template <typename T>
FleetStatus* TruncatedGaussianLaunch(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
  const double mean = FloatAttr(kc, "mean", 0.0), stddev = FloatAttr(kc, "std", 1.0);
  const uint64_t seed = SeedOf(kc);
  const int64_t n = Numel(out);
  if (n == 0) return nullptr;
  if (out->data == nullptr) return NoData(kc, "Out", n);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    TruncatedGaussianKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        static_cast<T*>(out->data), n, seed, mean, stddev);
    return nullptr;
  });
}

// ---- registration -------------------------------------------------------------------------

template <template <typename> class K>
void AddNumeric(KernelList& list, const char* op) {
  Add(list, op, FLEET_DTYPE_BOOL, K<B8>::launch);
  Add(list, op, FLEET_DTYPE_INT32, K<I32>::launch);
  Add(list, op, FLEET_DTYPE_INT64, K<I64>::launch);
  Add(list, op, FLEET_DTYPE_FLOAT32, K<F32>::launch);
  Add(list, op, FLEET_DTYPE_FLOAT64, K<F64>::launch);
}

template <typename E>
struct CastK {
  static constexpr LaunchFn launch = CastLaunch<E>;
};
template <typename E>
struct CastGradK {
  static constexpr LaunchFn launch = CastGradLaunch<E>;
};
template <typename E>
struct FillConstantK {
  static constexpr LaunchFn launch = FillConstantLaunch<E>;
};
template <typename E>
struct FillAnyLikeK {
  static constexpr LaunchFn launch = FillAnyLikeLaunch<E>;
};
template <typename E>
struct FillZerosLikeK {
  static constexpr LaunchFn launch = FillZerosLikeLaunch<E>;
};

}  // namespace

void AddTensorCreateKernels(KernelList& list) {
  AddNumeric<CastK>(list, "cast");
  AddNumeric<CastGradK>(list, "cast_grad");
  AddNumeric<FillConstantK>(list, "fill_constant");
  AddNumeric<FillAnyLikeK>(list, "fill_any_like");
  AddNumeric<FillZerosLikeK>(list, "fill_zeros_like");
  Add(list, "range", FLEET_DTYPE_INT32, RangeLaunch<int32_t>);
  Add(list, "range", FLEET_DTYPE_INT64, RangeLaunch<int64_t>);
  Add(list, "range", FLEET_DTYPE_FLOAT32, RangeLaunch<float>);
  Add(list, "range", FLEET_DTYPE_FLOAT64, RangeLaunch<double>);
  Add(list, "increment", FLEET_DTYPE_INT32, IncrementLaunch<I32>);
  Add(list, "increment", FLEET_DTYPE_INT64, IncrementLaunch<I64>);
  Add(list, "increment", FLEET_DTYPE_FLOAT32, IncrementLaunch<F32>);
  Add(list, "increment", FLEET_DTYPE_FLOAT64, IncrementLaunch<F64>);
  Add(list, "uniform_random", FLEET_DTYPE_FLOAT32, UniformLaunch<float>);
  Add(list, "uniform_random", FLEET_DTYPE_FLOAT64, UniformLaunch<double>);
  Add(list, "gaussian_random", FLEET_DTYPE_FLOAT32, GaussianLaunch<float>);
  Add(list, "gaussian_random", FLEET_DTYPE_FLOAT64, GaussianLaunch<double>);
  Add(list, "truncated_gaussian_random", FLEET_DTYPE_FLOAT32, TruncatedGaussianLaunch<float>);
  Add(list, "truncated_gaussian_random", FLEET_DTYPE_FLOAT64, TruncatedGaussianLaunch<double>);
}

}  // namespace fleet_cuda
