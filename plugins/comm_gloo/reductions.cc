#include "reductions.h"

#include <algorithm>
#include <cstring>

#include "fleet/fleet_abi.h"
#include "fleet/fleet_comm.h"

namespace fleet_gloo {
namespace {

struct Sum {
  template <typename T>
  T operator()(T a, T b) const { return a + b; }
};
struct Prod {
  template <typename T>
  T operator()(T a, T b) const { return a * b; }
};
struct Max {
  template <typename T>
  T operator()(T a, T b) const { return std::max(a, b); }
};
struct Min {
  template <typename T>
  T operator()(T a, T b) const { return std::min(a, b); }
};

// Plain types: a loop the compiler vectorises (out may alias a or b element by element).
template <typename T, typename Op>
void Apply(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  Op op;
  for (size_t i = 0; i < n; ++i) o[i] = static_cast<T>(op(x[i], y[i]));
}

struct HalfCodec {
  static float Decode(uint16_t v) { return HalfToFloat(v); }
  static uint16_t Encode(float v) { return FloatToHalf(v); }
};
struct BFloat16Codec {
  static float Decode(uint16_t v) { return BFloat16ToFloat(v); }
  static uint16_t Encode(float v) { return FloatToBFloat16(v); }
};

template <typename Codec, typename Op>
void ApplyWidened(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  Op op;
  for (size_t i = 0; i < n; ++i) o[i] = Codec::Encode(op(Codec::Decode(x[i]), Codec::Decode(y[i])));
}

template <typename Op>
ReduceFn ForDtype(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_FLOAT32: return &Apply<float, Op>;
    case FLEET_DTYPE_FLOAT64: return &Apply<double, Op>;
    case FLEET_DTYPE_INT32: return &Apply<int32_t, Op>;
    case FLEET_DTYPE_INT64: return &Apply<int64_t, Op>;
    case FLEET_DTYPE_FLOAT16: return &ApplyWidened<HalfCodec, Op>;
    case FLEET_DTYPE_BFLOAT16: return &ApplyWidened<BFloat16Codec, Op>;
    default: return nullptr;
  }
}

template <typename T>
void DivideTyped(void* data, size_t n, int64_t divisor) {
  T* p = static_cast<T*>(data);
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / d);
}

template <typename Codec>
void DivideWidened(void* data, size_t n, int64_t divisor) {
  uint16_t* p = static_cast<uint16_t*>(data);
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = Codec::Encode(Codec::Decode(p[i]) / d);
}

}  // namespace

size_t ElementSize(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_FLOAT32:
    case FLEET_DTYPE_INT32: return 4;
    case FLEET_DTYPE_FLOAT64:
    case FLEET_DTYPE_INT64: return 8;
    case FLEET_DTYPE_FLOAT16:
    case FLEET_DTYPE_BFLOAT16: return 2;
    default: return 0;
  }
}

std::string DtypeName(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL: return "bool";
    case FLEET_DTYPE_INT8: return "int8";
    case FLEET_DTYPE_UINT8: return "uint8";
    case FLEET_DTYPE_INT16: return "int16";
    case FLEET_DTYPE_INT32: return "int32";
    case FLEET_DTYPE_INT64: return "int64";
    case FLEET_DTYPE_FLOAT16: return "float16";
    case FLEET_DTYPE_BFLOAT16: return "bfloat16";
    case FLEET_DTYPE_FLOAT32: return "float32";
    case FLEET_DTYPE_FLOAT64: return "float64";
    default: return "dtype " + std::to_string(dtype);
  }
}

std::string ReduceOpName(int32_t op) {
  switch (op) {
    case FLEET_REDUCE_SUM: return "sum";
    case FLEET_REDUCE_PROD: return "prod";
    case FLEET_REDUCE_MAX: return "max";
    case FLEET_REDUCE_MIN: return "min";
    case FLEET_REDUCE_AVG: return "avg";
    default: return "op " + std::to_string(op);
  }
}

ReduceFn ReductionFor(int32_t dtype, int32_t op) {
  switch (op) {
    case FLEET_REDUCE_SUM:
    case FLEET_REDUCE_AVG: return ForDtype<Sum>(dtype);
    case FLEET_REDUCE_PROD: return ForDtype<Prod>(dtype);
    case FLEET_REDUCE_MAX: return ForDtype<Max>(dtype);
    case FLEET_REDUCE_MIN: return ForDtype<Min>(dtype);
    default: return nullptr;
  }
}

void DivideInPlace(int32_t dtype, void* data, size_t n, int64_t divisor) {
  switch (dtype) {
    case FLEET_DTYPE_FLOAT32: return DivideTyped<float>(data, n, divisor);
    case FLEET_DTYPE_FLOAT64: return DivideTyped<double>(data, n, divisor);
    case FLEET_DTYPE_INT32: return DivideTyped<int32_t>(data, n, divisor);
    case FLEET_DTYPE_INT64: return DivideTyped<int64_t>(data, n, divisor);
    case FLEET_DTYPE_FLOAT16: return DivideWidened<HalfCodec>(data, n, divisor);
    case FLEET_DTYPE_BFLOAT16: return DivideWidened<BFloat16Codec>(data, n, divisor);
    default: return;
  }
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    // Zero or subnormal: the value is mantissa * 2^-24, exact in float.
    float v = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -v : v;
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf or NaN (payload kept)
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t u = x & 0x7fffffffu;
  if (u > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN stays NaN
  if (u >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  const int32_t exponent = static_cast<int32_t>(u >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: drop 13 mantissa bits, round to nearest even (a carry may bump the
    // exponent, which is still the right encoding).
    uint32_t m = u - ((127u - 15u) << 23);
    m += 0x0fffu + ((m >> 13) & 1u);
    return static_cast<uint16_t>(sign | (m >> 13));
  }
  if (exponent < -25) return sign;  // below half of the smallest subnormal: rounds to zero
  // Subnormal half: the value in units of 2^-24, rounded to nearest even.
  const uint32_t mantissa = (u & 0x7fffffu) | 0x800000u;
  const uint32_t shift = static_cast<uint32_t>(-exponent - 1);  // 14..24
  const uint32_t q = mantissa >> shift;
  const uint32_t rem = mantissa & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  const uint32_t rounded = q + ((rem > halfway || (rem == halfway && (q & 1u))) ? 1u : 0u);
  return static_cast<uint16_t>(sign | rounded);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace fleet_gloo
