// Host-side geometry of mul and matmul_v2 (and their grads), shared by the CPU and CUDA plugins
// so both accept the same shapes and see the same batch of products.
//
// Contract:
//   - Both ops become a batch of logical products Out[b] (M x N) = op(X)[b] (M x K) .
//     op(Y)[b] (K x N). A 1-D X is a row vector and a 1-D Y a column vector (trans_* does not
//     apply to them); batch dims broadcast right-aligned, a broadcast dim having stride 0.
//   - Planning reads shapes and attributes only, once, at prepare; how the products run (oneDNN
//     or loops on the CPU, cuBLAS on CUDA) is the plugin's business.
//   - Errors come back as a PlanStatus carrying the op's message.
// Plain C++17: CUDA sources include this header.
#pragma once

#include <cstdint>
#include <string>

#include "broadcast_plan.h"
#include "fleet/fleet_kernels.h"
#include "plan_status.h"

namespace fleet::kernel {

struct MatmulGeom {
  int nb = 0;                           // batch rank (of Out)
  int64_t batch[kMaxStrideRank] = {};   // Out's batch dims
  int64_t xpad[kMaxStrideRank] = {};    // X's batch dims left-padded with 1s
  int64_t ypad[kMaxStrideRank] = {};
  int64_t xstr[kMaxStrideRank] = {};    // contiguous strides (elements) of X's padded batch dims
  int64_t ystr[kMaxStrideRank] = {};
  bool x_broadcast = false;             // some batch dim of X is 1 where Out's is larger
  bool y_broadcast = false;
  int64_t m = 1, n = 1, k = 1;
  int64_t xm = 0, xk = 0, yk = 0, yn = 0;  // element strides inside one matrix

  int64_t BatchCount() const {
    int64_t c = 1;
    for (int i = 0; i < nb; ++i) c *= batch[i];
    return c;
  }
  // X's and Y's matrix strides along each batch dim of Out: 0 where the operand is broadcast.
  int64_t XStride(int i) const { return xpad[i] == 1 ? 0 : xstr[i]; }
  int64_t YStride(int i) const { return ypad[i] == 1 ? 0 : ystr[i]; }
  // Iterates the batch: sa = X's matrix offset, sb = Y's (0 along broadcast dims).
  StridePlan BatchPlan() const {
    StridePlan p;
    p.rank = nb;
    for (int i = 0; i < nb; ++i) {
      p.dims[i] = batch[i];
      p.sa[i] = XStride(i);
      p.sb[i] = YStride(i);
    }
    return p;
  }
  // Strides of a dense batch of `size`-element matrices over Out's batch dims.
  void DenseStrides(int64_t size, int64_t* strides) const {
    for (int i = nb - 1; i >= 0; --i) {
      strides[i] = size;
      size *= batch[i];
    }
  }
};

// mul: X flattened to [prod(dims[:x_num_col_dims]), rest], Y likewise with y_num_col_dims.
PlanStatus MulGeometry(const FleetTensor* x, const FleetTensor* y, int64_t x_num_col_dims,
                       int64_t y_num_col_dims, MatmulGeom* g);

// matmul_v2 with trans_x / trans_y. The caller has checked that both ranks are within
// [1, kMaxStrideRank] (with its own message). `mark_transposed` names a transposed operand in
// the contraction mismatch message, as the CUDA plugin words it.
PlanStatus MatmulV2Geometry(const FleetTensor* x, const FleetTensor* y, bool trans_x,
                            bool trans_y, bool mark_transposed, MatmulGeom* g);

}  // namespace fleet::kernel
