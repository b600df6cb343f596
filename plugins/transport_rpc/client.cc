#include "client.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "auth.h"
#include "wire.h"

namespace fleet_rpc {
namespace {

constexpr const char* kSend = "/fleet.transport_rpc.Transport/Send";
constexpr const char* kGet = "/fleet.transport_rpc.Transport/Get";
constexpr const char* kBarrier = "/fleet.transport_rpc.Transport/Barrier";
constexpr const char* kComplete = "/fleet.transport_rpc.Transport/Complete";
constexpr const char* kAbort = "/fleet.transport_rpc.Transport/Abort";
constexpr const char* kHello = "/fleet.transport_rpc.Transport/Hello";
constexpr const char* kPrefetch = "/fleet.transport_rpc.Transport/Prefetch";
constexpr int64_t kFirstBackoffMs = 100;

// A single request, sent once per attempt.
std::function<bool(grpc::ByteBuffer*)> OneRequest(const WireHeader& header) {
  return [header, sent = false](grpc::ByteBuffer* out) mutable {
    if (sent) return false;
    sent = true;
    *out = EncodeMessage(header, nullptr, 0, nullptr);
    return true;
  };
}

double Jitter() {
  thread_local std::minstd_rand rng(static_cast<unsigned>(
      std::hash<std::thread::id>()(std::this_thread::get_id()) ^
      static_cast<size_t>(std::chrono::steady_clock::now().time_since_epoch().count())));
  return std::uniform_real_distribution<double>(0.75, 1.25)(rng);
}

}  // namespace

RpcClient::RpcClient(const FleetTransportClientConfig& config) {
  endpoint_ = config.endpoint != nullptr ? config.endpoint : "";
  const std::string where = "rpc client of " + endpoint_;
  std::string host;
  int port = 0;
  SplitEndpoint(endpoint_, where, &host, &port);
  if (port == 0) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where + ": port 0 is not a server's port");
  }
  trainer_id_ = config.trainer_id;
  options_ = ParseOptions(config.num_options, config.options, where);
  // Never 0, which marks a send without ids.
  std::random_device rd;
  do {
    client_id_ = static_cast<uint64_t>(rd()) << 32 | rd();
  } while (client_id_ == 0);

  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options_.tls) {
    grpc::SslCredentialsOptions ssl;
    // Empty roots: gRPC's default trust store.
    if (!options_.tls_ca.empty()) {
      ssl.pem_root_certs = ReadPemFile(options_.tls_ca, "tls_ca", where);
    }
    if (options_.tls_client_cert.empty() != options_.tls_client_key.empty()) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                     where + ": set both tls_client_cert and tls_client_key, or neither");
    }
    if (!options_.tls_client_cert.empty()) {
      ssl.pem_cert_chain = ReadPemFile(options_.tls_client_cert, "tls_client_cert", where);
      ssl.pem_private_key = ReadPemFile(options_.tls_client_key, "tls_client_key", where);
    }
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  // Our retries wait 100 ms, 200 ms, ...: the channel must try to reconnect at least as often,
  // or a server that came up meanwhile would still be reported down.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_TCP_READ_CHUNK_SIZE, kReadChunkBytes);
  args.SetInt(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, kMinReadChunkBytes);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, LookaheadBytes(options_.max_message_bytes));
  // A connection of its own per client, not shared with other clients of the process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ = grpc::CreateCustomChannel(endpoint_, creds, args);
  stub_ = std::make_unique<Stub>(channel_);
}

RpcClient::~RpcClient() = default;

bool RpcClient::Track(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return false;
  live_.insert(ctx);
  return true;
}

void RpcClient::Untrack(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(ctx);
}

bool RpcClient::Backoff(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return closed_; });
}

std::string RpcClient::Incarnation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return incarnation_;
}

void RpcClient::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (grpc::ClientContext* ctx : live_) ctx->TryCancel();
  cv_.notify_all();
}

std::string RpcClient::Challenge() const {
  std::lock_guard<std::mutex> lock(mu_);
  return challenge_;
}

