// Life cycle of an NCCL communicator: create (the unique id through the store, NCCL's
// non-blocking init), destroy, abort, new_group (ncclCommSplit), and the CUDA resources each
// communicator owns. How calls wait is in progress.cc, the collectives in collectives.cc.
#include "communicator.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "support.h"

namespace fleet_nccl {
namespace {

using Clock = std::chrono::steady_clock;

// Store keys, all inside the communicator's scope.
constexpr const char* kUniqueIdKey = "nccl_unique_id";
constexpr const char* kJoinedCounter = "nccl_joined";
constexpr const char* kJoinedPrefix = "nccl_joined/";

// The most ranks a missed deadline at create looks up by key to name the missing ones.
constexpr int kMaxRanksScanned = 1024;

int64_t RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max<int64_t>(1, left.count());
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// Rank 0 makes the NCCL unique id and publishes it; the others wait for it until the deadline.
ncclUniqueId ExchangeUniqueId(const CreateParams& p, const std::string& where,
                              Clock::time_point deadline) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  const FleetStore* store = p.store;
  if (p.rank == 0) {
    // An id already there is a previous run's (a reused file-store directory): peers could
    // read it instead of ours and wait for ranks that are long gone.
    if (KeyExists(p.host, store, kUniqueIdKey, where)) {
      throw CommError(FLEET_CODE_FAILED_PRECONDITION,
                      where + ": the store already holds an NCCL unique id from an earlier "
                              "communicator in the same scope (a reused store directory?); "
                              "give each run a fresh store or job id");
    }
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      throw CommError(NcclCode(r), where + ": ncclGetUniqueId failed: " + NcclText(r, nullptr));
    }
    CheckStore(p.host, store->set(store->ctx, kUniqueIdKey, &id, sizeof id),
               where + ": publishing the NCCL unique id");
    return id;
  }
  std::string value;
  size_t len = 0;
  FleetStatus* s =
      store->get(store->ctx, kUniqueIdKey, RemainingMs(deadline), &AllocInto, &value, &len);
  if (s != nullptr) {
    int32_t code = FLEET_CODE_UNKNOWN;
    const std::string message = TakeMessage(p.host, s, &code);
    if (code == FLEET_CODE_DEADLINE_EXCEEDED) {
      throw CommError(code, where + ": rank 0 never published the NCCL unique id within " +
                                std::to_string(p.timeout.count()) +
                                " ms: rank 0 never joined (" + message + ")");
    }
    throw CommError(code, where + ": reading the NCCL unique id: " + message);
  }
  if (len != sizeof id || value.size() != sizeof id) {
    throw CommError(FLEET_CODE_DATA_LOSS, where + ": the NCCL unique id in the store has " +
                                              std::to_string(len) + " bytes, expected " +
                                              std::to_string(sizeof id));
  }
  std::memcpy(&id, value.data(), sizeof id);
  return id;
}

// Each rank marks itself before NCCL's init, so a missed deadline can name who never came.
void MarkJoined(const CreateParams& p, const std::string& where) {
  const std::string key = kJoinedPrefix + std::to_string(p.rank);
  CheckStore(p.host, p.store->set(p.store->ctx, key.c_str(), "1", 1),
             where + ": store set '" + key + "'");
  int64_t joined = 0;
  CheckStore(p.host, p.store->add(p.store->ctx, kJoinedCounter, 1, &joined),
             where + ": store add '" + std::string(kJoinedCounter) + "'");
}

