// cuBLAS and cuBLASLt, loaded on first use instead of at plugin load.
//
// The two libraries are over 600 MB; mapping and relocating them took about 90 ms, which every
// `fleet-host plugins` listing and every CPU-only run paid just because the CUDA plugin sits in
// the plugin directory. The plugin does not link them. Instead this file defines, with hidden
// visibility, the few cuBLAS entry points the kernels call; the first call opens the libraries
// (found through the plugin's RUNPATH, like any dependency) and forwards. If they cannot be
// opened, every handle creation fails with CUBLAS_STATUS_NOT_INITIALIZED and the status string
// carries the loader's message, so the kernel that asked reports it.
//
// The definitions are checked against the toolkit's own declarations (cublas_v2.h and
// cublasLt.h are included), so a signature drift is a compile error.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace {

#define FLEET_STR2(x) #x
#define FLEET_STR(x) FLEET_STR2(x)

struct Cublas {
  std::string error;  // why the libraries could not be opened; empty when they were
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetPointerMode_v2) set_pointer_mode = nullptr;
  decltype(&cublasSetAtomicsMode) set_atomics_mode = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasGemmStridedBatchedEx_64) gemm_strided_batched_ex_64 = nullptr;
  decltype(&cublasLtCreate) lt_create = nullptr;
  decltype(&cublasLtDestroy) lt_destroy = nullptr;
};

template <typename Fn>
bool Bind(void* lib, const char* name, Fn& out, std::string& error) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (out == nullptr && error.empty()) error = std::string("symbol ") + name + " not found";
  return out != nullptr;
}

// Opened once; the libraries stay loaded until the process exits, as the plugin itself does.
const Cublas& Lib() {
  static Cublas lib;
  static std::once_flag once;
  std::call_once(once, [] {
    // The major the headers were built against: another major has another ABI.
    const char* blas_name = "libcublas.so." FLEET_STR(CUBLAS_VER_MAJOR);
    const char* lt_name = "libcublasLt.so." FLEET_STR(CUBLAS_VER_MAJOR);
    void* blas = dlopen(blas_name, RTLD_NOW | RTLD_LOCAL);
    void* lt = blas != nullptr ? dlopen(lt_name, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (blas == nullptr || lt == nullptr) {
      const char* why = dlerror();
      lib.error = std::string(blas == nullptr ? blas_name : lt_name) + " could not be loaded: " +
                  (why != nullptr ? why : "unknown reason");
      return;
    }
    std::string& e = lib.error;
    Bind(blas, "cublasCreate_v2", lib.create, e);
    Bind(blas, "cublasDestroy_v2", lib.destroy, e);
    Bind(blas, "cublasSetStream_v2", lib.set_stream, e);
    Bind(blas, "cublasSetPointerMode_v2", lib.set_pointer_mode, e);
    Bind(blas, "cublasSetAtomicsMode", lib.set_atomics_mode, e);
    Bind(blas, "cublasSetMathMode", lib.set_math_mode, e);
    Bind(blas, "cublasGetStatusName", lib.status_name, e);
    Bind(blas, "cublasGetStatusString", lib.status_string, e);
    Bind(blas, "cublasGemmStridedBatchedEx_64", lib.gemm_strided_batched_ex_64, e);
    Bind(lt, "cublasLtCreate", lib.lt_create, e);
    Bind(lt, "cublasLtDestroy", lib.lt_destroy, e);
    if (!e.empty()) e = std::string(blas_name) + ": " + e;
  });
  return lib;
}

// Every forwarded call but handle creation needs a handle, which exists only if the libraries
// loaded; the checks below are for a caller that ignored a failed create.
bool Ready() { return Lib().error.empty(); }

}  // namespace

extern "C" {

__attribute__((visibility("hidden"))) cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().create(handle);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().destroy(handle);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasSetStream_v2(cublasHandle_t handle,
                                                                        cudaStream_t stream) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().set_stream(handle, stream);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasSetPointerMode_v2(
    cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().set_pointer_mode(handle, mode);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasSetAtomicsMode(
    cublasHandle_t handle, cublasAtomicsMode_t mode) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().set_atomics_mode(handle, mode);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasSetMathMode(cublasHandle_t handle,
                                                                       cublasMath_t mode) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().set_math_mode(handle, mode);
}

__attribute__((visibility("hidden"))) const char* cublasGetStatusName(cublasStatus_t status) {
  if (!Ready()) return "CUBLAS_STATUS_NOT_INITIALIZED";
  return Lib().status_name(status);
}

__attribute__((visibility("hidden"))) const char* cublasGetStatusString(cublasStatus_t status) {
  if (!Ready()) return Lib().error.c_str();
  return Lib().status_string(status);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
    int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
    long long int strideA, const void* B, cudaDataType Btype, int64_t ldb, long long int strideB,
    const void* beta, void* C, cudaDataType Ctype, int64_t ldc, long long int strideC,
    int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().gemm_strided_batched_ex_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                                          strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
                                          strideC, batchCount, computeType, algo);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasLtCreate(
    cublasLtHandle_t* light_handle) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().lt_create(light_handle);
}

__attribute__((visibility("hidden"))) cublasStatus_t cublasLtDestroy(
    cublasLtHandle_t light_handle) {
  if (!Ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Lib().lt_destroy(light_handle);
}

}  // extern "C"