RpcClient::Outcome RpcClient::Attempt(const char* method, int64_t timeout_ms,
                                      const NextRequest& next, const OnReply& on_reply,
                                      const std::string& hello_nonce) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  // Each attempt answers the server's challenge with a counter of its own (auth.h).
  std::optional<CallAuth> auth;
  std::string challenge;  // the one this attempt answers, for checking the answer's proof too
  if (!hello_nonce.empty()) {
    ctx.AddMetadata(kHelloNonceKey, hello_nonce);
  } else if (!options_.token.empty()) {
    auth.emplace();
    auth->client_id = client_id_;
    auth->counter = next_counter_.fetch_add(1) + 1;
    challenge = Challenge();
    auth->proof = CallProof(options_.token, challenge, auth->client_id, auth->counter, method);
    ctx.AddMetadata(kCallAuthKey, FormatCallAuth(*auth));
  }
  const std::string known = Incarnation();
  if (!known.empty()) ctx.AddMetadata(kExpectIncarnationKey, known);
  if (!Track(&ctx)) return Outcome::Of(FLEET_CODE_CANCELLED, "client closed");

  grpc::CompletionQueue cq;
  // Every operation is waited for before the next, so the queue holds at most one event; the
  // context's deadline bounds each wait.
  auto wait = [&cq] {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok;
  };
  void* const tag = &ctx;
  std::optional<RpcError> failure;
  grpc::Status status;
  {
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub_->PrepareCall(&ctx, method, &cq);
    call->StartCall(tag);
    bool alive = wait();
    grpc::ByteBuffer request;
    while (alive && next(&request)) {
      call->Write(request, tag);
      alive = wait();
    }
    if (alive) {
      call->WritesDone(tag);
      alive = wait();
    }
    while (alive) {
      grpc::ByteBuffer reply;
      call->Read(&reply, tag);
      if (!wait()) break;
      try {
        on_reply(reply);
      } catch (const RpcError& e) {
        failure = e;
        ctx.TryCancel();
        break;
      }
    }
    call->Finish(&status, tag);
    wait();
  }
  Untrack(&ctx);
  cq.Shutdown();
  void* ignored_tag = nullptr;
  bool ignored_ok = false;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  if (failure) throw *failure;
  Outcome out;
  out.code = static_cast<int32_t>(status.error_code());
  out.message = status.error_message();
  const auto& trailing = ctx.GetServerTrailingMetadata();
  out.from_handler = trailing.find(kHandlerKey) != trailing.end();
  auto trailer = [&trailing](const char* key) {
    const auto it = trailing.find(key);
    return it == trailing.end() ? std::string() : std::string(it->second.data(),
                                                              it->second.size());
  };
  out.challenge = trailer(kChallengeKey);
  out.hello_proof = trailer(kHelloProofKey);
  // Only the server holding the token can vouch that a call went through; an error needs no
  // proof (whoever can cut the connection can make a call fail anyway).
  if (auth && out.code == FLEET_CODE_OK &&
      !ProofsEqual(trailer(kAnswerProofKey),
                   AnswerProof(options_.token, challenge, auth->client_id, auth->counter,
                               FLEET_CODE_OK))) {
    return Outcome::Of(FLEET_CODE_UNAUTHENTICATED,
                       "the answer does not prove that the server holds this job's token (is "
                       "something else listening at the endpoint?)");
  }
  if (const auto it = trailing.find(kIncarnationKey); it != trailing.end()) {
    // The first server to answer is the one this client keeps to; the server refuses a call
    // that expects another, and a reply from another (the first calls racing a restart) is
    // refused here.
    const std::string seen(it->second.data(), it->second.size());
    std::lock_guard<std::mutex> lock(mu_);
    if (incarnation_.empty()) {
      incarnation_ = seen;
    } else if (seen != incarnation_ && out.code != FLEET_CODE_DATA_LOSS) {
      out = Outcome::Of(FLEET_CODE_DATA_LOSS,
                        "the server restarted since this client's earlier calls (a new process "
                        "at the same endpoint): what the old one held is lost");
    }
  }
  return out;
}

