// Host-side planning of the reductions and per-axis ops of the comparison / logic family
// (reduce_max / min / prod / any / all, arg_max / arg_min, argsort, p_norm), shared by the CPU
// and CUDA plugins so both group the same elements in the same order.
//
// Contract:
//   - X is contiguous and row-major. Its elements fall into groups: group k (row-major over the
//     kept dims, which is also Out's element order) holds the elements GroupBase(k) +
//     GroupMember(r) for r in [0, red_count), r row-major over the reduced dims. Walking r in
//     order is the reduction order on every device.
//   - Size-1 dims are dropped and neighbouring dims of the same kind that X walks contiguously
//     are merged, so the index arithmetic stays short; the element order does not change.
//   - Planning reads shapes and attributes only, at prepare. Errors come back as PlanStatus
//     with the exact message the kernel reports (the op and the attribute named).
// ReduceGroups is trivially copyable with fixed-size arrays, so a device kernel can take it by
// value. Plain C++17: CUDA sources include this header.
#pragma once

#include <cstdint>

#include "broadcast_plan.h"
#include "fleet/fleet_kernels.h"
#include "host_device.h"
#include "plan_status.h"

namespace fleet::kernel {

struct ReduceGroups {
  int kept_rank = 0;
  int red_rank = 0;
  int64_t kept_count = 1;  // groups (Out's elements)
  int64_t red_count = 1;   // elements per group
  int64_t kept_dims[kMaxStrideRank] = {};
  int64_t kept_strides[kMaxStrideRank] = {};
  int64_t red_dims[kMaxStrideRank] = {};
  int64_t red_strides[kMaxStrideRank] = {};
};

// X's offset of group k's first element.
FLEET_HOST_DEVICE inline int64_t GroupBase(const ReduceGroups& g, int64_t k) {
  int64_t off = 0;
  for (int d = g.kept_rank - 1; d >= 0; --d) {
    off += (k % g.kept_dims[d]) * g.kept_strides[d];
    k /= g.kept_dims[d];
  }
  return off;
}

// The offset, from its group's base, of a group's r-th element.
FLEET_HOST_DEVICE inline int64_t GroupMember(const ReduceGroups& g, int64_t r) {
  int64_t off = 0;
  for (int d = g.red_rank - 1; d >= 0; --d) {
    off += (r % g.red_dims[d]) * g.red_strides[d];
    r /= g.red_dims[d];
  }
  return off;
}

// The groups of a contiguous X of `rank` dims reducing those with reduced[i]. rank must be at
// most kMaxStrideRank.
void MakeReduceGroups(const int64_t* dims, int rank, const bool* reduced, ReduceGroups* g);

// The reduce_* ops: the dims that attributes `dim` (negative counts from the end) and
// `reduce_all` (or an empty `dim`) select, planned over input X.
PlanStatus PlanReduce(const FleetKernelContext* kc, const FleetTensor* x, ReduceGroups* g);

// The per-axis ops: groups along one axis of X (attribute `axis_attr`, negative counts from the
// end, default `fallback`), with that axis's length and stride. `flatten` treats X as 1-D.
struct AxisPlan {
  ReduceGroups groups;
  int64_t axis_len = 1;
  int64_t axis_stride = 1;
};
PlanStatus PlanAxis(const FleetKernelContext* kc, const FleetTensor* x, const char* axis_attr,
                    int64_t fallback, bool flatten, AxisPlan* plan);

}  // namespace fleet::kernel
