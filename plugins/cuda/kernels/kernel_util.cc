#include "kernels/kernel_util.h"

#include <deque>

namespace fleet_cuda {

void Add(KernelList& list, const char* op_type, int32_t dtype, LaunchFn launch,
         PrepareFn prepare, ReleaseFn release, SupportsFn supports, uint32_t flags) {
  // A deque never moves its elements, so the pointers handed out stay valid.
  static std::deque<FleetKernelDef> storage;
  FleetKernelDef& def = storage.emplace_back();
  def.struct_size = FLEET_STRUCT_SIZE(FleetKernelDef, flags);
  def.op_type = op_type;
  def.device = "cuda";
  def.dtype = dtype;
  def.priority = 0;
  def.supports = supports;
  def.prepare = prepare;
  def.launch = launch;
  def.release = release;
  def.flags = flags;
  list.push_back(&def);
}

const KernelList& AllKernels() {
  static const KernelList list = [] {
    KernelList l;
    AddMathKernels(l);
    AddDenseKernels(l);
    AddNnKernels(l);
    AddOptimizerKernels(l);
    AddTensorKernels(l);
    AddSparseKernels(l);
    return l;
  }();
  return list;
}

FleetStatus* BlasStatus(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return nullptr;
  return Error(FLEET_CODE_INTERNAL,
               what + ": cuBLAS " + cublasGetStatusName(status) + " (" +
                   cublasGetStatusString(status) + ")");
}

FleetStatus* DnnStatus(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return nullptr;
  return Error(FLEET_CODE_INTERNAL, what + ": cuDNN " + cudnnGetErrorString(status));
}

// Handles are made on the stream's device, once, under the stream's lock; a stream is used by
// one kernel at a time, but the lock keeps a second thread that shares it safe.
cublasHandle_t Blas(FleetStream* stream) {
  std::lock_guard<std::mutex> lock(stream->handles_mu);
  if (stream->blas == nullptr) {
    cublasHandle_t h = nullptr;
    if (FleetStatus* s = BlasStatus(cublasCreate(&h), "cublasCreate")) throw StatusError(s);
    if (FleetStatus* s = BlasStatus(cublasSetStream(h, stream->native), "cublasSetStream")) {
      cublasDestroy(h);
      throw StatusError(s);
    }
    stream->blas = h;
  }
  return stream->blas;
}

cublasLtHandle_t BlasLt(FleetStream* stream) {
  std::lock_guard<std::mutex> lock(stream->handles_mu);
  if (stream->blas_lt == nullptr) {
    cublasLtHandle_t h = nullptr;
    if (FleetStatus* s = BlasStatus(cublasLtCreate(&h), "cublasLtCreate")) throw StatusError(s);
    stream->blas_lt = h;
  }
  return stream->blas_lt;
}

cudnnHandle_t Dnn(FleetStream* stream) {
  std::lock_guard<std::mutex> lock(stream->handles_mu);
  if (stream->dnn == nullptr) {
    cudnnHandle_t h = nullptr;
    if (FleetStatus* s = DnnStatus(cudnnCreate(&h), "cudnnCreate")) throw StatusError(s);
    if (FleetStatus* s = DnnStatus(cudnnSetStream(h, stream->native), "cudnnSetStream")) {
      cudnnDestroy(h);
      throw StatusError(s);
    }
    stream->dnn = h;
  }
  return stream->dnn;
}

namespace detail {
namespace {

// Built only for an error: a launch in steady state makes no string.
std::string OpName(const FleetKernelContext* kc) {
  return kc->op_type != nullptr ? kc->op_type : "kernel";
}

}  // namespace

FleetStatus* BeginLaunch(const FleetKernelContext* kc, FleetStream** stream) {
  if (kc->stream != nullptr && kc->stream->ordinal != kc->device_ordinal) {
    return InvalidArgument(OpName(kc) + ": the stream belongs to cuda:" +
                           std::to_string(kc->stream->ordinal) + ", the op to cuda:" +
                           std::to_string(kc->device_ordinal));
  }
  if (cudaError_t err = cudaSetDevice(kc->device_ordinal); err != cudaSuccess) {
    return CudaStatus(err, OpName(kc) + ": cudaSetDevice");
  }
  *stream = StreamOrDefault(kc->stream, kc->device_ordinal);
  if (*stream == nullptr) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": no stream for cuda:" +
                                          std::to_string(kc->device_ordinal));
  }
  return nullptr;
}

FleetStatus* EndLaunch(const FleetKernelContext* kc, FleetStream* stream, FleetStatus* body) {
  // A launch error (bad configuration, no kernel image for this GPU) is reported by the next
  // runtime call of this thread; reading it here pins it on the op that caused it.
  const cudaError_t launch = cudaGetLastError();
  if (body != nullptr) return body;
  if (launch != cudaSuccess) return CudaStatus(launch, OpName(kc) + ": kernel launch");
  if (kc->stream == nullptr) {
    if (cudaError_t err = cudaStreamSynchronize(stream->native); err != cudaSuccess) {
      return CudaStatus(err, OpName(kc) + ": running");
    }
  }
  return nullptr;
}

FleetStatus* FromException(const FleetKernelContext* kc, const std::exception* e) {
  return Error(FLEET_CODE_INTERNAL,
               OpName(kc) + ": " + (e != nullptr ? e->what() : "unknown exception"));
}

}  // namespace detail

FleetStatus* MissingScratch(const FleetKernelContext* kc, size_t bytes) {
  const std::string op = kc != nullptr && kc->op_type != nullptr ? kc->op_type : "kernel";
  return InvalidArgument(op + ": launched without the " + std::to_string(bytes) +
                         " scratch bytes prepare asked for");
}

}  // namespace fleet_cuda