RpcError RpcClient::Failure(const std::string& what, const Outcome& o, int attempts,
                            int64_t timeout_ms) const {
  bool closed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed = closed_;
  }
  if (closed && (o.code == FLEET_CODE_CANCELLED || o.code == FLEET_CODE_ABORTED ||
                 o.code == FLEET_CODE_UNAVAILABLE)) {
    return RpcError(FLEET_CODE_ABORTED, what + ": the client was closed");
  }
  if (o.from_handler) return RpcError(o.code, what + ": " + o.message);
  switch (o.code) {
    case FLEET_CODE_DEADLINE_EXCEEDED: {
      std::string text = what + ": deadline exceeded after " + std::to_string(timeout_ms) + " ms";
      if (channel_->GetState(false) != GRPC_CHANNEL_READY) {
        text += " (no connection to the server: is it up, and do both sides agree on "
                "transport.tls?)";
      }
      return RpcError(o.code, text);
    }
    case FLEET_CODE_UNAVAILABLE: {
      std::string text = what + ": server unavailable after " + std::to_string(attempts) +
                         (attempts == 1 ? " attempt" : " attempts") + " (" + o.message + ")";
      if (o.message.find("onnection refused") != std::string::npos) {
        text += "; nothing listens there: is the server up?";
      } else {
        text += std::string("; if the server is up, a TLS mismatch is a likely cause (this "
                            "client uses ") +
                (options_.tls ? "TLS" : "plaintext") +
                "): check transport.tls and the certificates on both sides";
        if (options_.tls && options_.tls_client_cert.empty()) {
          text += "; a server given tls_ca also requires a client certificate, and this client "
                  "has none (tls_client_cert)";
        }
      }
      return RpcError(o.code, text);
    }
    case FLEET_CODE_DATA_LOSS:
      return RpcError(o.code, what + ": " + o.message +
                                  "; the job cannot go on with it (resume from a checkpoint)");
    case FLEET_CODE_CANCELLED:
      return RpcError(FLEET_CODE_ABORTED,
                      what + ": the call was cancelled (is the server stopping?): " + o.message);
    case FLEET_CODE_RESOURCE_EXHAUSTED:
      return RpcError(o.code, what + ": a message over the size cap (" + o.message +
                                  "); this client sends and accepts messages of up to " +
                                  std::to_string(options_.max_message_bytes) +
                                  " bytes: set transport.max_message_mb to the same value on "
                                  "trainers and servers");
    default:
      return RpcError(o.code, what + ": " + o.message);
  }
}

