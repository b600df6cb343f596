// The element-wise math and activation ops of the unary family (rsqrt ... logsigmoid), prelu's
// alpha indexing and cumsum's line scan, written once for the CPU and the CUDA plugin so the two
// devices compute the same thing.
//
// Contract:
// - UnaryForward<op>(x, p) is Out for one element; UnaryBackward<op>(v, g, p) is X@GRAD for one
//   element from g = Out@GRAD and v, the forward tensor the grad op reads (UnaryGradReads: X,
//   Out, or nothing for the ops whose gradient is zero). These are Paddle's formulas, including
//   its conventions at kinks (clip's and relu6's gradient is zero at the bounds, abs's at 0),
//   hard_swish's gradient of 1 wherever x + offset >= threshold, even when threshold != scale,
//   and mish's softplus slope 1 - exp(-sp) also above its threshold, where sp = x (both exact
//   at the default attributes, to float precision).
// - UnaryParams holds the op's float attributes in the order UnaryAttrsOf lists them; a plugin
//   reads each by name (with the listed fallback, Paddle's default) and converts it to T.
// - The caller validates shapes and attributes; nothing here allocates or fails.
//
// Rounding: the math functions below are the C library's on the host and CUDA's on the device
// (both without fast-math), so results agree to an ulp or two, not bit for bit; round() rounds
// halves away from zero on both, as Paddle does.
//
// Header-only, C++17, usable from g++ and nvcc (see host_device.h).
#pragma once

#include <math.h>

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "host_device.h"

