#include "broadcast_plan.h"

namespace fleet::kernel {

void Coalesce(StridePlan& p) {
  StridePlan q;
  for (int i = 0; i < p.rank; ++i) {
    if (p.dims[i] == 1) continue;
    const int j = q.rank - 1;
    // Outer dim j absorbs inner dim i when one step of j is dims[i] steps of i, for both.
    if (j >= 0 && q.sa[j] == p.sa[i] * p.dims[i] && q.sb[j] == p.sb[i] * p.dims[i]) {
      q.dims[j] *= p.dims[i];
      q.sa[j] = p.sa[i];
      q.sb[j] = p.sb[i];
      continue;
    }
    q.dims[q.rank] = p.dims[i];
    q.sa[q.rank] = p.sa[i];
    q.sb[q.rank] = p.sb[i];
    ++q.rank;
  }
  p = q;
}

bool AxisBroadcastStrides(const FleetTensor* t, const FleetTensor* out, int64_t axis,
                          int64_t* strides) {
  const int64_t rank = out->ndim;
  int64_t r = t->ndim;
  int64_t offset = 0;
  if (r != rank) {
    offset = axis == -1 ? rank - r : axis;
    while (r > 0 && offset + r > rank && t->dims[r - 1] == 1) --r;
  }
  if (offset < 0 || offset + r > rank) return false;
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    const int64_t d = (i >= offset && i < offset + r) ? t->dims[i - offset] : 1;
    if (d != out->dims[i] && d != 1) return false;
    strides[i] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return true;
}

bool BinaryBroadcastPlan(const FleetTensor* x, const FleetTensor* y, const FleetTensor* out,
                         int64_t axis, StridePlan* p) {
  p->rank = out->ndim;
  for (int i = 0; i < p->rank; ++i) p->dims[i] = out->dims[i];
  if (!AxisBroadcastStrides(x, out, axis, p->sa) || !AxisBroadcastStrides(y, out, axis, p->sb)) {
    return false;
  }
  Coalesce(*p);
  return true;
}

}  // namespace fleet::kernel