void RpcClient::Hello(int64_t timeout_ms) {
  std::lock_guard<std::mutex> once(hello_mu_);
  if (!Challenge().empty()) return;
  const std::string what = "rpc hello to " + endpoint_;
  const std::string nonce = RandomHex(16);
  const Outcome o = Call(
      what, kHello, timeout_ms, /*idempotent=*/true,
      [] { return NextRequest([](grpc::ByteBuffer*) { return false; }); },
      [](grpc::ByteBuffer&) {}, nonce);
  const bool hex = o.challenge.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (o.challenge.size() < 32 || o.challenge.size() > 128 || !hex) {
    throw RpcError(FLEET_CODE_UNAUTHENTICATED,
                   what + ": the server sent no usable challenge (is it a Fleet rpc server of "
                          "this version?)");
  }
  if (o.hello_proof.empty()) {
    throw RpcError(FLEET_CODE_UNAUTHENTICATED,
                   what + ": the server does not prove that it holds this job's token: it runs "
                          "without transport.token (or the job secret), or it is not this "
                          "job's server");
  }
  if (!ProofsEqual(o.hello_proof, HelloProof(options_.token, o.challenge, nonce))) {
    throw RpcError(FLEET_CODE_UNAUTHENTICATED,
                   what + ": wrong or missing token: the server holds another token than this "
                          "client (another job's secret, or a different transport.token)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  challenge_ = o.challenge;
}

RpcClient::Outcome RpcClient::Call(const std::string& what, const char* method,
                                   int64_t timeout_ms, bool idempotent, const MakeRequests& make,
                                   const OnReply& on_reply, const std::string& hello_nonce) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  // A client with a token learns the server's challenge before its first call (auth.h).
  if (hello_nonce.empty() && !options_.token.empty()) Hello(timeout_ms);
  int64_t backoff = kFirstBackoffMs;
  for (int attempts = 1;; ++attempts) {
    Outcome o = Attempt(method, timeout_ms, make(), on_reply, hello_nonce);
    if (o.code == FLEET_CODE_OK) return o;
    const bool retry = idempotent && o.code == FLEET_CODE_UNAVAILABLE && !o.from_handler &&
                       attempts <= options_.retries;
    if (!retry) throw Failure(what, o, attempts, timeout_ms);
    if (!Backoff(static_cast<int64_t>(static_cast<double>(backoff) * Jitter()))) {
      throw Failure(what, Outcome::Of(FLEET_CODE_CANCELLED, "client closed"), attempts,
                    timeout_ms);
    }
    backoff *= 2;
  }
}

namespace {

// A SelectedRows send's pad between its values and its rows (at most 7 bytes, always copied).
constexpr uint8_t kZeroPad[8] = {};

// The pieces of the runs `runs` (laid end to end) that cover [offset, offset + n).
std::vector<PayloadPiece> PiecesOf(const std::vector<PayloadPiece>& runs, int64_t offset,
                                   int64_t n) {
  std::vector<PayloadPiece> out;
  int64_t start = 0;  // of the current run
  for (const PayloadPiece& run : runs) {
    const int64_t size = static_cast<int64_t>(run.n);
    const int64_t from = std::max(offset, start);
    const int64_t to = std::min(offset + n, start + size);
    if (from < to) {
      out.push_back({static_cast<const uint8_t*>(run.data) + (from - start),
                     static_cast<size_t>(to - from)});
    }
    start += size;
  }
  return out;
}

// Takes a tensor streamed back (Get, Prefetch) into memory from the host's allocator, which is
// called once: a retry must bring back the same dtype and dims.
class Receiver {
 public:
  // `check` vets the first reply's shape before anything is allocated (may be empty).
  Receiver(std::string what, FleetTensorAllocFn alloc, void* alloc_ctx, FleetTensor* out,
           std::function<void(const WireHeader&)> check)
      : what_(std::move(what)),
        alloc_(alloc),
        alloc_ctx_(alloc_ctx),
        out_(out),
        check_(std::move(check)) {}

  // A new attempt: its replies start from the first byte again.
  void Restart() {
    got_header_ = false;
    received_ = 0;
  }

  void OnReply(grpc::ByteBuffer& reply) {
    Decoded msg;
    DecodeMessage(&reply, &msg, what_);
    if (!got_header_) TakeHeader(msg.header);
    if (msg.header.offset != received_ || received_ + msg.payload_bytes > total_) {
      throw RpcError(FLEET_CODE_DATA_LOSS,
                     what_ + ": chunk of " + std::to_string(msg.payload_bytes) + " bytes at " +
                         std::to_string(msg.header.offset) + " does not fit (received " +
                         std::to_string(received_) + " of " + std::to_string(total_) + ")");
    }
    CopyPayload(msg, static_cast<uint8_t*>(out_->data) + received_);
    received_ += msg.payload_bytes;
  }

  // The call ended well: every byte must have come.
  void Finish() const {
    if (!got_header_ || received_ != total_) {
      throw RpcError(FLEET_CODE_DATA_LOSS, what_ + ": the reply ended after " +
                                               std::to_string(received_) + " of " +
                                               std::to_string(total_) + " bytes");
    }
  }

 private:
  void TakeHeader(const WireHeader& h) {
    if (!h.has_tensor) throw RpcError(FLEET_CODE_DATA_LOSS, what_ + ": reply without a tensor");
    const int64_t bytes = DenseBytes(h.dtype, h.dims);
    if (bytes < 0 || bytes != h.total_bytes) {
      throw RpcError(FLEET_CODE_DATA_LOSS, what_ + ": reply with inconsistent dtype " +
                                               std::to_string(h.dtype) + ", dims " +
                                               DimsText(h.dims) + " and size " +
                                               std::to_string(h.total_bytes));
    }
    if (check_) check_(h);
    if (!allocated_) {
      out_->struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
      FleetStatus* s = alloc_(alloc_ctx_, h.dtype, static_cast<int32_t>(h.dims.size()),
                              h.dims.data(), out_);
      if (s != nullptr) {
        const int32_t code = g_host->status_code(s);
        const char* message = g_host->status_message(s);
        RpcError e(code, what_ + ": " + (message != nullptr ? message : ""));
        g_host->status_free(s);
        throw e;
      }
      std::vector<int64_t> out_dims;
      if (out_->ndim > 0 && out_->dims != nullptr) {
        out_dims.assign(out_->dims, out_->dims + out_->ndim);
      }
      if (DenseBytes(out_->dtype, out_dims) != bytes || (bytes > 0 && out_->data == nullptr) ||
          out_->strides != nullptr || out_->device_type != FLEET_DEVICE_TYPE_HOST) {
        throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                       what_ + ": the destination allocated for " + DtypeName(h.dtype) + " " +
                           DimsText(h.dims) + " is not dense host memory of that size");
      }
      allocated_ = true;
      dtype_ = h.dtype;
      dims_ = h.dims;
      total_ = bytes;
    } else if (h.dtype != dtype_ || h.dims != dims_) {
      throw RpcError(FLEET_CODE_DATA_LOSS, what_ + ": the variable changed between attempts");
    }
    got_header_ = true;
  }

  const std::string what_;
  const FleetTensorAllocFn alloc_;
  void* const alloc_ctx_;
  FleetTensor* const out_;
  const std::function<void(const WireHeader&)> check_;
  bool allocated_ = false;
  int32_t dtype_ = 0;
  std::vector<int64_t> dims_;
  int64_t total_ = 0;
  bool got_header_ = false;
  int64_t received_ = 0;
};

}  // namespace