// Why NCCL's init did not finish: the ranks that never joined, or, when all did, a hint.
std::string JoinReport(const CreateParams& p, const std::string& where) {
  try {
    int64_t joined = 0;
    FleetStatus* s = p.store->add(p.store->ctx, kJoinedCounter, 0, &joined);
    if (s != nullptr) {
      int32_t code = FLEET_CODE_UNKNOWN;
      return "the store could not say which ranks joined (" + TakeMessage(p.host, s, &code) + ")";
    }
    if (joined >= p.size) {
      return "all " + std::to_string(p.size) +
             " ranks joined, but NCCL did not finish connecting them (check the network "
             "between the hosts and NCCL_SOCKET_IFNAME, or run with NCCL_DEBUG=INFO)";
    }
    std::vector<int> missing;
    const int scanned = std::min(p.size, kMaxRanksScanned);
    for (int r = 0; r < scanned; ++r) {
      if (!KeyExists(p.host, p.store, kJoinedPrefix + std::to_string(r), where)) {
        missing.push_back(r);
      }
    }
    if (missing.empty()) {
      return std::to_string(p.size - joined) + " of " + std::to_string(p.size) +
             " ranks never joined";
    }
    return (missing.size() == 1 ? "rank " : "ranks ") + RankList(missing) +
           (scanned < p.size ? " (of the first " + std::to_string(scanned) + ")" : "") +
           " never joined";
  } catch (const CommError& e) {
    return std::string("the store could not say which ranks joined (") + e.what() + ")";
  }
}

}  // namespace

Communicator::Communicator(CreateParams params)
    : params_(std::move(params)), shared_(std::make_shared<Shared>()) {
  shared_->host = params_.host;
  shared_->ordinal = params_.ordinal;
}

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ncclComm_t comm = std::exchange(shared_->nccl, nullptr);
    if (comm != nullptr) {
      (void)cudaSetDevice(params_.ordinal);
      (void)ncclCommAbort(comm);
    }
    shared_->notices = nullptr;
  }
  ReleaseCudaResources();
}

std::unique_ptr<Communicator> Communicator::Create(CreateParams params) {
  const auto deadline = Clock::now() + params.timeout;
  std::unique_ptr<Communicator> comm(new Communicator(std::move(params)));
  const CreateParams& p = comm->params_;
  const char* op = "create";
  const std::string where = comm->Where(op);

  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    throw CommError(FLEET_CODE_FAILED_PRECONDITION,
                    where + ": no usable CUDA device: cudaGetDeviceCount failed: " +
                        CudaText(err));
  }
  if (p.ordinal >= count) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": device ordinal " + std::to_string(p.ordinal) +
                        " is out of range; this process sees " + std::to_string(count) +
                        " CUDA device(s)");
  }
  comm->SetDevice(op);
  const ncclUniqueId id = ExchangeUniqueId(p, where, deadline);
  comm->CreateCudaResources(op);
  MarkJoined(p, where);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.minCTAs = p.tuning.min_ctas;
  config.maxCTAs = p.tuning.max_ctas;
  config.cgaClusterSize = p.tuning.cga_cluster_size;
  std::unique_lock<std::mutex> lock(comm->shared_->mu);
  ncclComm_t nccl = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&nccl, p.size, id, p.rank, &config);
  comm->shared_->nccl = nccl;
  if (r != ncclSuccess && r != ncclInProgress) {
    comm->FailNccl(op, -1, r, "ncclCommInitRankConfig failed");
  }
  if (nccl == nullptr) {
    throw CommError(FLEET_CODE_INTERNAL, where + ": ncclCommInitRankConfig returned no "
                                                 "communicator");
  }
  const bool ready = comm->Poll(op, -1, deadline,
                                [&] { return comm->NcclIdle(op, -1, "NCCL init failed"); });
  if (!ready) {
    const std::string message = where + ": NCCL init did not complete within " +
                                std::to_string(p.timeout.count()) +
                                " ms: " + JoinReport(p, where);
    comm->AbortNccl(message, false);
    throw CommError(FLEET_CODE_DEADLINE_EXCEEDED, message);
  }
  // Only a communicator that exists on every rank tells its peers when it gives up.
  comm->shared_->notices = p.store;
  return comm;
}

