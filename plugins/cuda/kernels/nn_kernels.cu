// The CUDA nn kernel group: losses (nn_loss.cu) and dropout, embedding lookup, accuracy and
// top-k (nn_misc.cu). This file holds what they share: input checks and the bad-index flag.
#include <cstring>

#include "kernels/nn_groups.h"

namespace fleet_cuda {
namespace nn {

std::string OpName(const FleetKernelContext* kc) {
  return kc != nullptr && kc->op_type != nullptr ? std::string(kc->op_type) : "kernel";
}

FleetStatus* Require(const FleetKernelContext* kc, const FleetTensor* t, const char* slot) {
  if (t != nullptr) return nullptr;
  return InvalidArgument(OpName(kc) + ": missing " + slot);
}

FleetStatus* RequireIndex(const FleetKernelContext* kc, const FleetTensor* t, const char* slot) {
  if (FleetStatus* st = Require(kc, t, slot)) return st;
  if (t->dtype == FLEET_DTYPE_INT32 || t->dtype == FLEET_DTYPE_INT64) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot +
                         " must hold int64 (or int32) values, got dtype " +
                         std::to_string(t->dtype));
}

FleetStatus* RequireSized(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                          int32_t dtype, int64_t n) {
  if (FleetStatus* st = Require(kc, t, slot)) return st;
  if (t->dtype != dtype) {
    return InvalidArgument(OpName(kc) + ": " + slot + " has dtype " + std::to_string(t->dtype) +
                           ", expected " + std::to_string(dtype));
  }
  if (Numel(t) != n) {
    return InvalidArgument(OpName(kc) + ": " + slot + " has " + std::to_string(Numel(t)) +
                           " elements, expected " + std::to_string(n));
  }
  return nullptr;
}

FleetStatus* PrepareFlag(void*, const FleetKernelContext*, void**, size_t* scratch_bytes) {
  *scratch_bytes = kFlagBytes;
  return nullptr;
}

FleetStatus* FlagOf(const FleetKernelContext* kc, unsigned long long** flag) {
  if (kc->scratch == nullptr) {
    return Error(FLEET_CODE_INTERNAL,
                 OpName(kc) + ": launched without the scratch memory asked for at prepare");
  }
  *flag = static_cast<unsigned long long*>(kc->scratch);
  return nullptr;
}

FleetStatus* ClearFlag(const FleetKernelContext* kc, FleetStream* stream,
                       unsigned long long* flag) {
  // All bits set is kNoBadPosition, above every position atomicMin can write.
  return CudaStatus(cudaMemsetAsync(flag, 0xff, sizeof(*flag), stream->native),
                    OpName(kc) + ": clearing the index check");
}

FleetStatus* ReadFlag(const FleetKernelContext* kc, FleetStream* stream,
                      const unsigned long long* flag, const FleetTensor* index, int64_t* pos,
                      int64_t* value) {
  *pos = -1;
  *value = 0;
  // Waiting here would make an asynchronous launch synchronous.
  if (kc->stream != nullptr) return nullptr;
  // A kernel that did not start left the flag clear; EndLaunch reports why it did not start.
  if (cudaPeekAtLastError() != cudaSuccess) return nullptr;
  const std::string op = OpName(kc);
  unsigned long long first = kNoBadPosition;
  if (FleetStatus* st = CudaStatus(cudaMemcpyAsync(&first, flag, sizeof(first),
                                                   cudaMemcpyDeviceToHost, stream->native),
                                   op + ": reading the index check")) {
    return st;
  }
  if (FleetStatus* st = CudaStatus(cudaStreamSynchronize(stream->native), op + ": running")) {
    return st;
  }
  if (first == kNoBadPosition) return nullptr;
  const bool is32 = index->dtype == FLEET_DTYPE_INT32;
  const size_t elem = is32 ? sizeof(int32_t) : sizeof(int64_t);
  unsigned char bytes[sizeof(int64_t)] = {};
  const char* src = static_cast<const char*>(index->data) + first * elem;
  if (FleetStatus* st = CudaStatus(
          cudaMemcpyAsync(bytes, src, elem, cudaMemcpyDeviceToHost, stream->native),
          op + ": reading the bad index")) {
    return st;
  }
  if (FleetStatus* st = CudaStatus(cudaStreamSynchronize(stream->native), op + ": running")) {
    return st;
  }
  if (is32) {
    int32_t v = 0;
    std::memcpy(&v, bytes, sizeof(v));
    *value = v;
  } else {
    int64_t v = 0;
    std::memcpy(&v, bytes, sizeof(v));
    *value = v;
  }
  *pos = static_cast<int64_t>(first);
  return nullptr;
}

}  // namespace nn

void AddNnKernels(KernelList& list) {
  AddNnLossKernels(list);
  AddNnLossExtKernels(list);
  AddNnMiscKernels(list);
  AddNnSequenceKernels(list);
  AddNnSequenceOffsetKernels(list);
  AddNnExtKernels(list);
  AddNnInterpKernels(list);
  AddNnSampledKernels(list);
  AddNnRnnKernels(list);
  AddNnMetricKernels(list);
}

}  // namespace fleet_cuda
