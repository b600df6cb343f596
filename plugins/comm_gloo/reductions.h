// Element-wise reductions over the Fleet dtypes the Gloo communicator accepts, in the shape Gloo's
// collectives call them: fn(out, a, b, n) with out == a allowed.
//
// float16 and bfloat16 are reduced by widening each element to float, combining, and rounding
// back to nearest-even, so a sum of halves rounds once per step, as NCCL and Gloo's own
// float16 do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fleet_gloo {

using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

// Bytes per element of a dtype the communicator moves, or 0 when it does not support it.
size_t ElementSize(int32_t dtype);

// The name of a dtype for messages ("float32", "bfloat16", "dtype 42").
std::string DtypeName(int32_t dtype);

// The name of a FLEET_REDUCE_* op for messages ("sum", ..., "op 9").
std::string ReduceOpName(int32_t op);

// The pairwise function implementing `op` on `dtype`; AVG maps to the sum (the caller divides
// by the world size afterwards with DivideInPlace). nullptr when the pair is unsupported.
ReduceFn ReductionFor(int32_t dtype, int32_t op);

// data[i] /= divisor for n elements of dtype (integers: truncating division).
void DivideInPlace(int32_t dtype, void* data, size_t n, int64_t divisor);

// Conversions used by the half-precision reductions (exposed for tests of rounding).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

}  // namespace fleet_gloo
