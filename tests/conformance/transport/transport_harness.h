// Harness of the transport conformance suite: loads the transport under test through the
// host's PluginRegistry and drives it with the host's wrapper (TransportServer and
// TransportClient) against a recording TransportHandler.
//
// The transport is named by FLEET_CONFORMANCE_TRANSPORT (default "rpc"); its plugin is found in
// FLEET_PLUGIN_PATH, then in the build's plugin directory (libfleet_transport_NAME.so first,
// else every plugin is loaded and searched).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "fleet/fleet_host.h"
#include "plugin/registry.h"
#include "plugin/transport.h"

namespace fleet::conformance::transport {

// The transport under test, or nullptr with *error set.
const ComponentRecord* Transport(std::string* error);
// The ABI minor the transport's plugin was built against (0 when it cannot be found).
uint32_t TransportAbiMinor();

// Skips a test of an ABI 1.4 contract for a transport built against an older minor.
#define FLEET_REQUIRE_TRANSPORT_ABI_1_4()                                              \
  if (TransportAbiMinor() < 4)                                                         \
  GTEST_SKIP() << "the transport's plugin predates ABI 1.4 (built against 1."          \
               << TransportAbiMinor() << ")"

// Skips a test of an ABI 1.7 contract (SelectedRows sends, client_prefetch) for a transport
// built against an older minor.
#define FLEET_REQUIRE_TRANSPORT_ABI_1_7()                                              \
  if (TransportAbiMinor() < 7)                                                         \
  GTEST_SKIP() << "the transport's plugin predates ABI 1.7 (built against 1."          \
               << TransportAbiMinor() << ")"

// Skips the test (as a failure) when the transport cannot be found.
#define FLEET_REQUIRE_TRANSPORT(rec)                      \
  std::string transport_error_;                           \
  const ComponentRecord* rec = Transport(&transport_error_); \
  ASSERT_NE(rec, nullptr) << transport_error_

int64_t ElapsedMs(std::chrono::steady_clock::time_point start);

size_t DtypeBytes(int32_t dtype);

// A tensor in host memory owned by the test. With height >= 0 it is a SelectedRows tensor
// whose dims[0] entries are listed in `rows` (fleet_abi.h).
struct HostTensor {
  int32_t dtype = FLEET_DTYPE_FLOAT32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  std::vector<int64_t> rows;
  int64_t height = -1;

  // dims' element count times the dtype's size, zero-filled.
  static HostTensor Zeros(int32_t dtype, std::vector<int64_t> dims);
  // Bytes from a seeded generator (independent of the transport), so a reordered, shifted or
  // truncated copy never compares equal.
  static HostTensor Random(int32_t dtype, std::vector<int64_t> dims, uint64_t seed);

  // A descriptor through `height` (rows null for a dense tensor).
  FleetTensor View();
};

// A TensorSink that allocates `*into` with the dtype and dims it is given.
TensorSink SinkInto(HostTensor* into);

// Stores what trainers send, rows and height included; Get returns the last value sent under
// that name (NOT_FOUND otherwise). A send whose descriptor breaks the ABI (a SelectedRows
// tensor without 8-byte aligned rows, a dense one with rows) is refused with INVALID_ARGUMENT
// saying so. Prefetch reads the tables given to ServePrefetch; without any it is the
// TransportHandler default (UNIMPLEMENTED). Barriers and completions are recorded. A barrier
// (or a get, or a prefetch) can be made to block until Release() or its own deadline, to test
// client deadlines.
class RecordingHandler : public TransportHandler {
 public:
  Status OnSend(int32_t trainer_id, std::string_view name, const FleetTensor& tensor) override;
  Status OnGet(int32_t trainer_id, std::string_view name, FleetTensor& out,
               void** token) override;
  void OnGetDone(void* token) override;
  Status OnBarrier(int32_t trainer_id, int32_t kind) override;
  Status OnComplete(int32_t trainer_id) override;
  Status OnSendBegin(int32_t trainer_id, std::string_view name,
                     const FleetTensor& shape) override;
  Status OnAbort(int32_t trainer_id, std::string_view reason) override;
  Status OnPrefetch(int32_t trainer_id, std::string_view name, const int64_t* ids,
                    int64_t num_ids, FleetTensor& out, void** token) override;

