#include "kernels/kernel_util.h"

namespace fleet_cpu {
namespace {

template <typename T>
FleetStatus* ScaleLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    const T scale = static_cast<T>(FloatAttr(kc, "scale", 1.0));
    const T bias = static_cast<T>(FloatAttr(kc, "bias", 0.0));
    const bool after = BoolAttr(kc, "bias_after_scale", true);
    const T* xs = Data<T>(x);
    T* ys = Data<T>(out);
    const int64_t n = Numel(x);
    if (after) {
      for (int64_t i = 0; i < n; ++i) ys[i] = scale * xs[i] + bias;
    } else {
      for (int64_t i = 0; i < n; ++i) ys[i] = scale * (xs[i] + bias);
    }
    return nullptr;
  });
}

}  // namespace

void AddMathKernels(KernelList& list) {
  Add(list, "scale", FLEET_DTYPE_FLOAT32, ScaleLaunch<float>);
  Add(list, "scale", FLEET_DTYPE_FLOAT64, ScaleLaunch<double>);
}

}  // namespace fleet_cpu
