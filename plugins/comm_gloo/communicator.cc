#include "communicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/reduce.h>
#include <gloo/transport/unbound_buffer.h>

#include "abort_hook.h"
#include "loop_waker.h"
#include "reductions.h"
#include "sigpipe_guard.h"
#include "store_adapter.h"

namespace fleet_gloo {
namespace {

// Gloo's ring allreduce (reduce-scatter then all-gather around the ring, in segments of at
// most 1 MiB with two in flight) moves 2(n-1)/n of the data per rank, the bandwidth optimum;
// it is also what torch.distributed's Gloo backend uses for CPU tensors. BCUBE exchanges
// fewer, larger messages and only wins for small messages on many hosts. The option
// `algorithm = "bcube"` selects it.
gloo::AllreduceOptions::Algorithm AllreduceAlgorithm(bool bcube) {
  return bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
               : gloo::AllreduceOptions::Algorithm::RING;
}

// Point-to-point and ring slots live above the ones Gloo's collectives use (their top byte is a
// collective prefix below 0x10), so a send/recv pair never matches a collective's message.
constexpr uint64_t kP2pSlotBase = uint64_t{0xf0} << 56;
// reduce_scatter's ring: this prefix, the call's tag, the step.
constexpr uint64_t kRingSlotBase = uint64_t{0xe0} << 56;

bool Contains(const std::string& s, const char* needle) {
  return s.find(needle) != std::string::npos;
}

bool Overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto pa = reinterpret_cast<uintptr_t>(a);
  auto pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

// Calls f with a value of an unsigned type of `element_size` bytes: Gloo's option setters are
// templates on the element type only to learn its size (our reduction functions do the math).
template <typename F>
void WithElementType(size_t element_size, F&& f) {
  switch (element_size) {
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Communicator::Communicator(CreateParams params)
    : params_(std::move(params)),
      send_seq_(new uint64_t[static_cast<size_t>(params_.size)]()),
      recv_seq_(new uint64_t[static_cast<size_t>(params_.size)]()) {}

Communicator::~Communicator() {
  // Each pair closed and, when this holds the last reference, the device's loop thread joined,
  // without waiting out a loop tick apiece (loop_waker.h).
  LoopWaker waker(params_.device.get());
  context_.reset();
  params_.device.reset();
}

std::unique_ptr<Communicator> Communicator::Create(CreateParams params) {
  std::unique_ptr<Communicator> comm(new Communicator(std::move(params)));
  const CreateParams& p = comm->params_;
  StoreAdapter store(p.host, p.store, p.key_prefix, p.timeout);
  const std::string where = comm->Where("create");

  // An explicit join before Gloo's own exchange, so that a missing rank is reported by number
  // (Gloo would only time out waiting for an address key).
  try {
    // A key of this rank already there is a previous run's (a reused file-store directory): its
    // peers' keys would let this join pass without them and point Gloo at dead addresses.
    if (store.Exists("join/" + std::to_string(p.rank))) {
      throw CommError(FLEET_CODE_FAILED_PRECONDITION,
                      "the store already holds rank " + std::to_string(p.rank) +
                          "'s join key from an earlier communicator in the same scope (a "
                          "reused store directory?); give each run a fresh store or job id");
    }
    store.set("join/" + std::to_string(p.rank), std::vector<char>{'1'});
    std::vector<std::string> keys;
    for (int r = 0; r < p.size; ++r) keys.push_back("join/" + std::to_string(r));
    try {
      store.wait(keys, p.timeout);
    } catch (const CommError& e) {
      if (e.code != FLEET_CODE_DEADLINE_EXCEEDED) throw;
      std::vector<int> missing;
      for (int r = 0; r < p.size; ++r) {
        if (!store.Exists(keys[static_cast<size_t>(r)])) missing.push_back(r);
      }
      throw CommError(FLEET_CODE_DEADLINE_EXCEEDED,
                      where + ": rendezvous of " + std::to_string(p.size) +
                          " ranks timed out after " + std::to_string(p.timeout.count()) +
                          " ms: " + (missing.size() == 1 ? "rank " : "ranks ") +
                          RankList(missing) + " never joined");
    }
  } catch (const CommError& e) {
    if (e.code == FLEET_CODE_DEADLINE_EXCEEDED && Contains(e.what(), "never joined")) throw;
    throw CommError(e.code, where + ": " + e.what());
  }

  try {
    SigpipeGuard no_sigpipe;
    auto context = std::make_shared<gloo::rendezvous::Context>(p.rank, p.size);
    // Gloo waits five times the context's timeout for a pair's first connection
    // (tcp/pair.h); a fifth of ours keeps connecting within the deadline we promise.
    context->setTimeout(std::max(p.timeout / 5, std::chrono::milliseconds(1)));
    std::shared_ptr<gloo::transport::Device> device = p.device;
    context->connectFullMesh(store, device);
    context->setTimeout(p.timeout);
    // A rank's connectFullMesh can return while a peer is still completing its side of their
    // pair; without this barrier a rank that destroys its communicator at once would break the
    // peer's create. After it, every rank holds the whole mesh.
    gloo::BarrierOptions barrier(context);
    barrier.setTag(comm->NextTag());
    barrier.setTimeout(p.timeout);
    gloo::barrier(barrier);
    comm->context_ = std::move(context);
    comm->guard_sigpipe_ = !ProcessIgnoresSigpipe();
  } catch (const CommError& e) {
    throw CommError(e.code, where + ": connecting the mesh: " + e.what());
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const bool timeout = Contains(what, "imed out") || Contains(what, "imeout");
    throw CommError(timeout ? FLEET_CODE_DEADLINE_EXCEEDED : FLEET_CODE_UNAVAILABLE,
                    where + ": connecting the mesh" +
                        (timeout ? " timed out after " + std::to_string(p.timeout.count()) +
                                       " ms"
                                 : std::string(" failed")) +
                        ": " + what);
  }
  return comm;
}

void Communicator::Abort() noexcept {
  aborted_.store(true);
  // Gloo (2022) has no abort: failing every pair wakes whatever waits on it (the blocked call
  // then throws and reports ABORTED) and drops the connections, so peers fail promptly too.
  try {
    if (context_ == nullptr) return;
    LoopWaker waker(params_.device.get());  // a tick per pair otherwise (loop_waker.h)
    for (int peer = 0; peer < params_.size; ++peer) {
      if (peer == params_.rank) continue;
      auto& pair = context_->getPair(peer);
      if (pair == nullptr) continue;
      if (!SignalPairError(pair.get(), Where("abort") + ": the communicator was aborted")) {
        pair->close();
      }
    }
  } catch (...) {
    // Nothing may escape abort; the flag alone still stops every later call.
  }
}

std::string Communicator::Where(const char* op) const {
  return std::string("gloo ") + op + " (rank " + std::to_string(params_.rank) + " of " +
         std::to_string(params_.size) + ")";
}

void Communicator::Invalid(const char* op, const std::string& what) const {
  throw CommError(FLEET_CODE_INVALID_ARGUMENT, Where(op) + ": " + what);
}

Communicator::Buffer Communicator::View(const char* op, const char* name,
                                        const FleetTensor* t) const {
  const std::string n(name);
  if (t == nullptr) Invalid(op, n + " is NULL");
  if (!FLEET_HAS_FIELD(t, FleetTensor, device_ordinal)) {
    Invalid(op, n + " has struct_size " + std::to_string(t->struct_size) +
                    ", too small for a FleetTensor");
  }
  const size_t element = ElementSize(t->dtype);
  if (element == 0) {
    Invalid(op, n + " has dtype " + DtypeName(t->dtype) + ", which " + op +
                    " does not support (float32, float64, int32, int64, float16, bfloat16)");
  }
  if (t->ndim < 0 || (t->ndim > 0 && t->dims == nullptr)) {
    Invalid(op, n + " has an invalid shape (ndim " + std::to_string(t->ndim) + ")");
  }
  size_t numel = 1;
  for (int32_t d = 0; d < t->ndim; ++d) {
    if (t->dims[d] < 0) Invalid(op, n + " has a negative dimension");
    numel *= static_cast<size_t>(t->dims[d]);
  }
  if (t->strides != nullptr) {
    int64_t expected = 1;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
      if (t->dims[d] != 1 && t->strides[d] != expected) {
        Invalid(op, n + " is not dense row-major; the communicator needs contiguous memory");
      }
      expected *= t->dims[d];
    }
  }
  if (t->device_type != FLEET_DEVICE_TYPE_HOST &&
      (params_.cpu_device_type < 0 || t->device_type != params_.cpu_device_type)) {
    Invalid(op, n + " lives on device type " + std::to_string(t->device_type) +
                    "; the gloo communicator reduces host (cpu) memory only");
  }
  if (numel != 0 && t->data == nullptr) Invalid(op, n + " has NULL data");
  return Buffer{t->data, t->dtype, numel, numel * element};
}

void Communicator::CheckRoot(const char* op, int32_t root) const {
  if (root < 0 || root >= params_.size) {
    Invalid(op, "root " + std::to_string(root) + " is out of range [0, " +
                    std::to_string(params_.size) + ")");
  }
}

void Communicator::CheckPeer(const char* op, int32_t peer) const {
  if (peer < 0 || peer >= params_.size) {
    Invalid(op, "peer " + std::to_string(peer) + " is out of range [0, " +
                    std::to_string(params_.size) + ")");
  }
  if (peer == params_.rank) Invalid(op, "peer " + std::to_string(peer) + " is this rank");
}

void Communicator::CheckUsable(const char* op) const {
  if (aborted_.load()) {
    throw CommError(FLEET_CODE_ABORTED, Where(op) + ": the communicator was aborted");
  }
  if (!broken_.empty()) {
    throw CommError(FLEET_CODE_ABORTED,
                    Where(op) + ": the communicator is unusable after an earlier failure (" +
                        broken_ + ")");
  }
}

template <typename F>
void Communicator::RunGloo(const char* op, int peer, F&& body) {
  CheckUsable(op);
  SigpipeGuard no_sigpipe(guard_sigpipe_);
  std::string what;
  bool io = false;
  try {
    body();
    if (!aborted_.load()) return;
    what = "aborted";
  } catch (const CommError&) {
    throw;
  } catch (const gloo::IoException& e) {
    what = e.what();
    io = true;
  } catch (const gloo::EnforceNotMet& e) {
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  std::string where = Where(op);
  if (peer >= 0) where += " with peer " + std::to_string(peer);
  if (aborted_.load()) {
    broken_ = "aborted";
    throw CommError(FLEET_CODE_ABORTED, where + ": aborted while in progress");
  }
  const bool timeout = Contains(what, "imed out") || Contains(what, "imeout");
  const std::string message =
      where + (timeout ? ": timed out after " + std::to_string(params_.timeout.count()) + " ms: "
                       : ": ") +
      what;
  if (timeout || io) broken_ = message;
  throw CommError(timeout ? FLEET_CODE_DEADLINE_EXCEEDED
                          : (io ? FLEET_CODE_UNAVAILABLE : FLEET_CODE_INTERNAL),
                  message);
}

void Communicator::AllReduce(const FleetTensor* in_t, const FleetTensor* out_t, int32_t op) {
  const char* name = "all_reduce";
  CheckUsable(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  if (in.dtype != out.dtype || in.numel != out.numel) {
    Invalid(name, "in (" + DtypeName(in.dtype) + ", " + std::to_string(in.numel) +
                      " elements) and out (" + DtypeName(out.dtype) + ", " +
                      std::to_string(out.numel) + " elements) differ");
  }
  const ReduceFn fn = ReductionFor(in.dtype, op);
  if (fn == nullptr) {
    Invalid(name, "reduction " + ReduceOpName(op) + " is not supported on " + DtypeName(in.dtype));
  }
  if (in.numel == 0) return;
  RunGloo(name, -1, [&] {
    gloo::AllreduceOptions opts(context_);
    WithElementType(in.bytes / in.numel, [&](auto t) {
      using T = decltype(t);
      // With in == out Gloo reduces in place (no input buffer, no extra copy).
      if (in.data != out.data) opts.setInput(static_cast<T*>(in.data), in.numel);
      opts.setOutput(static_cast<T*>(out.data), out.numel);
    });
    opts.setAlgorithm(AllreduceAlgorithm(params_.bcube));
    opts.setReduceFunction(fn);
    opts.setTag(NextTag());
    opts.setTimeout(params_.timeout);
    gloo::allreduce(opts);
  });
  if (op == FLEET_REDUCE_AVG) DivideInPlace(out.dtype, out.data, out.numel, params_.size);
}

void Communicator::Broadcast(const FleetTensor* buf_t, int32_t root) {
  const char* name = "broadcast";
  CheckUsable(name);
  const Buffer buf = View(name, "buf", buf_t);
  CheckRoot(name, root);
  if (buf.numel == 0) return;
  RunGloo(name, -1, [&] {
    gloo::BroadcastOptions opts(context_);
    WithElementType(buf.bytes / buf.numel, [&](auto t) {
      opts.setOutput(static_cast<decltype(t)*>(buf.data), buf.numel);
    });
    opts.setRoot(root);
    opts.setTag(NextTag());
    opts.setTimeout(params_.timeout);
    gloo::broadcast(opts);
  });
}

void Communicator::AllGather(const FleetTensor* in_t, const FleetTensor* out_t) {
  const char* name = "all_gather";
  CheckUsable(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  const size_t size = static_cast<size_t>(params_.size);
  if (in.dtype != out.dtype || out.numel != in.numel * size) {
    Invalid(name, "out must hold world_size * numel(in) = " + std::to_string(in.numel * size) +
                      " elements of " + DtypeName(in.dtype) + ", got " +
                      std::to_string(out.numel) + " of " + DtypeName(out.dtype));
  }
  if (in.numel == 0) return;
  char* own_block = static_cast<char*>(out.data) + in.bytes * static_cast<size_t>(params_.rank);
  std::vector<char> scratch;
  const void* src = in.data;
  if (src != own_block && Overlaps(in.data, in.bytes, out.data, out.bytes)) {
    scratch.assign(static_cast<const char*>(in.data), static_cast<const char*>(in.data) + in.bytes);
    src = scratch.data();
  }
  RunGloo(name, -1, [&] {
    gloo::AllgatherOptions opts(context_);
    WithElementType(in.bytes / in.numel, [&](auto t) {
      using T = decltype(t);
      // Already in place (in is this rank's block of out): Gloo gathers around it.
      if (src != own_block) opts.setInput(static_cast<T*>(const_cast<void*>(src)), in.numel);
      opts.setOutput(static_cast<T*>(out.data), out.numel);
    });
    opts.setTag(NextTag());
    opts.setTimeout(params_.timeout);
    gloo::allgather(opts);
  });
}

void Communicator::ReduceScatter(const FleetTensor* in_t, const FleetTensor* out_t, int32_t op) {
  const char* name = "reduce_scatter";
  CheckUsable(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  const size_t size = static_cast<size_t>(params_.size);
  if (in.dtype != out.dtype || in.numel != out.numel * size) {
    Invalid(name, "in must hold world_size * numel(out) = " + std::to_string(out.numel * size) +
                      " elements of " + DtypeName(out.dtype) + ", got " +
                      std::to_string(in.numel) + " of " + DtypeName(in.dtype));
  }
  const ReduceFn fn = ReductionFor(in.dtype, op);
  if (fn == nullptr) {
    Invalid(name, "reduction " + ReduceOpName(op) + " is not supported on " + DtypeName(in.dtype));
  }
  if (out.numel == 0) return;
  if (params_.size == 1) {
    std::memmove(out.data, in.data, out.bytes);
    return;
  }
  // Gloo (2022) has no unbound-buffer reduce-scatter (only a float-only class over bound
  // buffers), so this is a ring of our own: in step s rank r passes the partial sum of block
  // (r - s - 1) to its right neighbour and folds its own copy of block (r - s - 2) into what
  // arrives from the left; after size - 1 steps the block that arrives is its own. Each rank
  // sends (size - 1) / size of the input, half of what an all-reduce would, and out is written
  // only in the last step, so out may alias in.
  const int p = params_.size;
  const int r = params_.rank;
  const size_t block = out.bytes;
  const char* src = static_cast<const char*>(in.data);
  auto in_block = [&](int b) { return src + block * static_cast<size_t>((b % p + p) % p); };
  std::vector<char> partial(block), incoming(block);
  const uint64_t tag = NextTag();
  RunGloo(name, -1, [&] {
    auto partial_ub = context_->createUnboundBuffer(partial.data(), block);
    auto incoming_ub = context_->createUnboundBuffer(incoming.data(), block);
    // Gloo only reads a buffer it sends from; the first step sends straight from the input.
    auto first_ub = context_->createUnboundBuffer(const_cast<char*>(in_block(r - 1)), block);
    for (int step = 0; step < p - 1; ++step) {
      const uint64_t slot = kRingSlotBase | (tag << 16) | static_cast<uint64_t>(step);
      auto& send_ub = step == 0 ? first_ub : partial_ub;
      incoming_ub->recv((r + p - 1) % p, slot);
      send_ub->send((r + 1) % p, slot);
      if (!incoming_ub->waitRecv(params_.timeout) || !send_ub->waitSend(params_.timeout)) {
        throw gloo::IoException("reduce_scatter was aborted");
      }
      void* dst = step == p - 2 ? out.data : static_cast<void*>(partial.data());
      fn(dst, incoming.data(), in_block(r - step - 2), out.numel);
    }
  });
  if (op == FLEET_REDUCE_AVG) DivideInPlace(out.dtype, out.data, out.numel, params_.size);
}

void Communicator::Reduce(const FleetTensor* in_t, const FleetTensor* out_t, int32_t op,
                          int32_t root) {
  const char* name = "reduce";
  CheckUsable(name);
  const Buffer in = View(name, "in", in_t);
  CheckRoot(name, root);
  const bool is_root = params_.rank == root;
  Buffer out{nullptr, in.dtype, in.numel, in.bytes};
  if (is_root) {
    out = View(name, "out", out_t);
    if (in.dtype != out.dtype || in.numel != out.numel) {
      Invalid(name, "in (" + DtypeName(in.dtype) + ", " + std::to_string(in.numel) +
                        " elements) and out (" + DtypeName(out.dtype) + ", " +
                        std::to_string(out.numel) + " elements) differ");
    }
  }
  const ReduceFn fn = ReductionFor(in.dtype, op);
  if (fn == nullptr) {
    Invalid(name, "reduction " + ReduceOpName(op) + " is not supported on " + DtypeName(in.dtype));
  }
  if (in.numel == 0) return;
  // Gloo uses the output as scratch on every rank, and only root's out may be written.
  std::vector<char> scratch;
  if (!is_root) {
    scratch.resize(in.bytes);
    out.data = scratch.data();
  }
  RunGloo(name, -1, [&] {
    gloo::ReduceOptions opts(context_);
    WithElementType(in.bytes / in.numel, [&](auto t) {
      using T = decltype(t);
      if (in.data != out.data) opts.setInput(static_cast<T*>(in.data), in.numel);
      opts.setOutput(static_cast<T*>(out.data), in.numel);
    });
    opts.setRoot(root);
    opts.setReduceFunction(fn);
    opts.setTag(NextTag());
    opts.setTimeout(params_.timeout);
    gloo::reduce(opts);
  });
  if (is_root && op == FLEET_REDUCE_AVG) {
    DivideInPlace(out.dtype, out.data, out.numel, params_.size);
  }
}

void Communicator::AllToAll(const FleetTensor* in_t, const FleetTensor* out_t) {
  const char* name = "all_to_all";
  CheckUsable(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  const size_t size = static_cast<size_t>(params_.size);
  if (in.dtype != out.dtype || in.numel != out.numel || in.numel % size != 0) {
    Invalid(name, "in and out must have the same dtype and a number of elements divisible by "
                  "the world size " + std::to_string(size) + ", got in " +
                      std::to_string(in.numel) + " of " + DtypeName(in.dtype) + ", out " +
                      std::to_string(out.numel) + " of " + DtypeName(out.dtype));
  }
  if (in.numel == 0) return;
  // Gloo reads blocks of in while writing blocks of out, so overlapping buffers go through a
  // copy of the input.
  std::vector<char> scratch;
  const void* src = in.data;
  if (Overlaps(in.data, in.bytes, out.data, out.bytes)) {
    scratch.assign(static_cast<const char*>(in.data), static_cast<const char*>(in.data) + in.bytes);
    src = scratch.data();
  }
  RunGloo(name, -1, [&] {
    gloo::AlltoallOptions opts(context_);
    WithElementType(in.bytes / in.numel, [&](auto t) {
      using T = decltype(t);
      opts.setInput(static_cast<T*>(const_cast<void*>(src)), in.numel);
      opts.setOutput(static_cast<T*>(out.data), out.numel);
    });
    opts.setTag(NextTag());
    opts.setTimeout(params_.timeout);
    gloo::alltoall(opts);
  });
}

void Communicator::Send(const FleetTensor* buf, int32_t peer) { PointToPoint(true, buf, peer); }

void Communicator::Recv(const FleetTensor* buf, int32_t peer) { PointToPoint(false, buf, peer); }

// One unbound buffer per call; the slot is the pair's sequence number in that direction, so
// the n-th send to a peer meets that peer's n-th recv from this rank.
void Communicator::PointToPoint(bool send, const FleetTensor* buf_t, int32_t peer) {
  const char* name = send ? "send" : "recv";
  CheckUsable(name);
  const Buffer buf = View(name, "buf", buf_t);
  CheckPeer(name, peer);
  if (buf.numel == 0) return;
  uint64_t& seq = (send ? send_seq_ : recv_seq_)[static_cast<size_t>(peer)];
  const uint64_t slot = kP2pSlotBase + seq++;
  RunGloo(name, peer, [&] {
    auto ub = context_->createUnboundBuffer(buf.data, buf.bytes);
    if (send) {
      ub->send(peer, slot);
      if (!ub->waitSend(params_.timeout)) throw gloo::IoException("send was aborted");
    } else {
      ub->recv(peer, slot);
      if (!ub->waitRecv(params_.timeout)) throw gloo::IoException("recv was aborted");
    }
  });
}

void Communicator::Barrier() {
  const char* name = "barrier";
  RunGloo(name, -1, [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(NextTag());
    opts.setTimeout(params_.timeout);
    gloo::barrier(opts);
  });
}

std::unique_ptr<Communicator> Communicator::NewGroup(const int32_t* ranks, size_t n) {
  const char* name = "new_group";
  CheckUsable(name);
  if (n == 0 || ranks == nullptr) Invalid(name, "the rank list is empty");
  std::vector<int> list;
  int index = -1;
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
    list.push_back(r);
  }
  // Every parent rank counts every call, so group k has the same scope on all of them.
  const uint64_t id = groups_++;
  if (index < 0) return nullptr;
  CreateParams child = params_;
  std::string members;
  for (size_t i = 0; i < list.size(); ++i) members += (i ? "," : "") + std::to_string(list[i]);
  child.key_prefix = params_.key_prefix + "group" + std::to_string(id) + "[" + members + "]/";
  child.rank = index;
  child.size = static_cast<int>(n);
  try {
    return Create(std::move(child));
  } catch (const CommError& e) {
    throw CommError(e.code, Where(name) + " of ranks {" + members + "}: " + e.what());
  }
}

}  // namespace fleet_gloo
