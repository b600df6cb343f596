// bilinear_interp_v2 and nearest_interp_v2 (+ grads), float32 and float64, NCHW. Loops over the
// shared coordinate rules (plugins/common/interp_plan.h): oneDNN's resampling maps coordinates
// with half-pixel centres only, which is Paddle's rule for just one of the align_corners /
// align_mode combinations, so every case runs the same loops. The gradient gathers, per input
// pixel, the output pixels that read it, in the order the CUDA plugin uses too.
#include "interp_plan.h"
#include "kernels/nn_kernels.h"

namespace fleet_cpu {
namespace {

using fleet::kernel::InterpAxis;

struct InterpGeom {
  int64_t planes = 0;
  InterpAxis rows, cols;
};

// `out` is Out (forward) or Out@GRAD (grad).
FleetStatus* Geometry(const FleetKernelContext* kc, const FleetTensor* x, const FleetTensor* out,
                      const char* out_slot, InterpGeom* g) {
  if (FleetStatus* st = ExpectRank(kc, x, "X", 4)) return st;
  if (FleetStatus* st = ExpectRank(kc, out, out_slot, 4)) return st;
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
  g->planes = x->dims[0] * x->dims[1];
  g->rows = fleet::kernel::MakeInterpAxis(x->dims[2], out->dims[2], scaled ? scale[0] : -1.0,
                                          corners, mode);
  g->cols = fleet::kernel::MakeInterpAxis(x->dims[3], out->dims[3], scaled ? scale[1] : -1.0,
                                          corners, mode);
  return nullptr;
}

template <typename T, bool kNearest>
FleetStatus* Interp(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    InterpGeom g;
    const FleetTensor* xt = Input(kc, "X");
    const FleetTensor* yt = Output(kc, "Out");
    if (FleetStatus* st = Geometry(kc, xt, yt, "Out", &g)) return st;
    const T* x = Data<T>(xt);
    T* y = Data<T>(yt);
    const int64_t in_plane = g.rows.in * g.cols.in, out_plane = g.rows.out * g.cols.out;
    ParallelForEach(kc, g.planes, in_plane + out_plane, [&](int64_t p) {
      for (int64_t k = 0; k < g.rows.out; ++k) {
        for (int64_t l = 0; l < g.cols.out; ++l) {
          y[p * out_plane + k * g.cols.out + l] = static_cast<T>(
              fleet::kernel::InterpAt<kNearest>(g.rows, g.cols, x + p * in_plane, k, l));
        }
      }
    });
    return nullptr;
  });
}

template <typename T, bool kNearest>
FleetStatus* InterpGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    if (dxt == nullptr) return nullptr;
    InterpGeom g;
    const FleetTensor* dyt = Input(kc, "Out@GRAD");
    if (FleetStatus* st = Geometry(kc, Input(kc, "X"), dyt, "Out@GRAD", &g)) return st;
    const T* dy = Data<T>(dyt);
    T* dx = Data<T>(dxt);
    const int64_t in_plane = g.rows.in * g.cols.in, out_plane = g.rows.out * g.cols.out;
    ParallelForEach(kc, g.planes, in_plane + out_plane, [&](int64_t p) {
      for (int64_t r = 0; r < g.rows.in; ++r) {
        for (int64_t c = 0; c < g.cols.in; ++c) {
          dx[p * in_plane + r * g.cols.in + c] = static_cast<T>(
              fleet::kernel::InterpGradAt<kNearest>(g.rows, g.cols, dy + p * out_plane, r, c));
        }
      }
    });
    return nullptr;
  });
}

}  // namespace

void AddNnInterpKernels(KernelList& list) {
  Add(list, "bilinear_interp_v2", FLEET_DTYPE_FLOAT32, Interp<float, false>);
  Add(list, "bilinear_interp_v2", FLEET_DTYPE_FLOAT64, Interp<double, false>);
  Add(list, "bilinear_interp_v2_grad", FLEET_DTYPE_FLOAT32, InterpGrad<float, false>);
  Add(list, "bilinear_interp_v2_grad", FLEET_DTYPE_FLOAT64, InterpGrad<double, false>);
  Add(list, "nearest_interp_v2", FLEET_DTYPE_FLOAT32, Interp<float, true>);
  Add(list, "nearest_interp_v2", FLEET_DTYPE_FLOAT64, Interp<double, true>);
  Add(list, "nearest_interp_v2_grad", FLEET_DTYPE_FLOAT32, InterpGrad<float, true>);
  Add(list, "nearest_interp_v2_grad", FLEET_DTYPE_FLOAT64, InterpGrad<double, true>);
}

}  // namespace fleet_cpu
