#include "device.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "caching_allocator.h"

namespace fleet_cuda {
namespace {

// cudaMalloc returns at least 256-byte aligned memory; the caching allocator hands out whole
// cudaMalloc blocks, so every pointer alloc returns keeps that alignment.
constexpr uint64_t kAlignment = 256;

constexpr const char* kNativeStreamKind = "cudaStream_t";

const FleetHostApi* g_host = nullptr;  // set once by the entry point, before any slot runs

std::string Dev(int32_t ordinal) { return "cuda:" + std::to_string(ordinal); }

// Names a call in error messages ("cuda:0 copy_h2d"). The text is built only when an error
// needs it, so the copies and event calls of every step make no strings.
struct Where {
  int32_t ordinal;
  const char* call;
  std::string Text() const { return Dev(ordinal) + " " + call; }
};
std::string operator+(const Where& w, const std::string& tail) { return w.Text() + tail; }
std::string operator+(const Where& w, const char* tail) { return w.Text() + tail; }

std::string PointerText(const void* ptr) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", ptr);
  return buf;
}

std::string FormatBytes(uint64_t bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  if (bytes < 1024) return text;
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < sizeof kUnits / sizeof kUnits[0]) {
    value /= 1024.0;
    ++unit;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, " (%.1f %s)", value, kUnits[unit]);
  return text + buf;
}

void LogWarning(const std::string& message) {
  if (g_host != nullptr) fleet::plugin::Host(g_host).Log(FLEET_LOG_WARN, message);
}

int32_t CudaCode(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return FLEET_CODE_RESOURCE_EXHAUSTED;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return FLEET_CODE_FAILED_PRECONDITION;
    default:
      return FLEET_CODE_INTERNAL;
  }
}

std::string CudaMessage(cudaError_t err, const std::string& what) {
  const char* name = cudaGetErrorName(err);
  const char* text = cudaGetErrorString(err);
  return what + ": " + (name != nullptr ? name : "unknown CUDA error") + " (" +
         (text != nullptr ? text : "no description") + ")";
}

// Runs a slot's body and turns any exception into a status, because none may cross the C ABI.
// The messages are formatted without allocating, since bad_alloc is the likely exception.
template <typename F>
FleetStatus* Guard(const char* call, F&& body) noexcept {
  char buf[256];
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::snprintf(buf, sizeof buf, "cuda %s: out of host memory", call);
    return g_host->status_new(FLEET_CODE_RESOURCE_EXHAUSTED, buf);
  } catch (const std::exception& e) {
    std::snprintf(buf, sizeof buf, "cuda %s: exception: %s", call, e.what());
    return g_host->status_new(FLEET_CODE_INTERNAL, buf);
  } catch (...) {
    std::snprintf(buf, sizeof buf, "cuda %s: unknown exception", call);
    return g_host->status_new(FLEET_CODE_INTERNAL, buf);
  }
}

// The error of this thread's last failed backend call. The allocator calls its backend on the
// caller's thread, so Alloc reads here why the allocator answered nullptr.
thread_local cudaError_t tl_backend_error = cudaSuccess;

class CudaBackend final : public AllocatorBackend {
 public:
  explicit CudaBackend(int32_t ordinal) : ordinal_(ordinal) {}

  void* Allocate(size_t bytes) override {
    void* ptr = nullptr;
    cudaError_t err = cudaSetDevice(ordinal_);
    if (err == cudaSuccess) err = cudaMalloc(&ptr, bytes);
    if (err != cudaSuccess) {
      tl_backend_error = err;
      // Alloc reports this failure (or the allocator recovers from it); a later launch check
      // must not see it again.
      (void)cudaGetLastError();
      return nullptr;
    }
    return ptr;
  }

  bool Free(void* ptr, size_t bytes) override {
    cudaError_t err = cudaSetDevice(ordinal_);
    if (err == cudaSuccess) err = cudaFree(ptr);
    if (err == cudaSuccess) return true;
    (void)cudaGetLastError();
    try {
      LogWarning(CudaMessage(err, Dev(ordinal_) + " cudaFree of " + FormatBytes(bytes) + " at " +
                                      PointerText(ptr)));
    } catch (...) {
      // The backend must not throw (caching_allocator.h); the failure is still counted.
    }
    return false;
  }

