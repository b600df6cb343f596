// The rpc transport's messages: a length-prefixed protobuf header followed by raw payload bytes
// (transport_rpc.proto), built and taken apart as gRPC ByteBuffers so that large payloads are
// never copied on the sending side (the slices point into the tensor's memory).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

namespace fleet_rpc {

// The header fields (see transport_rpc.proto), kept out of the protobuf type so only wire.cc
// depends on the generated code.
struct WireHeader {
  std::string name;
  int32_t trainer_id = 0;
  int32_t dtype = 0;
  std::vector<int64_t> dims;
  int64_t total_bytes = 0;
  int32_t barrier_kind = 0;
  bool has_tensor = false;
  int64_t offset = 0;
  uint64_t client_id = 0;   // send: with request_id, names one client_send across retries
  uint64_t request_id = 0;
  std::string reason;       // abort
  bool selected_rows = false;  // send: a SelectedRows tensor (SelectedRowsLayout)
  int64_t height = 0;          // its height, when selected_rows
};

// Keeps memory that gRPC slices refer to alive: one reference for the owner plus one per slice.
// `on_release` runs once, on whichever thread drops the last reference (the owner's Unref or
// gRPC releasing the last slice), then the Pin deletes itself.
class Pin {
 public:
  static Pin* New(std::function<void()> on_release);
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  static void Unref(void* pin);

 private:
  explicit Pin(std::function<void()> on_release) : on_release_(std::move(on_release)) {}
  std::atomic<int64_t> refs_{1};
  std::function<void()> on_release_;
};

// Payloads below this size are copied into the message (a slice reference costs more).
constexpr size_t kZeroCopyMinBytes = 32 * 1024;

// One message: header, then `n` payload bytes at `payload`. With a pin and a large payload the
// slice references the memory (pin->Ref per slice); otherwise the bytes are copied.
grpc::ByteBuffer EncodeMessage(const WireHeader& header, const void* payload, size_t n, Pin* pin);

// A run of payload bytes in memory.
struct PayloadPiece {
  const void* data = nullptr;
  size_t n = 0;
};
// One message whose payload is the pieces one after another (a SelectedRows send's values,
// pad and rows): each large piece is referenced as above, the small ones are copied.
grpc::ByteBuffer EncodePieces(const WireHeader& header, const PayloadPiece* pieces, size_t count,
                              Pin* pin);

// A received message: its header and the payload as slices of the received buffer.
struct Decoded {
  WireHeader header;
  std::vector<grpc::Slice> payload;
  int64_t payload_bytes = 0;
};

// Takes a received message apart. INVALID_ARGUMENT (RpcError) naming `where` when it is
// malformed (short, bad header length, unparsable header).
void DecodeMessage(grpc::ByteBuffer* buffer, Decoded* out, const std::string& where);

// Copies the payload to dst (payload_bytes bytes).
void CopyPayload(const Decoded& message, uint8_t* dst);

}  // namespace fleet_rpc
