// The element formulas of the comparison, logic, selection and extended math ops (equal ...
// greater_equal, logical_*, isfinite_v2, elementwise_pow / mod / floordiv, reduce_max / min /
// prod / any / all, arg_max / arg_min, argsort, p_norm), written once for the CPU and the CUDA
// plugin so the two cannot drift apart.
//
// Contract (Paddle's semantics unless a line says otherwise):
//   - Comparisons return 0 or 1 (bool tensors hold one byte per element). Float equality is
//     Paddle's: |a - b| < 1e-8, except that an infinity equals only itself and NaN equals
//     nothing; not_equal is its negation. The ordered comparisons are the plain operators.
//   - Logic ops read any non-zero byte as true and write 0 or 1.
//   - Mod has the sign of the divisor (Python's %); FloorDiv rounds toward negative infinity
//     (Python's //, NumPy's floor_divide, also for floats). Integer division by zero gives 0 for
//     both instead of trapping, and INT_MIN // -1 wraps, so no input can crash a kernel.
//   - Integer Pow is exact repeated squaring with two's-complement wrap-around; a negative
//     exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise (Paddle rounds pow()).
//   - Max / min propagate NaN; arg_max / arg_min take the first index on ties and treat NaN as
//     the extreme (NumPy's rule); argsort orders NaN last and is stable.
//   - Integer products wrap (computed unsigned), never overflow as signed.
//
// Header-only, C++17, usable from g++ and nvcc (see host_device.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "host_device.h"

namespace fleet::kernel {

// ---- float math by type (the C names exist for host and device) --------------------------
FLEET_HOST_DEVICE inline float MathAbs(float x) { return fabsf(x); }
FLEET_HOST_DEVICE inline double MathAbs(double x) { return fabs(x); }
FLEET_HOST_DEVICE inline float MathPow(float a, float b) { return powf(a, b); }
FLEET_HOST_DEVICE inline double MathPow(double a, double b) { return pow(a, b); }
FLEET_HOST_DEVICE inline float MathLog(float x) { return logf(x); }
FLEET_HOST_DEVICE inline double MathLog(double x) { return log(x); }
FLEET_HOST_DEVICE inline float MathFmod(float a, float b) { return fmodf(a, b); }
FLEET_HOST_DEVICE inline double MathFmod(double a, double b) { return fmod(a, b); }
FLEET_HOST_DEVICE inline float MathFloor(float x) { return floorf(x); }
FLEET_HOST_DEVICE inline double MathFloor(double x) { return floor(x); }

template <typename T>
FLEET_HOST_DEVICE inline bool IsNan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

template <typename T>
FLEET_HOST_DEVICE inline bool IsInf(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x == std::numeric_limits<T>::infinity() || x == -std::numeric_limits<T>::infinity();
  } else {
    return false;
  }
}

// isfinite_v2: neither infinite nor NaN; integers always are.
template <typename T>
FLEET_HOST_DEVICE inline uint8_t IsFinite(T x) {
  return !IsNan(x) && !IsInf(x);
}

// ---- comparisons ----------------------------------------------------------------------------
enum class CompareOp : int32_t { kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual };

template <typename T>
FLEET_HOST_DEVICE inline bool PaddleEqual(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (IsInf(a) || IsInf(b)) return a == b;
    if (IsNan(a) || IsNan(b)) return false;
    return fabs(static_cast<double>(a) - static_cast<double>(b)) < 1e-8;
  } else {
    return a == b;
  }
}

template <CompareOp op, typename T>
FLEET_HOST_DEVICE inline uint8_t Compare(T a, T b) {
  if constexpr (op == CompareOp::kEqual) {
    return PaddleEqual(a, b);
  } else if constexpr (op == CompareOp::kNotEqual) {
    return !PaddleEqual(a, b);
  } else if constexpr (op == CompareOp::kLess) {
    return a < b;
  } else if constexpr (op == CompareOp::kLessEqual) {
    return a <= b;
  } else if constexpr (op == CompareOp::kGreater) {
    return a > b;
  } else {
    return a >= b;
  }
}

// ---- logic ----------------------------------------------------------------------------------
enum class LogicOp : int32_t { kAnd, kOr, kXor };

template <LogicOp op>
FLEET_HOST_DEVICE inline uint8_t Logic(uint8_t a, uint8_t b) {
  const bool x = a != 0, y = b != 0;
  if constexpr (op == LogicOp::kAnd) {
    return x && y;
  } else if constexpr (op == LogicOp::kOr) {
    return x || y;
  } else {
    return x != y;
  }
}

