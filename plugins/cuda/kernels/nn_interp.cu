// bilinear_interp_v2 and nearest_interp_v2 (+ grads), float32 and float64, NCHW, with the CPU
// plugin's definitions: both evaluate the shared coordinate rules of
// plugins/common/interp_plan.h. The gradient is gathered, one thread per input pixel, over the
// output pixels that read it (found by binary search on the monotone coordinate maps) in
// row-major output order, so nothing is accumulated with atomics and every run gives the same
// bits.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "interp_plan.h"
#include "kernels/nn_groups.h"

namespace fleet_cuda {
namespace {

using fleet::kernel::InterpAxis;
using nn::OpName;

struct InterpGeom {
  int64_t n = 0, c = 0;
  InterpAxis rows, cols;
};

// Prepare only: reads the `scale` list attribute. `out` is Out (forward) or Out@GRAD (grad).
FleetStatus* Geometry(const FleetKernelContext* kc, const FleetTensor* x, const FleetTensor* out,
                      const char* out_slot, InterpGeom* g) {
  for (auto [t, slot] : {std::pair{x, "X"}, std::pair{out, out_slot}}) {
    if (t == nullptr || t->ndim != 4) {
      return InvalidArgument(OpName(kc) + ": " + slot + " must be present with 4 dims");
    }
  }
  if (out->dims[0] != x->dims[0] || out->dims[1] != x->dims[1]) {
    return InvalidArgument(OpName(kc) + ": " + out_slot + " must keep X's batch and channels");
  }
  if ((x->dims[2] == 0 || x->dims[3] == 0) && out->dims[2] * out->dims[3] > 0) {
    return InvalidArgument(OpName(kc) + ": X has an empty plane to resize");
  }
  const std::vector<double> scale = FloatsAttr(kc, "scale");
  const bool scaled = scale.size() == 2 && scale[0] > 0 && scale[1] > 0;
  const bool corners = BoolAttr(kc, "align_corners", true);
  const int64_t mode = IntAttr(kc, "align_mode", 1);
  g->n = x->dims[0];
  g->c = x->dims[1];
  g->rows = fleet::kernel::MakeInterpAxis(x->dims[2], out->dims[2], scaled ? scale[0] : -1.0,
                                          corners, mode);
  g->cols = fleet::kernel::MakeInterpAxis(x->dims[3], out->dims[3], scaled ? scale[1] : -1.0,
                                          corners, mode);
  return nullptr;
}

bool HasDims(const FleetTensor* t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  return t != nullptr && t->ndim == 4 && t->dims[0] == d0 && t->dims[1] == d1 &&
         t->dims[2] == d2 && t->dims[3] == d3;
}

template <typename T, bool kNearest>
__global__ void InterpForward(InterpGeom g, const T* x, T* y) {
  const int64_t total = g.n * g.c * g.rows.out * g.cols.out;
  const int64_t in_plane = g.rows.in * g.cols.in;
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t l = idx % g.cols.out;
    const int64_t t = idx / g.cols.out;
    const int64_t k = t % g.rows.out;
    const int64_t p = t / g.rows.out;
    y[idx] = static_cast<T>(
        fleet::kernel::InterpAt<kNearest>(g.rows, g.cols, x + p * in_plane, k, l));
  }
}

template <typename T, bool kNearest>
__global__ void InterpBackward(InterpGeom g, const T* dy, T* dx) {
  const int64_t total = g.n * g.c * g.rows.in * g.cols.in;
  const int64_t out_plane = g.rows.out * g.cols.out;
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t col = idx % g.cols.in;
    const int64_t t = idx / g.cols.in;
    const int64_t row = t % g.rows.in;
    const int64_t p = t / g.rows.in;
    dx[idx] = static_cast<T>(
        fleet::kernel::InterpGradAt<kNearest>(g.rows, g.cols, dy + p * out_plane, row, col));
  }
}

template <bool kGrad>
FleetStatus* InterpPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  const char* out_slot = kGrad ? "Out@GRAD" : "Out";
  const FleetTensor* out = kGrad ? Input(kc, out_slot) : Output(kc, out_slot);
  auto g = std::make_unique<InterpGeom>();
  if (FleetStatus* st = Geometry(kc, Input(kc, "X"), out, out_slot, g.get())) return st;
  *state = g.release();
  return nullptr;
}

FleetStatus* ShapeChanged(const FleetKernelContext* kc, const char* out_slot) {
  return InvalidArgument(OpName(kc) + ": X or " + out_slot +
                         " is missing or differs from the shapes prepared for");
}

template <typename T, bool kNearest>
FleetStatus* InterpLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* g = static_cast<const InterpGeom*>(state);
  if (g == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Output(kc, "Out");
  if (!HasDims(x, g->n, g->c, g->rows.in, g->cols.in) ||
      !HasDims(y, g->n, g->c, g->rows.out, g->cols.out)) {
    return ShapeChanged(kc, "Out");
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t total = Numel(y);
    if (total > 0) {
      InterpForward<T, kNearest>
          <<<Blocks(total), kThreads, 0, s->native>>>(*g, Data<const T>(x), Data<T>(y));
    }
    return nullptr;
  });
}

template <typename T, bool kNearest>
FleetStatus* InterpGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* g = static_cast<const InterpGeom*>(state);
  if (g == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* dy = Input(kc, "Out@GRAD");
  if (!HasDims(dx, g->n, g->c, g->rows.in, g->cols.in) ||
      !HasDims(dy, g->n, g->c, g->rows.out, g->cols.out)) {
    return ShapeChanged(kc, "Out@GRAD");
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t total = Numel(dx);
    if (total > 0) {
      InterpBackward<T, kNearest>
          <<<Blocks(total), kThreads, 0, s->native>>>(*g, Data<const T>(dy), Data<T>(dx));
    }
    return nullptr;
  });
}

template <typename T>
void AddInterp(KernelList& list, int32_t dtype) {
  Add(list, "bilinear_interp_v2", dtype, InterpLaunch<T, false>, InterpPrepare<false>,
      nn::DeleteState<InterpGeom>);
  Add(list, "bilinear_interp_v2_grad", dtype, InterpGradLaunch<T, false>, InterpPrepare<true>,
      nn::DeleteState<InterpGeom>);
  Add(list, "nearest_interp_v2", dtype, InterpLaunch<T, true>, InterpPrepare<false>,
      nn::DeleteState<InterpGeom>);
  Add(list, "nearest_interp_v2_grad", dtype, InterpGradLaunch<T, true>, InterpPrepare<true>,
      nn::DeleteState<InterpGeom>);
}

}  // namespace

void AddNnInterpKernels(KernelList& list) {
  AddInterp<float>(list, FLEET_DTYPE_FLOAT32);
  AddInterp<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
