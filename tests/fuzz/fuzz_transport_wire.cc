// The gRPC transport's wire decoding (plugins/transport_rpc/wire.cc) and a parameter server's
// acceptance of a Send stream (send_assembly.cc), fed as the server would meet them: each
// message arrives as a gRPC ByteBuffer that may be cut into several slices anywhere.
//
// Input: a sequence of records, each one message of one Send call:
//   u8 cuts (low 3 bits: how many cut points follow) | cuts x u16 LE cut position |
//   u32 LE message length (clamped to what is left) | the message bytes
// A message is fixed32 LE header length | protobuf Header (transport_rpc.proto) | payload;
// make_transport_wire_seeds.py writes the committed seeds in this form.
//
// Besides the sanitizers, the harness checks what the server relies on: a decoded message
// accounts for every byte it was given, re-encoding it gives back the same message, and the
// bytes SendAssembly accepts fill the variable's buffer exactly, in order. For a SelectedRows
// header (ABI 1.7) the accepted size must be the layout the server reads the rows from (values,
// pad to 8, dims[0] rows), and the rows are read where the server reads them.
//
// The whole input is also given to the parser of a call's credentials (auth.h), which must take
// only the canonical form: whatever it accepts formats back to the same bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "auth.h"
#include "common.h"
#include "send_assembly.h"
#include "wire.h"

namespace fleet_rpc {
// options.cc refers to the plugin's host services (for MakeStatus); no code path fuzzed here
// calls them.
const FleetHostApi* g_host = nullptr;
}  // namespace fleet_rpc

