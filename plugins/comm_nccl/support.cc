#include "support.h"

#include "communicator.h"

namespace fleet_nccl {

std::string CudaText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

int32_t CudaCode(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation: return FLEET_CODE_RESOURCE_EXHAUSTED;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError: return FLEET_CODE_FAILED_PRECONDITION;
    case cudaErrorInvalidDevice: return FLEET_CODE_INVALID_ARGUMENT;
    default: return FLEET_CODE_INTERNAL;
  }
}

int32_t NcclCode(ncclResult_t result) {
  switch (result) {
    case ncclSystemError:
    case ncclRemoteError: return FLEET_CODE_UNAVAILABLE;
    case ncclInvalidArgument: return FLEET_CODE_INVALID_ARGUMENT;
    case ncclInvalidUsage: return FLEET_CODE_FAILED_PRECONDITION;
    default: return FLEET_CODE_INTERNAL;
  }
}

std::string NcclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += " (last NCCL error: " + std::string(last) + ")";
  return text;
}

std::string TakeMessage(const FleetHostApi* host, FleetStatus* status, int32_t* code) {
  *code = host->status_code(status);
  const char* message = host->status_message(status);
  std::string text = message != nullptr ? message : "";
  host->status_free(status);
  return text;
}

void CheckStore(const FleetHostApi* host, FleetStatus* status, const std::string& what) {
  if (status == nullptr) return;
  int32_t code = FLEET_CODE_UNKNOWN;
  const std::string message = TakeMessage(host, status, &code);
  throw CommError(code, what + ": " + message);
}

void* AllocInto(void* ctx, size_t len) {
  auto* out = static_cast<std::string*>(ctx);
  out->resize(len);
  return out->data();  // never NULL, even for an empty value
}

bool KeyExists(const FleetHostApi* host, const FleetStore* store, const std::string& key,
               const std::string& where) {
  const char* ptr = key.c_str();
  FleetStatus* s = store->wait(store->ctx, &ptr, 1, 1);
  if (s == nullptr) return true;
  int32_t code = FLEET_CODE_UNKNOWN;
  const std::string message = TakeMessage(host, s, &code);
  if (code == FLEET_CODE_DEADLINE_EXCEEDED) return false;
  throw CommError(code, where + ": store wait '" + key + "': " + message);
}

void PublishNotice(const FleetHostApi* host, const FleetStore* store, const std::string& text) {
  // Key before counter: a reader that sees the counter finds the key.
  if (FleetStatus* s = store->set(store->ctx, kNoticeKey, text.data(), text.size())) {
    host->status_free(s);
    return;
  }
  int64_t total = 0;
  if (FleetStatus* s = store->add(store->ctx, kNoticeCounter, 1, &total)) host->status_free(s);
}

std::string ReadNotice(const FleetHostApi* host, const FleetStore* store) {
  if (store == nullptr) return "";
  // A store that cannot answer now must not fail a collective that may still finish.
  int64_t count = 0;
  FleetStatus* s = store->add(store->ctx, kNoticeCounter, 0, &count);
  if (s != nullptr) {
    host->status_free(s);
    return "";
  }
  if (count <= 0) return "";
  std::string notice;
  size_t len = 0;
  s = store->get(store->ctx, kNoticeKey, 1, &AllocInto, &notice, &len);
  if (s != nullptr) {
    host->status_free(s);
    return "";
  }
  return notice;
}

}  // namespace fleet_nccl