 private:
  const int32_t ordinal_;
};

struct Device {
  explicit Device(int32_t o) : ordinal(o) {}

  const int32_t ordinal;

  std::mutex props_mu;  // guards the four members below
  bool props_loaded = false;
  std::string name;  // never changes once loaded, so props hands out its c_str()
  uint64_t total_memory = 0;
  int32_t compute_units = 0;

  std::once_flag allocator_once;
  // Made on first alloc and never destroyed: at process exit CUDA may be gone already, and the
  // plugin's shutdown returns the cache (ReleaseAllCachedMemory).
  std::atomic<CachingAllocator*> allocator{nullptr};
};

struct Devices {
  int32_t count = 0;
  std::string no_device_reason;
  std::vector<std::unique_ptr<Device>> list;
};

std::once_flag g_devices_once;
Devices* g_devices = nullptr;            // made once, never destroyed (see Device::allocator)
std::atomic<bool> g_devices_ready{false};  // lets shutdown skip CUDA when nothing was used

std::string ReasonForNoDevice(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
      return "no CUDA driver (libcuda.so not found, or older than this CUDA " +
             std::to_string(CUDART_VERSION / 1000) + "." +
             std::to_string(CUDART_VERSION % 1000 / 10) + " runtime)";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    default:
      return CudaMessage(err, "cudaGetDeviceCount");
  }
}

const Devices& GetDevices() {
  std::call_once(g_devices_once, [] {
    auto devices = std::make_unique<Devices>();
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      // No driver or no GPU is an answer (count 0), not an error of the plugin.
      (void)cudaGetLastError();
      devices->no_device_reason = ReasonForNoDevice(err);
      n = 0;
    } else if (n <= 0) {
      devices->no_device_reason = ReasonForNoDevice(cudaErrorNoDevice);
      n = 0;
    }
    devices->count = n;
    if (n == 0 && g_host != nullptr) {
      fleet::plugin::Host(g_host).Log(FLEET_LOG_INFO,
                                      "no usable GPU: " + devices->no_device_reason);
    }
    devices->list.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) devices->list.push_back(std::make_unique<Device>(i));
    g_devices = devices.release();
    g_devices_ready.store(true, std::memory_order_release);
  });
  return *g_devices;
}

FleetStatus* CheckOrdinal(int32_t ordinal, const char* call) {
  const Devices& devices = GetDevices();
  if (ordinal >= 0 && ordinal < devices.count) return nullptr;
  std::string message = std::string("cuda ") + call + ": device ordinal " +
                        std::to_string(ordinal) + " does not exist (";
  if (devices.count == 0) {
    message += "there are no CUDA devices: " + devices.no_device_reason + ")";
  } else {
    message += std::to_string(devices.count) + " device(s), ordinals 0.." +
               std::to_string(devices.count - 1) + ")";
  }
  return Error(FLEET_CODE_OUT_OF_RANGE, message);
}

Device& DeviceAt(int32_t ordinal) { return *GetDevices().list[static_cast<size_t>(ordinal)]; }

// CUDA_VISIBLE_DEVICES as a list of indices; empty when unset or when it names devices any
// other way (UUIDs, MIG instances), where the logical ordinal is the best answer there is.
std::vector<int32_t> ParseVisibleDevices(const char* env) {
  std::vector<int32_t> ids;
  if (env == nullptr) return ids;
  const std::string text(env);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const size_t first = text.find_first_not_of(" \t", start);
    const size_t last = text.find_last_not_of(" \t", end == 0 ? 0 : end - 1);
    if (first == std::string::npos || first >= end || last < first) return {};
    int64_t value = 0;
    for (size_t i = first; i <= last; ++i) {
      const char c = text[i];
      if (c < '0' || c > '9') return {};
      value = value * 10 + (c - '0');
      if (value > INT32_MAX) return {};
    }
    ids.push_back(static_cast<int32_t>(value));
    start = end + 1;
  }
  return ids;
}

int32_t PhysicalId(int32_t ordinal) {
  static const std::vector<int32_t> ids = ParseVisibleDevices(std::getenv("CUDA_VISIBLE_DEVICES"));
  return static_cast<size_t>(ordinal) < ids.size() ? ids[static_cast<size_t>(ordinal)] : ordinal;
}

