// Shared pieces of the CUDA nn kernel group (nn_*.cu): each file's registration function, the
// reading of integer index tensors, and the scratch flag through which kernels report the
// first out-of-range label or id they meet.
//
// Why a flag: a label or id lives in device memory, so a launch cannot look at it before
// enqueueing work. A kernel that meets a bad one writes NaN (or skips the element) instead of
// reading out of bounds, and records the smallest bad position in the first bytes of its
// scratch. A synchronous launch (kc->stream == NULL) waits for its work before returning
// anyway, so it reads the flag back then and fails with the CPU plugin's message; an
// asynchronous launch never waits, so there the NaN in the output is the only sign.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/kernel_util.h"

namespace fleet_cuda {

// One per file, both called from AddNnKernels (nn_kernels.cu).
void AddNnLossKernels(KernelList& list);  // nn_loss.cu
void AddNnLossExtKernels(KernelList& list);  // nn_loss_ext.cu
void AddNnMiscKernels(KernelList& list);  // nn_misc.cu
void AddNnSequenceKernels(KernelList& list);  // nn_sequence.cu: sequence_pool
void AddNnSequenceOffsetKernels(KernelList& list);  // nn_sequence_offset.cu: concat, slice, unpad
void AddNnExtKernels(KernelList& list);   // nn_ext.cu: group_norm, instance_norm
void AddNnInterpKernels(KernelList& list);  // nn_interp.cu: bilinear/nearest_interp_v2
void AddNnSampledKernels(KernelList& list);  // nn_sampled.cu: hierarchical_sigmoid, nce
void AddNnRnnKernels(KernelList& list);    // nn_rnn.cu: rnn on cuDNN (LSTM, GRU, simple RNN)
void AddNnMetricKernels(KernelList& list);  // nn_metric.cu: auc

// The helpers get their own namespace: other kernel groups have helpers of the same names.
namespace nn {

std::string OpName(const FleetKernelContext* kc);

// INVALID_ARGUMENT "<op>: missing <slot>" when `t` is NULL.
FleetStatus* Require(const FleetKernelContext* kc, const FleetTensor* t, const char* slot);
// `t` must be present and hold int32 or int64 values (labels, ids, indices).
FleetStatus* RequireIndex(const FleetKernelContext* kc, const FleetTensor* t, const char* slot);
// `t` must be present and hold `n` elements of `dtype`.
FleetStatus* RequireSized(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                          int32_t dtype, int64_t n);

// Bytes at the start of scratch taken by the flag (padded so what follows stays aligned).
constexpr size_t kFlagBytes = 256;
constexpr unsigned long long kNoBadPosition = ~0ULL;

inline size_t AlignScratch(size_t bytes) { return (bytes + 255) / 256 * 256; }

// A prepare for kernels whose only scratch is the flag.
FleetStatus* PrepareFlag(void* ctx, const FleetKernelContext* kc, void** state,
                         size_t* scratch_bytes);

// The flag in kc's scratch, or an error when the launch came without it.
FleetStatus* FlagOf(const FleetKernelContext* kc, unsigned long long** flag);
// Enqueues the reset of the flag on `stream`.
FleetStatus* ClearFlag(const FleetKernelContext* kc, FleetStream* stream,
                       unsigned long long* flag);
// After the kernels that may set the flag: for a synchronous launch waits for them and sets
// *pos to the first bad position (-1 when none) and *value to element *pos of `index`; for an
// asynchronous launch sets *pos = -1 without waiting.
FleetStatus* ReadFlag(const FleetKernelContext* kc, FleetStream* stream,
                      const unsigned long long* flag, const FleetTensor* index, int64_t* pos,
                      int64_t* value);

template <typename S>
void DeleteState(void*, void* state) {
  delete static_cast<S*>(state);
}

// FLEET_DTYPE_* of a kernel's element type.
template <typename T>
constexpr int32_t DtypeOf() {
  if constexpr (std::is_same_v<T, float>) return FLEET_DTYPE_FLOAT32;
  if constexpr (std::is_same_v<T, double>) return FLEET_DTYPE_FLOAT64;
  if constexpr (std::is_same_v<T, int64_t>) return FLEET_DTYPE_INT64;
  return FLEET_DTYPE_INVALID;
}

}  // namespace nn
}  // namespace fleet_cuda

#ifdef __CUDACC__
namespace fleet_cuda::nn {

// Element i of an int32 (is32) or int64 index tensor, widened like the CPU's IndexAt.
__device__ inline int64_t LoadIndex(const void* p, bool is32, int64_t i) {
  return is32 ? static_cast<int64_t>(static_cast<const int32_t*>(p)[i])
              : static_cast<const int64_t*>(p)[i];
}

__device__ inline void NoteBad(unsigned long long* flag, int64_t pos) {
  atomicMin(flag, static_cast<unsigned long long>(pos));
}

// What a kernel writes where a bad label or id leaves no value to compute.
template <typename T>
__device__ inline T NaN() {
  return std::numeric_limits<T>::quiet_NaN();
}

// Warp-per-row loops: the row index is the same in all lanes of a warp, so every lane reaches
// each shuffle. Launch with blockDim.x a multiple of 32 (kThreads) and Blocks(rows * 32).
__device__ inline int64_t WarpId() {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}
__device__ inline int64_t WarpCount() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
}
__device__ inline int Lane() { return static_cast<int>(threadIdx.x % 32); }

}  // namespace fleet_cuda::nn
#endif
