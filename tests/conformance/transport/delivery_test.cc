// The contracts ABI 1.4 adds to transports (fleet_transport.h): on_send_begin before a send's
// payload is buffered, the abort notice, a restarted server refused with DATA_LOSS, and a
// retried send delivered at most once.
#include <cstdlib>

#include "report/expect_ok.h"
#include "transport_harness.h"

namespace fleet::conformance::transport {
namespace {

using std::chrono::milliseconds;

TEST(TransportDelivery, SendBeginSeesTheShapeBeforeTheSend) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_4();
  TransportOptions o = TestOptions();
  o.max_message_bytes = 1 << 20;  // several chunks
  auto served = Serve(o);
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 2, o);
  ASSERT_NE(client, nullptr);
  HostTensor t = HostTensor::Random(FLEET_DTYPE_FLOAT32, {3, 300000}, 7);
  FLEET_ASSERT_OK(client->Send("emb@GRAD", t.View()));
  const auto begins = served->handler.send_begins();
  ASSERT_EQ(begins.size(), 1u);
  EXPECT_EQ(begins[0].first, "emb@GRAD");
  EXPECT_EQ(begins[0].second, std::to_string(FLEET_DTYPE_FLOAT32) + " [3, 300000]");
  EXPECT_EQ(served->handler.send_calls(), 1);
  HostTensor stored;
  ASSERT_TRUE(served->handler.Stored("emb@GRAD", &stored));
  EXPECT_EQ(stored.bytes, t.bytes);
}

TEST(TransportDelivery, SendBeginRefusalStopsTheSend) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_4();
  TransportOptions o = TestOptions();
  o.max_message_bytes = 1 << 20;
  auto served = Serve(o);
  ASSERT_NE(served, nullptr);
  served->handler.RefuseSends(
      "w", InvalidArgument("the server's 'w' is float32 [4], not float32 [8388608]"));
  auto client = Connect(served->endpoint(), 0, o);
  ASSERT_NE(client, nullptr);
  // 32 MiB announced: refused on its header, so it never arrives whole and is never handed on.
  HostTensor big = HostTensor::Zeros(FLEET_DTYPE_FLOAT32, {8388608});
  const Status s = client->Send("w", big.View());
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not float32 [8388608]"), std::string::npos) << s.ToString();
  EXPECT_EQ(served->handler.send_calls(), 0);
  EXPECT_EQ(served->handler.send_begins().size(), 1u);
  // Another variable still goes through.
  HostTensor small = HostTensor::Random(FLEET_DTYPE_FLOAT32, {4}, 1);
  FLEET_EXPECT_OK(client->Send("b", small.View()));
  EXPECT_EQ(served->handler.send_calls(), 1);
}

TEST(TransportDelivery, AbortReachesTheServerWithItsReason) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_4();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 3, TestOptions());
  ASSERT_NE(client, nullptr);
  const std::string reason = "data/part-3.txt:17: slot 'click' has 2 values, declared 1";
  FLEET_ASSERT_OK(client->Abort(reason, milliseconds(2000)));
  const auto aborts = served->handler.aborts();
  ASSERT_EQ(aborts.size(), 1u);
  EXPECT_EQ(aborts[0].first, 3);
  EXPECT_EQ(aborts[0].second, reason);
}

TEST(TransportDelivery, AbortOfAnUnreachableServerEndsInTime) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_4();
  auto client = Connect("127.0.0.1:" + std::to_string(ClosedPort()), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const Status s = client->Abort("gone", milliseconds(1000));
  EXPECT_FALSE(s.ok());
  EXPECT_LT(ElapsedMs(start), 3000);
}

TEST(TransportDelivery, ARestartedServerIsDataLoss) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_4();
  TransportOptions o = TestOptions();
  o.retries = 5;
  auto first = Serve(o);
  ASSERT_NE(first, nullptr);
  const std::string endpoint = first->endpoint();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  auto client = Connect(endpoint, 1, o);
  ASSERT_NE(client, nullptr);
  HostTensor t = HostTensor::Random(FLEET_DTYPE_FLOAT32, {16}, 3);
  FLEET_ASSERT_OK(client->Send("w", t.View()));

  first.reset();  // the server process is gone ...
  auto second = Serve(o, port);  // ... and another one listens at the same endpoint
  ASSERT_NE(second, nullptr);
  const Status s = client->Send("w", t.View());
  EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("restarted"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(endpoint), std::string::npos) << s.ToString();
  // The replacement's handlers never saw the call.
  EXPECT_EQ(second->handler.send_calls(), 0);
  EXPECT_TRUE(second->handler.send_begins().empty());
  HostTensor back;
  EXPECT_EQ(client->Get("w", SinkInto(&back)).code(), Code::kDataLoss);

  // A new client (a restarted trainer) talks to the new server.
  auto fresh = Connect(endpoint, 1, o);
  ASSERT_NE(fresh, nullptr);
  FLEET_EXPECT_OK(fresh->Send("w", t.View()));
}

// A lost reply makes the client retry a send the server already delivered; the retry must be
// answered without a second delivery. The rpc transport loses replies on request (its test
// hook, FLEET_RPC_LOSE_SEND_REPLIES); other transports have no such hook.
TEST(TransportDelivery, ARetriedSendIsDeliveredOnce) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_4();
  FLEET_REQUIRE_TRANSPORT(rec);
  if (rec->name != "rpc") GTEST_SKIP() << "needs the rpc transport's reply-loss hook";
  TransportOptions o = TestOptions();
  o.retries = 3;
  ::setenv("FLEET_RPC_LOSE_SEND_REPLIES", "2", 1);
  auto served = Serve(o);
  ::unsetenv("FLEET_RPC_LOSE_SEND_REPLIES");
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, o);
  ASSERT_NE(client, nullptr);
  HostTensor a = HostTensor::Random(FLEET_DTYPE_FLOAT32, {64}, 1);
  HostTensor b = HostTensor::Random(FLEET_DTYPE_FLOAT32, {64}, 2);
  FLEET_ASSERT_OK(client->Send("g", a.View()));  // reply lost once, retried
  FLEET_ASSERT_OK(client->Send("g", b.View()));  // a new send: delivered again (reply lost)
  FLEET_ASSERT_OK(client->Send("g", a.View()));  // no loss left
  EXPECT_EQ(served->handler.send_calls(), 3);
  HostTensor stored;
  ASSERT_TRUE(served->handler.Stored("g", &stored));
  EXPECT_EQ(stored.bytes, a.bytes);
}

}  // namespace
}  // namespace fleet::conformance::transport
