// The rpc server against SelectedRows sends and prefetches made by hand, the way a peer that
// is not Fleet's client (or a broken one) would make them: rows outside the height, sizes that
// leave out the pad, ids of another type, and sizes meant to make the server buffer or
// allocate what never arrives. The client checks most of these itself, so only calls made by
// hand reach the server's own checks.
#include <gtest/gtest.h>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <cstring>
#include <string>
#include <vector>

#include "transport_harness.h"
#include "wire.h"

namespace fleet::conformance::transport {
namespace {

constexpr char kSend[] = "/fleet.transport_rpc.Transport/Send";
constexpr char kPrefetch[] = "/fleet.transport_rpc.Transport/Prefetch";

struct RawResult {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
};

// One call that writes `messages` (header and payload each) in order, without credentials.
RawResult RawCall(const std::string& endpoint, const char* method,
                  const std::vector<std::pair<fleet_rpc::WireHeader, std::string>>& messages) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer> stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto wait = [&cq] {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok;
  };
  void* const tag = &ctx;
  grpc::Status status;
  {
    auto call = stub.PrepareCall(&ctx, method, &cq);
    call->StartCall(tag);
    bool alive = wait();
    for (const auto& [header, payload] : messages) {
      if (!alive) break;
      call->Write(fleet_rpc::EncodeMessage(header, payload.data(), payload.size(), nullptr), tag);
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
    }
    call->Finish(&status, tag);
    wait();
  }
  cq.Shutdown();
  void* ignored = nullptr;
  bool ignored_ok = false;
  while (cq.Next(&ignored, &ignored_ok)) {
  }
  return {status.error_code(), status.error_message()};
}

std::string Int64s(const std::vector<int64_t>& values) {
  std::string out(values.size() * 8, '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// The first header of a SelectedRows send of float32 [n, 2].
fleet_rpc::WireHeader SparseHead(int64_t n, int64_t height, int64_t total) {
  fleet_rpc::WireHeader h;
  h.name = "emb@GRAD";
  h.trainer_id = 1;
  h.dtype = FLEET_DTYPE_FLOAT32;
  h.dims = {n, 2};
  h.has_tensor = true;
  h.selected_rows = true;
  h.height = height;
  h.total_bytes = total;
  return h;
}

fleet_rpc::WireHeader IdsHead(int32_t dtype, int64_t n, int64_t total) {
  fleet_rpc::WireHeader h;
  h.name = "emb";
  h.dtype = dtype;
  h.dims = {n};
  h.has_tensor = true;
  h.total_bytes = total;
  return h;
}

TEST(RpcSparseWire, AWellFormedSendByHandIsDelivered) {
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  // 3 entries of 8 value bytes: no pad, then the rows.
  const std::string payload = std::string(24, '\x01') + Int64s({4, -1, 0});
  const RawResult r =
      RawCall(served->endpoint(), kSend, {{SparseHead(3, 5, 48), payload}});
  ASSERT_EQ(r.code, grpc::StatusCode::OK) << r.message;
  HostTensor stored;
  ASSERT_TRUE(served->handler.Stored("emb@GRAD", &stored));
  EXPECT_EQ(stored.rows, (std::vector<int64_t>{4, -1, 0}));
  EXPECT_EQ(stored.height, 5);
}

TEST(RpcSparseWire, RowsOutsideTheHeightNeverReachTheHandler) {
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  for (int64_t bad : {int64_t{5}, int64_t{-2}, int64_t{1} << 62}) {
    const std::string payload = std::string(24, '\0') + Int64s({0, bad, 1});
    const RawResult r =
        RawCall(served->endpoint(), kSend, {{SparseHead(3, 5, 48), payload}});
    EXPECT_EQ(r.code, grpc::StatusCode::INVALID_ARGUMENT) << bad << ": " << r.message;
    EXPECT_NE(r.message.find("entry 1 lists row " + std::to_string(bad)), std::string::npos)
        << r.message;
  }
  EXPECT_EQ(served->handler.send_calls(), 0);
}

TEST(RpcSparseWire, SizesThatLeaveOutThePadOrTheRowsAreRefusedFirst) {
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  // float32 [3, 1]: 12 value bytes, 4 of pad, 24 of rows = 40.
  fleet_rpc::WireHeader odd = SparseHead(3, 5, 36);
  odd.dims = {3, 1};
  // 2^61 entries of no values: their rows would be 2^64 bytes, which must not wrap to 0.
  fleet_rpc::WireHeader overflowing = SparseHead(0, 5, 0);
  overflowing.dims = {int64_t{1} << 61, 0};
  const struct {
    const char* what;
    fleet_rpc::WireHeader head;
  } cases[] = {
      {"no pad", odd},
      {"no rows", SparseHead(3, 5, 24)},
      {"negative height", SparseHead(3, -1, 48)},
      {"overflowing rows", overflowing},
  };
  for (const auto& c : cases) {
    const RawResult r = RawCall(served->endpoint(), kSend, {{c.head, ""}});
    EXPECT_EQ(r.code, grpc::StatusCode::INVALID_ARGUMENT) << c.what << ": " << r.message;
  }
  // Refused on the header: the host was not even asked about them.
  EXPECT_TRUE(served->handler.send_begins().empty());
  EXPECT_EQ(served->handler.send_calls(), 0);
}

TEST(RpcSparseWire, PrefetchIdsAreCheckedLikeASend) {
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  served->handler.ServePrefetch("emb", HostTensor::Random(FLEET_DTYPE_FLOAT32, {4, 2}, 1));
  const std::string two = Int64s({1, 3});

  const RawResult good = RawCall(served->endpoint(), kPrefetch,
                                 {{IdsHead(FLEET_DTYPE_INT64, 2, 16), two}});
  EXPECT_EQ(good.code, grpc::StatusCode::OK) << good.message;

  const RawResult floats = RawCall(served->endpoint(), kPrefetch,
                                   {{IdsHead(FLEET_DTYPE_FLOAT64, 2, 16), two}});
  EXPECT_EQ(floats.code, grpc::StatusCode::INVALID_ARGUMENT) << floats.message;
  EXPECT_NE(floats.message.find("int64 [n]"), std::string::npos) << floats.message;

  // 2^40 ids announced, 16 bytes sent: refused when the stream ends, with nothing of the
  // announced size allocated (this test would run out of memory otherwise).
  const RawResult huge = RawCall(served->endpoint(), kPrefetch,
                                 {{IdsHead(FLEET_DTYPE_INT64, int64_t{1} << 40,
                                           int64_t{8} << 40),
                                   two}});
  EXPECT_EQ(huge.code, grpc::StatusCode::INVALID_ARGUMENT) << huge.message;
  EXPECT_NE(huge.message.find("16 bytes arrived"), std::string::npos) << huge.message;

  // 2^61 ids would be 2^64 bytes.
  const RawResult overflow = RawCall(served->endpoint(), kPrefetch,
                                     {{IdsHead(FLEET_DTYPE_INT64, int64_t{1} << 61, 0), ""}});
  EXPECT_EQ(overflow.code, grpc::StatusCode::INVALID_ARGUMENT) << overflow.message;
  EXPECT_EQ(served->handler.prefetch_calls(), 1) << "a refused prefetch reached the handler";
}

}  // namespace
}  // namespace fleet::conformance::transport
