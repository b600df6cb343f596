// How a call waits: the lock and checks every call starts with, the polling that bounds every
// wait by the call's deadline, the launch of NCCL work ordered against the caller's stream, and
// the failure paths that abort the NCCL communicator.
#include <thread>

#include "communicator.h"
#include "support.h"

namespace fleet_nccl {
namespace {

// Short enough that a NULL-stream collective of a few microseconds is not stretched much, long
// enough that four ranks polling as threads leave the cores to NCCL's own threads.
constexpr auto kPollSleep = std::chrono::microseconds(50);
// Each look for a peer's abort notice is a store round trip (a network one with a TCP store).
constexpr auto kNoticeInterval = std::chrono::milliseconds(100);

}  // namespace

std::string Communicator::Where(const char* op, int peer) const {
  std::string s = std::string("nccl ") + op + " (rank " + std::to_string(params_.rank) + " of " +
                  std::to_string(params_.size);
  if (!params_.group.empty()) s += " in the group of parent ranks " + params_.group;
  s += ")";
  if (peer >= 0) s += " with peer " + std::to_string(peer);
  return s;
}

void Communicator::Invalid(const char* op, const std::string& what) const {
  throw CommError(FLEET_CODE_INVALID_ARGUMENT, Where(op) + ": " + what);
}

std::unique_lock<std::mutex> Communicator::Enter(const char* op) {
  if (shared_->aborted.load()) {
    throw CommError(FLEET_CODE_ABORTED, Where(op) + ": the communicator was aborted");
  }
  return std::unique_lock<std::mutex>(shared_->mu);
}

Communicator::Clock::time_point Communicator::Begin(const char* op) {
  const auto deadline = Clock::now() + params_.timeout;
  SetDevice(op);
  CheckUsable(op, deadline);
  return deadline;
}

void Communicator::CheckUsable(const char* op, Clock::time_point deadline) {
  if (shared_->aborted.load()) {
    AbortNccl(Where(op) + ": abort() was called", true);
    throw CommError(FLEET_CODE_ABORTED, Where(op) + ": the communicator was aborted");
  }
  if (!broken_.empty()) {
    throw CommError(FLEET_CODE_ABORTED,
                    Where(op) + ": the communicator is unusable after an earlier failure (" +
                        broken_ + ")");
  }
  if (shared_->nccl == nullptr) {
    throw CommError(FLEET_CODE_ABORTED, Where(op) + ": the communicator was aborted");
  }
  // Errors of work that earlier calls left on a caller's stream surface here.
  const char* context = "work enqueued by an earlier call failed";
  if (!NcclIdle(op, -1, context) &&
      !Poll(op, -1, deadline, [&] { return NcclIdle(op, -1, context); })) {
    FailDeadline(op, -1, "NCCL was still busy with an earlier call");
  }
}

bool Communicator::Poll(const char* op, int peer, Clock::time_point deadline,
                        const std::function<bool()>& done, bool watch_peers) {
  auto next_notice = Clock::now() + kNoticeInterval;
  for (;;) {
    if (shared_->aborted.load(std::memory_order_acquire)) {
      const std::string message = Where(op, peer) + ": aborted while in progress";
      AbortNccl(message, true);
      throw CommError(FLEET_CODE_ABORTED, message);
    }
    if (done()) return true;
    if (shared_->nccl != nullptr) (void)NcclIdle(op, peer, "NCCL reported an error");
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (watch_peers && now >= next_notice) {
      CheckPeerNotice(op, peer);
      next_notice = now + kNoticeInterval;
    }
    std::this_thread::sleep_for(kPollSleep);
  }
}

bool Communicator::NcclIdle(const char* op, int peer, const char* context) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(shared_->nccl, &state);
  if (r != ncclSuccess) FailNccl(op, peer, r, "ncclCommGetAsyncError failed");
  if (state == ncclInProgress) return false;
  if (state != ncclSuccess) FailNccl(op, peer, state, context);
  return true;
}

void Communicator::AwaitEnqueued(const char* op, int peer, ncclResult_t result,
                                 Clock::time_point deadline) {
  if (result == ncclSuccess) return;
  if (result != ncclInProgress) FailNccl(op, peer, result, "NCCL refused the call");
  // Until NCCL leaves ncclInProgress the work is not on the stream yet (it may still be
  // connecting to peers), so nothing may be recorded after it.
  if (!Poll(op, peer, deadline, [&] { return NcclIdle(op, peer, "NCCL failed"); })) {
    FailDeadline(op, peer,
                 peer >= 0 ? "NCCL could not reach the peer (did it never call the matching "
                             "operation?)"
                           : "NCCL could not reach the other ranks (did one of them never call "
                             "it?)");
  }
}

