// What the CUDA optimizer kernels share: the one-element scalar inputs they read on the device
// (learning rate, beta powers, step counters), the beta powers' advance, and the momentum and
// adam updates with the gradient given apart, which the dense kernels (optimizer_kernels.cu,
// gradient = Grad) and the sparse ones (sparse_rows.cu, gradient = a sparse Grad made dense in
// scratch) both enqueue.
//
// Check* validate every slot but Grad against Param before anything is enqueued; Enqueue*
// then queue the update on the launch's stream. The caller owns `grad` (device memory, one T
// per element of Param) until the stream has run the update.
#pragma once

#include <cstdint>

#include "kernels/kernel_util.h"

namespace fleet_cuda {

// A scalar input as kernels take it: the device pointer and its dtype.
struct Scalar {
  const void* data = nullptr;
  int32_t dtype = FLEET_DTYPE_FLOAT32;
};

inline Scalar ScalarOf(const FleetTensor* t) { return Scalar{t->data, t->dtype}; }

// "<op>: <what> is missing".
FleetStatus* MissingSlot(const FleetKernelContext* kc, const char* what);
// A scalar input: at least one element of float32, float64 or int64.
FleetStatus* CheckScalarIn(const FleetKernelContext* kc, const FleetTensor* t, const char* slot);

// momentum's slots but Grad (T = float or double).
template <typename T>
FleetStatus* CheckMomentum(const FleetKernelContext* kc);
template <typename T>
void EnqueueMomentum(const FleetKernelContext* kc, FleetStream* stream, const T* grad);

// adam's (adamw's with kAdamW) slots but Grad, the beta powers' outputs included.
template <typename T, bool kAdamW>
FleetStatus* CheckAdam(const FleetKernelContext* kc);
// Every element of Param, then the beta powers.
template <typename T, bool kAdamW>
void EnqueueAdam(const FleetKernelContext* kc, FleetStream* stream, const T* grad);
// Beta1PowOut = Beta1Pow * beta1 and Beta2PowOut likewise, where present: one thread queued
// behind the update, since every update thread reads the powers.
void EnqueueBetaPows(const FleetKernelContext* kc, FleetStream* stream, double beta1,
                     double beta2);

}  // namespace fleet_cuda

#ifdef __CUDACC__
namespace fleet_cuda {

// The first element of a scalar tensor as double, like the CPU's ReadScalar.
__device__ inline double LoadScalar(const void* p, int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_FLOAT32: return static_cast<double>(*static_cast<const float*>(p));
    case FLEET_DTYPE_FLOAT64: return *static_cast<const double*>(p);
    default: return static_cast<double>(*static_cast<const int64_t*>(p));
  }
}
__device__ inline double LoadScalar(Scalar s) { return LoadScalar(s.data, s.dtype); }

// Like the CPU's WriteScalar: float64 outputs get the double, others its float rounding.
__device__ inline void StoreScalar(void* p, int32_t dtype, double v) {
  if (dtype == FLEET_DTYPE_FLOAT64) {
    *static_cast<double*>(p) = v;
  } else {
    *static_cast<float*>(p) = static_cast<float>(v);
  }
}

}  // namespace fleet_cuda
#endif
