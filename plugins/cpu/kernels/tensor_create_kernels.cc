// Creation and conversion kernels: cast (+ cast_grad), fill_constant, fill_any_like,
// fill_zeros_like, range, increment, uniform_random, gaussian_random, truncated_gaussian_random.
//
// Random kernels draw from a counter-based generator, so element i depends only on the seed
// and i (never on threads or on earlier launches):
//   bits(i) = SplitMix64 output for state seed + (i + 1) * 0x9e3779b97f4a7c15
//   u(i)    = (bits(i) >> 11) * 2^-53, uniform in [0, 1)
//   uniform_random:  min + (max - min) * u(i), computed in double, then rounded to the dtype
//                    (a value that rounds up to max is moved just below it)
//   gaussian_random: Box-Muller on the pair (u(2k), u(2k+1)) gives elements 2k and 2k+1:
//                    r = sqrt(-2 ln(1 - u(2k))), mean + std * r * {cos, sin}(2 pi u(2k+1))
//   truncated_gaussian_random: see TruncatedGaussianLaunch
// The seed is the op's `seed` attribute when nonzero, else the executor's per-op seed.
// tests/conformance/ref/ref_tensor.py implements the same streams independently in NumPy.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/tensor_kernel_util.h"
#include "random_draws.h"

namespace fleet_cpu::tensor {
namespace {

std::string OpName(const FleetKernelContext* kc) { return kc->op_type; }

template <typename E, typename V>
typename E::type Convert(V v) {
  using T = typename E::type;
  if constexpr (E::is_bool) {
    return static_cast<T>(v != V(0) ? 1 : 0);
  } else {
    return static_cast<T>(v);
  }
}

// ---- cast ---------------------------------------------------------------------------------

template <typename InE, typename OutE>
void CastLoop(const void* xv, void* yv, int64_t n) {
  const auto* x = static_cast<const typename InE::type*>(xv);
  auto* y = static_cast<typename OutE::type*>(yv);
  for (int64_t i = 0; i < n; ++i) {
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
  const bool ok = VisitNumeric(y->dtype, [&](auto out_e) {
    CastLoop<InE, decltype(out_e)>(x->data, y->data, n);
  });
  if (!ok) {
    return Unimplemented(OpName(kc) + ": no conversion to dtype " + std::to_string(y->dtype));
  }
  return nullptr;
}

template <typename InE>
FleetStatus* CastLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&] { return CastImpl<InE>(kc, "X", "Out"); });
}

template <typename InE>
FleetStatus* CastGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&] { return CastImpl<InE>(kc, "Out@GRAD", "X@GRAD"); });
}

// ---- fills --------------------------------------------------------------------------------

template <typename E>
void Fill(const FleetTensor* t, typename E::type v) {
  auto* y = static_cast<typename E::type*>(t->data);
  const int64_t n = Numel(t);
  for (int64_t i = 0; i < n; ++i) y[i] = v;
}

// fill_constant's value: str_value when set (parsed as an integer for integer dtypes, so large
// int64 values stay exact), else `value`.
template <typename E>
typename E::type ConstantValue(const FleetKernelContext* kc) {
  const std::string text(StringAttr(kc, "str_value"));
  if (!text.empty()) {
    if constexpr (std::is_integral_v<typename E::type> && !E::is_bool) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (end != text.c_str() && *end == '\0' && errno == 0) {
        return static_cast<typename E::type>(v);
      }
    }
    return Convert<E>(std::strtod(text.c_str(), nullptr));
  }
  return Convert<E>(FloatAttr(kc, "value", 0.0));
}

template <typename E>
FleetStatus* FillConstantLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
    if (Numel(out) > 0) Fill<E>(out, ConstantValue<E>(kc));
    return nullptr;
  });
}

template <typename E>
FleetStatus* FillAnyLikeLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
    if (Numel(out) > 0) Fill<E>(out, Convert<E>(FloatAttr(kc, "value", 0.0)));
    return nullptr;
  });
}

template <typename E>
FleetStatus* FillZerosLikeLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
    if (Numel(out) > 0) Fill<E>(out, typename E::type{});
    return nullptr;
  });
}

// Out[i] = Start + i * Step (not a running sum, which would drift), as the CUDA plugin does.
template <typename T>
FleetStatus* RangeLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* start = Input(kc, "Start");
    const FleetTensor* step = Input(kc, "Step");
    const FleetTensor* out = Output(kc, "Out");
    if (start == nullptr || step == nullptr || out == nullptr) {
      return InvalidArgument(OpName(kc) + ": Start, Step or Out is missing");
    }
    if (Numel(start) != 1 || Numel(step) != 1 || out->ndim != 1) {
      return InvalidArgument(OpName(kc) + ": Start and Step must hold one value, Out be 1-D");
    }
    const T first = Data<T>(start)[0], delta = Data<T>(step)[0];
    T* y = Data<T>(out);
    for (int64_t i = 0; i < Numel(out); ++i) y[i] = first + static_cast<T>(i) * delta;
    return nullptr;
  });
}