void RpcClient::CallWithPayload(const std::string& what, const char* method, int64_t timeout_ms,
                                bool idempotent, const WireHeader& head,
                                const std::vector<PayloadPiece>& runs,
                                const std::function<void()>& on_attempt,
                                const OnReply& on_reply) {
  int64_t bytes = 0;
  for (const PayloadPiece& run : runs) bytes += static_cast<int64_t>(run.n);
  // gRPC may hold the payload slices a little past the end of the call; the memory is only
  // valid for this call, so wait until the last slice is released.
  struct Released {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto released = std::make_shared<Released>();
  Pin* pin = Pin::New([released] {
    std::lock_guard<std::mutex> lock(released->mu);
    released->done = true;
    released->cv.notify_all();
  });
  const int64_t chunk = options_.max_message_bytes - kHeaderSlack;
  auto make = [&]() -> NextRequest {
    if (on_attempt) on_attempt();
    return [&, offset = int64_t{0}, first = true](grpc::ByteBuffer* out) mutable {
      if (!first && offset >= bytes) return false;
      const int64_t n = std::min(chunk, bytes - offset);
      WireHeader h;
      if (first) h = head;
      h.offset = offset;
      const std::vector<PayloadPiece> pieces = PiecesOf(runs, offset, n);
      *out = EncodePieces(h, pieces.data(), pieces.size(), pin);
      offset += n;
      first = false;
      return true;
    };
  };
  std::optional<RpcError> error;
  try {
    Call(what, method, timeout_ms, idempotent, make, on_reply);
  } catch (const RpcError& e) {
    error = e;
  }
  Pin::Unref(pin);
  {
    std::unique_lock<std::mutex> lock(released->mu);
    if (!released->cv.wait_for(lock, std::chrono::seconds(60), [&] { return released->done; })) {
      throw RpcError(FLEET_CODE_INTERNAL, what + ": gRPC did not release the payload in 60 s");
    }
  }
  if (error) throw *error;
}

void RpcClient::Send(const char* name, const FleetTensor* t, int64_t timeout_ms) {
  const std::string var = name != nullptr ? name : "";
  const std::string what = "rpc send '" + var + "' to " + endpoint_;
  if (var.empty()) throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": empty name");
  if (!FLEET_HAS_FIELD(t, FleetTensor, device_ordinal) || t->ndim < 0 ||
      (t->ndim > 0 && t->dims == nullptr)) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": bad tensor descriptor");
  }
  WireHeader head;
  head.name = var;
  head.trainer_id = trainer_id_;
  head.dtype = t->dtype;
  head.has_tensor = true;
  head.dims.assign(t->dims, t->dims + t->ndim);
  const int64_t values = DenseBytes(t->dtype, head.dims);
  if (values < 0) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": bad dtype " + std::to_string(t->dtype) +
                                                    " or dims " + DimsText(head.dims));
  }
  if (t->strides != nullptr || t->device_type != FLEET_DEVICE_TYPE_HOST ||
      (values > 0 && t->data == nullptr)) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                   what + ": only dense host tensors can be sent");
  }
  if (static_cast<int64_t>(var.size()) + 16 * static_cast<int64_t>(head.dims.size()) + 256 >
      kHeaderSlack) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": name or shape too long");
  }
  // The payload: the values, and for a SelectedRows tensor the pad and the rows after them
  // (transport_rpc.proto), each referenced where it lies.
  std::vector<PayloadPiece> runs = {{t->data, static_cast<size_t>(values)}};
  head.total_bytes = values;
  if (FLEET_HAS_FIELD(t, FleetTensor, height) && t->height >= 0) {
    SelectedRowsLayout layout;
    if (!LayoutSelectedRows(t->dtype, head.dims, &layout)) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                     what + ": a SelectedRows tensor of dims " + DimsText(head.dims) +
                         " (its rows are dims[0])");
    }
    const int64_t n = head.dims[0];
    if (n > 0 && t->rows == nullptr) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                     what + ": a SelectedRows tensor without its " + std::to_string(n) + " rows");
    }
    // Checked here too, so a bad row is the caller's error, named, not the server's refusal.
    for (int64_t i = 0; i < n; ++i) {
      if (t->rows[i] < -1 || t->rows[i] >= t->height) {
        throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                       what + ": entry " + std::to_string(i) + " lists row " +
                           std::to_string(t->rows[i]) + ", outside [0, " +
                           std::to_string(t->height) + ") and not -1");
      }
    }
    head.selected_rows = true;
    head.height = t->height;
    head.total_bytes = layout.total;
    runs.push_back({kZeroPad, static_cast<size_t>(layout.rows_offset - layout.values)});
    runs.push_back({t->rows, static_cast<size_t>(layout.total - layout.rows_offset)});
  }
  head.client_id = client_id_;
  head.request_id = next_request_id_.fetch_add(1) + 1;
  CallWithPayload(what, kSend, timeout_ms, /*idempotent=*/true, head, runs, nullptr,
                  [](grpc::ByteBuffer&) {});
}

