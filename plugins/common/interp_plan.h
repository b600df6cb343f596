// Paddle's coordinate rules of bilinear_interp_v2 and nearest_interp_v2 (NCHW), shared by the
// CPU and CUDA plugins so that both map output pixels to the same input pixels.
//
// Contract: one InterpAxis per spatial dim, made on the host by MakeInterpAxis from the input
// and output sizes, the `scale` attribute's value for the dim (<= 0 when unset) and the
// align_corners / align_mode attributes. Then, for output position k:
//   bilinear: lo = trunc(ratio * (k + 0.5) - 0.5) when align_mode == 0 and !align_corners
//             (half-pixel), else trunc(ratio * k); lo clipped at 0, hi = min(lo + 1, in - 1),
//             and hi's weight frac = max(ratio * (k + 0.5) - 0.5, 0) - lo (half-pixel) or
//             ratio * k - lo; lo's weight is 1 - frac;
//   nearest:  trunc(ratio * k + 0.5) with align_corners, else trunc(ratio * k), clipped to
//             in - 1;
// with ratio = (in - 1) / (out - 1) under align_corners, else 1 / scale when a scale is set,
// else in / out; ratio = 0 when out == 1. Coordinates are computed in double (Paddle uses
// float; the two can differ only where a coordinate lands within float rounding of an
// integer). Both maps are non-decreasing in k, which the gather-style gradients use to find
// the output positions reading an input position by binary search. Header-only C++17.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace fleet::kernel {

struct InterpAxis {
  int64_t in = 1, out = 1;
  double ratio = 0;
  bool align_corners = true;
  bool half_pixel = false;  // align_mode == 0 && !align_corners (bilinear only)
};

inline InterpAxis MakeInterpAxis(int64_t in, int64_t out, double scale, bool align_corners,
                                 int64_t align_mode) {
  InterpAxis a;
  a.in = in;
  a.out = out;
  a.align_corners = align_corners;
  a.half_pixel = align_mode == 0 && !align_corners;
  if (out > 1) {
    if (align_corners) {
      a.ratio = static_cast<double>(in - 1) / static_cast<double>(out - 1);
    } else {
      a.ratio = scale > 0 ? 1.0 / scale : static_cast<double>(in) / static_cast<double>(out);
    }
  }
  return a;
}

// Bilinear taps of output position k: *lo with weight 1 - *frac, *hi with weight *frac.
FLEET_HOST_DEVICE inline void BilinearTaps(const InterpAxis& a, int64_t k, int64_t* lo,
                                           int64_t* hi, double* frac) {
  const double centre = a.ratio * (static_cast<double>(k) + 0.5) - 0.5;
  const double plain = a.ratio * static_cast<double>(k);
  int64_t l = static_cast<int64_t>(a.half_pixel ? centre : plain);  // truncates, as Paddle
  if (l < 0) l = 0;
  *lo = l;
  *hi = l + 1 < a.in - 1 ? l + 1 : a.in - 1;
  *frac = (a.half_pixel ? (centre > 0 ? centre : 0.0) : plain) - static_cast<double>(l);
}

FLEET_HOST_DEVICE inline int64_t NearestTap(const InterpAxis& a, int64_t k) {
  const double p = a.ratio * static_cast<double>(k) + (a.align_corners ? 0.5 : 0.0);
  const int64_t i = static_cast<int64_t>(p);
  return i < a.in - 1 ? i : a.in - 1;
}

// The first output position whose bilinear lo (kNearest: nearest tap) is >= `target`, or
// a.out when there is none.
template <bool kNearest>
FLEET_HOST_DEVICE inline int64_t FirstTapAtLeast(const InterpAxis& a, int64_t target) {
  int64_t begin = 0, end = a.out;
  while (begin < end) {
    const int64_t mid = begin + (end - begin) / 2;
    int64_t tap;
    if (kNearest) {
      tap = NearestTap(a, mid);
    } else {
      int64_t hi;
      double frac;
      BilinearTaps(a, mid, &tap, &hi, &frac);
    }
    if (tap < target) {
      begin = mid + 1;
    } else {
      end = mid;
    }
  }
  return begin;
}

// The output positions [*begin, *end) that may read input position `pos`: for bilinear those
// whose lo is pos - 1 or pos (hi = lo + 1 or the clipped last), for nearest those whose tap is
// pos.
template <bool kNearest>
FLEET_HOST_DEVICE inline void InterpReaders(const InterpAxis& a, int64_t pos, int64_t* begin,
                                            int64_t* end) {
  *begin = FirstTapAtLeast<kNearest>(a, kNearest ? pos : pos - 1);
  *end = FirstTapAtLeast<kNearest>(a, pos + 1);
}

// The weight with which output position k of a bilinear axis reads input position pos.
FLEET_HOST_DEVICE inline double BilinearWeight(const InterpAxis& a, int64_t k, int64_t pos) {
  int64_t lo, hi;
  double frac;
  BilinearTaps(a, k, &lo, &hi, &frac);
  return (lo == pos ? 1.0 - frac : 0.0) + (hi == pos ? frac : 0.0);
}

// The gradient of one input pixel (row r, column c) of a plane: the sum over the output pixels
// reading it of dy times their weight, visited in row-major output order. `dy` is the plane of
// Out@GRAD ([rows.out, cols.out]).
template <bool kNearest, typename T>
FLEET_HOST_DEVICE inline double InterpGradAt(const InterpAxis& rows, const InterpAxis& cols,
                                             const T* dy, int64_t r, int64_t c) {
  int64_t k0, k1, l0, l1;
  InterpReaders<kNearest>(rows, r, &k0, &k1);
  InterpReaders<kNearest>(cols, c, &l0, &l1);
  double acc = 0;
  for (int64_t k = k0; k < k1; ++k) {
    const double wy = kNearest ? 1.0 : BilinearWeight(rows, k, r);
    for (int64_t l = l0; l < l1; ++l) {
      const double wx = kNearest ? 1.0 : BilinearWeight(cols, l, c);
      acc += static_cast<double>(dy[k * cols.out + l]) * wy * wx;
    }
  }
  return acc;
}

// The forward value of output pixel (k, l) of a plane `x` ([rows.in, cols.in]).
template <bool kNearest, typename T>
FLEET_HOST_DEVICE inline double InterpAt(const InterpAxis& rows, const InterpAxis& cols,
                                         const T* x, int64_t k, int64_t l) {
  if (kNearest) return x[NearestTap(rows, k) * cols.in + NearestTap(cols, l)];
  int64_t n, s, w, e;
  double dn, dw;
  BilinearTaps(rows, k, &n, &s, &dn);
  BilinearTaps(cols, l, &w, &e, &dw);
  const double ds = 1.0 - dn, de = 1.0 - dw;
  return x[n * cols.in + w] * ds * de + x[s * cols.in + w] * dn * de +
         x[n * cols.in + e] * ds * dw + x[s * cols.in + e] * dn * dw;
}

}  // namespace fleet::kernel