FleetStatus* LoadProps(Device& dev) {
  std::lock_guard<std::mutex> lock(dev.props_mu);
  if (dev.props_loaded) return nullptr;
  cudaDeviceProp prop{};
  if (FleetStatus* s = CudaStatus(cudaGetDeviceProperties(&prop, dev.ordinal),
                                  Dev(dev.ordinal) + " props: cudaGetDeviceProperties")) {
    return s;
  }
  dev.name.assign(prop.name, strnlen(prop.name, sizeof prop.name));
  dev.total_memory = static_cast<uint64_t>(prop.totalGlobalMem);
  dev.compute_units = prop.multiProcessorCount;
  dev.props_loaded = true;
  return nullptr;
}

CachingAllocator& AllocatorFor(int32_t ordinal) {
  Device& dev = DeviceAt(ordinal);
  std::call_once(dev.allocator_once, [&dev] {
    dev.allocator.store(new CachingAllocator(std::make_unique<CudaBackend>(dev.ordinal)),
                        std::memory_order_release);
  });
  return *dev.allocator.load(std::memory_order_acquire);
}

// ---- streams ------------------------------------------------------------------------------

// First failure of a teardown that goes on after failing, so that nothing is leaked.
struct Failure {
  int32_t code = FLEET_CODE_OK;
  std::string message;

  void Note(int32_t c, const std::string& m) {
    if (code != FLEET_CODE_OK) return;
    code = c;
    message = m;
  }
  void NoteCuda(cudaError_t err, const std::string& what) {
    if (err == cudaSuccess) return;
    (void)cudaGetLastError();
    Note(CudaCode(err), CudaMessage(err, what));
  }
};

// A new FleetStream on `ordinal` with a non-blocking CUDA stream (it does not wait for the
// legacy default stream, which libraries outside Fleet may use).
FleetStatus* NewStream(int32_t ordinal, const std::string& what, FleetStream** out) {
  auto stream = std::make_unique<FleetStream>();
  stream->ordinal = ordinal;
  if (FleetStatus* s = CudaStatus(cudaSetDevice(ordinal), what + ": cudaSetDevice")) return s;
  cudaStream_t native = nullptr;
  if (FleetStatus* s = CudaStatus(cudaStreamCreateWithFlags(&native, cudaStreamNonBlocking),
                                  what + ": cudaStreamCreateWithFlags")) {
    return s;
  }
  stream->native = native;
  *out = stream.release();
  return nullptr;
}

// Waits for `stream`, destroys its library handles and the CUDA stream, and deletes it.
Failure DestroyStream(FleetStream* stream) {
  const Where what{stream->ordinal, "stream_destroy"};
  Failure failure;
  failure.NoteCuda(cudaSetDevice(stream->ordinal), what + ": cudaSetDevice");
  // The handles may still have work in flight (cuBLAS workspaces, cuDNN kernels).
  failure.NoteCuda(cudaStreamSynchronize(stream->native), what + ": cudaStreamSynchronize");
  {
    std::lock_guard<std::mutex> lock(stream->handles_mu);
    if (stream->blas != nullptr) {
      const cublasStatus_t st = cublasDestroy(stream->blas);
      stream->blas = nullptr;
      if (st != CUBLAS_STATUS_SUCCESS) {
        failure.Note(FLEET_CODE_INTERNAL,
                     what + ": cublasDestroy: " + cublasGetStatusName(st));
      }
    }
    if (stream->blas_lt != nullptr) {
      const cublasStatus_t st = cublasLtDestroy(stream->blas_lt);
      stream->blas_lt = nullptr;
      if (st != CUBLAS_STATUS_SUCCESS) {
        failure.Note(FLEET_CODE_INTERNAL,
                     what + ": cublasLtDestroy: " + cublasGetStatusName(st));
      }
    }
    if (stream->dnn != nullptr) {
      const cudnnStatus_t st = cudnnDestroy(stream->dnn);
      stream->dnn = nullptr;
      if (st != CUDNN_STATUS_SUCCESS) {
        failure.Note(FLEET_CODE_INTERNAL, what + ": cudnnDestroy: " + cudnnGetErrorString(st));
      }
    }
  }
  failure.NoteCuda(cudaStreamDestroy(stream->native), what + ": cudaStreamDestroy");
  delete stream;
  return failure;
}

