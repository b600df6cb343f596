#include "plugin/transport.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "plugin/host_api.h"
#include "support/secret.h"
#include "support/logging.h"

namespace fleet {
namespace {

// TransportOptions as the FleetAttrs of server_start/client_connect. The attrs point into this
// object, which must outlive the call they are passed to.
class OptionAttrs {
 public:
  explicit OptionAttrs(const TransportOptions& o) {
    AddInt("timeout_ms", o.timeout.count());
    AddInt("retries", o.retries);
    AddInt("max_message_bytes", o.max_message_bytes);
    if (!o.token.empty()) AddString("token", o.token);
    FleetAttr& tls = Add("tls", FLEET_ATTR_BOOL);
    tls.i = o.tls ? 1 : 0;
    const std::pair<const char*, const std::string*> paths[] = {
        {"tls_cert", &o.tls_cert},
        {"tls_key", &o.tls_key},
        {"tls_ca", &o.tls_ca},
        {"tls_client_cert", &o.tls_client_cert},
        {"tls_client_key", &o.tls_client_key}};
    for (const auto& [name, value] : paths) {
      if (!value->empty()) AddString(name, *value);
    }
    for (const FleetAttr& a : attrs_) pointers_.push_back(&a);
  }
  OptionAttrs(const OptionAttrs&) = delete;
  OptionAttrs& operator=(const OptionAttrs&) = delete;

  size_t size() const { return pointers_.size(); }
  const FleetAttr* const* data() const { return pointers_.data(); }

 private:
  FleetAttr& Add(const char* name, int32_t type) {
    FleetAttr& a = attrs_.emplace_back();
    a.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
    a.name = name;
    a.type = type;
    return a;
  }
  void AddInt(const char* name, int64_t value) { Add(name, FLEET_ATTR_INT64).i = value; }
  void AddString(const char* name, const std::string& value) {
    const std::string& kept = strings_.emplace_back(value);
    FleetAttr& a = Add(name, FLEET_ATTR_STRING);
    a.s = kept.c_str();
    a.s_len = kept.size();
  }

