// Helpers shared by the communicator's files: the text and Fleet code of CUDA and NCCL errors,
// and the rendezvous store calls (statuses the host returns turned into CommError or text).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fleet/fleet_host.h"

namespace fleet_nccl {

// Store keys of abort notices, inside the communicator's scope.
inline constexpr const char* kNoticeKey = "nccl_abort";       // why a rank gave up
inline constexpr const char* kNoticeCounter = "nccl_aborts";  // > 0 once kNoticeKey is set

// "cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string CudaText(cudaError_t err);
int32_t CudaCode(cudaError_t err);
int32_t NcclCode(ncclResult_t result);
// NCCL's name for `result` and its last error message (which may be about `comm` or, NCCL
// warns, about an earlier asynchronous failure).
std::string NcclText(ncclResult_t result, ncclComm_t comm);

// The message of a status the host returned (freeing it); its code goes to *code.
std::string TakeMessage(const FleetHostApi* host, FleetStatus* status, int32_t* code);
// Throws CommError (the status's code, `what` and its message) for a non-NULL status.
void CheckStore(const FleetHostApi* host, FleetStatus* status, const std::string& what);
// FleetStore.get's allocator for a std::string passed as ctx.
void* AllocInto(void* ctx, size_t len);
// Whether `key` exists now (the shortest wait the store takes); other store errors throw.
bool KeyExists(const FleetHostApi* host, const FleetStore* store, const std::string& key,
               const std::string& where);

// Leaves `text` as the abort notice; failures are ignored (peers then wait out their deadline).
void PublishNotice(const FleetHostApi* host, const FleetStore* store, const std::string& text);
// A peer's abort notice, or "" when there is none or the store cannot answer now.
std::string ReadNotice(const FleetHostApi* host, const FleetStore* store);

}  // namespace fleet_nccl
