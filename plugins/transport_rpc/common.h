// Shared pieces of the rpc transport: the error type the plugin's internals throw (caught at
// every ABI slot), the parsed options, dtype sizes and the host services the plugin was given.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fleet/fleet_plugin.h"
#include "fleet/fleet_transport.h"

namespace fleet_rpc {

// The host services (set once by the entry point, before any slot can run).
extern const FleetHostApi* g_host;

// An error with a canonical code (FLEET_CODE_*). Thrown inside the plugin only; every slot
// turns it into a FleetStatus.
class RpcError : public std::runtime_error {
 public:
  RpcError(int32_t code, const std::string& message) : std::runtime_error(message), code(code) {}
  int32_t code;
};

FleetStatus* MakeStatus(int32_t code, const std::string& message);

// Bytes reserved in every message for the framing and the header (name, dims, ...). A
// variable's name and shape must fit in it; the payload of one message is at most
// max_message_bytes - kHeaderSlack.
constexpr int64_t kHeaderSlack = 64 * 1024;
// Trailing metadata a server sets when the status came from the host's handler, not from the
// transport, so the client does not mistake a handler's UNAVAILABLE for a server that is down.
constexpr const char* kHandlerKey = "x-fleet-handler";
// Trailing metadata of every answer: the server process's incarnation (random, per process).
constexpr const char* kIncarnationKey = "x-fleet-incarnation";
// Request metadata: the incarnation that answered this client before; a server with another
// one (a restart) refuses the call.
constexpr const char* kExpectIncarnationKey = "x-fleet-expect-incarnation";
// The server's test hook (server.h).
constexpr const char* kLoseRepliesEnv = "FLEET_RPC_LOSE_SEND_REPLIES";

// Socket reads and HTTP/2 flow control, tuned for messages of megabytes (both sides).
constexpr int kReadChunkBytes = 1 << 20;
constexpr int kMinReadChunkBytes = 256 << 10;
inline int LookaheadBytes(int64_t max_message_bytes) {
  return static_cast<int>(std::min<int64_t>(2 * max_message_bytes, 64 << 20));
}

// The options of server_start/client_connect (names as in the host's TransportOptions).
struct Options {
  int64_t timeout_ms = 300000;
  int64_t retries = 3;
  int64_t max_message_bytes = 4 << 20;
  std::string token;
  bool tls = false;
  std::string tls_cert, tls_key, tls_ca, tls_client_cert, tls_client_key;
};

// Parses the FleetAttr options; unknown names and wrong types are INVALID_ARGUMENT naming
// `where`.
Options ParseOptions(size_t n, const FleetAttr* const* attrs, const std::string& where);

// The contents of a PEM file; INVALID_ARGUMENT naming the option and the path when unreadable.
std::string ReadPemFile(const std::string& path, const char* option, const std::string& where);

// Bytes per element of a FLEET_DTYPE_*, or 0 for an unknown dtype.
int64_t DtypeSize(int32_t dtype);
const char* DtypeName(int32_t dtype);

// The byte size of a dense tensor, or -1 when a dim is negative or the size overflows.
int64_t DenseBytes(int32_t dtype, const std::vector<int64_t>& dims);

// Where the parts of a SelectedRows tensor's payload lie (transport_rpc.proto): the values
// (DenseBytes of dtype and dims), zeros up to rows_offset (a multiple of 8), then dims[0] int64
// rows up to total. Both sides compute it, so the pad never travels as a choice.
struct SelectedRowsLayout {
  int64_t values = 0;
  int64_t rows_offset = 0;
  int64_t total = 0;
};
// False when dims are empty (the rows are dims[0]), a dim is negative, the dtype unknown or a
// size overflows int64: hostile dims and heights are refused, never wrapped.
bool LayoutSelectedRows(int32_t dtype, const std::vector<int64_t>& dims,
                        SelectedRowsLayout* out);

std::string DimsText(const std::vector<int64_t>& dims);

// "host:port" split; INVALID_ARGUMENT naming `where` when there is no port or it is not a
// number in [0, 65535]. IPv6 hosts come bracketed ("[::1]:80").
void SplitEndpoint(const std::string& endpoint, const std::string& where, std::string* host,
                   int* port);

}  // namespace fleet_rpc