namespace fleet::kernel {

enum class UnaryOp : int32_t {
  kRsqrt, kAbs, kSin, kCos, kFloor, kCeil, kRound, kReciprocal, kLog1p, kErf, kPow, kClip,
  kRelu6, kSwish, kSilu, kElu, kSelu, kHardSwish, kHardSigmoid, kSoftplus, kSoftsign, kMish,
  kLogSigmoid,
};

// Which forward tensor the grad op reads besides Out@GRAD.
enum class UnaryGradInput : int32_t { kNone, kX, kOut };

constexpr UnaryGradInput UnaryGradReads(UnaryOp op) {
  switch (op) {
    case UnaryOp::kFloor:
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
      return UnaryGradInput::kNone;
    case UnaryOp::kRsqrt:
    case UnaryOp::kReciprocal:
    case UnaryOp::kRelu6:
    case UnaryOp::kSelu:
    case UnaryOp::kHardSigmoid:
      return UnaryGradInput::kOut;
    default:
      return UnaryGradInput::kX;
  }
}

// An attribute a formula reads: its name (nullptr: unused slot) and Paddle's default.
struct UnaryAttr {
  const char* name = nullptr;
  float fallback = 0.0f;
};
struct UnaryAttrs {
  UnaryAttr a, b, c;
};

constexpr UnaryAttrs UnaryAttrsOf(UnaryOp op) {
  switch (op) {
    case UnaryOp::kPow: return {{"factor", 1.0f}, {}, {}};
    case UnaryOp::kClip: return {{"min", 0.0f}, {"max", 0.0f}, {}};
    case UnaryOp::kRelu6: return {{"threshold", 6.0f}, {}, {}};
    case UnaryOp::kSwish: return {{"beta", 1.0f}, {}, {}};
    case UnaryOp::kElu: return {{"alpha", 1.0f}, {}, {}};
    case UnaryOp::kSelu:
      return {{"scale", 1.0507009873554804934193349852946f},
              {"alpha", 1.6732632423543772848170429916717f},
              {}};
    case UnaryOp::kHardSwish: return {{"threshold", 6.0f}, {"scale", 6.0f}, {"offset", 3.0f}};
    case UnaryOp::kHardSigmoid: return {{"slope", 0.2f}, {"offset", 0.5f}, {}};
    case UnaryOp::kSoftplus: return {{"beta", 1.0f}, {"threshold", 20.0f}, {}};
    case UnaryOp::kMish: return {{"threshold", 20.0f}, {}, {}};
    default: return {};
  }
}

template <typename T>
struct UnaryParams {
  T a = T(0), b = T(0), c = T(0);
};

// ---- math functions, one name for float and double on both compilers ----------------------

namespace unary_math {
FLEET_HOST_DEVICE inline float Exp(float v) { return expf(v); }
FLEET_HOST_DEVICE inline double Exp(double v) { return exp(v); }
FLEET_HOST_DEVICE inline float Expm1(float v) { return expm1f(v); }
FLEET_HOST_DEVICE inline double Expm1(double v) { return expm1(v); }
FLEET_HOST_DEVICE inline float Log1p(float v) { return log1pf(v); }
FLEET_HOST_DEVICE inline double Log1p(double v) { return log1p(v); }
FLEET_HOST_DEVICE inline float Sqrt(float v) { return sqrtf(v); }
FLEET_HOST_DEVICE inline double Sqrt(double v) { return sqrt(v); }
FLEET_HOST_DEVICE inline float Sin(float v) { return sinf(v); }
FLEET_HOST_DEVICE inline double Sin(double v) { return sin(v); }
FLEET_HOST_DEVICE inline float Cos(float v) { return cosf(v); }
FLEET_HOST_DEVICE inline double Cos(double v) { return cos(v); }
FLEET_HOST_DEVICE inline float Tanh(float v) { return tanhf(v); }
FLEET_HOST_DEVICE inline double Tanh(double v) { return tanh(v); }
FLEET_HOST_DEVICE inline float Erf(float v) { return erff(v); }
FLEET_HOST_DEVICE inline double Erf(double v) { return erf(v); }
FLEET_HOST_DEVICE inline float Floor(float v) { return floorf(v); }
FLEET_HOST_DEVICE inline double Floor(double v) { return floor(v); }
FLEET_HOST_DEVICE inline float Ceil(float v) { return ceilf(v); }
FLEET_HOST_DEVICE inline double Ceil(double v) { return ceil(v); }
FLEET_HOST_DEVICE inline float Round(float v) { return roundf(v); }
FLEET_HOST_DEVICE inline double Round(double v) { return round(v); }
FLEET_HOST_DEVICE inline float Pow(float v, float e) { return powf(v, e); }
FLEET_HOST_DEVICE inline double Pow(double v, double e) { return pow(v, e); }
FLEET_HOST_DEVICE inline float Fabs(float v) { return fabsf(v); }
FLEET_HOST_DEVICE inline double Fabs(double v) { return fabs(v); }
}  // namespace unary_math

// 2 / sqrt(pi), the scale of erf's derivative.
inline constexpr double kTwoOverSqrtPi = 1.12837916709551257389615890312154517;

template <UnaryOp op, typename T>
FLEET_HOST_DEVICE inline T UnaryForward(T x, const UnaryParams<T>& p) {
  using namespace unary_math;
  if constexpr (op == UnaryOp::kAbs) {
    if constexpr (std::is_integral_v<T>) {
      return x < T(0) ? static_cast<T>(-x) : x;
    } else {
      return Fabs(x);
    }
  } else if constexpr (op == UnaryOp::kRsqrt) {
    return T(1) / Sqrt(x);
  } else if constexpr (op == UnaryOp::kSin) {
    return Sin(x);
  } else if constexpr (op == UnaryOp::kCos) {
    return Cos(x);
  } else if constexpr (op == UnaryOp::kFloor) {
    return Floor(x);
  } else if constexpr (op == UnaryOp::kCeil) {
    return Ceil(x);
  } else if constexpr (op == UnaryOp::kRound) {
    return Round(x);
  } else if constexpr (op == UnaryOp::kReciprocal) {
    return T(1) / x;
  } else if constexpr (op == UnaryOp::kLog1p) {
    return Log1p(x);
  } else if constexpr (op == UnaryOp::kErf) {
    return Erf(x);
  } else if constexpr (op == UnaryOp::kPow) {
    return Pow(x, p.a);
  } else if constexpr (op == UnaryOp::kClip) {
    return x < p.a ? p.a : (x > p.b ? p.b : x);
  } else if constexpr (op == UnaryOp::kRelu6) {
    return x > T(0) ? (x < p.a ? x : p.a) : T(0);
  } else if constexpr (op == UnaryOp::kSwish) {
    return x / (T(1) + Exp(-p.a * x));
  } else if constexpr (op == UnaryOp::kSilu) {
    return x / (T(1) + Exp(-x));
  } else if constexpr (op == UnaryOp::kElu) {
    return x > T(0) ? x : p.a * Expm1(x);
  } else if constexpr (op == UnaryOp::kSelu) {
    return x > T(0) ? p.a * x : p.a * (p.b * Expm1(x));
  } else if constexpr (op == UnaryOp::kHardSwish) {
    const T t = x + p.c;
    const T r = t > T(0) ? (t < p.a ? t : p.a) : T(0);
    return r * x / p.b;
  } else if constexpr (op == UnaryOp::kHardSigmoid) {
    const T t = p.a * x + p.b;
    return t > T(0) ? (t < T(1) ? t : T(1)) : T(0);
  } else if constexpr (op == UnaryOp::kSoftplus) {
    const T bx = p.a * x;
    return bx > p.b ? x : Log1p(Exp(bx)) / p.a;
  } else if constexpr (op == UnaryOp::kSoftsign) {
    return x / (T(1) + Fabs(x));
  } else if constexpr (op == UnaryOp::kMish) {
    const T sp = x > p.a ? x : Log1p(Exp(x));
    return x * Tanh(sp);
  } else {
    static_assert(op == UnaryOp::kLogSigmoid, "every op has a forward formula");
    // log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)), which never overflows.
    return (x < T(0) ? x : T(0)) - Log1p(Exp(-Fabs(x)));
  }
}

template <UnaryOp op, typename T>
FLEET_HOST_DEVICE inline T UnaryBackward(T v, T g, const UnaryParams<T>& p) {
  using namespace unary_math;
  if constexpr (op == UnaryOp::kFloor || op == UnaryOp::kCeil || op == UnaryOp::kRound) {
    return T(0);
  } else if constexpr (op == UnaryOp::kAbs) {
    return v > T(0) ? g : (v < T(0) ? -g : T(0));
  } else if constexpr (op == UnaryOp::kRsqrt) {  // v = Out
    return T(-0.5) * g * v * v * v;
  } else if constexpr (op == UnaryOp::kSin) {
    return g * Cos(v);
  } else if constexpr (op == UnaryOp::kCos) {
    return -g * Sin(v);
  } else if constexpr (op == UnaryOp::kReciprocal) {  // v = Out
    return -g * v * v;
  } else if constexpr (op == UnaryOp::kLog1p) {
    return g / (v + T(1));
  } else if constexpr (op == UnaryOp::kErf) {
    return g * T(kTwoOverSqrtPi) * Exp(-v * v);
  } else if constexpr (op == UnaryOp::kPow) {
    return g * p.a * Pow(v, p.a - T(1));
  } else if constexpr (op == UnaryOp::kClip) {
    return v > p.a && v < p.b ? g : T(0);
  } else if constexpr (op == UnaryOp::kRelu6) {  // v = Out
    return v > T(0) && v < p.a ? g : T(0);
  } else if constexpr (op == UnaryOp::kSwish) {
    const T s = T(1) / (T(1) + Exp(-p.a * v));
    const T bo = p.a * v * s;
    return g * (bo + s * (T(1) - bo));
  } else if constexpr (op == UnaryOp::kSilu) {
    const T s = T(1) / (T(1) + Exp(-v));
    return g * s * (T(1) + v * (T(1) - s));
  } else if constexpr (op == UnaryOp::kElu) {
    return v > T(0) ? g : g * p.a * Exp(v);
  } else if constexpr (op == UnaryOp::kSelu) {  // v = Out
    return v > T(0) ? g * p.a : g * (v + p.a * p.b);
  } else if constexpr (op == UnaryOp::kHardSwish) {
    const T t = v + p.c;
    if (!(t < p.a)) return g;  // Paddle's 1, not threshold / scale
    return t > T(0) ? g * (T(2) * v + p.c) / p.b : T(0);
  } else if constexpr (op == UnaryOp::kHardSigmoid) {  // v = Out
    return v > T(0) && v < T(1) ? g * p.a : T(0);
  } else if constexpr (op == UnaryOp::kSoftplus) {
    const T bx = p.a * v;
    return bx > p.b ? g : g / (T(1) + Exp(-bx));
  } else if constexpr (op == UnaryOp::kSoftsign) {
    const T d = T(1) + Fabs(v);
    return g / (d * d);
  } else if constexpr (op == UnaryOp::kMish) {
    const T sp = v > p.a ? v : Log1p(Exp(v));
    const T t = Tanh(sp);
    return g * (t + v * (T(1) - t * t) * -Expm1(-sp));
  } else {
    static_assert(op == UnaryOp::kLogSigmoid, "every op has a backward formula");
    // d/dx log(sigmoid(x)) = sigmoid(-x), from exp(-|x|) so it cannot overflow.
    const T e = Exp(-Fabs(v));
    return v > T(0) ? g * e / (T(1) + e) : g / (T(1) + e);
  }
}

// ---- prelu ----------------------------------------------------------------------------------

// X seen as [outer, channels, inner]: element i uses alpha[(i / inner) % channels].
// mode "all": [1, 1, numel]; "channel" (NCHW): [N, C, H*W...]; "channel" (NHWC): [N*H*W..., C,
// 1]; "element": [N, numel / N, 1].
struct PreluPlan {
  int64_t outer = 1, channels = 1, inner = 1;
};

// Host side: the plan for X of `dims` (`rank` of them) under Paddle's `mode` and `data_format`
// strings; false when the mode or format is unknown or X's rank does not suit the mode (the
// schema reports those; Alpha's size is the caller's to compare with `channels`).
inline bool MakePreluPlan(const int64_t* dims, int rank, std::string_view mode,
                          std::string_view data_format, PreluPlan* p) {
  if (data_format != "NCHW" && data_format != "NHWC") return false;
  int64_t numel = 1;
  for (int i = 0; i < rank; ++i) numel *= dims[i];
  *p = PreluPlan{};
  if (mode == "all") {
    p->inner = numel;
  } else if (mode == "channel") {
    if (rank < 2) return false;
    if (data_format == "NCHW") {
      p->outer = dims[0];
      p->channels = dims[1];
      for (int i = 2; i < rank; ++i) p->inner *= dims[i];
    } else {
      for (int i = 0; i < rank - 1; ++i) p->outer *= dims[i];
      p->channels = dims[rank - 1];
    }
  } else if (mode == "element") {
    if (rank < 1) return false;
    p->outer = dims[0];
    for (int i = 1; i < rank; ++i) p->channels *= dims[i];
  } else {
    return false;
  }
  return true;
}

FLEET_HOST_DEVICE inline int64_t PreluAlphaIndex(const PreluPlan& p, int64_t i) {
  return (i / p.inner) % p.channels;
}

template <typename T>
FLEET_HOST_DEVICE inline T PreluForward(T x, T alpha) {
  return x > T(0) ? x : alpha * x;
}

// X@GRAD of one element, and its contribution to Alpha@GRAD.
template <typename T>
FLEET_HOST_DEVICE inline T PreluGradX(T x, T alpha, T g) {
  return x > T(0) ? g : alpha * g;
}
template <typename T>
FLEET_HOST_DEVICE inline T PreluGradAlphaTerm(T x, T g) {
  return x > T(0) ? T(0) : x * g;
}

// ---- cumsum ---------------------------------------------------------------------------------

// X seen as [outer, dim, inner] around the summed axis (flatten: [1, numel, 1]).
struct ScanPlan {
  int64_t outer = 1, dim = 1, inner = 1;
};

// Host side: the plan for X of `dims` (`rank` of them); false when `axis` is out of range
// (ignored under `flatten`).
inline bool MakeScanPlan(const int64_t* dims, int rank, int64_t axis, bool flatten,
                         ScanPlan* p) {
  *p = ScanPlan{};
  if (flatten) {
    for (int i = 0; i < rank; ++i) p->dim *= dims[i];
    return true;
  }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  for (int64_t i = 0; i < axis; ++i) p->outer *= dims[i];
  p->dim = dims[axis];
  for (int64_t i = axis + 1; i < rank; ++i) p->inner *= dims[i];
  return true;
}

// Floats are summed in double, integers in their own type (wrapping as Paddle's do).
template <typename T>
using ScanAcc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

// Scans line `line` (an (outer, inner) pair) of `x` into `out`. Each element is read before its
// output is written, so x and out may be the same buffer.
template <typename T>
FLEET_HOST_DEVICE inline void ScanLine(const ScanPlan& p, int64_t line, const T* x, T* out,
                                       bool exclusive, bool reverse) {
  const int64_t base = (line / p.inner) * p.dim * p.inner + line % p.inner;
  ScanAcc<T> acc = 0;
  for (int64_t k = 0; k < p.dim; ++k) {
    const int64_t d = reverse ? p.dim - 1 - k : k;
    const int64_t i = base + d * p.inner;
    const ScanAcc<T> v = x[i];
    out[i] = static_cast<T>(exclusive ? acc : acc + v);
    acc += v;
  }
}

}  // namespace fleet::kernel
