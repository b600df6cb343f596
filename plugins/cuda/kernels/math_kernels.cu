// The math kernel group: `scale` here, the rest in math_*.cu (see math_groups.h).
#include <string>

#include "kernels/math_groups.h"

namespace fleet_cuda {
namespace math {
namespace {

// Out = scale * X + bias, or scale * (X + bias) without bias_after_scale; both in T, as on the
// CPU. Element-wise, so Out may be X.
template <typename T>
__global__ void ScaleKernel(const T* x, T* out, int64_t n, T scale, T bias, bool after) {
  FLEET_CUDA_LOOP(i, n) { out[i] = after ? scale * x[i] + bias : scale * (x[i] + bias); }
}

template <typename T>
FleetStatus* ScaleLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if (n == 0) return nullptr;
    const T scale = static_cast<T>(FloatAttr(kc, "scale", 1.0));
    const T bias = static_cast<T>(FloatAttr(kc, "bias", 0.0));
    const bool after = BoolAttr(kc, "bias_after_scale", true);
    ScaleKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x), Data<T>(out), n,
                                                          scale, bias, after);
    return nullptr;
  });
}

}  // namespace
}  // namespace math

void AddMathKernels(KernelList& list) {
  Add(list, "scale", FLEET_DTYPE_FLOAT32, math::ScaleLaunch<float>);
  Add(list, "scale", FLEET_DTYPE_FLOAT64, math::ScaleLaunch<double>);
  AddMathElementwiseKernels(list);
  AddMathReduceKernels(list);
  AddMathActivationKernels(list);
  AddMathUnaryKernels(list);
  AddMathCompareKernels(list);
  AddMathReduceExtKernels(list);
}

}  // namespace fleet_cuda