void RpcClient::Get(const char* name, FleetTensorAllocFn alloc, void* alloc_ctx,
                    FleetTensor* out, int64_t timeout_ms) {
  const std::string var = name != nullptr ? name : "";
  const std::string what = "rpc get '" + var + "' from " + endpoint_;
  if (var.empty()) throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": empty name");
  if (alloc == nullptr || out == nullptr) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": alloc or out is NULL");
  }
  WireHeader request;
  request.name = var;
  request.trainer_id = trainer_id_;
  Receiver receiver(what, alloc, alloc_ctx, out, nullptr);
  auto make = [&]() -> NextRequest {
    receiver.Restart();
    return OneRequest(request);
  };
  Call(what, kGet, timeout_ms, /*idempotent=*/true, make,
       [&](grpc::ByteBuffer& reply) { receiver.OnReply(reply); });
  receiver.Finish();
}

void RpcClient::Prefetch(const char* name, const int64_t* ids, int64_t num_ids,
                         FleetTensorAllocFn alloc, void* alloc_ctx, FleetTensor* out,
                         int64_t timeout_ms) {
  const std::string var = name != nullptr ? name : "";
  const std::string what = "rpc prefetch '" + var + "' from " + endpoint_;
  if (var.empty()) throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": empty name");
  if (alloc == nullptr || out == nullptr) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": alloc or out is NULL");
  }
  if (num_ids < 0 || (num_ids > 0 && ids == nullptr) ||
      num_ids > std::numeric_limits<int64_t>::max() / 8) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                   what + ": " + std::to_string(num_ids) + " ids" +
                       (num_ids > 0 && ids == nullptr ? " at NULL" : ""));
  }
  if (static_cast<int64_t>(var.size()) + 256 > kHeaderSlack) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": name too long");
  }
  // The ids travel as a send of an int64 [num_ids] tensor would, chunked alike.
  WireHeader head;
  head.name = var;
  head.trainer_id = trainer_id_;
  head.dtype = FLEET_DTYPE_INT64;
  head.dims = {num_ids};
  head.has_tensor = true;
  head.total_bytes = 8 * num_ids;
  Receiver receiver(what, alloc, alloc_ctx, out, [&](const WireHeader& h) {
    if (h.dims.empty() || h.dims[0] != num_ids) {
      throw RpcError(FLEET_CODE_DATA_LOSS, what + ": the server answered " +
                                               std::to_string(num_ids) + " ids with " +
                                               DtypeName(h.dtype) + " " + DimsText(h.dims));
    }
  });
  // A prefetch changes nothing on the server, so it is retried like a get.
  CallWithPayload(what, kPrefetch, timeout_ms, /*idempotent=*/true, head,
                  {{ids, static_cast<size_t>(8 * num_ids)}}, [&] { receiver.Restart(); },
                  [&](grpc::ByteBuffer& reply) { receiver.OnReply(reply); });
  receiver.Finish();
}

