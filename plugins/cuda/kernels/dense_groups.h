// The dense group (AddDenseKernels, dense_kernels.cu) is spread over one file per family so that
// each compiles on its own; this header declares each file's adder and what they share: the
// Paddle window geometry of conv2d/pool2d and a deterministic block reduction.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/kernel_util.h"
#include "window_plan.h"

namespace fleet_cuda {

void AddDenseMatmulKernels(KernelList& list);  // dense_matmul.cu: mul, matmul_v2 (+ grads)
void AddDenseConvKernels(KernelList& list);    // dense_conv.cu: conv2d (+ grad)
void AddDensePoolKernels(KernelList& list);    // dense_pool.cu: pool2d (+ grad)
void AddDenseNormKernels(KernelList& list);    // dense_norm.cu: batch_norm, layer_norm (+ grads)
void AddDenseSyncNormKernels(KernelList& list);  // dense_sync_norm.cu: sync_batch_norm*
void AddDenseDeconvKernels(KernelList& list);  // dense_deconv.cu: conv2d_transpose (+ grad)

namespace dense {

// kc's op type, or "kernel" for a context without one.
std::string OpName(const FleetKernelContext* kc);
// INVALID_ARGUMENT "<op>: missing <slot>" when `t` is NULL.
FleetStatus* Require(const FleetKernelContext* kc, const FleetTensor* t, const char* slot);
// INVALID_ARGUMENT naming the op and slot unless `t` exists with `ndim` dims.
FleetStatus* ExpectRank(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                        int32_t ndim);

// A resolved 2-D window; the type and the rules are shared with the CPU plugin
// (plugins/common/window_plan.h).
using fleet::kernel::Window2d;

// Reads strides/paddings/padding_algorithm (and dilations when `with_dilation`) for input
// spatial dims `in` and kernel sizes `k`, applying Paddle's SAME/VALID rules. Allocates (it
// reads list attributes), so it belongs in prepare, not in a launch.
FleetStatus* ResolveWindow(const FleetKernelContext* kc, const int64_t in[2], const int64_t k[2],
                           bool with_dilation, Window2d* w);

template <typename S>
void DeleteState(void*, void* state) {
  delete static_cast<S*>(state);
}

#ifdef __CUDACC__
// The sum of `v` over the block, returned to every thread. `buf` is shared memory of blockDim.x
// elements and blockDim.x a power of two. The tree has a fixed shape, so the result is the same
// on every run; all threads of the block must call it.
template <typename A>
__device__ A BlockSum(A v, A* buf) {
  const unsigned t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half >>= 1) {
    if (t < half) buf[t] += buf[t + half];
    __syncthreads();
  }
  const A total = buf[0];
  __syncthreads();  // buf is free for the next call only once everyone has read the total
  return total;
}
#endif

}  // namespace dense
}  // namespace fleet_cuda