// The streams StreamOrDefault makes for this thread, one per ordinal, destroyed at thread exit.
// Work on them is waited for before the call that queued it returns, so normally none is
// pending when the thread ends; DestroyStream still waits for what an error path left behind.
struct ThreadStreams {
  std::vector<FleetStream*> by_ordinal;
  std::string last_error;  // why the last stream could not be made

  ~ThreadStreams() {
    for (FleetStream* stream : by_ordinal) {
      if (stream == nullptr) continue;
      try {
        (void)DestroyStream(stream);  // nobody is left to report a failure to
      } catch (...) {
      }
    }
  }
};
thread_local ThreadStreams tl_streams;

// Sets the device and picks the stream for a call on `ordinal` with `stream` (maybe NULL).
FleetStatus* Enter(int32_t ordinal, FleetStream* stream, const Where& what,
                   FleetStream** out) {
  if (FleetStatus* s = CudaStatus(cudaSetDevice(ordinal), what + ": cudaSetDevice")) return s;
  *out = StreamOrDefault(stream, ordinal);
  if (*out == nullptr) {
    return Error(FLEET_CODE_INTERNAL,
                 what + ": cannot make this thread's stream: " + tl_streams.last_error);
  }
  return nullptr;
}

// For a NULL `stream`, waits for the work just queued on the thread's stream `used`.
FleetStatus* FinishSync(FleetStream* stream, FleetStream* used, const Where& what) {
  if (stream != nullptr) return nullptr;
  return CudaStatus(cudaStreamSynchronize(used->native), what + ": cudaStreamSynchronize");
}

FleetStatus* CheckStreamOrdinal(FleetStream* stream, int32_t ordinal, const Where& what) {
  if (stream == nullptr || stream->ordinal == ordinal) return nullptr;
  return Error(FLEET_CODE_INVALID_ARGUMENT, what + ": the stream belongs to " +
                                                Dev(stream->ordinal) + ", not to " + Dev(ordinal));
}

// ---- slots ----------------------------------------------------------------------------------

FleetStatus* Count(void*, int32_t* out) {
  return Guard("count", [&]() -> FleetStatus* {
    if (out == nullptr) return Error(FLEET_CODE_INVALID_ARGUMENT, "cuda count: out is NULL");
    *out = GetDevices().count;
    return nullptr;
  });
}

FleetStatus* Props(void*, int32_t ordinal, FleetDeviceProps* out) {
  return Guard("props", [&]() -> FleetStatus* {
    if (FleetStatus* s = CheckOrdinal(ordinal, "props")) return s;
    if (out == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT, Dev(ordinal) + " props: out is NULL");
    }
    Device& dev = DeviceAt(ordinal);
    if (FleetStatus* s = LoadProps(dev)) return s;
    // Write only what the host's struct has room for.
    if (FLEET_HAS_FIELD(out, FleetDeviceProps, model)) out->model = dev.name.c_str();
    if (FLEET_HAS_FIELD(out, FleetDeviceProps, physical_id)) out->physical_id = PhysicalId(ordinal);
    // Device memory is not host memory, and stream work is asynchronous.
    // The random kernels draw the CPU plugin's counter-based streams
    // (plugins/common/random_draws.h).
    if (FLEET_HAS_FIELD(out, FleetDeviceProps, caps)) {
      out->caps = FLEET_DEVICE_CAP_PINNED_HOST | FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS;
    }
    if (FLEET_HAS_FIELD(out, FleetDeviceProps, total_memory)) {
      out->total_memory = dev.total_memory;
    }
    if (FLEET_HAS_FIELD(out, FleetDeviceProps, alignment)) out->alignment = kAlignment;
    if (FLEET_HAS_FIELD(out, FleetDeviceProps, compute_units)) {
      out->compute_units = dev.compute_units;
    }
    return nullptr;
  });
}

