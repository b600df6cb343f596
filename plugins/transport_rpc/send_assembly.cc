#include "send_assembly.h"

#include "common.h"

namespace fleet_rpc {

void SendAssembly::Begin(const WireHeader& head, const std::string& call) {
  if (head.name.empty()) throw RpcError(FLEET_CODE_INVALID_ARGUMENT, call + ": empty name");
  where_ = call + " '" + head.name + "' (trainer " + std::to_string(head.trainer_id) + ")";
  if (!head.has_tensor) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where_ + ": the first message has no tensor");
  }
  int64_t expected = -1;
  int64_t rows_offset = -1;
  if (head.selected_rows) {
    if (head.height < 0) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                     where_ + ": SelectedRows of height " + std::to_string(head.height));
    }
    SelectedRowsLayout layout;
    if (!LayoutSelectedRows(head.dtype, head.dims, &layout)) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                     where_ + ": bad dtype " + std::to_string(head.dtype) + " or dims " +
                         DimsText(head.dims) + " for SelectedRows (its rows are dims[0])");
    }
    expected = layout.total;
    rows_offset = layout.rows_offset;
    shape_ = std::string(DtypeName(head.dtype)) + " " + DimsText(head.dims) +
             " rows of height " + std::to_string(head.height) + " (" +
             std::to_string(expected) + " bytes with the rows)";
  } else {
    expected = DenseBytes(head.dtype, head.dims);
    if (expected < 0) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where_ + ": bad dtype " +
                                                      std::to_string(head.dtype) + " or dims " +
                                                      DimsText(head.dims));
    }
    shape_ = std::string(DtypeName(head.dtype)) + " " + DimsText(head.dims) + " (" +
             std::to_string(expected) + " bytes)";
  }
  if (head.total_bytes != expected) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                   where_ + ": header announces " + std::to_string(head.total_bytes) +
                       " bytes but its dtype and dims make " + shape_);
  }
  expected_ = expected;
  rows_offset_ = rows_offset;
  received_ = 0;
}

int64_t SendAssembly::Add(const Decoded& message) {
  if (expected_ < 0) {
    // A server bug, not the peer's: Begin failed or was never called.
    throw RpcError(FLEET_CODE_INTERNAL, "send assembly used before a valid first header");
  }
  const int64_t offset = message.header.offset;
  if (offset != received_) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where_ + ": chunk at offset " +
                                                    std::to_string(offset) + ", expected " +
                                                    std::to_string(received_));
  }
  // Subtracting from the announced size, never adding to what arrived, keeps a hostile size
  // from overflowing the comparison.
  if (message.payload_bytes < 0 || message.payload_bytes > expected_ - received_) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                   where_ + ": more bytes arrived than " + shape_ + " holds");
  }
  received_ += message.payload_bytes;
  return offset;
}

void SendAssembly::Finish() const {
  if (received_ != expected_) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where_ + ": " + shape_ + " but " +
                                                    std::to_string(received_) +
                                                    " bytes arrived");
  }
}

}  // namespace fleet_rpc