  // Serves prefetches of `name` from `table` (dense, its rows are dims[0]); an id outside
  // [0, dims[0]) is NOT_FOUND naming it, and so is a name never served.
  void ServePrefetch(const std::string& name, HostTensor table);

  // Makes OnSendBegin refuse `name` with `status`.
  void RefuseSends(const std::string& name, Status status);

  // Makes barriers, gets and prefetches block (at most `max_block`) until Release().
  void BlockCalls(std::chrono::milliseconds max_block);
  void Release();
  // Makes every OnBarrier answer `status` (counted in barrier_calls()).
  void FailBarriers(Status status);

  // The last value sent under `name`, if any.
  bool Stored(const std::string& name, HostTensor* out) const;
  std::map<std::string, int32_t> senders() const;               // name -> trainer id
  std::vector<std::pair<int32_t, int32_t>> barriers() const;     // (trainer id, kind)
  std::vector<int32_t> completions() const;
  // What OnSendBegin saw, in order: (name, "dtype dims" as ShapeText gives it).
  std::vector<std::pair<std::string, std::string>> send_begins() const;
  // What else OnSendBegin saw, in the same order: (height, whether rows was null).
  std::vector<std::pair<int64_t, bool>> send_begin_rows() const;
  int send_calls() const;  // OnSend calls
  std::vector<std::pair<int32_t, std::string>> aborts() const;  // (trainer id, reason)
  int barrier_calls() const;
  int outstanding_gets() const;  // OnGet or OnPrefetch without OnGetDone yet
  int prefetch_calls() const;    // OnPrefetch calls

 private:
  bool WaitIfBlocked(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, HostTensor> vars_;
  std::map<std::string, int32_t> senders_;
  std::vector<std::pair<int32_t, int32_t>> barriers_;
  std::vector<int32_t> completions_;
  std::vector<std::pair<std::string, std::string>> send_begins_;
  std::vector<std::pair<int64_t, bool>> send_begin_rows_;
  std::map<std::string, HostTensor> prefetch_tables_;
  int prefetch_calls_ = 0;
  std::map<std::string, Status> refused_;
  int send_calls_ = 0;
  std::vector<std::pair<int32_t, std::string>> aborts_;
  std::map<void*, std::shared_ptr<HostTensor>> lent_;  // token -> the copy a get reads
  int barrier_calls_ = 0;
  bool blocking_ = false;
  std::chrono::milliseconds max_block_{0};
  Status barrier_status_;
};

// "float32 [2, 3]": a descriptor's dtype and dims, for comparing what a handler saw.
std::string ShapeText(int32_t dtype, const int64_t* dims, int32_t ndim);

// Options for tests: short deadlines so failures are quick.
TransportOptions TestOptions();

// A server on 127.0.0.1 (port 0 = any free) with its recording handler.
struct Served {
  RecordingHandler handler;
  std::unique_ptr<TransportServer> server;
  std::string endpoint() const { return server->endpoint(); }
};
// Starts one; a failure to start is a test failure (nullptr).
std::unique_ptr<Served> Serve(const TransportOptions& options, int port = 0);
// Connects a client to `endpoint` as `trainer_id` (nullptr and a test failure on error).
std::unique_ptr<TransportClient> Connect(const std::string& endpoint, int32_t trainer_id,
                                         const TransportOptions& options);

// A loopback port nothing listens on (bound once, then closed).
int ClosedPort();

// Certificates made by the openssl CLI in a temporary directory, once per process: a CA, a
// server certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1) and a client certificate.
struct TlsFiles {
  std::filesystem::path dir, ca, server_cert, server_key, client_cert, client_key;
};
// nullptr with *error set when openssl failed.
const TlsFiles* Certificates(std::string* error);

}  // namespace fleet::conformance::transport