FleetStatus* Alloc(void*, int32_t ordinal, size_t bytes, void** out) {
  return Guard("alloc", [&]() -> FleetStatus* {
    if (FleetStatus* s = CheckOrdinal(ordinal, "alloc")) return s;
    const Where what{ordinal, "alloc"};
    if (out == nullptr) return Error(FLEET_CODE_INVALID_ARGUMENT, what + ": out is NULL");
    *out = nullptr;
    const size_t rounded = CachingAllocator::RoundSize(bytes);
    if (rounded == 0) {
      return Error(FLEET_CODE_RESOURCE_EXHAUSTED,
                   what + ": " + FormatBytes(bytes) + " is more than any device has");
    }
    CachingAllocator& allocator = AllocatorFor(ordinal);
    tl_backend_error = cudaSuccess;
    void* ptr = allocator.Allocate(bytes);
    const cudaError_t err = tl_backend_error;
    tl_backend_error = cudaSuccess;
    if (ptr != nullptr) {
      *out = ptr;
      return nullptr;
    }
    // Anything but "out of memory" (a lost device, a broken context) is CUDA's own error.
    if (err != cudaSuccess && err != cudaErrorMemoryAllocation) {
      return CudaStatus(err, what + ": cudaMalloc of " + FormatBytes(rounded));
    }
    const CachingAllocatorStats stats = allocator.Stats();
    std::string message = what + ": out of memory: cannot allocate " + FormatBytes(bytes) +
                          " (rounded to " + FormatBytes(rounded) +
                          ") even with the allocator's cache returned to CUDA; this device's "
                          "allocator has " + FormatBytes(stats.in_use_bytes) + " in use in " +
                          std::to_string(stats.in_use_blocks) + " block(s) (peak " +
                          FormatBytes(stats.peak_in_use_bytes) + ") and " +
                          FormatBytes(stats.cached_bytes) + " cached";
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (cudaSetDevice(ordinal) == cudaSuccess &&
        cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      // Other processes and libraries' own allocations show up only here.
      message += "; CUDA reports " + FormatBytes(free_bytes) + " free of " +
                 FormatBytes(total_bytes);
    } else {
      (void)cudaGetLastError();
    }
    return Error(FLEET_CODE_RESOURCE_EXHAUSTED, message);
  });
}

FleetStatus* Free(void*, int32_t ordinal, void* ptr) {
  return Guard("free", [&]() -> FleetStatus* {
    if (ptr == nullptr) return nullptr;
    if (FleetStatus* s = CheckOrdinal(ordinal, "free")) return s;
    CachingAllocator* allocator = DeviceAt(ordinal).allocator.load(std::memory_order_acquire);
    if (allocator == nullptr || !allocator->Free(ptr)) {
      return Error(FLEET_CODE_INVALID_ARGUMENT,
                   Dev(ordinal) + " free: " + PointerText(ptr) +
                       " is not memory in use from alloc on this device (never allocated "
                       "there, or already freed)");
    }
    return nullptr;
  });
}

FleetStatus* StreamCreate(void*, int32_t ordinal, FleetStream** out) {
  return Guard("stream_create", [&]() -> FleetStatus* {
    if (FleetStatus* s = CheckOrdinal(ordinal, "stream_create")) return s;
    const Where what{ordinal, "stream_create"};
    if (out == nullptr) return Error(FLEET_CODE_INVALID_ARGUMENT, what + ": out is NULL");
    *out = nullptr;
    return NewStream(ordinal, what.Text(), out);
  });
}

FleetStatus* StreamDestroy(void*, FleetStream* stream) {
  return Guard("stream_destroy", [&]() -> FleetStatus* {
    if (stream == nullptr) return nullptr;
    Failure failure = DestroyStream(stream);
    return Error(failure.code, failure.message);
  });
}

FleetStatus* StreamSynchronize(void*, FleetStream* stream) {
  return Guard("stream_synchronize", [&]() -> FleetStatus* {
    // Work given with a NULL stream is finished before its call returns.
    if (stream == nullptr) return nullptr;
    return CudaStatus(cudaStreamSynchronize(stream->native),
                      Dev(stream->ordinal) + " stream_synchronize: cudaStreamSynchronize");
  });
}