namespace {

using fleet_rpc::Decoded;
using fleet_rpc::RpcError;
using fleet_rpc::WireHeader;

// A violated expectation is a finding: abort so libFuzzer keeps the input.
#define FUZZ_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "fuzz_transport_wire: check failed: %s\n", #cond);  \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

// Larger variables are checked by their offsets alone; a real buffer for each would spend the
// fuzzer's memory on allocation rather than on finding bugs.
constexpr int64_t kMaxBufferBytes = int64_t{1} << 20;
constexpr int kMaxMessages = 64;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  // Missing bytes read as zero, so every input means something.
  uint32_t Take(int bytes) {
    uint32_t v = 0;
    for (int i = 0; i < bytes && p_ < end_; ++i) v |= static_cast<uint32_t>(*p_++) << (8 * i);
    return v;
  }
  const uint8_t* Skip(size_t n) {
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// The message bytes as a ByteBuffer of slices cut at `cuts` (empty slices included: gRPC may
// hand those over too).
grpc::ByteBuffer Sliced(const uint8_t* bytes, size_t n, std::vector<size_t> cuts) {
  for (size_t& c : cuts) c %= n + 1;
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(n);
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (size_t c : cuts) {
    slices.emplace_back(bytes + from, c - from);
    from = c;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string PayloadOf(const Decoded& m) {
  std::string out(static_cast<size_t>(m.payload_bytes), '\0');
  if (!out.empty()) fleet_rpc::CopyPayload(m, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

// The header's encoding alone, which covers every field the wire format has, including any
// added after this harness was written.
std::string Encoded(const WireHeader& h) {
  grpc::ByteBuffer buffer = fleet_rpc::EncodeMessage(h, nullptr, 0, nullptr);
  std::vector<grpc::Slice> slices;
  FUZZ_CHECK(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

bool SameHeader(const WireHeader& a, const WireHeader& b) {
  return a.name == b.name && a.trainer_id == b.trainer_id && a.dtype == b.dtype &&
         a.dims == b.dims && a.total_bytes == b.total_bytes && a.barrier_kind == b.barrier_kind &&
         a.has_tensor == b.has_tensor && a.offset == b.offset &&
         a.selected_rows == b.selected_rows && a.height == b.height && Encoded(a) == Encoded(b);
}

// Encoding what was decoded must decode to the same message, through both of EncodeMessage's
// paths (copied and, for a large payload with a pin, referenced).
void RoundTrip(const Decoded& m, const std::string& payload, uint32_t header_len) {
  bool released = false;
  fleet_rpc::Pin* pin = payload.size() >= fleet_rpc::kZeroCopyMinBytes
                            ? fleet_rpc::Pin::New([&released] { released = true; })
                            : nullptr;
  {
    grpc::ByteBuffer again =
        fleet_rpc::EncodeMessage(m.header, payload.data(), payload.size(), pin);
    Decoded back;
    try {
      fleet_rpc::DecodeMessage(&again, &back, "fuzz round trip");
      FUZZ_CHECK(SameHeader(m.header, back.header));
      FUZZ_CHECK(PayloadOf(back) == payload);
    } catch (const RpcError&) {
      // The canonical encoding of a negative int32 takes 10 bytes where the input may have
      // used 5, so a header close to the limit can grow past it; nothing else may fail.
      FUZZ_CHECK(header_len + 64 > static_cast<uint32_t>(fleet_rpc::kHeaderSlack));
    }
  }
  if (pin != nullptr) {
    fleet_rpc::Pin::Unref(pin);
    // Every slice and the owner's reference are gone: the release must have run.
    FUZZ_CHECK(released);
  }
}

// What Begin accepted must be the size the server assembles: the dense bytes, or for a
// SelectedRows header the values padded to 8 and then dims[0] rows, without overflow.
void CheckLayout(const WireHeader& h, const fleet_rpc::SendAssembly& send) {
  const int64_t values = fleet_rpc::DenseBytes(h.dtype, h.dims);
  FUZZ_CHECK(values >= 0);
  if (!h.selected_rows) {
    FUZZ_CHECK(send.rows_offset() == -1);
    FUZZ_CHECK(send.expected() == values);
    return;
  }
  FUZZ_CHECK(!h.dims.empty() && h.height >= 0);
  const int64_t rows_offset = send.rows_offset();
  FUZZ_CHECK(rows_offset % 8 == 0 && rows_offset >= values && rows_offset - values < 8);
  // Computed back from the accepted size, so an overflow on either side shows.
  FUZZ_CHECK((send.expected() - rows_offset) % 8 == 0);
  FUZZ_CHECK((send.expected() - rows_offset) / 8 == h.dims[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto auth = fleet_rpc::ParseCallAuth(text)) {
    FUZZ_CHECK(fleet_rpc::FormatCallAuth(*auth) == text);
  }
  Input in(data, size);
  fleet_rpc::SendAssembly send;
  bool begun = false;
  WireHeader head;  // the first message's, once Begin accepted it
  std::unique_ptr<uint8_t[]> variable;  // the server's buffer, when small enough to have one
  std::string accepted;                 // every accepted payload, in order
  for (int i = 0; i < kMaxMessages && !in.empty(); ++i) {
    std::vector<size_t> cuts(in.Take(1) & 7);
    for (size_t& c : cuts) c = in.Take(2);
    const size_t n = std::min<size_t>(in.Take(4), in.left());
    const uint8_t* bytes = in.Skip(n);

    grpc::ByteBuffer buffer = Sliced(bytes, n, std::move(cuts));
    Decoded msg;
    try {
      fleet_rpc::DecodeMessage(&buffer, &msg, "fuzz");
    } catch (const RpcError& e) {
      FUZZ_CHECK(e.code == FLEET_CODE_INVALID_ARGUMENT);
      return 0;  // the server ends the call on a malformed message
    }
    // Accepted: the framing, a header within the limit and the rest as payload.
    FUZZ_CHECK(n >= 4);
    const uint32_t header_len = static_cast<uint32_t>(bytes[0]) |
                                static_cast<uint32_t>(bytes[1]) << 8 |
                                static_cast<uint32_t>(bytes[2]) << 16 |
                                static_cast<uint32_t>(bytes[3]) << 24;
    FUZZ_CHECK(header_len <= static_cast<uint32_t>(fleet_rpc::kHeaderSlack));
    FUZZ_CHECK(msg.payload_bytes == static_cast<int64_t>(n - 4 - header_len));
    int64_t in_slices = 0;
    for (const grpc::Slice& s : msg.payload) in_slices += static_cast<int64_t>(s.size());
    FUZZ_CHECK(in_slices == msg.payload_bytes);
    const std::string payload = PayloadOf(msg);
    FUZZ_CHECK(payload.size() == 0 ||
               std::memcmp(payload.data(), bytes + 4 + header_len, payload.size()) == 0);
    RoundTrip(msg, payload, header_len);

    try {
      if (!begun) {
        send.Begin(msg.header, "fuzz Send");
        begun = true;
        FUZZ_CHECK(send.expected() >= 0);
        CheckLayout(msg.header, send);
        head = msg.header;
        if (send.expected() <= kMaxBufferBytes) {
          variable.reset(new uint8_t[static_cast<size_t>(send.expected())]);
        }
      }
      const int64_t before = send.received();
      const int64_t offset = send.Add(msg);
      FUZZ_CHECK(offset == before);
      FUZZ_CHECK(send.received() == before + msg.payload_bytes);
      FUZZ_CHECK(send.received() <= send.expected());
      // What the server does with an accepted message: ASan reports a write past the buffer.
      if (variable != nullptr) fleet_rpc::CopyPayload(msg, variable.get() + offset);
      accepted += payload;
    } catch (const RpcError& e) {
      FUZZ_CHECK(e.code == FLEET_CODE_INVALID_ARGUMENT);
      return 0;
    }
  }
  if (!begun) return 0;
  try {
    send.Finish();
  } catch (const RpcError& e) {
    FUZZ_CHECK(e.code == FLEET_CODE_INVALID_ARGUMENT);
    FUZZ_CHECK(send.received() != send.expected());
    return 0;
  }
  FUZZ_CHECK(static_cast<int64_t>(accepted.size()) == send.expected());
  if (variable != nullptr && !accepted.empty()) {
    FUZZ_CHECK(std::memcmp(variable.get(), accepted.data(), accepted.size()) == 0);
  }
  if (variable != nullptr && head.selected_rows) {
    // Where the server reads the rows from (it checks each against the height): ASan reports a
    // read past the buffer. The count only keeps the reads from being optimized away.
    int64_t in_range = 0;
    for (int64_t i = 0; i < head.dims[0]; ++i) {
      int64_t row = 0;
      std::memcpy(&row, variable.get() + send.rows_offset() + 8 * i, 8);
      in_range += row >= -1 && row < head.height;
    }
    FUZZ_CHECK(in_range <= head.dims[0]);
  }
  return 0;
}
