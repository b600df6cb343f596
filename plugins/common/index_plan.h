// Host-side planning of the indexing kernels (gather, index_select, gather_nd, scatter,
// one_hot_v2, their grads) and tril_triu, shared by the CPU and CUDA plugins so both accept the
// same shapes, address the same elements and report the same errors.
//
// Contract:
//   - A Plan* function reads shapes and attributes only (never index values), once, at prepare,
//     and returns the op's error for a bad shape, rank, dtype or attribute.
//   - Index values are checked at launch: a value outside [0, bound) is an error worded by
//     BadIndexMessage, naming the op, the index slot, the position (row-major in that tensor),
//     the value and the bound. The CPU checks every index before it writes anything; the CUDA
//     plugin reports the first bad position it meets after a synchronous launch, as
//     lookup_table_v2 does.
//   - The FLEET_HOST_DEVICE functions are the arithmetic both plugins run per element.
// The geometry structs are trivially copyable; plain C++17, so CUDA sources include this.
#pragma once

#include <cstdint>
#include <string>

#include "fleet/fleet_kernels.h"
#include "host_device.h"
#include "plan_status.h"

namespace fleet::kernel {

// gather / index_select and their grads: X is [outer, rows, inner] around the indexed dim;
// Out is [outer, count, inner]; Out[o, j, i] = X[o, Index[j], i].
struct TakePlan {
  int64_t outer = 1;
  int64_t rows = 0;
  int64_t inner = 1;
  int64_t count = 0;  // indices
};

// Reads X (or, for a grad, X and Out@GRAD), Index and the axis attribute `axis_attr` ("axis"
// for gather, "dim" for index_select). Checks the index dtype and rank and the shapes of
// Out / Out@GRAD and X@GRAD where present.
PlanStatus PlanTake(const FleetKernelContext* kc, const char* axis_attr, bool grad,
                    TakePlan* plan);

// The deepest index vector gather_nd takes (X's rank bound).
inline constexpr int kMaxGatherNdDepth = 8;

// gather_nd and its grad: Index is [count, depth]; X is [rows, inner] where rows is the product
// of X's first `depth` dims, whose sizes and row strides are dims/row_strides. Out[j, i] =
// X[row(Index[j]), i].
struct GatherNdPlan {
  int depth = 0;
  int64_t dims[kMaxGatherNdDepth] = {};
  int64_t row_strides[kMaxGatherNdDepth] = {};
  int64_t rows = 1;
  int64_t inner = 1;
  int64_t count = 0;
};
PlanStatus PlanGatherNd(const FleetKernelContext* kc, bool grad, GatherNdPlan* plan);

// scatter and scatter_grad: X / Out@GRAD is [rows, inner], Ids has `count` entries, Updates is
// [count, inner].
struct ScatterPlan {
  int64_t rows = 0;
  int64_t inner = 1;
  int64_t count = 0;
};
PlanStatus PlanScatter(const FleetKernelContext* kc, bool grad, ScatterPlan* plan);

// one_hot_v2: Out is [count, depth] of the dtype attribute (float32 or float64).
struct OneHotPlan {
  int64_t count = 0;
  int64_t depth = 0;
  int32_t out_dtype = FLEET_DTYPE_FLOAT32;
  bool allow_out_of_range = false;
};
PlanStatus PlanOneHot(const FleetKernelContext* kc, OneHotPlan* plan);

// tril_triu and its grad: `src` (X or Out@GRAD) and `dst` are [batch, rows, cols].
struct TrilPlan {
  int64_t batch = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t diagonal = 0;
  bool lower = true;
};
PlanStatus PlanTrilTriu(const FleetKernelContext* kc, const char* src, const char* dst,
                        TrilPlan* plan);

// "<op>: <slot>[<pos>] = <value> is out of range [0, <bound>)".
std::string BadIndexMessage(const FleetKernelContext* kc, const char* slot, int64_t pos,
                            int64_t value, int64_t bound);

// ---- per element ---------------------------------------------------------------------------

// Whether tril_triu keeps element (r, c) of a matrix: on or below the `diagonal`-th diagonal
// for lower, on or above it otherwise.
FLEET_HOST_DEVICE inline bool TrilKeeps(const TrilPlan& p, int64_t r, int64_t c) {
  return p.lower ? c - r <= p.diagonal : c - r >= p.diagonal;
}

FLEET_HOST_DEVICE inline bool IndexInRange(int64_t v, int64_t bound) {
  return v >= 0 && v < bound;
}

// The X row that index vector `idx` (depth entries, already in range) addresses.
FLEET_HOST_DEVICE inline int64_t GatherNdRow(const GatherNdPlan& p, const int64_t* idx) {
  int64_t row = 0;
  for (int k = 0; k < p.depth; ++k) row += idx[k] * p.row_strides[k];
  return row;
}

}  // namespace fleet::kernel