FleetStatus* Copy(const char* call, cudaMemcpyKind kind, int32_t ordinal, void* dst,
                  const void* src, size_t bytes, FleetStream* stream) {
  return Guard(call, [&]() -> FleetStatus* {
    if (FleetStatus* s = CheckOrdinal(ordinal, call)) return s;
    const Where what{ordinal, call};
    if (FleetStatus* s = CheckStreamOrdinal(stream, ordinal, what)) return s;
    if (bytes == 0) return nullptr;
    if (dst == nullptr || src == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT,
                   what + ": NULL pointer for a copy of " + FormatBytes(bytes) + " (dst " +
                       PointerText(dst) + ", src " + PointerText(src) + ")");
    }
    FleetStream* used = nullptr;
    if (FleetStatus* s = Enter(ordinal, stream, what, &used)) return s;
    if (FleetStatus* s = CudaStatus(cudaMemcpyAsync(dst, src, bytes, kind, used->native),
                                    what + ": cudaMemcpyAsync of " + FormatBytes(bytes))) {
      return s;
    }
    return FinishSync(stream, used, what);
  });
}

FleetStatus* CopyH2D(void*, int32_t ordinal, void* dst, const void* src, size_t bytes,
                     FleetStream* stream) {
  return Copy("copy_h2d", cudaMemcpyHostToDevice, ordinal, dst, src, bytes, stream);
}
FleetStatus* CopyD2H(void*, int32_t ordinal, void* dst, const void* src, size_t bytes,
                     FleetStream* stream) {
  return Copy("copy_d2h", cudaMemcpyDeviceToHost, ordinal, dst, src, bytes, stream);
}
FleetStatus* CopyD2D(void*, int32_t ordinal, void* dst, const void* src, size_t bytes,
                     FleetStream* stream) {
  return Copy("copy_d2d", cudaMemcpyDeviceToDevice, ordinal, dst, src, bytes, stream);
}

FleetStatus* Memset(void*, int32_t ordinal, void* dst, int32_t value, size_t bytes,
                    FleetStream* stream) {
  return Guard("memset", [&]() -> FleetStatus* {
    if (FleetStatus* s = CheckOrdinal(ordinal, "memset")) return s;
    const Where what{ordinal, "memset"};
    if (FleetStatus* s = CheckStreamOrdinal(stream, ordinal, what)) return s;
    if (bytes == 0) return nullptr;
    if (dst == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT,
                   what + ": NULL destination for " + FormatBytes(bytes));
    }
    FleetStream* used = nullptr;
    if (FleetStatus* s = Enter(ordinal, stream, what, &used)) return s;
    if (FleetStatus* s = CudaStatus(cudaMemsetAsync(dst, static_cast<int>(value), bytes,
                                                    used->native),
                                    what + ": cudaMemsetAsync of " + FormatBytes(bytes))) {
      return s;
    }
    return FinishSync(stream, used, what);
  });
}

FleetStatus* EventCreate(void*, int32_t ordinal, FleetEvent** out) {
  return Guard("event_create", [&]() -> FleetStatus* {
    if (FleetStatus* s = CheckOrdinal(ordinal, "event_create")) return s;
    const Where what{ordinal, "event_create"};
    if (out == nullptr) return Error(FLEET_CODE_INVALID_ARGUMENT, what + ": out is NULL");
    *out = nullptr;
    auto event = std::make_unique<FleetEvent>();
    event->ordinal = ordinal;
    if (FleetStatus* s = CudaStatus(cudaSetDevice(ordinal), what + ": cudaSetDevice")) return s;
    // Events only order work; without timing, record and wait are cheaper.
    cudaEvent_t native = nullptr;
    if (FleetStatus* s = CudaStatus(cudaEventCreateWithFlags(&native, cudaEventDisableTiming),
                                    what + ": cudaEventCreateWithFlags")) {
      return s;
    }
    event->native = native;
    *out = event.release();
    return nullptr;
  });
}

FleetStatus* EventDestroy(void*, FleetEvent* event) {
  return Guard("event_destroy", [&]() -> FleetStatus* {
    if (event == nullptr) return nullptr;
    const Where what{event->ordinal, "event_destroy"};
    Failure failure;
    failure.NoteCuda(cudaSetDevice(event->ordinal), what + ": cudaSetDevice");
    // A recorded event that has not completed yet is released by CUDA once it completes.
    failure.NoteCuda(cudaEventDestroy(event->native), what + ": cudaEventDestroy");
    delete event;
    return Error(failure.code, failure.message);
  });
}