  // Deques: elements never move, so the pointers taken above stay valid.
  std::deque<std::string> strings_;
  std::deque<FleetAttr> attrs_;
  std::vector<const FleetAttr*> pointers_;
};

std::string Where(const ComponentRecord& component) {
  return "transport '" + component.name + "'";
}

Status CheckComponent(const ComponentRecord& component) {
  if (component.kind != FLEET_COMPONENT_TRANSPORT) {
    return InvalidArgument("component '" + component.name + "' is a " +
                           ComponentKindName(component.kind) + ", not a transport");
  }
  return OkStatus();
}

// A delivered tensor as the handler reads it: every member through `height` present, so that
// a handler need not test struct_size. A transport whose descriptor ends before `height` (one
// built against 1.5 or older) delivers a dense tensor. False (with *error set) when the
// descriptor lacks the 1.0 members or is inconsistent; `call` names the handler slot.
bool Delivered(const FleetTensor* t, const char* call, FleetTensor* out, Status* error) {
  if (!FLEET_HAS_FIELD(t, FleetTensor, device_ordinal) || t->ndim < 0 ||
      (t->ndim > 0 && t->dims == nullptr)) {
    *error = InvalidArgument(std::string("transport ") + call + ": bad tensor descriptor");
    return false;
  }
  *out = FleetTensor{};
  out->struct_size = FLEET_STRUCT_SIZE(FleetTensor, height);
  out->data = t->data;
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  out->dims = t->dims;
  out->strides = t->strides;
  out->device_type = t->device_type;
  out->device_ordinal = t->device_ordinal;
  if (FLEET_HAS_FIELD(t, FleetTensor, lod_count)) {
    out->lod = t->lod;
    out->lod_count = t->lod_count;
  }
  out->height = -1;
  if (FLEET_HAS_FIELD(t, FleetTensor, height) && t->height >= 0) {
    if (t->ndim < 1) {
      *error = InvalidArgument(std::string("transport ") + call +
                               ": a SelectedRows tensor without dims (its rows are dims[0])");
      return false;
    }
    out->rows = t->rows;
    out->height = t->height;
  }
  return true;
}

// The handler trampolines: ctx is the TransportHandler.
FleetStatus* HandleSend(void* ctx, int32_t trainer_id, const char* name,
                        const FleetTensor* tensor) {
  if (name == nullptr || tensor == nullptr) {
    return MakeFleetStatus(InvalidArgument("transport on_send: name or tensor is NULL"));
  }
  FleetTensor delivered;
  Status error;
  if (!Delivered(tensor, "on_send", &delivered, &error)) return MakeFleetStatus(error);
  if (delivered.height >= 0 && delivered.dims[0] > 0 && delivered.rows == nullptr) {
    return MakeFleetStatus(InvalidArgument(
        "transport on_send: SelectedRows tensor '" + std::string(name) + "' without its rows"));
  }
  return MakeFleetStatus(
      static_cast<TransportHandler*>(ctx)->OnSend(trainer_id, name, delivered));
}

FleetStatus* HandleGet(void* ctx, int32_t trainer_id, const char* name, FleetTensor* out,
                       void** token) {
  if (name == nullptr || out == nullptr || token == nullptr) {
    return MakeFleetStatus(InvalidArgument("transport on_get: name, out or token is NULL"));
  }
  return MakeFleetStatus(
      static_cast<TransportHandler*>(ctx)->OnGet(trainer_id, name, *out, token));
}

void HandleGetDone(void* ctx, void* token) {
  static_cast<TransportHandler*>(ctx)->OnGetDone(token);
}

FleetStatus* HandleBarrier(void* ctx, int32_t trainer_id, int32_t kind) {
  return MakeFleetStatus(static_cast<TransportHandler*>(ctx)->OnBarrier(trainer_id, kind));
}

FleetStatus* HandleComplete(void* ctx, int32_t trainer_id) {
  return MakeFleetStatus(static_cast<TransportHandler*>(ctx)->OnComplete(trainer_id));
}

FleetStatus* HandleSendBegin(void* ctx, int32_t trainer_id, const char* name,
                             const FleetTensor* shape) {
  if (name == nullptr || shape == nullptr) {
    return MakeFleetStatus(InvalidArgument("transport on_send_begin: name or shape is NULL"));
  }
  FleetTensor delivered;
  Status error;
  if (!Delivered(shape, "on_send_begin", &delivered, &error)) return MakeFleetStatus(error);
  // Nothing has arrived yet: the contract's data and rows are NULL here, whatever was passed.
  delivered.data = nullptr;
  delivered.rows = nullptr;
  return MakeFleetStatus(
      static_cast<TransportHandler*>(ctx)->OnSendBegin(trainer_id, name, delivered));
}

FleetStatus* HandleAbort(void* ctx, int32_t trainer_id, const char* reason) {
  // The reason is the peer's text: bounded here whatever the transport delivered.
  std::string_view text = reason != nullptr ? reason : "";
  text = text.substr(0, std::min<size_t>(text.size(), FLEET_TRANSPORT_MAX_REASON));
  return MakeFleetStatus(static_cast<TransportHandler*>(ctx)->OnAbort(trainer_id, text));
}

FleetStatus* HandlePrefetch(void* ctx, int32_t trainer_id, const char* name, const int64_t* ids,
                           int64_t num_ids, FleetTensor* out, void** token) {
  if (name == nullptr || out == nullptr || token == nullptr || num_ids < 0 ||
      (num_ids > 0 && ids == nullptr)) {
    return MakeFleetStatus(
        InvalidArgument("transport on_prefetch: name, ids, out or token is bad"));
  }
  return MakeFleetStatus(static_cast<TransportHandler*>(ctx)->OnPrefetch(
      trainer_id, name, ids, num_ids, *out, token));
}

// client_get's allocator: asks the caller's TensorSink (alloc_ctx) for the destination.
FleetStatus* SinkAlloc(void* alloc_ctx, int32_t dtype, int32_t ndim, const int64_t* dims,
                       FleetTensor* out) {
  if (ndim < 0 || (ndim > 0 && dims == nullptr) || out == nullptr) {
    return MakeFleetStatus(InvalidArgument("transport alloc: bad shape or out is NULL"));
  }
  const auto& sink = *static_cast<const TensorSink*>(alloc_ctx);
  StatusOr<FleetTensor> tensor = sink(dtype, std::vector<int64_t>(dims, dims + ndim));
  if (!tensor.ok()) return MakeFleetStatus(tensor.status());
  *out = *tensor;
  return nullptr;
}

}  // namespace

bool TransportCarriesSelectedRows(const ComponentRecord& transport) {
  return transport.kind == FLEET_COMPONENT_TRANSPORT && transport.abi_minor >= 7;
}

Status TransportHandler::OnPrefetch(int32_t, std::string_view name, const int64_t*, int64_t,
                                    FleetTensor&, void**) {
  return Unimplemented("this parameter server serves no prefetch (asked for rows of '" +
                       std::string(name) + "')");
}

std::vector<std::string> TransportOptionNames(const TransportOptions& options) {
  const OptionAttrs attrs(options);
  std::vector<std::string> names;
  for (size_t i = 0; i < attrs.size(); ++i) names.emplace_back(attrs.data()[i]->name);
  return names;
}

TransportOptions TransportOptionsFrom(const Config& config, std::string_view job_secret) {
  const Config::Rpc& rpc = config.rpc;
  TransportOptions o;
  o.timeout = std::chrono::milliseconds(std::llround(rpc.timeout_s * 1000.0));
  o.retries = rpc.retries;
  o.max_message_bytes = std::llround(rpc.max_message_mb * 1024.0 * 1024.0);
  o.token = !rpc.token.empty() ? rpc.token : TransportTokenFromSecret(job_secret);
  o.tls = rpc.tls;
  o.tls_cert = rpc.tls_cert.string();
  o.tls_key = rpc.tls_key.string();
  o.tls_ca = rpc.tls_ca.string();
  o.tls_client_cert = rpc.tls_client_cert.string();
  o.tls_client_key = rpc.tls_client_key.string();
  return o;
}

TransportServer::TransportServer(const ComponentRecord& component, TransportHandler* handler)
    : component_(component),
      table_(component.table<FleetTransportVTable>()),
      handler_(handler) {
  handlers_.struct_size = FLEET_STRUCT_SIZE(FleetTransportHandlers, on_prefetch);
  handlers_.ctx = handler;
  handlers_.on_send = HandleSend;
  handlers_.on_get = HandleGet;
  handlers_.on_get_done = HandleGetDone;
  handlers_.on_barrier = HandleBarrier;
  handlers_.on_complete = HandleComplete;
  handlers_.on_send_begin = HandleSendBegin;
  handlers_.on_abort = HandleAbort;
  handlers_.on_prefetch = HandlePrefetch;
}

StatusOr<std::unique_ptr<TransportServer>> TransportServer::Start(
    const ComponentRecord& component, const std::string& endpoint, TransportHandler* handler,
    const TransportOptions& options) {
  FLEET_RETURN_IF_ERROR(CheckComponent(component));
  if (handler == nullptr) return InvalidArgument(Where(component) + ": no handler");
  std::unique_ptr<TransportServer> server(new TransportServer(component, handler));
  const OptionAttrs attrs(options);
  FleetTransportServerConfig config{};
  config.struct_size = FLEET_STRUCT_SIZE(FleetTransportServerConfig, options);
  config.endpoint = endpoint.c_str();
  config.handlers = &server->handlers_;
  config.num_options = attrs.size();
  config.options = attrs.data();
  FLEET_RETURN_IF_ERROR(TakeStatus(
      server->table_->server_start(component.ctx, &config, &server->server_), Where(component)));
  if (server->server_ == nullptr) {
    return Internal(Where(component) + ": server_start returned no server");
  }
  const char* bound = server->table_->server_endpoint(component.ctx, server->server_);
  server->endpoint_ = bound != nullptr && *bound != '\0' ? bound : endpoint;
  return server;
}

void TransportServer::Stop() {
  if (server_ == nullptr || stopped_.exchange(true)) return;
  table_->server_stop(component_.ctx, server_);
}

TransportServer::~TransportServer() {
  if (server_ == nullptr) return;
  Stop();
  Status status = TakeStatus(table_->server_destroy(component_.ctx, server_), Where(component_));
  if (!status.ok()) Log().warn("{}", status.ToString());
}

TransportClient::TransportClient(const ComponentRecord& component, std::string endpoint,
                                 TransportOptions options)
    : component_(component),
      table_(component.table<FleetTransportVTable>()),
      endpoint_(std::move(endpoint)),
      options_(std::move(options)) {}

StatusOr<std::unique_ptr<TransportClient>> TransportClient::Connect(
    const ComponentRecord& component, const std::string& endpoint, int32_t trainer_id,
    const TransportOptions& options) {
  FLEET_RETURN_IF_ERROR(CheckComponent(component));
  std::unique_ptr<TransportClient> client(new TransportClient(component, endpoint, options));
  const OptionAttrs attrs(options);
  FleetTransportClientConfig config{};
  config.struct_size = FLEET_STRUCT_SIZE(FleetTransportClientConfig, options);
  config.endpoint = endpoint.c_str();
  config.trainer_id = trainer_id;
  config.connect_timeout_ms = options.timeout.count();
  config.num_options = attrs.size();
  config.options = attrs.data();
  FLEET_RETURN_IF_ERROR(TakeStatus(
      client->table_->client_connect(component.ctx, &config, &client->client_),
      Where(component)));
  if (client->client_ == nullptr) {
    return Internal(Where(component) + ": client_connect returned no client");
  }
  return client;
}

TransportClient::~TransportClient() { Close(); }

namespace {
Status Closed(const ComponentRecord& component, const std::string& endpoint, const char* call) {
  return Aborted(Where(component) + ": " + call + " to " + endpoint + ": the client is closed");
}
}  // namespace

Status TransportClient::Send(std::string_view name, const FleetTensor& tensor) {
  if (closed_) return Closed(component_, endpoint_, "send");
  const std::string n(name);
  // FLEET_HAS_FIELD without its NULL test: a reference is never null (and GCC says so).
  if (tensor.struct_size >= FLEET_STRUCT_SIZE(FleetTensor, height) && tensor.height >= 0) {
    // An older transport would drop the rows and deliver the values as a dense variable.
    if (!TransportCarriesSelectedRows(component_)) {
      return FailedPrecondition(Where(component_) + ": send '" + n + "' to " + endpoint_ +
                                ": a SelectedRows tensor needs a transport of ABI 1.7 or "
                                "later (its plugin '" + component_.plugin + "' declares 1." +
                                std::to_string(component_.abi_minor) + ")");
    }
    if (tensor.ndim < 1 || tensor.dims == nullptr ||
        (tensor.dims[0] > 0 && tensor.rows == nullptr)) {
      return InvalidArgument(Where(component_) + ": send '" + n + "' to " + endpoint_ +
                             ": a SelectedRows tensor needs dims and rows for dims[0]");
    }
  }
  return TakeStatus(table_->client_send(component_.ctx, client_, n.c_str(), &tensor,
                                        options_.timeout.count()),
                    Where(component_));
}

Status TransportClient::Get(std::string_view name, const TensorSink& sink) {
  if (closed_) return Closed(component_, endpoint_, "get");
  const std::string n(name);
  FleetTensor out{};
  out.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
  return TakeStatus(
      table_->client_get(component_.ctx, client_, n.c_str(), SinkAlloc,
                         const_cast<TensorSink*>(&sink), &out, options_.timeout.count()),
      Where(component_));
}

Status TransportClient::Prefetch(std::string_view name, const int64_t* ids, int64_t num_ids,
                                 const TensorSink& sink) {
  if (closed_) return Closed(component_, endpoint_, "prefetch");
  const std::string n(name);
  if (!FLEET_CAN_CALL(table_, FleetTransportVTable, client_prefetch)) {
    return Unimplemented(Where(component_) + " cannot prefetch rows of '" + n + "' from " +
                         endpoint_ + " (it predates ABI 1.7's client_prefetch)");
  }
  if (num_ids < 0 || (num_ids > 0 && ids == nullptr)) {
    return InvalidArgument(Where(component_) + ": prefetch '" + n + "' from " + endpoint_ +
                           ": " + std::to_string(num_ids) + " ids" +
                           (num_ids > 0 ? " at NULL" : ""));
  }
  FleetTensor out{};
  out.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
  return TakeStatus(table_->client_prefetch(component_.ctx, client_, n.c_str(), ids, num_ids,
                                            SinkAlloc, const_cast<TensorSink*>(&sink), &out,
                                            options_.timeout.count()),
                    Where(component_));
}

Status TransportClient::Barrier(int32_t kind) {
  if (closed_) return Closed(component_, endpoint_, "barrier");
  return TakeStatus(
      table_->client_barrier(component_.ctx, client_, kind, options_.timeout.count()),
      Where(component_));
}

Status TransportClient::Complete() {
  if (closed_) return Closed(component_, endpoint_, "complete");
  return TakeStatus(table_->client_complete(component_.ctx, client_, options_.timeout.count()),
                    Where(component_));
}

Status TransportClient::Abort(std::string_view reason, std::chrono::milliseconds timeout) {
  if (closed_) return Closed(component_, endpoint_, "abort");
  if (!FLEET_CAN_CALL(table_, FleetTransportVTable, client_abort)) {
    return Unimplemented(Where(component_) + " cannot tell a server that a trainer failed "
                         "(it predates ABI 1.4's client_abort)");
  }
  const std::string text(reason.substr(0, std::min<size_t>(reason.size(),
                                                           FLEET_TRANSPORT_MAX_REASON)));
  return TakeStatus(
      table_->client_abort(component_.ctx, client_, text.c_str(), timeout.count()),
      Where(component_));
}

void TransportClient::Close() {
  if (client_ == nullptr || closed_.exchange(true)) return;
  table_->client_close(component_.ctx, client_);
}

}  // namespace fleet
