// The "cuda" device: NVIDIA GPUs through the CUDA runtime.
//
// Ordinals are logical (after CUDA_VISIBLE_DEVICES); props.physical_id is the index in the
// machine's list when CUDA_VISIBLE_DEVICES names devices by index, else the logical one.
// Memory comes from a caching allocator per device (caching_allocator.h): a freed block is kept
// for the next allocation of its size class instead of going back to cudaFree, because
// cudaFree synchronises the whole device. Streams are real CUDA streams created non-blocking;
// a NULL FleetStream means "synchronous": the call returns when the work is done.
//
// Threading: every slot may be called from any thread; each sets the current device from the
// ordinal or stream it is given, so no slot depends on the caller's current device.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <mutex>
#include <string>

#include "fleet/plugin.hpp"

// The plugin's definition of the ABI's opaque stream. Handles for cuBLAS and cuDNN are made on
// first use by a kernel on this stream and bound to it for good.
struct FleetStream {
  int32_t ordinal = 0;
  cudaStream_t native = nullptr;
  std::mutex handles_mu;             // guards the lazily made handles below
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t blas_lt = nullptr;
  cudnnHandle_t dnn = nullptr;
};

struct FleetEvent {
  int32_t ordinal = 0;
  cudaEvent_t native = nullptr;
};

namespace fleet_cuda {

// Remembers the host's services (for status objects and logging). Called from the entry point.
void SetHost(const FleetHostApi* host);
const FleetHostApi* GetHost();

// A status with `code` and `message`; NULL for FLEET_CODE_OK.
FleetStatus* Error(int32_t code, const std::string& message);
// NULL when `err` is cudaSuccess, else a status naming `what` and CUDA's description. Out of
// memory becomes RESOURCE_EXHAUSTED, a missing driver or device FAILED_PRECONDITION. An error
// also clears this thread's last CUDA error (cudaGetLastError), so that the next launch check
// does not report it a second time against another op.
FleetStatus* CudaStatus(cudaError_t err, const std::string& what);

// The device component's table (static storage).
const FleetDeviceVTable* DeviceVTable();

// Why there are no usable devices ("" when there are some): no driver, no GPU, ... Runs
// cudaGetDeviceCount once; the entry point never calls it.
const std::string& NoDeviceReason();

// The stream work of a kernel goes to: `stream` itself, or, for a NULL stream, a stream of this
// thread for `ordinal` that the caller synchronises before returning. The stream of a thread
// is made on first use (non-blocking) and destroyed when the thread exits. NULL only when that
// stream cannot be made or `ordinal` is not a device.
FleetStream* StreamOrDefault(FleetStream* stream, int32_t ordinal);

// Frees every cached block of every device (at plugin shutdown).
void ReleaseAllCachedMemory();

}  // namespace fleet_cuda
