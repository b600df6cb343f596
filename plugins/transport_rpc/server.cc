#include "server.h"

#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <new>
#include <vector>

#include "auth.h"
#include "deliveries.h"
#include "send_assembly.h"
#include "wire.h"

namespace fleet_rpc {
namespace {

using Stream = grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// Threads the server may run at once (gRPC's own pollers included): N trainers each with a few
// calls in flight (their sends, a get, a barrier) stay far below it.
constexpr int kMaxThreads = 1024;
constexpr size_t kAlign = 64;

// Received variables are assembled in buffers kept for reuse: a trainer sends the same
// gradients every step, and a fresh buffer of tens of MiB costs more in page faults than the
// copy into it. At most kPoolBytes are kept idle.
constexpr size_t kPoolBytes = size_t{256} << 20;

class BufferPool {
 public:
  ~BufferPool() {
    for (auto& [size, p] : idle_) Free(p);
  }
  // An idle buffer of exactly n bytes, or nullptr.
  uint8_t* TryTake(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(n);
    if (it == idle_.end()) return nullptr;
    uint8_t* p = it->second;
    idle_.erase(it);
    idle_bytes_ -= n;
    return p;
  }
  uint8_t* Take(size_t n) {
    uint8_t* p = TryTake(n);
    return p != nullptr ? p : static_cast<uint8_t*>(::operator new(n, std::align_val_t(kAlign)));
  }
  void Give(uint8_t* p, size_t n) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (n > kPoolBytes) {
      Free(p);
      return;
    }
    // Make room by dropping the smallest idle buffers (the cheapest to make again).
    while (idle_bytes_ + n > kPoolBytes && !idle_.empty()) {
      idle_bytes_ -= idle_.begin()->first;
      Free(idle_.begin()->second);
      idle_.erase(idle_.begin());
    }
    idle_.emplace(n, p);
    idle_bytes_ += n;
  }

 private:
  static void Free(uint8_t* p) { ::operator delete(p, std::align_val_t(kAlign)); }
  std::mutex mu_;
  std::multimap<size_t, uint8_t*> idle_;
  size_t idle_bytes_ = 0;
};

// A buffer of the pool, given back when it goes out of scope.
class PooledBuffer {
 public:
  PooledBuffer(BufferPool* pool, size_t n, uint8_t* p) : pool_(pool), n_(n), p_(p) {}
  ~PooledBuffer() { pool_->Give(p_, n_); }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  uint8_t* get() const { return p_; }

 private:
  BufferPool* pool_;
  size_t n_;
  uint8_t* p_;
};

grpc::Status Error(int32_t code, const std::string& message) {
  return grpc::Status(static_cast<grpc::StatusCode>(code), message);
}

}  // namespace

class RpcServer::Service : public grpc::Service {
 public:
  explicit Service(RpcServer* server) : server_(server) {
    Add("/fleet.transport_rpc.Transport/Send", &Service::Send);
    Add("/fleet.transport_rpc.Transport/Get", &Service::Get);
    Add("/fleet.transport_rpc.Transport/Barrier", &Service::Barrier);
    Add("/fleet.transport_rpc.Transport/Complete", &Service::Complete);
    Add("/fleet.transport_rpc.Transport/Abort", &Service::Abort);
    Add("/fleet.transport_rpc.Transport/Hello", &Service::Hello);
    Add("/fleet.transport_rpc.Transport/Prefetch", &Service::Prefetch);
  }

 private:
  using Method = grpc::Status (Service::*)(grpc::ServerContext*, Stream*, const std::string&);