void Communicator::Destroy() {
  const char* op = "destroy";
  std::unique_lock<std::mutex> lock(shared_->mu);
  std::string failure;
  int32_t code = FLEET_CODE_OK;
  if (shared_->nccl != nullptr) {
    if (shared_->aborted.load()) {
      // The abort thread may still wait for the lock held here; peers learn of it now.
      AbortNccl(Where(op) + ": abort() was called", true);
    } else {
      try {
        SetDevice(op);
        const auto deadline = Clock::now() + params_.timeout;
        // NCCL frees memory its kernels use: this communicator's enqueued work goes first.
        const bool drained = Poll(op, -1, deadline, [&] {
          const cudaError_t e = cudaStreamQuery(stream_);
          if (e == cudaErrorNotReady) return false;
          if (e != cudaSuccess) FailCuda(op, e, "cudaStreamQuery on the communication stream");
          return true;
        });
        if (!drained) {
          FailDeadline(op, -1, "work enqueued by earlier calls did not finish (did a peer stop "
                               "taking part?)");
        }
        const ncclResult_t r = ncclCommFinalize(shared_->nccl);
        if (r != ncclSuccess && r != ncclInProgress) {
          FailNccl(op, -1, r, "ncclCommFinalize failed");
        }
        // Finalizing is local; a peer that gave up meanwhile is no reason to stop it.
        const bool finalized = Poll(
            op, -1, deadline, [&] { return NcclIdle(op, -1, "ncclCommFinalize failed"); },
            false);
        if (!finalized) FailDeadline(op, -1, "ncclCommFinalize did not finish");
        // With a non-blocking communicator NCCL may finish freeing it on a thread of its own
        // (ncclInProgress); either way it must not be touched again.
        const ncclResult_t d = ncclCommDestroy(std::exchange(shared_->nccl, nullptr));
        if (d != ncclSuccess && d != ncclInProgress) {
          throw CommError(NcclCode(d), Where(op) + ": ncclCommDestroy failed: " +
                                           NcclText(d, nullptr));
        }
      } catch (const CommError& e) {
        // A destroy raced by abort() is what the caller asked for.
        if (!shared_->aborted.load()) {
          failure = e.what();
          code = e.code;
        }
      }
    }
  }
  shared_->notices = nullptr;
  lock.unlock();
  ReleaseCudaResources();
  if (!failure.empty()) throw CommError(code, failure);
}

void Communicator::Abort() noexcept {
  if (shared_->aborted.exchange(true)) return;
  try {
    // The thread holds its own reference to the shared state, so it may outlive this object.
    std::shared_ptr<Shared> shared = shared_;
    std::string notice = "rank " + std::to_string(params_.rank) + " of " +
                         std::to_string(params_.size) + " aborted the communicator";
    std::thread([shared, notice = std::move(notice)] { AbortFromThread(shared, notice); })
        .detach();
  } catch (...) {
    // No thread: the flag alone still stops every call, and Destroy aborts NCCL.
  }
}

void Communicator::AbortFromThread(const std::shared_ptr<Shared>& shared,
                                   const std::string& notice) {
  // A call polling on another thread holds `mu` until it noticed the flag and aborted NCCL
  // itself; then there is nothing left to do here.
  std::lock_guard<std::mutex> lock(shared->mu);
  ncclComm_t comm = std::exchange(shared->nccl, nullptr);
  if (comm == nullptr) return;
  (void)cudaSetDevice(shared->ordinal);
  (void)ncclCommAbort(comm);
  if (shared->notices != nullptr) PublishNotice(shared->host, shared->notices, notice);
}

void Communicator::CreateCudaResources(const char* op) {
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) throw CudaError(op, e, "cudaStreamCreateWithFlags");
  stream_ = stream;
  for (cudaEvent_t* event : {&ready_, &done_}) {
    cudaEvent_t created = nullptr;
    e = cudaEventCreateWithFlags(&created, cudaEventDisableTiming);
    if (e != cudaSuccess) throw CudaError(op, e, "cudaEventCreateWithFlags");
    *event = created;
  }
  // Stream-ordered, like every allocation here: cudaFree would wait for the whole device,
  // including kernels of other communicators that may be stuck on a dead peer.
  void* buf = nullptr;
  e = cudaMallocAsync(&buf, sizeof(int32_t), stream_);
  if (e != cudaSuccess) throw CudaError(op, e, "cudaMallocAsync of the barrier buffer");
  barrier_buf_ = static_cast<int32_t*>(buf);
  e = cudaMemsetAsync(barrier_buf_, 0, sizeof(int32_t), stream_);
  if (e != cudaSuccess) throw CudaError(op, e, "cudaMemsetAsync of the barrier buffer");
}