void Communicator::Launch(const char* op, int peer, FleetStream* stream,
                          Clock::time_point deadline,
                          const std::function<ncclResult_t()>& issue) {
  cudaStream_t user = nullptr;
  if (stream != nullptr) {
    user = NativeStream(op, stream);
    cudaError_t e = cudaEventRecord(ready_, user);
    if (e != cudaSuccess) throw CudaError(op, e, "cudaEventRecord on the caller's stream");
    e = cudaStreamWaitEvent(stream_, ready_, 0);
    if (e != cudaSuccess) {
      throw CudaError(op, e, "cudaStreamWaitEvent on the communication stream");
    }
  }
  AwaitEnqueued(op, peer, issue(), deadline);
  cudaError_t e = cudaEventRecord(done_, stream_);
  if (e != cudaSuccess) FailCuda(op, e, "cudaEventRecord on the communication stream");
  if (stream != nullptr) {
    e = cudaStreamWaitEvent(user, done_, 0);
    if (e != cudaSuccess) FailCuda(op, e, "cudaStreamWaitEvent on the caller's stream");
    return;
  }
  const bool finished = Poll(op, peer, deadline, [&] {
    const cudaError_t q = cudaEventQuery(done_);
    if (q == cudaErrorNotReady) return false;
    if (q != cudaSuccess) FailCuda(op, q, "cudaEventQuery");
    return true;
  });
  if (!finished) {
    FailDeadline(op, peer,
                 peer >= 0 ? "the transfer never finished (did the peer never call the matching "
                             "operation?)"
                           : "the collective never finished (did another rank never call it?)");
  }
}

cudaStream_t Communicator::NativeStream(const char* op, FleetStream* stream) {
  const FleetDeviceVTable* table = params_.device_table;
  if (!FLEET_CAN_CALL(table, FleetDeviceVTable, stream_native)) {
    throw CommError(FLEET_CODE_FAILED_PRECONDITION,
                    Where(op) + ": a stream was given, but the host passed no cuda device table "
                                "with stream_native (FleetCommConfig.device_table, ABI 1.2), so "
                                "the call cannot be ordered against it");
  }
  void* native = nullptr;
  FleetStatus* s = table->stream_native(params_.device_ctx, stream, "cudaStream_t", &native);
  if (s != nullptr) {
    int32_t code = FLEET_CODE_UNKNOWN;
    const std::string message = TakeMessage(params_.host, s, &code);
    throw CommError(code, Where(op) + ": stream_native(\"cudaStream_t\") failed: " + message);
  }
  return static_cast<cudaStream_t>(native);
}

Communicator::Scratch Communicator::CopyToScratch(const char* op, const Buffer& src) {
  void* ptr = nullptr;
  cudaError_t e = cudaMallocAsync(&ptr, src.bytes, stream_);
  if (e != cudaSuccess) {
    throw CudaError(op, e, "cudaMallocAsync of " + std::to_string(src.bytes) + " scratch bytes");
  }
  Scratch scratch(ptr, stream_);
  e = cudaMemcpyAsync(ptr, src.data, src.bytes, cudaMemcpyDeviceToDevice, stream_);
  if (e != cudaSuccess) throw CudaError(op, e, "cudaMemcpyAsync of the input to scratch");
  return scratch;
}

void Communicator::FailNccl(const char* op, int peer, ncclResult_t result,
                            const std::string& context) {
  std::string message = Where(op, peer) + ": " + context + ": " + NcclText(result, shared_->nccl);
  int32_t code = NcclCode(result);
  // A peer that gave up explains a failure better than NCCL's error about the broken link.
  const std::string notice = ReadNotice(params_.host, shared_->notices);
  if (!notice.empty()) {
    message += "; " + notice;
    code = FLEET_CODE_ABORTED;
  }
  AbortNccl(message, notice.empty());
  broken_ = message;
  throw CommError(code, message);
}

void Communicator::FailCuda(const char* op, cudaError_t err, const std::string& call) {
  const std::string message = Where(op) + ": " + call + " failed: " + CudaText(err);
  AbortNccl(message, true);
  broken_ = message;
  throw CommError(CudaCode(err), message);
}

void Communicator::FailDeadline(const char* op, int peer, const std::string& detail) {
  std::string message = Where(op, peer) + ": did not complete within " +
                        std::to_string(params_.timeout.count()) + " ms";
  if (!detail.empty()) message += ": " + detail;
  AbortNccl(message, true);
  broken_ = message;
  throw CommError(FLEET_CODE_DEADLINE_EXCEEDED, message);
}

CommError Communicator::CudaError(const char* op, cudaError_t err, const std::string& call) const {
  return CommError(CudaCode(err), Where(op) + ": " + call + " failed: " + CudaText(err));
}

void Communicator::AbortNccl(const std::string& reason, bool tell_peers) {
  ncclComm_t comm = std::exchange(shared_->nccl, nullptr);
  if (comm == nullptr) return;
  (void)cudaSetDevice(params_.ordinal);
  (void)ncclCommAbort(comm);
  if (tell_peers && shared_->notices != nullptr) {
    PublishNotice(params_.host, shared_->notices,
                  "rank " + std::to_string(params_.rank) + " gave up: " + reason);
  }
}

void Communicator::CheckPeerNotice(const char* op, int peer) {
  const std::string notice = ReadNotice(params_.host, shared_->notices);
  if (notice.empty()) return;
  const std::string message = Where(op, peer) + ": stopped because " + notice;
  AbortNccl(message, false);
  broken_ = message;
  throw CommError(FLEET_CODE_ABORTED, message);
}

void Communicator::SetDevice(const char* op) {
  const cudaError_t e = cudaSetDevice(params_.ordinal);
  if (e != cudaSuccess) {
    throw CudaError(op, e, "cudaSetDevice(" + std::to_string(params_.ordinal) + ")");
  }
}

}  // namespace fleet_nccl
