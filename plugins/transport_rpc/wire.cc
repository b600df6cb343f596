#include "wire.h"

#include <cstring>

#include "common.h"
#include "transport_rpc.pb.h"

namespace fleet_rpc {

Pin* Pin::New(std::function<void()> on_release) { return new Pin(std::move(on_release)); }

void Pin::Unref(void* pin) {
  auto* self = static_cast<Pin*>(pin);
  if (self->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (self->on_release_) self->on_release_();
    delete self;
  }
}

grpc::ByteBuffer EncodeMessage(const WireHeader& h, const void* payload, size_t n, Pin* pin) {
  const PayloadPiece piece{payload, n};
  return EncodePieces(h, &piece, 1, pin);
}

grpc::ByteBuffer EncodePieces(const WireHeader& h, const PayloadPiece* pieces, size_t count,
                              Pin* pin) {
  ::fleet::transport_rpc::Header proto;
  proto.set_name(h.name);
  proto.set_trainer_id(h.trainer_id);
  proto.set_dtype(h.dtype);
  for (int64_t d : h.dims) proto.add_dims(d);
  proto.set_total_bytes(h.total_bytes);
  proto.set_barrier_kind(h.barrier_kind);
  proto.set_has_tensor(h.has_tensor);
  proto.set_offset(h.offset);
  proto.set_client_id(h.client_id);
  proto.set_request_id(h.request_id);
  proto.set_reason(h.reason);
  proto.set_selected_rows(h.selected_rows);
  proto.set_height(h.height);
  const std::string header = proto.SerializeAsString();
  auto referenced = [pin](const PayloadPiece& p) {
    return pin != nullptr && p.n >= kZeroCopyMinBytes;
  };
  size_t copied = 0;
  for (size_t i = 0; i < count; ++i) copied += referenced(pieces[i]) ? 0 : pieces[i].n;
  // Copied bytes gather in `run` up to the next referenced piece: one slice per run.
  std::string run;
  run.reserve(4 + header.size() + copied);
  const uint32_t len = static_cast<uint32_t>(header.size());
  const char prefix[4] = {static_cast<char>(len & 0xff), static_cast<char>((len >> 8) & 0xff),
                          static_cast<char>((len >> 16) & 0xff),
                          static_cast<char>((len >> 24) & 0xff)};
  run.append(prefix, 4);
  run.append(header);
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < count; ++i) {
    const PayloadPiece& p = pieces[i];
    if (!referenced(p)) {
      if (p.n > 0) run.append(static_cast<const char*>(p.data), p.n);
      continue;
    }
    if (!run.empty()) slices.emplace_back(run.data(), run.size());
    run.clear();
    pin->Ref();
    // gRPC only reads through this pointer; the const_cast is for the slice API's type.
    slices.emplace_back(const_cast<void*>(p.data), p.n, &Pin::Unref, pin);
  }
  if (!run.empty() || slices.empty()) slices.emplace_back(run.data(), run.size());
  return grpc::ByteBuffer(slices.data(), slices.size());
}

namespace {

// Reads bytes across the slices of a received buffer.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) {}

  bool Read(void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (index_ >= slices_.size()) return false;
      const grpc::Slice& s = slices_[index_];
      const size_t take = std::min(n, s.size() - pos_);
      std::memcpy(out, s.begin() + pos_, take);
      out += take;
      n -= take;
      pos_ += take;
      if (pos_ == s.size()) {
        ++index_;
        pos_ = 0;
      }
    }
    return true;
  }

  // The unread rest, as sub-slices (no copy).
  void Rest(std::vector<grpc::Slice>* out, int64_t* bytes) {
    *bytes = 0;
    for (; index_ < slices_.size(); ++index_, pos_ = 0) {
      const grpc::Slice& s = slices_[index_];
      if (pos_ == s.size()) continue;
      out->push_back(pos_ == 0 ? s : s.sub(pos_, s.size()));
      *bytes += static_cast<int64_t>(s.size() - pos_);
    }
  }

 private:
  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t pos_ = 0;
};

}  // namespace

void DecodeMessage(grpc::ByteBuffer* buffer, Decoded* out, const std::string& where) {
  std::vector<grpc::Slice> slices;
  if (!buffer->Dump(&slices).ok()) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where + ": unreadable message");
  }
  SliceReader reader(slices);
  uint8_t prefix[4];
  if (!reader.Read(prefix, 4)) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where + ": message shorter than its framing");
  }
  const uint32_t len = static_cast<uint32_t>(prefix[0]) | static_cast<uint32_t>(prefix[1]) << 8 |
                       static_cast<uint32_t>(prefix[2]) << 16 |
                       static_cast<uint32_t>(prefix[3]) << 24;
  if (len > static_cast<uint32_t>(kHeaderSlack)) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT,
                   where + ": message header of " + std::to_string(len) + " bytes (the limit is " +
                       std::to_string(kHeaderSlack) + ")");
  }
  std::string header(len, '\0');
  if (!reader.Read(header.data(), len)) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where + ": message shorter than its header");
  }
  ::fleet::transport_rpc::Header proto;
  if (!proto.ParseFromString(header)) {
    throw RpcError(FLEET_CODE_INVALID_ARGUMENT, where + ": unparsable message header");
  }
  WireHeader& h = out->header;
  h.name = proto.name();
  h.trainer_id = proto.trainer_id();
  h.dtype = proto.dtype();
  h.dims.assign(proto.dims().begin(), proto.dims().end());
  h.total_bytes = proto.total_bytes();
  h.barrier_kind = proto.barrier_kind();
  h.has_tensor = proto.has_tensor();
  h.offset = proto.offset();
  h.client_id = proto.client_id();
  h.request_id = proto.request_id();
  h.reason = proto.reason();
  h.selected_rows = proto.selected_rows();
  h.height = proto.height();
  out->payload.clear();
  reader.Rest(&out->payload, &out->payload_bytes);
}

void CopyPayload(const Decoded& message, uint8_t* dst) {
  for (const grpc::Slice& s : message.payload) {
    std::memcpy(dst, s.begin(), s.size());
    dst += s.size();
  }
}

}  // namespace fleet_rpc