void RpcClient::Barrier(int32_t kind, int64_t timeout_ms) {
  const char* kind_name = kind == FLEET_BARRIER_BATCH   ? "batch"
                          : kind == FLEET_BARRIER_FETCH ? "fetch"
                                                        : "unknown";
  const std::string what = std::string("rpc barrier (") + kind_name + ") at " + endpoint_;
  if (kind != FLEET_BARRIER_BATCH && kind != FLEET_BARRIER_FETCH) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, what + ": unknown kind " + std::to_string(kind));
  }
  WireHeader request;
  request.trainer_id = trainer_id_;
  request.barrier_kind = kind;
  Call(what, kBarrier, timeout_ms, /*idempotent=*/false, [&] { return OneRequest(request); },
       [](grpc::ByteBuffer&) {});
}

void RpcClient::Complete(int64_t timeout_ms) {
  WireHeader request;
  request.trainer_id = trainer_id_;
  Call("rpc complete at " + endpoint_, kComplete, timeout_ms, /*idempotent=*/false,
       [&] { return OneRequest(request); }, [](grpc::ByteBuffer&) {});
}

void RpcClient::Abort(const char* reason, int64_t timeout_ms) {
  WireHeader request;
  request.trainer_id = trainer_id_;
  request.reason = reason != nullptr ? reason : "";
  if (request.reason.size() > FLEET_TRANSPORT_MAX_REASON) {
    request.reason.resize(FLEET_TRANSPORT_MAX_REASON);
  }
  Call("rpc abort at " + endpoint_, kAbort, timeout_ms, /*idempotent=*/false,
       [&] { return OneRequest(request); }, [](grpc::ByteBuffer&) {});
}

}  // namespace fleet_rpc
