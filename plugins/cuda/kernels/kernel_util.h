// What every CUDA kernel file shares: reading the kernel context, running on the kernel's
// stream, cuBLAS/cuDNN handles, errors, and the list kernels are registered into. Compiles as
// C++17 under nvcc and g++; the device-side helpers at the end exist only under nvcc.
//
// Conventions of a kernel file (kernels/*.cu):
//   - one launch function per op and dtype, registered with Add() from the file's group function
//     (declared below and called by AllKernels());
//   - the body of every launch runs inside Run(kc, ...), which sets the device, picks the stream,
//     catches exceptions and checks the launch;
//   - inputs are validated before anything is enqueued; a bad shape or attribute is
//     INVALID_ARGUMENT naming the op and what was expected;
//   - nothing is allocated at launch: temporary memory is scratch asked for at prepare;
//   - no launch synchronises the stream (Run does, only for a NULL stream).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "device.h"
#include "fleet/fleet_plugin.h"
#include "kernel_context.h"
#include "plan_status.h"

namespace fleet_cuda {

using KernelList = std::vector<const FleetKernelDef*>;

using SupportsFn = FleetStatus* (*)(void*, const FleetKernelContext*);
using PrepareFn = FleetStatus* (*)(void*, const FleetKernelContext*, void**, size_t*);
using LaunchFn = FleetStatus* (*)(void*, const FleetKernelContext*, void*);
using ReleaseFn = void (*)(void*, void*);

// Appends a kernel for `op_type` on "cuda" with `dtype` (FLEET_DTYPE_*) to `list`.
void Add(KernelList& list, const char* op_type, int32_t dtype, LaunchFn launch,
         PrepareFn prepare = nullptr, ReleaseFn release = nullptr, SupportsFn supports = nullptr,
         uint32_t flags = 0);

// Groups, one or more files each.
void AddMathKernels(KernelList& list);       // math_*.cu: elementwise, activations, reductions
void AddDenseKernels(KernelList& list);      // dense_*.cu: matmul, conv, pool, batch/layer norm
void AddNnKernels(KernelList& list);         // nn_*.cu: losses, dropout, embedding, top-k, random
void AddOptimizerKernels(KernelList& list);  // optimizer_kernels.cu
void AddOptimizerExtKernels(KernelList& list);  // optimizer_ext.cu (from the above)
void AddTensorKernels(KernelList& list);     // tensor_*.cu: reshape, concat, slice, cast, fill
// sparse_rows.cu: the kernels of SelectedRows tensors, after the dense kernels of their ops
void AddSparseKernels(KernelList& list);

// The whole list, built once.
const KernelList& AllKernels();

// ---- reading the context (plugins/common/kernel_context.h) --------------------------------
using fleet::kernel::BoolAttr;
using fleet::kernel::Dims;
using fleet::kernel::DimsText;
using fleet::kernel::FindAttr;
using fleet::kernel::FloatAttr;
using fleet::kernel::FloatsAttr;
using fleet::kernel::Input;
using fleet::kernel::InputCount;
using fleet::kernel::IntAttr;
using fleet::kernel::IntsAttr;
using fleet::kernel::Numel;
using fleet::kernel::Output;
using fleet::kernel::OutputCount;
using fleet::kernel::StringAttr;

template <typename T>
T* Data(const FleetTensor* t) {
  return static_cast<T*>(t->data);
}

// ---- errors -------------------------------------------------------------------------------
inline FleetStatus* InvalidArgument(const std::string& m) {
  return Error(FLEET_CODE_INVALID_ARGUMENT, m);
}
inline FleetStatus* Unimplemented(const std::string& m) {
  return Error(FLEET_CODE_UNIMPLEMENTED, m);
}
// A planner's status (plugins/common/plan_status.h) as this plugin's status; NULL when ok.
inline FleetStatus* FromPlan(const fleet::kernel::PlanStatus& planned) {
  return fleet::kernel::ToFleetStatus(planned, Error);
}
// NULL on success, else INTERNAL naming `what` and the library's status.
FleetStatus* BlasStatus(cublasStatus_t status, const std::string& what);
FleetStatus* DnnStatus(cudnnStatus_t status, const std::string& what);

// Thrown by the helpers below (handle creation); Run turns it into the status it carries.
struct StatusError : std::exception {
  explicit StatusError(FleetStatus* s) : status(s) {}
  const char* what() const noexcept override { return "fleet status"; }
  FleetStatus* status;
};

// ---- running on the kernel's stream --------------------------------------------------------
// Handles bound to `stream`, made on first use (StatusError when that fails).
cublasHandle_t Blas(FleetStream* stream);
cublasLtHandle_t BlasLt(FleetStream* stream);
cudnnHandle_t Dnn(FleetStream* stream);

namespace detail {
FleetStatus* BeginLaunch(const FleetKernelContext* kc, FleetStream** stream);
FleetStatus* EndLaunch(const FleetKernelContext* kc, FleetStream* stream, FleetStatus* body);
FleetStatus* FromException(const FleetKernelContext* kc, const std::exception* e);
}  // namespace detail

// Runs `body(FleetStream*)` (returning FleetStatus*) for kernel `kc`: sets kc's device, hands
// body the stream to enqueue on (kc->stream, or a stream of this thread when it is NULL),
// turns exceptions and launch errors into statuses naming the op and, for a NULL kc->stream,
// waits for the work before returning.
template <typename F>
FleetStatus* Run(const FleetKernelContext* kc, F&& body) {
  FleetStream* stream = nullptr;
  if (FleetStatus* s = detail::BeginLaunch(kc, &stream)) return s;
  FleetStatus* result = nullptr;
  try {
    result = body(stream);
  } catch (const StatusError& e) {
    result = e.status;
  } catch (const std::exception& e) {
    result = detail::FromException(kc, &e);
  } catch (...) {
    result = detail::FromException(kc, nullptr);
  }
  return detail::EndLaunch(kc, stream, result);
}

// ---- cuDNN ---------------------------------------------------------------------------------
// The cuDNN data and math types of a kernel's element type: float32 runs without TF32 tensor
// cores, so results stay within float32 rounding of the CPU plugin's.
template <typename T>
struct DnnTraits;
template <>
struct DnnTraits<float> {
  static constexpr cudnnDataType_t kType = CUDNN_DATA_FLOAT;
  static constexpr cudnnMathType_t kMath = CUDNN_FMA_MATH;
};
template <>
struct DnnTraits<double> {
  static constexpr cudnnDataType_t kType = CUDNN_DATA_DOUBLE;
  static constexpr cudnnMathType_t kMath = CUDNN_DEFAULT_MATH;
};

// Whether a size fits cuDNN's int parameters.
inline bool FitsInt(int64_t v) { return v >= 0 && v <= 2147483647; }

// INVALID_ARGUMENT for a launch whose context lacks the scratch prepare asked for.
FleetStatus* MissingScratch(const FleetKernelContext* kc, size_t bytes);

// ---- launch geometry ---------------------------------------------------------------------
constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n elements (at least 1, capped so the grid stays small).
inline unsigned Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > 65535) b = 65535;
  return static_cast<unsigned>(b);
}

}  // namespace fleet_cuda

#ifdef __CUDACC__
// Grid-stride loop over [0, n) with a 64-bit index.
#define FLEET_CUDA_LOOP(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
#endif
