#include "device.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace fleet_cpu {
namespace {

// 64 bytes: a cache line, and the widest vector load (AVX-512) oneDNN issues.
constexpr size_t kAlignment = 64;

// Work on a CPU stream runs inside the call that enqueues it, so a stream or an event carries
// no state; they exist so that the host drives every device the same way.
struct Stream {};
struct Event {};

const FleetHostApi* g_host = nullptr;  // set once by the entry point, before any slot runs

FleetStatus* Error(int32_t code, const std::string& message) {
  return g_host->status_new(code, message.c_str());
}

FleetStatus* CheckOrdinal(int32_t ordinal) {
  if (ordinal == 0) return nullptr;
  return Error(FLEET_CODE_OUT_OF_RANGE,
               "cpu device ordinal " + std::to_string(ordinal) + " does not exist (only 0)");
}

// The processor's name, read once; the string lives for the process.
const char* ModelName() {
  static const std::string name = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0) {
        size_t colon = line.find(':');
        if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
      }
    }
    return std::string("unknown CPU");
  }();
  return name.c_str();
}

FleetStatus* Count(void*, int32_t* out) {
  *out = 1;
  return nullptr;
}

FleetStatus* Props(void*, int32_t ordinal, FleetDeviceProps* out) {
  if (FleetStatus* s = CheckOrdinal(ordinal)) return s;
  // Write only what the host's struct has room for.
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, model)) out->model = ModelName();
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, physical_id)) out->physical_id = 0;
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, caps)) {
    out->caps = FLEET_DEVICE_CAP_HOST_MEMORY | FLEET_DEVICE_CAP_SYNC_STREAMS |
                FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS;
  }
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, total_memory)) {
    out->total_memory =
        static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, alignment)) out->alignment = kAlignment;
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, compute_units)) {
    out->compute_units = static_cast<int32_t>(std::thread::hardware_concurrency());
  }
  return nullptr;
}

FleetStatus* Alloc(void*, int32_t ordinal, size_t bytes, void** out) {
  if (FleetStatus* s = CheckOrdinal(ordinal)) return s;
  // aligned_alloc needs a multiple of the alignment; 0 bytes still yields a unique pointer.
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) {
    return Error(FLEET_CODE_RESOURCE_EXHAUSTED,
                 "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  *out = p;
  return nullptr;
}

FleetStatus* Free(void*, int32_t, void* ptr) {
  std::free(ptr);
  return nullptr;
}

FleetStatus* StreamCreate(void*, int32_t ordinal, FleetStream** out) {
  if (FleetStatus* s = CheckOrdinal(ordinal)) return s;
  *out = reinterpret_cast<FleetStream*>(new Stream());
  return nullptr;
}
FleetStatus* StreamDestroy(void*, FleetStream* stream) {
  delete reinterpret_cast<Stream*>(stream);
  return nullptr;
}
FleetStatus* StreamSynchronize(void*, FleetStream*) { return nullptr; }

FleetStatus* Copy(void*, int32_t ordinal, void* dst, const void* src, size_t bytes, FleetStream*) {
  if (FleetStatus* s = CheckOrdinal(ordinal)) return s;
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return Error(FLEET_CODE_INVALID_ARGUMENT, "cpu: copy with a NULL pointer");
  }
  if (bytes > 0) std::memmove(dst, src, bytes);
  return nullptr;
}

FleetStatus* Memset(void*, int32_t ordinal, void* dst, int32_t value, size_t bytes, FleetStream*) {
  if (FleetStatus* s = CheckOrdinal(ordinal)) return s;
  if (bytes > 0 && dst == nullptr) {
    return Error(FLEET_CODE_INVALID_ARGUMENT, "cpu: memset of a NULL pointer");
  }
  if (bytes > 0) std::memset(dst, value, bytes);
  return nullptr;
}

FleetStatus* EventCreate(void*, int32_t ordinal, FleetEvent** out) {
  if (FleetStatus* s = CheckOrdinal(ordinal)) return s;
  *out = reinterpret_cast<FleetEvent*>(new Event());
  return nullptr;
}
FleetStatus* EventDestroy(void*, FleetEvent* event) {
  delete reinterpret_cast<Event*>(event);
  return nullptr;
}
FleetStatus* EventRecord(void*, FleetEvent*, FleetStream*) { return nullptr; }
FleetStatus* StreamWaitEvent(void*, FleetStream*, FleetEvent*) { return nullptr; }
FleetStatus* EventSynchronize(void*, FleetEvent*) { return nullptr; }
FleetStatus* Synchronize(void*, int32_t ordinal) { return CheckOrdinal(ordinal); }

FleetStatus* HostAlloc(void* ctx, size_t bytes, void** out) { return Alloc(ctx, 0, bytes, out); }
FleetStatus* HostFree(void*, void* ptr) {
  std::free(ptr);
  return nullptr;
}

}  // namespace

void SetHost(const FleetHostApi* host) { g_host = host; }
const FleetHostApi* GetHost() { return g_host; }

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
    t.copy_h2d = Copy;
    t.copy_d2h = Copy;
    t.copy_d2d = Copy;
    t.memset = Memset;
    t.event_create = EventCreate;
    t.event_destroy = EventDestroy;
    t.event_record = EventRecord;
    t.stream_wait_event = StreamWaitEvent;
    t.event_synchronize = EventSynchronize;
    t.synchronize = Synchronize;
    t.host_alloc = HostAlloc;
    t.host_free = HostFree;
    t.stream_native = nullptr;  // no native stream: work runs in the caller
    return t;
  }();
  return &table;
}

}  // namespace fleet_cpu