FleetStatus* EventRecord(void*, FleetEvent* event, FleetStream* stream) {
  return Guard("event_record", [&]() -> FleetStatus* {
    if (event == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT, "cuda event_record: event is NULL");
    }
    const Where what{event->ordinal, "event_record"};
    // CUDA records an event only on a stream of the event's device.
    if (FleetStatus* s = CheckStreamOrdinal(stream, event->ordinal, what)) return s;
    // On a NULL stream (this thread's, where nothing is pending) the event completes at once.
    FleetStream* used = nullptr;
    if (FleetStatus* s = Enter(event->ordinal, stream, what, &used)) return s;
    return CudaStatus(cudaEventRecord(event->native, used->native), what + ": cudaEventRecord");
  });
}

FleetStatus* StreamWaitEvent(void*, FleetStream* stream, FleetEvent* event) {
  return Guard("stream_wait_event", [&]() -> FleetStatus* {
    if (event == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT, "cuda stream_wait_event: event is NULL");
    }
    if (stream == nullptr) {
      // Work given with a NULL stream starts after this call returns, from any thread's
      // stream, so the only way to order it after the event is to wait for the event here.
      return CudaStatus(cudaEventSynchronize(event->native),
                        Dev(event->ordinal) + " stream_wait_event: cudaEventSynchronize");
    }
    const Where what{stream->ordinal, "stream_wait_event"};
    if (FleetStatus* s = CudaStatus(cudaSetDevice(stream->ordinal), what + ": cudaSetDevice")) {
      return s;
    }
    // The event may belong to another device; CUDA orders across devices.
    return CudaStatus(cudaStreamWaitEvent(stream->native, event->native, 0),
                      what + ": cudaStreamWaitEvent on an event of " + Dev(event->ordinal));
  });
}

FleetStatus* EventSynchronize(void*, FleetEvent* event) {
  return Guard("event_synchronize", [&]() -> FleetStatus* {
    if (event == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT, "cuda event_synchronize: event is NULL");
    }
    return CudaStatus(cudaEventSynchronize(event->native),
                      Dev(event->ordinal) + " event_synchronize: cudaEventSynchronize");
  });
}

FleetStatus* Synchronize(void*, int32_t ordinal) {
  return Guard("synchronize", [&]() -> FleetStatus* {
    if (FleetStatus* s = CheckOrdinal(ordinal, "synchronize")) return s;
    const Where what{ordinal, "synchronize"};
    if (FleetStatus* s = CudaStatus(cudaSetDevice(ordinal), what + ": cudaSetDevice")) return s;
    return CudaStatus(cudaDeviceSynchronize(), what + ": cudaDeviceSynchronize");
  });
}

FleetStatus* HostAlloc(void*, size_t bytes, void** out) {
  return Guard("host_alloc", [&]() -> FleetStatus* {
    if (out == nullptr) return Error(FLEET_CODE_INVALID_ARGUMENT, "cuda host_alloc: out is NULL");
    *out = nullptr;
    const Devices& devices = GetDevices();
    if (devices.count == 0) {
      return Error(FLEET_CODE_FAILED_PRECONDITION,
                   "cuda host_alloc: pinned memory needs a CUDA device: " +
                       devices.no_device_reason);
    }
    // Portable: the pages are pinned for every device, not only the current one. 0 bytes still
    // gets a real (unique) allocation, so that host_free is the same for every size.
    void* ptr = nullptr;
    if (FleetStatus* s = CudaStatus(cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes,
                                                  cudaHostAllocPortable),
                                    "cuda host_alloc: cudaHostAlloc of " + FormatBytes(bytes))) {
      return s;
    }
    *out = ptr;
    return nullptr;
  });
}

FleetStatus* HostFree(void*, void* ptr) {
  return Guard("host_free", [&]() -> FleetStatus* {
    if (ptr == nullptr) return nullptr;
    return CudaStatus(cudaFreeHost(ptr), "cuda host_free: cudaFreeHost of " + PointerText(ptr));
  });
}

