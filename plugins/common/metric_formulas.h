// The arithmetic of Paddle's `auc` op, written once for the CPU and the CUDA plugin so the two
// count, slide and integrate the same way and agree bit for bit.
//
// The statistics are int64 histograms of the positive-class probability over
// L = num_thresholds + 1 buckets, one for positive rows (StatPos) and one for negative rows
// (StatNeg); a row with probability p falls in bucket (int64)(p * num_thresholds), the product
// taken in the prediction's own type as Paddle does, so p = 1 is bucket num_thresholds.
//
// Layout of one statistics tensor, S = slide_steps:
//   - S == 0: one histogram of L buckets, accumulated over every batch (the global AUC);
//   - S > 0: S + 1 histograms of L buckets. Histograms 0 .. S-1 are the last S batches, oldest
//     first; histogram S is their sum, the one the AUC is computed from (the batch AUC over a
//     window of S batches). Each batch first slides the window: the oldest histogram leaves the
//     sum, the others move down one place, and the newest starts empty.
//
// The AUC walks the buckets from the top (highest probability) down, as Paddle's does: each
// bucket adds the trapezoid of width neg[b] between heights P and P + pos[b], P being the
// positives in the buckets above it; the area over total_pos * total_neg is the AUC, and 0
// when either class is absent (Paddle's value for a one-class histogram). The trapezoids are
// summed doubled, as exact 128-bit integers: the sum then does not depend on the order of
// the additions (the CUDA plugin adds chunks in parallel) and never rounds, so the only
// rounding is the final division.
//
// Header-only, C++17, usable from g++ and nvcc (see host_device.h).
#pragma once

#include <cstdint>

#include "host_device.h"

namespace fleet::kernel {

// Twice a trapezoid area, exactly. A GNU extension that both g++ and nvcc provide.
__extension__ typedef __int128 AucArea2;
__extension__ typedef unsigned __int128 AucArea2Magnitude;

// Bucket of the positive-class probability `p` (which must be in [0, 1]).
template <typename T>
FLEET_HOST_DEVICE inline int64_t AucBucket(T p, int64_t num_thresholds) {
  return static_cast<int64_t>(p * static_cast<T>(num_thresholds));
}

// A probability the op accepts: within [0, 1] (NaN is not).
template <typename T>
FLEET_HOST_DEVICE inline bool AucProbabilityOk(T p) {
  return p >= T(0) && p <= T(1);
}

// A label the op accepts: 0 (negative) or 1 (positive).
FLEET_HOST_DEVICE inline bool AucLabelOk(int64_t label) { return label == 0 || label == 1; }

// Elements of one statistics tensor.
FLEET_HOST_DEVICE inline int64_t AucStatSize(int64_t num_thresholds, int64_t slide_steps) {
  const int64_t buckets = num_thresholds + 1;
  return slide_steps > 0 ? (slide_steps + 1) * buckets : buckets;
}

// Offset of the histogram the AUC is computed from (the window's sum, or the only one).
FLEET_HOST_DEVICE inline int64_t AucSumOffset(int64_t num_thresholds, int64_t slide_steps) {
  return slide_steps * (num_thresholds + 1);
}

// Slides the window of bucket `b` of `stat` one batch on (slide_steps > 0): the oldest count
// leaves the sum, the others move down one histogram and the newest becomes 0. Buckets are
// independent, so any number of threads may slide different buckets at once.
FLEET_HOST_DEVICE inline void AucSlideBucket(int64_t* stat, int64_t buckets, int64_t slide_steps,
                                             int64_t b) {
  stat[slide_steps * buckets + b] -= stat[b];
  for (int64_t k = 0; k + 1 < slide_steps; ++k) stat[k * buckets + b] = stat[(k + 1) * buckets + b];
  stat[(slide_steps - 1) * buckets + b] = 0;
}

// The cells one row of bucket `b` increments: the newest histogram and the sum (slide_steps > 0),
// or the only histogram. `second` is -1 when there is one cell.
FLEET_HOST_DEVICE inline void AucCountCells(int64_t buckets, int64_t slide_steps, int64_t b,
                                            int64_t* first, int64_t* second) {
  if (slide_steps > 0) {
    *first = (slide_steps - 1) * buckets + b;
    *second = slide_steps * buckets + b;
  } else {
    *first = b;
    *second = -1;
  }
}

// The doubled area of buckets [lo, hi) of one histogram, walked from hi - 1 down to lo, with
// `pos_above` positives in the buckets at and above hi. Summing it over consecutive ranges that
// cover the histogram (each with its own pos_above) gives the same total in any order.
FLEET_HOST_DEVICE inline AucArea2 AucDoubledArea(const int64_t* pos, const int64_t* neg,
                                                 int64_t lo, int64_t hi, int64_t pos_above) {
  AucArea2 area = 0;
  for (int64_t b = hi - 1; b >= lo; --b) {
    area += static_cast<AucArea2>(neg[b]) * (static_cast<AucArea2>(pos_above) * 2 + pos[b]);
    pos_above += pos[b];
  }
  return area;
}

// The AUC from the doubled area and the class totals: 0 when a class is absent.
FLEET_HOST_DEVICE inline double AucValue(AucArea2 area2, int64_t total_pos, int64_t total_neg) {
  if (total_pos <= 0 || total_neg <= 0) return 0.0;
  // Split by hand into two 64-bit halves, so both compilers convert the same way.
  const bool negative = area2 < 0;
  const AucArea2Magnitude m = negative ? static_cast<AucArea2Magnitude>(-area2)
                                       : static_cast<AucArea2Magnitude>(area2);
  const double high = static_cast<double>(static_cast<uint64_t>(m >> 64));
  const double low = static_cast<double>(static_cast<uint64_t>(m));
  double area = (high * 18446744073709551616.0 + low) / 2.0;
  if (negative) area = -area;
  return area / static_cast<double>(total_pos) / static_cast<double>(total_neg);
}

}  // namespace fleet::kernel
