// What a parameter server accepts on a Send call (and on a Prefetch, whose ids arrive as a send
// of an int64 tensor), apart from the server itself so the checks can be fuzzed and tested
// without gRPC streams. The server owns the buffering: this class only
// says whether each message may be taken and where its payload belongs.
#pragma once

#include <cstdint>
#include <string>

#include "wire.h"

namespace fleet_rpc {

// One Send call's stream of messages. Use: Begin with the first message's header, then Add
// every message (the first included) in arrival order, then Finish once the stream ended.
// Every failed check throws RpcError with FLEET_CODE_INVALID_ARGUMENT and a message naming the
// call, the variable and the trainer; after a throw the object must not be used again.
//
// The guarantee the server builds on: a message that Add accepted fits in the announced size,
// so writing its payload at the returned offset into a buffer of expected() bytes stays inside
// it, and after Finish exactly expected() bytes were accepted, in order, without gaps.
class SendAssembly {
 public:
  // Checks the first header: a non-empty name, has_tensor, a known dtype and dims whose dense
  // size (DenseBytes) is defined and equals total_bytes. A SelectedRows header (selected_rows)
  // needs a height >= 0 and at least one dim, and total_bytes must be its whole layout
  // (LayoutSelectedRows: values, pad, rows). `call` names the call for messages
  // ("rpc server host:port: Send").
  void Begin(const WireHeader& head, const std::string& call);

  // Checks one message: its offset is where the previous payload ended and its payload does
  // not go past expected(). Returns the offset its payload starts at. Only the first message's
  // header carries the shape; later headers are read for their offset alone.
  int64_t Add(const Decoded& message);

  // Checks that exactly expected() bytes arrived.
  void Finish() const;

  // The call and variable, as the messages name them ("... Send 'w' (trainer 3)").
  const std::string& where() const { return where_; }
  // The variable's size in bytes (total_bytes, checked against dtype and dims).
  int64_t expected() const { return expected_; }
  // Where a SelectedRows tensor's rows start within those bytes (a multiple of 8; the values
  // come first), or -1 for a dense tensor.
  int64_t rows_offset() const { return rows_offset_; }
  // Payload bytes accepted so far.
  int64_t received() const { return received_; }

 private:
  std::string where_;
  std::string shape_;
  int64_t expected_ = -1;
  int64_t rows_offset_ = -1;
  int64_t received_ = 0;
};

}  // namespace fleet_rpc