template <typename E>
FleetStatus* IncrementLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    if (x == nullptr || out == nullptr) {
      return InvalidArgument(OpName(kc) + ": X or Out is missing");
    }
    if (Numel(x) != 1 || Numel(out) != 1) {
      return InvalidArgument(OpName(kc) + ": X must hold exactly one element");
    }
    using T = typename E::type;
    const T step = static_cast<T>(FloatAttr(kc, "step", 1.0));
    static_cast<T*>(out->data)[0] = static_cast<const T*>(x->data)[0] + step;
    return nullptr;
  });
}

// ---- random -------------------------------------------------------------------------------

// The streams' arithmetic lives in plugins/common/random_draws.h, shared with the CUDA plugin
// so both produce the same bits.

uint64_t SeedOf(const FleetKernelContext* kc) {
  const int64_t attr = IntAttr(kc, "seed", 0);
  return attr != 0 ? static_cast<uint64_t>(attr) : kc->seed;
}

template <typename T>
FleetStatus* UniformLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
    const double lo = FloatAttr(kc, "min", -1.0), hi = FloatAttr(kc, "max", 1.0);
    const T lo_t = static_cast<T>(lo), hi_t = static_cast<T>(hi);
    // The largest value below max, for samples that round up to max.
    const T below_hi = std::max(lo_t, std::nextafter(hi_t, lo_t));
    const uint64_t seed = SeedOf(kc);
    T* y = static_cast<T*>(out->data);
    const int64_t n = Numel(out);
    const double range = hi - lo;
    for (int64_t i = 0; i < n; ++i) {
      T v = static_cast<T>(fleet::kernel::UniformAt(seed, static_cast<uint64_t>(i), lo, range));
      y[i] = (v >= hi_t && lo_t < hi_t) ? below_hi : v;
    }
    const int64_t diag_num = IntAttr(kc, "diag_num", 0);
    const int64_t diag_step = IntAttr(kc, "diag_step", 0);
    const T diag_val = static_cast<T>(FloatAttr(kc, "diag_val", 1.0));
    for (int64_t i = 0; i < diag_num; ++i) {
      const int64_t pos = i * diag_step + i;
      if (pos < 0 || pos >= n) {
        return InvalidArgument(OpName(kc) + ": diagonal entry " + std::to_string(i) +
                               " lies outside Out (" + std::to_string(n) + " elements)");
      }
      y[pos] = diag_val;
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* GaussianLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
    const double mean = FloatAttr(kc, "mean", 0.0), stddev = FloatAttr(kc, "std", 1.0);
    const uint64_t seed = SeedOf(kc);
    T* y = static_cast<T*>(out->data);
    const int64_t n = Numel(out);
    for (int64_t k = 0; 2 * k < n; ++k) {
      const fleet::kernel::GaussianPair g =
          fleet::kernel::GaussianPairAt(seed, static_cast<uint64_t>(k), stddev);
      y[2 * k] = static_cast<T>(fleet::kernel::GaussianFirst(g, mean));
      if (2 * k + 1 < n) y[2 * k + 1] = static_cast<T>(fleet::kernel::GaussianSecond(g, mean));
    }
    return nullptr;
  });
}

// Element i draws from its own stream, key(i) = SplitMix64 output i for the seed, and takes the
// cos value of Box-Muller on (u_key(2a), u_key(2a + 1)) for attempts a = 0, 1, ... until it
// lies within 2 std.
template <typename T>
FleetStatus* TruncatedGaussianLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr) return InvalidArgument(OpName(kc) + ": Out is missing");
    const double mean = FloatAttr(kc, "mean", 0.0), stddev = FloatAttr(kc, "std", 1.0);
    const uint64_t seed = SeedOf(kc);
    T* y = static_cast<T*>(out->data);
    const int64_t n = Numel(out);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = static_cast<T>(
          fleet::kernel::TruncatedGaussianAt(seed, static_cast<uint64_t>(i), mean, stddev));
    }
    return nullptr;
  });
}

using B8 = Elem<uint8_t, true>;
using I32 = Elem<int32_t>;
using I64 = Elem<int64_t>;
using F32 = Elem<float>;
using F64 = Elem<double>;

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

}  // namespace fleet_cpu::tensor