void Communicator::ReleaseCudaResources() noexcept {
  if (stream_ == nullptr && ready_ == nullptr && done_ == nullptr) return;
  (void)cudaSetDevice(params_.ordinal);
  if (barrier_buf_ != nullptr) (void)cudaFreeAsync(barrier_buf_, stream_);
  barrier_buf_ = nullptr;
  if (done_ != nullptr) (void)cudaEventDestroy(done_);
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
  // Returns at once; CUDA frees the stream when the work on it is done.
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  done_ = ready_ = nullptr;
  stream_ = nullptr;
}

void Communicator::Barrier() {
  const char* name = "barrier";
  auto lock = Enter(name);
  const auto deadline = Begin(name);
  // A max keeps the value in place; the reduction only matters for who takes part.
  Launch(name, -1, nullptr, deadline, [&] {
    return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclMax, shared_->nccl,
                         stream_);
  });
}

std::unique_ptr<Communicator> Communicator::NewGroup(const int32_t* ranks, size_t n) {
  const char* name = "new_group";
  auto lock = Enter(name);
  if (n == 0 || ranks == nullptr) Invalid(name, "the rank list is empty");
  int index = -1;
  std::string members = "{";
  for (size_t i = 0; i < n; ++i) {
    const int32_t r = ranks[i];
    if (r < 0 || r >= params_.size) {
      Invalid(name, "rank " + std::to_string(r) + " is out of range [0, " +
                        std::to_string(params_.size) + ")");
    }
    if (i > 0 && r <= ranks[i - 1]) {
      Invalid(name, "ranks must be sorted and distinct, got " + std::to_string(ranks[i - 1]) +
                        " before " + std::to_string(r));
    }
    if (r == params_.rank) index = static_cast<int>(i);
    members += (i ? "," : "") + std::to_string(r);
  }
  members += "}";
  const auto deadline = Begin(name);

  // NCCL writes the child from its own thread once the split completes, so the slot must
  // outlive any failure below: it is freed only when the split finished.
  auto* slot = new ncclComm_t(nullptr);
  // The color is the group's first parent rank: groups with disjoint lists made by the same
  // call (ranks 0,1 asking for {0,1} while ranks 2,3 ask for {2,3}) must not merge into one
  // communicator, as they would with a color shared by every member.
  const ncclResult_t r =
      ncclCommSplit(shared_->nccl, index >= 0 ? static_cast<int>(ranks[0]) : NCCL_SPLIT_NOCOLOR,
                    index >= 0 ? index : 0, slot, nullptr);
  AwaitEnqueued(name, -1, r, deadline);
  ncclComm_t child_nccl = *slot;
  delete slot;
  if (index < 0) {
    if (child_nccl != nullptr) (void)ncclCommAbort(child_nccl);
    return nullptr;
  }
  if (child_nccl == nullptr) {
    throw CommError(FLEET_CODE_INTERNAL,
                    Where(name) + " of ranks " + members + ": ncclCommSplit gave a member no "
                                                           "communicator");
  }
  CreateParams child_params = params_;
  child_params.store = nullptr;
  child_params.rank = index;
  child_params.size = static_cast<int>(n);
  child_params.group = members;
  std::unique_ptr<Communicator> child(new Communicator(std::move(child_params)));
  {
    std::unique_lock<std::mutex> child_lock(child->shared_->mu);
    child->shared_->nccl = child_nccl;  // from here on the child aborts it on any failure
    // The split's job also ran the child's init; its state settles right after. The child's
    // Poll watches the child's flag, which no one can set yet: abort() of the parent (this
    // pending call) must stop the wait as well.
    const auto idle = [&] {
      if (shared_->aborted.load(std::memory_order_acquire)) {
        const std::string message = Where(name) + ": aborted while in progress";
        AbortNccl(message, true);
        throw CommError(FLEET_CODE_ABORTED, message);
      }
      return child->NcclIdle(name, -1, "NCCL init of the group failed");
    };
    if (!child->Poll(name, -1, deadline, idle)) {
      child->FailDeadline(name, -1, "NCCL init of the group of ranks " + members);
    }
  }
  child->CreateCudaResources(name);
  return child;
}

}  // namespace fleet_nccl