// ---- elementwise_pow / mod / floordiv -------------------------------------------------------
enum class ArithOp : int32_t { kPow, kMod, kFloorDiv };

template <typename T>
FLEET_HOST_DEVICE inline T FloorDiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    // NumPy's npy_divmod: the quotient of a - fmod(a, b), corrected toward -inf, then rounded
    // to the nearest integer so an inexact division cannot land just below one.
    if (b == T(0)) return a / b;
    T mod = MathFmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div == T(0)) return static_cast<T>(copysign(0.0, static_cast<double>(a / b)));
    T fl = MathFloor(div);
    if (div - fl > T(0.5)) fl += T(1);
    return fl;
  } else {
    using U = std::make_unsigned_t<T>;
    if (b == 0) return T(0);
    if (b == -1) return static_cast<T>(U(0) - static_cast<U>(a));
    T q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  }
}

template <typename T>
FLEET_HOST_DEVICE inline T Mod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = MathFmod(a, b);
    if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
    return r;
  } else {
    if (b == 0 || b == -1) return T(0);
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
}

template <typename T>
FLEET_HOST_DEVICE inline T Pow(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return MathPow(a, b);
  } else {
    if (b < 0) {
      if (a == 1) return T(1);
      if (a == -1) return (b & 1) ? T(-1) : T(1);
      return T(0);
    }
    using U = std::make_unsigned_t<T>;
    U result = 1, base = static_cast<U>(a);
    for (T e = b; e > 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return static_cast<T>(result);
  }
}

template <ArithOp op, typename T>
FLEET_HOST_DEVICE inline T Arith(T a, T b) {
  if constexpr (op == ArithOp::kPow) {
    return Pow(a, b);
  } else if constexpr (op == ArithOp::kMod) {
    return Mod(a, b);
  } else {
    return FloorDiv(a, b);
  }
}

// d/dx and d/dy of x^y times the incoming gradient g (floats only). At x == 0 the y-gradient
// is 0 (the limit of x^y log x for y > 0) instead of 0 * -inf.
template <typename T>
FLEET_HOST_DEVICE inline T PowGradX(T x, T y, T g) {
  return g * y * MathPow(x, y - T(1));
}
template <typename T>
FLEET_HOST_DEVICE inline T PowGradY(T x, T y, T g) {
  if (x == T(0)) return T(0);
  return g * MathPow(x, y) * MathLog(x);
}

// ---- reductions -----------------------------------------------------------------------------
enum class ReduceOp : int32_t { kMax, kMin, kProd, kAny, kAll };

// The value an empty reduction gives: -inf / lowest for max, +inf / highest for min, 1 for
// prod, false for any, true for all.
template <ReduceOp op, typename T>
FLEET_HOST_DEVICE inline T ReduceIdentity() {
  if constexpr (op == ReduceOp::kMax) {
    if constexpr (std::is_floating_point_v<T>) {
      return -std::numeric_limits<T>::infinity();
    } else {
      return std::numeric_limits<T>::lowest();
    }
  } else if constexpr (op == ReduceOp::kMin) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::numeric_limits<T>::infinity();
    } else {
      return std::numeric_limits<T>::max();
    }
  } else if constexpr (op == ReduceOp::kAll) {
    return T(1);
  } else if constexpr (op == ReduceOp::kProd) {
    return T(1);
  } else {
    return T(0);
  }
}

template <ReduceOp op, typename T>
FLEET_HOST_DEVICE inline T ReduceCombine(T acc, T v) {
  if constexpr (op == ReduceOp::kMax) {
    return (v > acc || IsNan(v)) && !IsNan(acc) ? v : acc;
  } else if constexpr (op == ReduceOp::kMin) {
    return (v < acc || IsNan(v)) && !IsNan(acc) ? v : acc;
  } else if constexpr (op == ReduceOp::kProd) {
    if constexpr (std::is_floating_point_v<T>) {
      return acc * v;
    } else {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(acc) * static_cast<U>(v));
    }
  } else if constexpr (op == ReduceOp::kAny) {
    return static_cast<T>(acc != 0 || v != 0);
  } else {
    return static_cast<T>(acc != 0 && v != 0);
  }
}

// The gradient of reduce_max / reduce_min at one element, Paddle's rule: every element equal to
// the extreme receives the whole output gradient (ties are not split).
template <typename T>
FLEET_HOST_DEVICE inline T ExtremeGrad(T x, T out, T g) {
  return x == out ? g : T(0);
}

