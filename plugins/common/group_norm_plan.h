// The view and formulas of group_norm and instance_norm that the CPU and CUDA plugins share.
//
// Contract: X [N, C, S...] (NCHW-style, any number of spatial dims, S their product) is seen as
// N * groups rows of (C / groups) * S contiguous elements; instance_norm is groups = C. Each
// row is normalised with its own biased mean and variance, then channel c is scaled by
// Scale[c] and shifted by Bias[c]. Header-only C++17, FLEET_HOST_DEVICE throughout.
#pragma once

#include <math.h>

#include <cstdint>

#include "host_device.h"

namespace fleet::kernel {

struct GroupNormView {
  int64_t n = 0, c = 0, groups = 1, s = 1;

  FLEET_HOST_DEVICE int64_t Rows() const { return n * groups; }
  FLEET_HOST_DEVICE int64_t Width() const { return c / groups * s; }
  // The channel of element k of row `row`.
  FLEET_HOST_DEVICE int64_t Channel(int64_t row, int64_t k) const {
    return (row % groups) * (c / groups) + k / s;
  }
  // The row holding element i of channel `ch` of sample `b` (i in [0, s)) and its offset.
  FLEET_HOST_DEVICE int64_t RowOf(int64_t b, int64_t ch) const {
    return b * groups + ch / (c / groups);
  }
  FLEET_HOST_DEVICE int64_t OffsetOf(int64_t b, int64_t ch, int64_t i) const {
    return (b * c + ch) * s + i;
  }
};

FLEET_HOST_DEVICE inline double NormInvStd(double var, double eps) {
  return 1.0 / sqrt(var + eps);
}

// X@GRAD of one element: with g = dY * Scale and xhat = (x - mean) * inv_std over a row of
// `width` elements whose sums of g and g * xhat are given,
// dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)).
FLEET_HOST_DEVICE inline double NormDataGrad(double g, double xhat, double inv_std, double sum_g,
                                             double sum_gx, double width) {
  return inv_std * (g - sum_g / width - xhat * sum_gx / width);
}

}  // namespace fleet::kernel