  void Add(const char* path, Method method) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        path, grpc::internal::RpcMethod::BIDI_STREAMING,
        new grpc::internal::BidiStreamingHandler<Service, grpc::ByteBuffer, grpc::ByteBuffer>(
            [method, path](Service* self, grpc::ServerContext* ctx, Stream* stream) {
              return self->Guarded(ctx, stream, method, path);
            },
            this)));
  }

  // Authenticates the call, runs the method and turns anything it throws into a status.
  grpc::Status Guarded(grpc::ServerContext* ctx, Stream* stream, Method method,
                       const char* path) {
    const char* verb = std::strrchr(path, '/') + 1;
    const std::string where = "rpc server " + server_->endpoint_ + ": " + verb;
    std::optional<CallAuth> auth;
    grpc::Status status;
    try {
      // Every answer names this server process; a client that talked to an earlier one at
      // this endpoint is refused before anything else (fleet_transport.h, "Restarts"). The
      // incarnation is no secret: it only tells processes apart.
      ctx->AddTrailingMetadata(kIncarnationKey, server_->incarnation_);
      const auto& md = ctx->client_metadata();
      if (const auto it = md.find(kExpectIncarnationKey); it != md.end()) {
        const std::string_view expected(it->second.data(), it->second.size());
        if (expected != server_->incarnation_) {
          return Error(FLEET_CODE_DATA_LOSS,
                       where + ": this server restarted since the client's earlier calls "
                               "(a new process at the same endpoint): what the old one held "
                               "is lost");
        }
      }
      // Hello is how a client gets the challenge it must answer, so it is the one call that
      // needs no credentials (auth.h).
      if (method != &Service::Hello && !server_->options_.token.empty()) {
        const auto it = md.find(kCallAuthKey);
        if (it != md.end()) {
          auth = ParseCallAuth(std::string_view(it->second.data(), it->second.size()));
        }
        if (const char* why = Refusal(auth, path)) {
          server_->LogRefusal(where + ": refused a call from " + ctx->peer() + ": " + why);
          auth.reset();  // no answer proof for a refused call
          return Error(FLEET_CODE_UNAUTHENTICATED, where + ": " + why);
        }
      }
      status = (this->*method)(ctx, stream, where);
    } catch (const RpcError& e) {
      status = Error(e.code, e.what());
    } catch (const std::bad_alloc&) {
      status = Error(FLEET_CODE_RESOURCE_EXHAUSTED, where + ": out of memory");
    } catch (const std::exception& e) {
      status = Error(FLEET_CODE_INTERNAL, where + ": " + e.what());
    } catch (...) {
      status = Error(FLEET_CODE_INTERNAL, where + ": unknown exception");
    }
    if (auth) {
      // The client accepts an OK only with this proof (auth.h, step 3).
      ctx->AddTrailingMetadata(
          kAnswerProofKey,
          AnswerProof(server_->options_.token, server_->challenge_, auth->client_id,
                      auth->counter, static_cast<int32_t>(status.error_code())));
    }
    return status;
  }

  // Why a call's credentials are refused, or nullptr when they are good (then its counter is
  // spent). The proof is checked before the counter, so only the job's clients use up memory
  // in the replay window. The phrase "wrong or missing token" covers both ways to not hold it.
  const char* Refusal(const std::optional<CallAuth>& auth, const char* path) {
    if (!auth) return "wrong or missing token (no valid credentials on the call)";
    const std::string expected = CallProof(server_->options_.token, server_->challenge_,
                                           auth->client_id, auth->counter, path);
    if (!ProofsEqual(auth->proof, expected)) {
      return "wrong or missing token (the call's proof does not match this server's token)";
    }
    switch (server_->replays_.Accept(auth->client_id, auth->counter)) {
      case ReplayWindow::Verdict::kFresh:
        return nullptr;
      case ReplayWindow::Verdict::kReplayed:
        return "a replayed call (its credentials were used before)";
      case ReplayWindow::Verdict::kTooOld:
        return "a replayed or very late call (its counter is far below the client's latest)";
      case ReplayWindow::Verdict::kFull:
        return "too many clients have connected to this server";
    }
    return "unknown verdict";
  }

  // The challenge, and with a token the proof that this server holds it (auth.h, step 1).
  grpc::Status Hello(grpc::ServerContext* ctx, Stream*, const std::string& where) {
    const auto& md = ctx->client_metadata();
    const auto it = md.find(kHelloNonceKey);
    const std::string_view nonce =
        it == md.end() ? std::string_view() : std::string_view(it->second.data(),
                                                               it->second.size());
    if (nonce.size() < 16 || nonce.size() > 128) {
      return Error(FLEET_CODE_INVALID_ARGUMENT,
                   where + ": a hello needs a nonce of 16 to 128 characters");
    }
    ctx->AddTrailingMetadata(kChallengeKey, server_->challenge_);
    if (!server_->options_.token.empty()) {
      ctx->AddTrailingMetadata(kHelloProofKey,
                               HelloProof(server_->options_.token, server_->challenge_, nonce));
    }
    return grpc::Status::OK;
  }

  // A handler's answer: its code and message, marked so the client does not retry it.
  grpc::Status FromHandler(grpc::ServerContext* ctx, FleetStatus* status) {
    if (status == nullptr) return grpc::Status::OK;
    const int32_t code = g_host->status_code(status);
    const char* message = g_host->status_message(status);
    grpc::Status out = Error(code, message != nullptr ? message : "");
    g_host->status_free(status);
    ctx->AddTrailingMetadata(kHandlerKey, "1");
    return out;
  }

  // The first message of a call; CANCELLED when the client went away before sending it.
  void ReadFirst(Stream* stream, Decoded* msg, const std::string& where) {
    grpc::ByteBuffer buffer;
    if (!stream->Read(&buffer)) {
      throw RpcError(FLEET_CODE_CANCELLED, where + ": the client sent no request");
    }
    DecodeMessage(&buffer, msg, where);
  }

  grpc::Status Send(grpc::ServerContext* ctx, Stream* stream, const std::string& call) {
    Decoded msg;
    ReadFirst(stream, &msg, call);
    const WireHeader head = msg.header;
    SendAssembly assembly;
    assembly.Begin(head, call);
    const std::string& where = assembly.where();
    const int64_t expected = assembly.expected();
    const FleetTransportHandlers& h = server_->handlers_;

    // A send that carries its ids is delivered at most once (fleet_transport.h, "Delivery").
    std::optional<DeliveryClaim> claim;
    if (head.client_id != 0 && head.request_id != 0) {
      const DeliveryLog::Key key{head.client_id, head.request_id};
      DeliveryLog::Answer answer;
      // Bounded by the job's deadline too: a call may come without one.
      const auto limit = std::min(ctx->deadline(),
                                  std::chrono::system_clock::now() +
                                      std::chrono::milliseconds(server_->options_.timeout_ms));
      switch (server_->deliveries_.Begin(key, limit, &answer)) {
        case DeliveryLog::Claim::kDeliver:
          claim.emplace(&server_->deliveries_, key);
          break;
        case DeliveryLog::Claim::kAnswered:
          // Rare (a reply lost on the way) and worth a line: the operator sees the network
          // dropping replies, and that no gradient was applied twice for it.
          server_->Log(FLEET_LOG_INFO, where + ": a retry of a send already delivered, "
                                               "answered from the delivery log, not delivered "
                                               "again");
          // The first delivery's answer; a handler's error keeps the handler's mark.
          if (answer.code != FLEET_CODE_OK) ctx->AddTrailingMetadata(kHandlerKey, "1");
          return Error(answer.code, answer.message);
        case DeliveryLog::Claim::kTimedOut:
          throw RpcError(FLEET_CODE_DEADLINE_EXCEEDED,
                         where + ": an earlier attempt of this send is still being delivered");
      }
    }

    // Through `height` on every send, so the host reads height without a version test; rows
    // stay NULL until the payload has arrived.
    FleetTensor tensor{};
    tensor.struct_size = FLEET_STRUCT_SIZE(FleetTensor, height);
    tensor.dtype = head.dtype;
    tensor.ndim = static_cast<int32_t>(head.dims.size());
    tensor.dims = head.dims.data();
    tensor.device_type = FLEET_DEVICE_TYPE_HOST;
    tensor.height = head.selected_rows ? head.height : -1;
    // The host checks the name and shape against its variable before any more is buffered.
    if (FLEET_CAN_CALL(&h, FleetTransportHandlers, on_send_begin)) {
      if (FleetStatus* refused = h.on_send_begin(h.ctx, head.trainer_id, head.name.c_str(),
                                                 &tensor)) {
        return FromHandler(ctx, refused);
      }
    }

    // Memory grows with the data received, never with what a header claims: unless the pool
    // already holds a buffer of that size (the same gradient as last step), the chunks stay in
    // gRPC's buffers until the last arrives. Either way the bytes are copied once.
    std::unique_ptr<PooledBuffer> data;
    if (uint8_t* idle = expected > 0 ? pool_.TryTake(static_cast<size_t>(expected)) : nullptr) {
      data = std::make_unique<PooledBuffer>(&pool_, static_cast<size_t>(expected), idle);
    }
    std::vector<grpc::Slice> pieces;
    for (;;) {
      const int64_t offset = assembly.Add(msg);
      if (data != nullptr) {
        CopyPayload(msg, data->get() + offset);
      } else {
        for (grpc::Slice& piece : msg.payload) pieces.push_back(std::move(piece));
      }
      grpc::ByteBuffer buffer;
      if (!stream->Read(&buffer)) break;
      DecodeMessage(&buffer, &msg, where);
    }
    if (ctx->IsCancelled()) {
      throw RpcError(FLEET_CODE_CANCELLED, where + ": cancelled by the client");
    }
    assembly.Finish();
    if (data == nullptr) {
      data = std::make_unique<PooledBuffer>(
          &pool_, static_cast<size_t>(expected),
          expected > 0 ? pool_.Take(static_cast<size_t>(expected)) : nullptr);
      uint8_t* dst = data->get();
      for (const grpc::Slice& piece : pieces) {
        std::memcpy(dst, piece.begin(), piece.size());
        dst += piece.size();
      }
      pieces.clear();
    }
    tensor.data = data->get();
    int64_t no_rows = 0;  // where the rows of a SelectedRows tensor of no entries point
    if (head.selected_rows) {
      // The pool's buffers are kAlign-aligned and the layout puts the rows at a multiple of 8,
      // so the host reads them in place (fleet_transport.h: 8-byte aligned).
      tensor.rows = head.dims[0] > 0
                        ? reinterpret_cast<int64_t*>(data->get() + assembly.rows_offset())
                        : &no_rows;
      CheckRows(tensor.rows, head.dims[0], head.height, where);
    }
    FleetStatus* status = h.on_send(h.ctx, head.trainer_id, head.name.c_str(), &tensor);
    if (claim) {
      DeliveryLog::Answer answer;
      if (status != nullptr) {
        answer.code = g_host->status_code(status);
        const char* message = g_host->status_message(status);
        answer.message = message != nullptr ? message : "";
      }
      claim->Finish(std::move(answer));
    }
    if (status == nullptr && server_->LoseThisReply()) {
      server_->Log(FLEET_LOG_WARN, where + ": delivered; its reply dropped on purpose (" +
                                       kLoseRepliesEnv + ")");
      return Error(FLEET_CODE_UNAVAILABLE, where + ": reply dropped (" + kLoseRepliesEnv + ")");
    }
    return FromHandler(ctx, status);
  }

  grpc::Status Get(grpc::ServerContext* ctx, Stream* stream, const std::string& call) {
    Decoded msg;
    ReadFirst(stream, &msg, call);
    const WireHeader& head = msg.header;
    if (head.name.empty()) throw RpcError(FLEET_CODE_INVALID_ARGUMENT, call + ": empty name");
    const std::string where = call + " '" + head.name + "' (trainer " +
                              std::to_string(head.trainer_id) + ")";
    const FleetTransportHandlers& h = server_->handlers_;
    FleetTensor out{};
    out.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
    void* token = nullptr;
    FleetStatus* status = h.on_get(h.ctx, head.trainer_id, head.name.c_str(), &out, &token);
    if (status != nullptr) return FromHandler(ctx, status);
    Pin* pin = Pin::New(server_->PinGet(token));
    // The owner's reference goes when this call is done with the tensor, whatever happens.
    std::unique_ptr<Pin, void (*)(Pin*)> owner(pin, [](Pin* p) { Pin::Unref(p); });
    return Reply(stream, head.name, out, pin, where);
  }

  // Streams a tensor the host lent (on_get, on_prefetch) back in chunks that reference its
  // memory through `pin`: its shape on the first message only.
  grpc::Status Reply(Stream* stream, const std::string& name, const FleetTensor& out, Pin* pin,
                     const std::string& where) {
    WireHeader reply;
    reply.has_tensor = true;
    reply.name = name;
    reply.dtype = out.dtype;
    if (out.ndim < 0 || (out.ndim > 0 && out.dims == nullptr)) {
      throw RpcError(FLEET_CODE_INTERNAL, where + ": the handler returned a bad shape");
    }
    reply.dims.assign(out.dims, out.dims + out.ndim);
    const int64_t bytes = DenseBytes(out.dtype, reply.dims);
    if (bytes < 0 || (bytes > 0 && out.data == nullptr) || out.strides != nullptr ||
        out.device_type != FLEET_DEVICE_TYPE_HOST) {
      throw RpcError(FLEET_CODE_INTERNAL,
                     where + ": the handler returned a tensor that is not dense host memory "
                             "of a known dtype");
    }
    reply.total_bytes = bytes;
    const int64_t chunk = server_->options_.max_message_bytes - kHeaderSlack;
    const auto* base = static_cast<const uint8_t*>(out.data);
    int64_t offset = 0;
    do {
      const int64_t n = std::min(chunk, bytes - offset);
      reply.offset = offset;
      grpc::ByteBuffer buffer = EncodeMessage(reply, base + offset, static_cast<size_t>(n), pin);
      if (!stream->Write(buffer)) {
        throw RpcError(FLEET_CODE_CANCELLED, where + ": the client went away");
      }
      offset += n;
      // Only the first message carries the name and shape.
      reply = WireHeader{};
    } while (offset < bytes);
    return grpc::Status::OK;
  }

  // A batched fetch of rows (ABI 1.7): the ids arrive like a send of an int64 [n] tensor, in
  // as many messages as their size needs, and are held only once all have arrived (memory
  // grows with what arrived, never with what the header claims). The answer is streamed as a
  // Get's, from the host's on_prefetch.
  grpc::Status Prefetch(grpc::ServerContext* ctx, Stream* stream, const std::string& call) {
    Decoded msg;
    ReadFirst(stream, &msg, call);
    const FleetTransportHandlers& h = server_->handlers_;
    if (!FLEET_CAN_CALL(&h, FleetTransportHandlers, on_prefetch)) {
      return Error(FLEET_CODE_UNIMPLEMENTED,
                   call + ": this server's host serves no prefetch (its handlers predate ABI "
                          "1.7)");
    }
    const WireHeader head = msg.header;
    SendAssembly assembly;
    assembly.Begin(head, call);
    const std::string& where = assembly.where();
    if (head.dtype != FLEET_DTYPE_INT64 || head.dims.size() != 1 || head.selected_rows) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                     where + ": the ids must be int64 [n], not " + DtypeName(head.dtype) + " " +
                         DimsText(head.dims) + (head.selected_rows ? " with rows" : ""));
    }
    std::vector<grpc::Slice> pieces;
    for (;;) {
      assembly.Add(msg);
      for (grpc::Slice& piece : msg.payload) pieces.push_back(std::move(piece));
      grpc::ByteBuffer buffer;
      if (!stream->Read(&buffer)) break;
      DecodeMessage(&buffer, &msg, where);
    }
    if (ctx->IsCancelled()) {
      throw RpcError(FLEET_CODE_CANCELLED, where + ": cancelled by the client");
    }
    assembly.Finish();
    std::vector<int64_t> ids(static_cast<size_t>(head.dims[0]));
    auto* dst = reinterpret_cast<uint8_t*>(ids.data());
    for (const grpc::Slice& piece : pieces) {
      std::memcpy(dst, piece.begin(), piece.size());
      dst += piece.size();
    }
    pieces.clear();

    FleetTensor out{};
    out.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
    void* token = nullptr;
    FleetStatus* status = h.on_prefetch(h.ctx, head.trainer_id, head.name.c_str(), ids.data(),
                                        head.dims[0], &out, &token);
    if (status != nullptr) return FromHandler(ctx, status);
    Pin* pin = Pin::New(server_->PinGet(token));
    std::unique_ptr<Pin, void (*)(Pin*)> owner(pin, [](Pin* p) { Pin::Unref(p); });
    if (out.ndim < 1 || out.dims == nullptr || out.dims[0] != head.dims[0]) {
      throw RpcError(FLEET_CODE_INTERNAL,
                     where + ": the handler answered " + std::to_string(head.dims[0]) +
                         " ids with a tensor of " +
                         (out.ndim < 1 || out.dims == nullptr ? std::string("no rows")
                                                              : std::to_string(out.dims[0]) +
                                                                    " rows"));
    }
    return Reply(stream, head.name, out, pin, where);
  }

  // A SelectedRows tensor's rows as the ABI allows them (fleet_abi.h): each in [0, height) or
  // -1. They are the peer's, so a bad one refuses the send before the host sees it.
  static void CheckRows(const int64_t* rows, int64_t n, int64_t height,
                        const std::string& where) {
    for (int64_t i = 0; i < n; ++i) {
      if (rows[i] < -1 || rows[i] >= height) {
        throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                       where + ": entry " + std::to_string(i) + " lists row " +
                           std::to_string(rows[i]) + ", outside [0, " + std::to_string(height) +
                           ") and not -1");
      }
    }
  }

  grpc::Status Barrier(grpc::ServerContext* ctx, Stream* stream, const std::string& call) {
    Decoded msg;
    ReadFirst(stream, &msg, call);
    const int32_t kind = msg.header.barrier_kind;
    if (kind != FLEET_BARRIER_BATCH && kind != FLEET_BARRIER_FETCH) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                     call + ": unknown barrier kind " + std::to_string(kind));
    }
    // A client that gave up (its deadline passed, it was closed) must not be counted: it will
    // not wait for this barrier, and counting it could complete a round without it.
    if (ctx->IsCancelled()) {
      throw RpcError(FLEET_CODE_CANCELLED, call + ": cancelled by the client");
    }
    const FleetTransportHandlers& h = server_->handlers_;
    return FromHandler(ctx, h.on_barrier(h.ctx, msg.header.trainer_id, kind));
  }

  grpc::Status Complete(grpc::ServerContext* ctx, Stream* stream, const std::string& call) {
    Decoded msg;
    ReadFirst(stream, &msg, call);
    if (ctx->IsCancelled()) {
      throw RpcError(FLEET_CODE_CANCELLED, call + ": cancelled by the client");
    }
    const FleetTransportHandlers& h = server_->handlers_;
    return FromHandler(ctx, h.on_complete(h.ctx, msg.header.trainer_id));
  }

  grpc::Status Abort(grpc::ServerContext* ctx, Stream* stream, const std::string& call) {
    Decoded msg;
    ReadFirst(stream, &msg, call);
    const FleetTransportHandlers& h = server_->handlers_;
    if (!FLEET_CAN_CALL(&h, FleetTransportHandlers, on_abort)) {
      return Error(FLEET_CODE_UNIMPLEMENTED, call + ": this server's host takes no abort notice");
    }
    std::string& reason = msg.header.reason;
    if (reason.size() > FLEET_TRANSPORT_MAX_REASON) reason.resize(FLEET_TRANSPORT_MAX_REASON);
    return FromHandler(ctx, h.on_abort(h.ctx, msg.header.trainer_id, reason.c_str()));
  }

  RpcServer* server_;
  BufferPool pool_;
};

