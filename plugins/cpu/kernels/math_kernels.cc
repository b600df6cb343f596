// The math kernel group: `scale` here, the rest in math_*_kernels.cc (see math_util.h).
#include "kernels/kernel_util.h"
#include "kernels/math_util.h"

namespace fleet_cpu {
namespace math {

FleetStatus* RequireSlots(const FleetKernelContext* kc, std::initializer_list<const char*> inputs,
                          std::initializer_list<const char*> outputs) {
  for (const char* slot : inputs) {
    if (Input(kc, slot) == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": input " + slot + " is missing");
    }
  }
  for (const char* slot : outputs) {
    if (Output(kc, slot) == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": output " + slot + " is missing");
    }
  }
  return nullptr;
}

}  // namespace math

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
  math::AddMatmulKernels(list);
  math::AddElementwiseKernels(list);
  math::AddReduceKernels(list);
  math::AddActivationKernels(list);
  math::AddUnaryKernels(list);
  math::AddCompareKernels(list);
  math::AddReduceExtKernels(list);
}

}  // namespace fleet_cpu
