// One NCCL communicator: a non-blocking ncclComm_t on one GPU, the CUDA stream it runs on, and
// the Fleet collectives on top of it.
//
// Streams. Every NCCL call is enqueued on the communicator's own stream. A call given a stream S
// orders itself against S with events both ways (S -> ready event -> comm stream -> NCCL ->
// done event -> S) and returns once the work is enqueued; a call with a NULL stream returns when
// the done event completed. So the communication overlaps compute on other streams, and work
// enqueued on S after the call sees the result.
//
// Waits. The communicator is created non-blocking (ncclConfig_t.blocking = 0): NCCL never blocks
// the caller, it answers ncclInProgress and the communicator polls ncclCommGetAsyncError (and,
// for NULL streams, the done event) until the deadline of the call (config.timeout_ms). A missed
// deadline, an NCCL error or a CUDA error aborts the NCCL communicator (ncclCommAbort) and leaves
// this object unusable: every later call answers ABORTED naming that first failure.
//
// Abort. Abort() only sets a flag and starts a short-lived thread; a call polling on another
// thread sees the flag and aborts the NCCL communicator itself, and when no call is in flight
// the thread aborts it (which also stops kernels that earlier calls left on a caller's stream).
// Both hold `Shared::mu`, so ncclCommAbort never races a call using the communicator. A rank
// that gives up (abort(), a missed deadline, an NCCL or CUDA error) leaves a notice in the
// rendezvous store; peers polling on the same communicator look for it every 100 ms and stop
// with ABORTED naming that rank instead of waiting out their deadline. Sub-groups from
// new_group have no store scope of their own and leave no notices.
//
// Errors are thrown as CommError with a Fleet code and a message naming the op, this rank, the
// world size and, where known, the peer; plugin.cc turns them into statuses.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "fleet/fleet_comm.h"

namespace fleet_nccl {

// An error with a Fleet status code, thrown inside the plugin and caught at the ABI boundary.
struct CommError : std::runtime_error {
  CommError(int32_t code, const std::string& message) : std::runtime_error(message), code(code) {}
  int32_t code;
};

// ncclConfig_t fields a user may set through options; NCCL_CONFIG_UNDEF_INT leaves NCCL's
// default.
struct TuningOptions {
  int min_ctas = NCCL_CONFIG_UNDEF_INT;
  int max_ctas = NCCL_CONFIG_UNDEF_INT;
  int cga_cluster_size = NCCL_CONFIG_UNDEF_INT;
};

struct CreateParams {
  const FleetHostApi* host = nullptr;
  const FleetStore* store = nullptr;  // NULL for a sub-group (it has no scope of its own)
  int rank = 0;
  int size = 1;
  int ordinal = 0;                    // CUDA device of this rank
  std::chrono::milliseconds timeout{0};
  const FleetDeviceVTable* device_table = nullptr;  // the cuda device, for stream_native
  void* device_ctx = nullptr;
  TuningOptions tuning;
  std::string group;  // "" for a communicator made by create, else "{0,2}" (parent ranks)
};

class Communicator {
 public:
  // Joins the group: rank 0 publishes an NCCL unique id through the store, every rank inits
  // the NCCL communicator. DEADLINE_EXCEEDED names the ranks that never joined.
  static std::unique_ptr<Communicator> Create(CreateParams params);
  // Releases everything Destroy has not (aborting the NCCL communicator if it is still alive).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Waits (within the deadline) for this communicator's work, finalizes and destroys the NCCL
  // communicator and frees the stream, events and buffers. Throws after releasing everything
  // when the orderly path failed (the NCCL communicator is then aborted instead).
  void Destroy();
  // Any thread; never blocks (see the file comment).
  void Abort() noexcept;

  void AllReduce(const FleetTensor* in, const FleetTensor* out, int32_t op, FleetStream* stream);
  void Broadcast(const FleetTensor* buf, int32_t root, FleetStream* stream);
  void AllGather(const FleetTensor* in, const FleetTensor* out, FleetStream* stream);
  void ReduceScatter(const FleetTensor* in, const FleetTensor* out, int32_t op,
                     FleetStream* stream);
  void Reduce(const FleetTensor* in, const FleetTensor* out, int32_t op, int32_t root,
              FleetStream* stream);
  void AllToAll(const FleetTensor* in, const FleetTensor* out, FleetStream* stream);
  void Send(const FleetTensor* buf, int32_t peer, FleetStream* stream);
  void Recv(const FleetTensor* buf, int32_t peer, FleetStream* stream);
  void Barrier();
  // ncclCommSplit; nullptr when this rank is not in ranks[0..n).
  std::unique_ptr<Communicator> NewGroup(const int32_t* ranks, size_t n);

 private:
  using Clock = std::chrono::steady_clock;

  // What the abort thread needs; it outlives the Communicator while that thread still waits
  // for `mu`.
  struct Shared {
    std::mutex mu;              // held by a call for its whole duration and by the abort thread
    ncclComm_t nccl = nullptr;  // guarded by mu; NULL once aborted or destroyed
    std::atomic<bool> aborted{false};
    const FleetHostApi* host = nullptr;
    int ordinal = 0;
    // Where abort notices go: set once create succeeded (NULL for sub-groups), cleared by
    // Destroy. Guarded by mu.
    const FleetStore* notices = nullptr;
  };