FleetStatus* StreamNative(void*, FleetStream* stream, const char* kind, void** out) {
  return Guard("stream_native", [&]() -> FleetStatus* {
    if (out == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT, "cuda stream_native: out is NULL");
    }
    *out = nullptr;
    if (kind == nullptr) {
      return Error(FLEET_CODE_INVALID_ARGUMENT, "cuda stream_native: kind is NULL");
    }
    if (std::strcmp(kind, kNativeStreamKind) != 0) {
      return Error(FLEET_CODE_UNIMPLEMENTED, std::string("cuda stream_native: unknown kind \"") +
                                                 kind + "\" (the CUDA device has \"" +
                                                 kNativeStreamKind + "\")");
    }
    if (stream == nullptr) {
      // A NULL stream means "synchronous"; a native handle for it would let work escape that.
      return Error(FLEET_CODE_INVALID_ARGUMENT,
                   "cuda stream_native: a NULL stream has no native stream");
    }
    *out = static_cast<void*>(stream->native);
    return nullptr;
  });
}

}  // namespace

void SetHost(const FleetHostApi* host) { g_host = host; }
const FleetHostApi* GetHost() { return g_host; }

FleetStatus* Error(int32_t code, const std::string& message) {
  if (code == FLEET_CODE_OK) return nullptr;
  return g_host->status_new(code, message.c_str());
}

FleetStatus* CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return nullptr;
  (void)cudaGetLastError();
  return Error(CudaCode(err), CudaMessage(err, what));
}

const std::string& NoDeviceReason() { return GetDevices().no_device_reason; }

FleetStream* StreamOrDefault(FleetStream* stream, int32_t ordinal) {
  if (stream != nullptr) return stream;
  try {
    const Devices& devices = GetDevices();
    if (ordinal < 0 || ordinal >= devices.count) {
      tl_streams.last_error = Dev(ordinal) + " is not a device";
      return nullptr;
    }
    std::vector<FleetStream*>& streams = tl_streams.by_ordinal;
    const size_t index = static_cast<size_t>(ordinal);
    if (streams.size() <= index) streams.resize(static_cast<size_t>(devices.count), nullptr);
    if (streams[index] == nullptr) {
      FleetStream* made = nullptr;
      if (FleetStatus* s = NewStream(ordinal, Dev(ordinal) + " thread stream", &made)) {
        const char* text = g_host->status_message(s);
        tl_streams.last_error = text != nullptr ? text : "unknown error";
        g_host->status_free(s);
        LogWarning(tl_streams.last_error);
        return nullptr;
      }
      streams[index] = made;
    }
    return streams[index];
  } catch (...) {
    return nullptr;
  }
}

void ReleaseAllCachedMemory() {
  if (!g_devices_ready.load(std::memory_order_acquire)) return;
  for (const std::unique_ptr<Device>& dev : g_devices->list) {
    CachingAllocator* allocator = dev->allocator.load(std::memory_order_acquire);
    if (allocator == nullptr) continue;
    try {
      const size_t released = allocator->ReleaseCached();
      (void)released;
    } catch (...) {
      // Shutdown goes on; the memory goes back with the process.
    }
  }
}

const FleetDeviceVTable* DeviceVTable() {
  static const FleetDeviceVTable table = [] {
    FleetDeviceVTable t{};
    t.struct_size = FLEET_STRUCT_SIZE(FleetDeviceVTable, stream_native);
    t.count = Count;
    t.props = Props;
    t.alloc = Alloc;
    t.free = Free;
    t.stream_create = StreamCreate;
    t.stream_destroy = StreamDestroy;
    t.stream_synchronize = StreamSynchronize;
    t.copy_h2d = CopyH2D;
    t.copy_d2h = CopyD2H;
    t.copy_d2d = CopyD2D;
    t.memset = Memset;
    t.event_create = EventCreate;
    t.event_destroy = EventDestroy;
    t.event_record = EventRecord;
    t.stream_wait_event = StreamWaitEvent;
    t.event_synchronize = EventSynchronize;
    t.synchronize = Synchronize;
    t.host_alloc = HostAlloc;
    t.host_free = HostFree;
    t.stream_native = StreamNative;
    return t;
  }();
  return &table;
}

}  // namespace fleet_cuda
