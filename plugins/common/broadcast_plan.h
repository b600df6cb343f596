// Host-side broadcast planning of the elementwise ops (Paddle's `axis` rule), shared by the CPU
// and CUDA plugins so both accept the same operand shapes and walk them the same way.
//
// Contract:
//   - A StridePlan is row-major iteration over `dims` carrying two element offsets, `a` (X)
//     and `b` (Y); a stride of 0 repeats an element, which is how broadcasting is expressed.
//   - Planning reads shapes only. It is done once, at a kernel's prepare; walking a plan is the
//     plugin's business (host loops on the CPU, a thread per element on CUDA).
//   - Errors are the caller's to word: the functions here answer yes/no, since each plugin's
//     messages name slots its own way.
// StridePlan is trivially copyable with fixed-size arrays, so a device kernel can take it by
// value; Numel() is host-only. Plain C++17: CUDA sources include this header.
#pragma once

#include <cstdint>

#include "fleet/fleet_kernels.h"

namespace fleet::kernel {

// The deepest shape an elementwise op, a reduction or a batched matmul accepts.
inline constexpr int kMaxStrideRank = 12;

struct StridePlan {
  int rank = 0;
  int64_t dims[kMaxStrideRank] = {};
  int64_t sa[kMaxStrideRank] = {};
  int64_t sb[kMaxStrideRank] = {};
  int64_t Numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
};

// Drops size-1 dims and merges neighbours that both offsets walk contiguously, so that common
// cases end up with rank 0-2 and long inner loops (or short index arithmetic on a device).
void Coalesce(StridePlan& p);

// Strides of `t` laid over `out`'s dims by Paddle's axis rule (0 where `t` broadcasts): the
// lower-rank operand starts at `axis` (-1: at the rank difference) and its trailing 1s that
// would run past the end are dropped. Writes out->ndim strides; false when `t` does not fit.
bool AxisBroadcastStrides(const FleetTensor* t, const FleetTensor* out, int64_t axis,
                          int64_t* strides);

// The coalesced plan over `out`'s dims with X's offsets in sa and Y's in sb. The caller has
// checked out->ndim <= kMaxStrideRank. False (plan unspecified) when X or Y does not broadcast
// to `out` at `axis`.
bool BinaryBroadcastPlan(const FleetTensor* x, const FleetTensor* y, const FleetTensor* out,
                         int64_t axis, StridePlan* plan);

}  // namespace fleet::kernel