// The gradient of reduce_prod at one element: the product of the other elements of its group
// times g, from the group's count of zeros and the product of its non-zero elements, so a zero
// element gets the exact product of the rest (Paddle divides Out by X, which gives NaN there).
template <typename T>
FLEET_HOST_DEVICE inline T ProdGrad(T x, int64_t zeros, T nonzero_product, T g) {
  if (zeros == 0) return g * nonzero_product / x;
  if (zeros == 1 && x == T(0)) return g * nonzero_product;
  return T(0);
}

// Whether value `v` (at a later index) replaces the current best `best` of arg_max (kMax) or
// arg_min: strictly better, or NaN where best is not.
template <bool kMax, typename T>
FLEET_HOST_DEVICE inline bool ArgBetter(T v, T best) {
  if (IsNan(best)) return false;
  if (IsNan(v)) return true;
  return kMax ? v > best : v < best;
}

// Whether `a` sorts strictly before `b` (NaN last in either direction).
template <typename T>
FLEET_HOST_DEVICE inline bool SortsBefore(T a, T b, bool descending) {
  if (IsNan(a)) return false;
  if (IsNan(b)) return true;
  return descending ? a > b : a < b;
}

// A stable sort of the `n` positions of one row (element i at x[i * stride]) into idx, using
// tmp (n entries) as the merge buffer: bottom-up merge sort, the same sequence of steps on
// every device.
template <typename T>
FLEET_HOST_DEVICE inline void StableArgsortRow(const T* x, int64_t n, int64_t stride,
                                               bool descending, int64_t* idx, int64_t* tmp) {
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  int64_t* src = idx;
  int64_t* dst = tmp;
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = lo + width < n ? lo + width : n;
      const int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        // Take from the right run only when it sorts strictly first: equal keys keep order.
        if (SortsBefore(x[src[j] * stride], x[src[i] * stride], descending)) {
          dst[k++] = src[j++];
        } else {
          dst[k++] = src[i++];
        }
      }
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    int64_t* t = src;
    src = dst;
    dst = t;
  }
  if (src != idx) {
    for (int64_t i = 0; i < n; ++i) idx[i] = src[i];
  }
}

// ---- p_norm ---------------------------------------------------------------------------------
// Accumulated in double on both devices: porder 0 counts non-zeros, +inf takes max |x|, -inf
// min |x|, anything else sums |x|^p and takes the p-th root at the end.
FLEET_HOST_DEVICE inline bool PNormIsPosInf(double p) { return p > 0 && p * 0.5 == p; }
FLEET_HOST_DEVICE inline bool PNormIsNegInf(double p) { return p < 0 && p * 0.5 == p; }

FLEET_HOST_DEVICE inline double PNormInit(double p) {
  return PNormIsNegInf(p) ? std::numeric_limits<double>::infinity() : 0.0;
}

FLEET_HOST_DEVICE inline double PNormAccumulate(double acc, double x, double p) {
  const double a = fabs(x);
  if (p == 0) return acc + (x != 0 ? 1.0 : 0.0);
  if (PNormIsPosInf(p)) return a > acc ? a : acc;
  if (PNormIsNegInf(p)) return a < acc ? a : acc;
  return acc + pow(a, p);
}

// Joins two partial accumulations (for a reduction split over threads).
FLEET_HOST_DEVICE inline double PNormCombine(double a, double b, double p) {
  if (PNormIsPosInf(p)) return a > b ? a : b;
  if (PNormIsNegInf(p)) return a < b ? a : b;
  return a + b;
}

FLEET_HOST_DEVICE inline double PNormFinish(double acc, double p) {
  if (p == 0 || PNormIsPosInf(p) || PNormIsNegInf(p)) return acc;
  return pow(acc, 1.0 / p);
}

// Paddle's p_norm_grad: 0 for porder 0; g * sign(x) where |x| equals the norm for +-inf;
// otherwise g * sign(x) * |x|^(p-1) / (norm^(p-1) + epsilon).
FLEET_HOST_DEVICE inline double PNormGrad(double x, double norm, double g, double p,
                                          double epsilon) {
  const double sign = x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
  if (p == 0) return 0.0;
  if (PNormIsPosInf(p) || PNormIsNegInf(p)) return fabs(x) == norm ? g * sign : 0.0;
  return g * sign * pow(fabs(x), p - 1.0) / (pow(norm, p - 1.0) + epsilon);
}

}  // namespace fleet::kernel
