#include "matmul_plan.h"

#include <algorithm>
#include <string>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

int64_t Product(const int64_t* dims, int64_t begin, int64_t end) {
  int64_t p = 1;
  for (int64_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

}  // namespace

PlanStatus MulGeometry(const FleetTensor* x, const FleetTensor* y, int64_t xnc, int64_t ync,
                       MatmulGeom* g) {
  if (xnc < 1 || xnc >= x->ndim || ync < 1 || ync >= y->ndim) {
    return PlanInvalid("mul: num_col_dims (" + std::to_string(xnc) + ", " +
                       std::to_string(ync) + ") do not fit X " + DimsText(x) + ", Y " +
                       DimsText(y));
  }
  g->m = Product(x->dims, 0, xnc);
  g->k = Product(x->dims, xnc, x->ndim);
  g->n = Product(y->dims, ync, y->ndim);
  if (Product(y->dims, 0, ync) != g->k) {
    return PlanInvalid("mul: X " + DimsText(x) + " and Y " + DimsText(y) +
                       " flatten to matrices that do not multiply");
  }
  g->xm = g->k;
  g->xk = 1;
  g->yk = g->n;
  g->yn = 1;
  return PlanOk();
}

PlanStatus MatmulV2Geometry(const FleetTensor* x, const FleetTensor* y, bool tx, bool ty,
                            bool mark_transposed, MatmulGeom* g) {
  const int xr = x->ndim, yr = y->ndim;
  if (xr < 1 || yr < 1 || xr > kMaxStrideRank || yr > kMaxStrideRank) {
    // Callers word this themselves first; this only keeps the arrays below in bounds.
    return PlanInvalid("matmul_v2: unsupported ranks of X " + DimsText(x) + " and Y " +
                       DimsText(y));
  }
  // A 1-D X is a row vector and a 1-D Y a column vector; trans_* does not apply to them.
  int64_t kx = 0, ky = 0;
  if (xr == 1) {
    g->m = 1;
    kx = x->dims[0];
    g->xm = kx;
    g->xk = 1;
  } else {
    const int64_t rows = x->dims[xr - 2], cols = x->dims[xr - 1];
    g->m = tx ? cols : rows;
    kx = tx ? rows : cols;
    g->xm = tx ? 1 : cols;
    g->xk = tx ? cols : 1;
  }
  if (yr == 1) {
    g->n = 1;
    ky = y->dims[0];
    g->yk = 1;
    g->yn = 1;
  } else {
    const int64_t rows = y->dims[yr - 2], cols = y->dims[yr - 1];
    ky = ty ? cols : rows;
    g->n = ty ? rows : cols;
    g->yk = ty ? 1 : cols;
    g->yn = ty ? cols : 1;
  }
  if (kx != ky) {
    const bool mark_x = mark_transposed && tx && xr >= 2;
    const bool mark_y = mark_transposed && ty && yr >= 2;
    return PlanInvalid("matmul_v2: contraction dims differ for X " + DimsText(x) +
                       (mark_x ? " (transposed)" : "") + " and Y " + DimsText(y) +
                       (mark_y ? " (transposed)" : ""));
  }
  g->k = kx;
  const int xb = xr >= 2 ? xr - 2 : 0, yb = yr >= 2 ? yr - 2 : 0;
  g->nb = std::max(xb, yb);
  int64_t xs = g->m * g->k, ys = g->k * g->n;
  for (int i = g->nb - 1; i >= 0; --i) {
    const int xi = i - (g->nb - xb), yi = i - (g->nb - yb);
    g->xpad[i] = xi >= 0 ? x->dims[xi] : 1;
    g->ypad[i] = yi >= 0 ? y->dims[yi] : 1;
    g->xstr[i] = xs;
    g->ystr[i] = ys;
    xs *= g->xpad[i];
    ys *= g->ypad[i];
    const int64_t a = g->xpad[i], b = g->ypad[i];
    if (a != b && a != 1 && b != 1) {
      return PlanInvalid("matmul_v2: batch dims of X " + DimsText(x) + " and Y " +
                         DimsText(y) + " do not broadcast");
    }
    g->batch[i] = a == 1 ? b : a;
    g->x_broadcast |= a != g->batch[i];
    g->y_broadcast |= b != g->batch[i];
  }
  return PlanOk();
}

}  // namespace fleet::kernel