RpcServer::RpcServer() = default;

void RpcServer::LogRefusal(const std::string& text) {
  // A stranger can knock as often as it likes: the first refusals are logged in full, later
  // ones only now and then with a count, so the log cannot be flooded.
  const int64_t n = ++refusals_;
  if (!FLEET_CAN_CALL(g_host, FleetHostApi, log)) return;
  if (n <= kLoggedRefusals) {
    g_host->log(g_host->host_ctx, FLEET_LOG_WARN, text.c_str());
  } else if (n % 1000 == 0) {
    const std::string line = text + " (" + std::to_string(n) + " refusals so far)";
    g_host->log(g_host->host_ctx, FLEET_LOG_WARN, line.c_str());
  }
}

void RpcServer::Log(int32_t level, const std::string& text) {
  if (FLEET_CAN_CALL(g_host, FleetHostApi, log)) g_host->log(g_host->host_ctx, level, text.c_str());
}

bool RpcServer::LoseThisReply() {
  int64_t left = lose_replies_.load();
  while (left > 0) {
    if (lose_replies_.compare_exchange_weak(left, left - 1)) return true;
  }
  return false;
}

std::unique_ptr<RpcServer> RpcServer::Start(const FleetTransportServerConfig& config) {
  const std::string endpoint = config.endpoint != nullptr ? config.endpoint : "";
  const std::string where = "rpc server " + endpoint;
  std::string host;
  int port = 0;
  SplitEndpoint(endpoint, where, &host, &port);
  const FleetTransportHandlers* h = config.handlers;
  if (!FLEET_HAS_FIELD(h, FleetTransportHandlers, on_complete) || h->on_send == nullptr ||
      h->on_get == nullptr || h->on_get_done == nullptr || h->on_barrier == nullptr ||
      h->on_complete == nullptr) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where + ": handlers are missing");
  }
  std::unique_ptr<RpcServer> server(new RpcServer());
  // 128 random bits: two processes at one endpoint never share one by chance.
  server->incarnation_ = RandomHex(16);
  server->challenge_ = RandomHex(32);
  if (const char* lose = std::getenv(kLoseRepliesEnv)) {
    server->lose_replies_ = std::max<int64_t>(0, std::strtoll(lose, nullptr, 10));
  }
  server->handlers_ = *h;
  server->pin_state_->handlers = *h;
  server->options_ = ParseOptions(config.num_options, config.options, where);
  const Options& o = server->options_;

  std::shared_ptr<grpc::ServerCredentials> creds;
  if (o.tls) {
    // A CA on the server means: only clients with a certificate it signed.
    grpc::SslServerCredentialsOptions ssl(
        o.tls_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                         : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_key_cert_pairs.push_back({ReadPemFile(o.tls_key, "tls_key", where),
                                      ReadPemFile(o.tls_cert, "tls_cert", where)});
    if (!o.tls_ca.empty()) ssl.pem_root_certs = ReadPemFile(o.tls_ca, "tls_ca", where);
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }

  server->service_ = std::make_unique<Service>(server.get());
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(endpoint, creds, &bound_port);
  // Bind exactly: with SO_REUSEPORT a second server on a taken port would share it silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Large tensors: read the socket in big chunks and let a stream run ahead by a few
  // messages, instead of starting from HTTP/2's 64 KiB window.
  builder.AddChannelArgument(GRPC_ARG_TCP_READ_CHUNK_SIZE, kReadChunkBytes);
  builder.AddChannelArgument(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, kMinReadChunkBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                             LookaheadBytes(o.max_message_bytes));
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
  grpc::ResourceQuota quota("fleet-transport-rpc");
  quota.SetMaxThreads(kMaxThreads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || bound_port == 0) {
    if (server->server_ != nullptr) server->server_->Shutdown();
    throw RpcError(FLEET_CODE_UNAVAILABLE, "rpc server: cannot listen on " + endpoint +
                                               " (address in use?)");
  }
  server->endpoint_ = host + ":" + std::to_string(bound_port);
  return server;
}

void RpcServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  // A deadline of now cancels every call in flight at once; Shutdown returns when their
  // handlers have.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

std::function<void()> RpcServer::PinGet(void* token) {
  std::shared_ptr<PinState> state = pin_state_;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    ++state->pins;
  }
  // The closure owns a reference to the state, never the server: gRPC may release the reply
  // after the server was destroyed.
  return [state = std::move(state), token] {
    std::unique_lock<std::mutex> lock(state->mu);
    if (!state->gone) {
      ++state->calling;
      lock.unlock();
      const FleetTransportHandlers& h = state->handlers;
      h.on_get_done(h.ctx, token);
      lock.lock();
      --state->calling;
    }
    --state->pins;
    state->cv.notify_all();
  };
}

RpcServer::~RpcServer() {
  if (server_ == nullptr) return;
  Stop();
  server_.reset();
  // gRPC lets go of a Get's slices when the call's buffers go; the handlers must not be called
  // after server_destroy, so wait for the last on_get_done. Past the wait, later releases skip
  // on_get_done: their tokens leak rather than reach a host object that may be gone.
  PinState& state = *pin_state_;
  std::unique_lock<std::mutex> lock(state.mu);
  if (!state.cv.wait_for(lock, std::chrono::seconds(30), [&] { return state.pins == 0; })) {
    state.gone = true;
    const int64_t left = state.pins;
    // Releases already inside on_get_done finish it before the host may go away.
    const bool settled =
        state.cv.wait_for(lock, std::chrono::seconds(10), [&] { return state.calling == 0; });
    lock.unlock();
    if (FLEET_CAN_CALL(g_host, FleetHostApi, log)) {
      std::string text = "rpc server " + endpoint_ + ": gRPC still holds " +
                         std::to_string(left) +
                         " get replies after 30 s; their on_get_done will not be called (the "
                         "lent variables leak)";
      if (!settled) text += "; an on_get_done call did not return within 10 s";
      g_host->log(g_host->host_ctx, FLEET_LOG_WARN, text.c_str());
    }
  }
}

}  // namespace fleet_rpc