  // A validated tensor.
  struct Buffer {
    void* data = nullptr;
    int32_t dtype = 0;
    ncclDataType_t type = ncclFloat32;
    size_t numel = 0;
    size_t bytes = 0;
  };

  // Device memory allocated on the communication stream and freed there (cudaFreeAsync) when
  // the holder goes out of scope, so kernels enqueued before the free still find it.
  class Scratch {
   public:
    Scratch() = default;
    Scratch(void* ptr, cudaStream_t stream) : ptr_(ptr), stream_(stream) {}
    Scratch(Scratch&& other) noexcept
        : ptr_(std::exchange(other.ptr_, nullptr)), stream_(other.stream_) {}
    Scratch& operator=(Scratch&& other) noexcept {
      if (this != &other) {
        Release();
        ptr_ = std::exchange(other.ptr_, nullptr);
        stream_ = other.stream_;
      }
      return *this;
    }
    ~Scratch() { Release(); }
    void* get() const { return ptr_; }

   private:
    void Release() noexcept {
      if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
      ptr_ = nullptr;
    }
    void* ptr_ = nullptr;
    cudaStream_t stream_ = nullptr;
  };

  explicit Communicator(CreateParams params);

  // "nccl all_reduce (rank 1 of 4)", with the group and the peer where they apply.
  std::string Where(const char* op, int peer = -1) const;
  [[noreturn]] void Invalid(const char* op, const std::string& what) const;

  // collectives.cc: argument checks.
  Buffer View(const char* op, const char* name, const FleetTensor* t) const;
  ncclRedOp_t RedOp(const char* op, int32_t reduce_op) const;
  void CheckRoot(const char* op, int32_t root) const;
  void CheckPeer(const char* op, int32_t peer) const;
  int32_t CudaDeviceType() const;

  // Starts a call: answers ABORTED at once after abort() (without waiting for the lock, which
  // the abort thread may hold), then takes shared_->mu for the rest of the call.
  std::unique_lock<std::mutex> Enter(const char* op);
  // With the lock held: the deadline of this call, after CheckUsable and SetDevice.
  Clock::time_point Begin(const char* op);
  // Throws ABORTED after abort() or an earlier failure, or the error NCCL reports for work
  // that earlier calls enqueued.
  void CheckUsable(const char* op, Clock::time_point deadline);
  // Polls `done` (true when finished; it throws on failure) until it answers true, sleeping
  // briefly in between. Throws ABORTED on abort() or (with `watch_peers`) a peer's abort
  // notice, and the NCCL error the communicator reports; returns false when the deadline
  // passed first.
  bool Poll(const char* op, int peer, Clock::time_point deadline,
            const std::function<bool()>& done, bool watch_peers = true);
  // Whether the communicator left ncclInProgress; throws the NCCL error it reports instead.
  bool NcclIdle(const char* op, int peer, const char* context);
  // After an NCCL call answered `result`: waits while it is ncclInProgress, throws on an error.
  void AwaitEnqueued(const char* op, int peer, ncclResult_t result, Clock::time_point deadline);
  // Runs `issue` (which enqueues on stream_ and returns the result of its last NCCL call)
  // ordered after `stream`, orders `stream` after it, or, for a NULL stream, waits for it.
  void Launch(const char* op, int peer, FleetStream* stream, Clock::time_point deadline,
              const std::function<ncclResult_t()>& issue);
  // The cudaStream_t behind a FleetStream of the cuda device.
  cudaStream_t NativeStream(const char* op, FleetStream* stream);
  // A copy of `src` on stream_ (for an input that overlaps its output in a way NCCL does not
  // handle).
  Scratch CopyToScratch(const char* op, const Buffer& src);

  // Failure paths: abort the NCCL communicator, remember why, throw.
  [[noreturn]] void FailNccl(const char* op, int peer, ncclResult_t result,
                             const std::string& context);
  [[noreturn]] void FailCuda(const char* op, cudaError_t err, const std::string& call);
  [[noreturn]] void FailDeadline(const char* op, int peer, const std::string& detail);
  // A CUDA failure before anything was enqueued for NCCL: the communicator stays usable.
  CommError CudaError(const char* op, cudaError_t err, const std::string& call) const;
  // ncclCommAbort (once) and, when `tell_peers`, a notice in the store.
  void AbortNccl(const std::string& reason, bool tell_peers);
  // Throws ABORTED when a peer left an abort notice.
  void CheckPeerNotice(const char* op, int peer);
  // Body of the thread Abort() starts.
  static void AbortFromThread(const std::shared_ptr<Shared>& shared, const std::string& notice);

  // The stream, events and barrier buffer (create and new_group).
  void CreateCudaResources(const char* op);
  void ReleaseCudaResources() noexcept;
  // Makes this communicator's device current on the calling thread.
  void SetDevice(const char* op);

  CreateParams params_;
  std::shared_ptr<Shared> shared_;
  std::string broken_;  // first failure; touched only by the (serialised) call thread
  mutable int32_t cuda_device_type_ = -1;  // looked up on first use (not in the entry)
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on the caller's stream, waited for by stream_
  cudaEvent_t done_ = nullptr;   // recorded on stream_ after the NCCL call
  int32_t* barrier_buf_ = nullptr;
};

}  // namespace fleet_nccl
