// The contracts ABI 1.7 adds to transports (fleet_transport.h, "Sparse rows" and
// client_prefetch): a SelectedRows tensor reaches the server with its values, rows and height,
// whatever its size; and a prefetch brings back exactly the rows asked for, in one call, with
// the handler's errors and the client's deadline as a get has them.
#include <algorithm>
#include <random>
#include <thread>

#include "report/expect_ok.h"
#include "transport_harness.h"

namespace fleet::conformance::transport {
namespace {

using std::chrono::milliseconds;

// The smallest cap the transports accept (twice the rpc transport's 64 KiB header slack), so
// that a few hundred KiB take several messages.
constexpr int64_t kSmallMessages = 128 << 10;

// A SelectedRows tensor of random values with the given rows.
HostTensor Sparse(int32_t dtype, std::vector<int64_t> dims, std::vector<int64_t> rows,
                  int64_t height, uint64_t seed) {
  HostTensor t = HostTensor::Random(dtype, std::move(dims), seed);
  t.rows = std::move(rows);
  t.height = height;
  return t;
}

// `n` rows in [-1, height), from a seeded generator.
std::vector<int64_t> RandomRows(int64_t n, int64_t height, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> row(-1, height - 1);
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t& r : rows) r = row(rng);
  return rows;
}

// Sends `t` as `name` and checks that the handler got its values, rows and height unchanged.
void SendAndCheck(Served& served, TransportClient& client, const std::string& name,
                  HostTensor& t) {
  const Status sent = client.Send(name, t.View());
  ASSERT_TRUE(sent.ok()) << name << ": " << sent.ToString();
  HostTensor stored;
  ASSERT_TRUE(served.handler.Stored(name, &stored)) << "the server never stored '" << name << "'";
  EXPECT_EQ(stored.dtype, t.dtype) << name;
  EXPECT_EQ(stored.dims, t.dims) << name;
  EXPECT_TRUE(stored.bytes == t.bytes) << name << ": the values differ at the server";
  EXPECT_EQ(stored.height, t.height) << name;
  EXPECT_TRUE(stored.rows == t.rows) << name << ": the rows differ at the server";
}

// Row i of `out` must be row ids[i] of `table`.
void ExpectRowsOf(const HostTensor& table, const std::vector<int64_t>& ids,
                  const HostTensor& out) {
  std::vector<int64_t> dims = table.dims;
  dims[0] = static_cast<int64_t>(ids.size());
  ASSERT_EQ(out.dtype, table.dtype);
  ASSERT_EQ(out.dims, dims);
  const size_t row = table.bytes.size() / static_cast<size_t>(table.dims[0]);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(std::equal(out.bytes.begin() + static_cast<ptrdiff_t>(i * row),
                           out.bytes.begin() + static_cast<ptrdiff_t>((i + 1) * row),
                           table.bytes.begin() + static_cast<ptrdiff_t>(ids[i]) *
                                                     static_cast<ptrdiff_t>(row)))
        << "row " << i << " is not row " << ids[i] << " of the table";
  }
}

// Lent replies are released once gRPC has let go of them, which may be a moment after the call.
bool AllGetsReturned(const RecordingHandler& handler) {
  const auto start = std::chrono::steady_clock::now();
  while (handler.outstanding_gets() != 0 && ElapsedMs(start) < 5000) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  return handler.outstanding_gets() == 0;
}

TEST(TransportSparse, TheHostKnowsWhichTransportsCarryRows) {
  FLEET_REQUIRE_TRANSPORT(rec);
  EXPECT_EQ(TransportCarriesSelectedRows(*rec), TransportAbiMinor() >= 7);
}

// Value sizes that are not multiples of 8 (60, 15 and 2 bytes) put the rows after a pad; 32
// bytes needs none. Rows repeat, are unsorted and include -1 (an empty entry).
TEST(TransportSparse, SelectedRowsArriveWithTheirRowsAndHeight) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 1, TestOptions());
  ASSERT_NE(client, nullptr);
  HostTensor f32 = Sparse(FLEET_DTYPE_FLOAT32, {5, 3}, {7, -1, 2, 7, 0}, 9, 1);
  SendAndCheck(*served, *client, "emb@GRAD", f32);
  HostTensor u8 = Sparse(FLEET_DTYPE_UINT8, {3, 5}, {2, 0, 1}, 3, 2);
  SendAndCheck(*served, *client, "u8@GRAD", u8);
  HostTensor f16 = Sparse(FLEET_DTYPE_FLOAT16, {1}, {4}, 5, 3);
  SendAndCheck(*served, *client, "f16@GRAD", f16);
  HostTensor f64 = Sparse(FLEET_DTYPE_FLOAT64, {2, 2}, {-1, -1}, 1, 4);
  SendAndCheck(*served, *client, "f64@GRAD", f64);
  // Height 0: a variable of no rows, every entry empty.
  HostTensor none = Sparse(FLEET_DTYPE_INT32, {2, 3}, {-1, -1}, 0, 5);
  SendAndCheck(*served, *client, "none@GRAD", none);
  EXPECT_EQ(served->handler.senders().at("emb@GRAD"), 1);
}

TEST(TransportSparse, SelectedRowsOfNoEntries) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  HostTensor empty = Sparse(FLEET_DTYPE_FLOAT32, {0, 4}, {}, 100, 1);
  SendAndCheck(*served, *client, "emb@GRAD", empty);
  // The same name with entries again: nothing of the empty send lingers.
  HostTensor some = Sparse(FLEET_DTYPE_FLOAT32, {2, 4}, {99, 0}, 100, 2);
  SendAndCheck(*served, *client, "emb@GRAD", some);
}

// Larger than one message: values, pad and rows are cut at whatever offsets the chunks fall on.
TEST(TransportSparse, LargeSelectedRowsInChunks) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  TransportOptions o = TestOptions();
  o.max_message_bytes = kSmallMessages;
  auto served = Serve(o);
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, o);
  ASSERT_NE(client, nullptr);
  // 280028 value bytes (4 of pad) and 80008 of rows.
  HostTensor a = Sparse(FLEET_DTYPE_FLOAT32, {10001, 7}, RandomRows(10001, 50000, 1), 50000, 1);
  SendAndCheck(*served, *client, "a@GRAD", a);
  // 70001 value bytes (7 of pad) and 560008 of rows: mostly rows.
  HostTensor b = Sparse(FLEET_DTYPE_INT8, {70001}, RandomRows(70001, 1 << 30, 2), 1 << 30, 2);
  SendAndCheck(*served, *client, "b@GRAD", b);
  // The same gradient again, as every step sends it.
  HostTensor a2 = Sparse(FLEET_DTYPE_FLOAT32, {10001, 7}, RandomRows(10001, 50000, 3), 50000, 3);
  SendAndCheck(*served, *client, "a@GRAD", a2);
}

TEST(TransportSparse, SendBeginSeesTheHeightButNoRows) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  HostTensor sparse = Sparse(FLEET_DTYPE_FLOAT32, {5, 3}, {7, -1, 2, 7, 0}, 9, 1);
  FLEET_ASSERT_OK(client->Send("emb@GRAD", sparse.View()));
  HostTensor dense = HostTensor::Random(FLEET_DTYPE_FLOAT32, {5, 3}, 2);
  FLEET_ASSERT_OK(client->Send("fc@GRAD", dense.View()));
  const std::vector<std::pair<int64_t, bool>> expected = {{9, true}, {-1, true}};
  EXPECT_EQ(served->handler.send_begin_rows(), expected);
  const auto begins = served->handler.send_begins();
  ASSERT_EQ(begins.size(), 2u);
  EXPECT_EQ(begins[0].second, std::to_string(FLEET_DTYPE_FLOAT32) + " [5, 3]");
}

// A dense send reaches the handler as dense: height -1 and no rows (the handler refuses
// anything else, so the send would fail).
TEST(TransportSparse, DenseSendsArriveWithoutRows) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  HostTensor dense = HostTensor::Random(FLEET_DTYPE_FLOAT32, {5, 3}, 1);
  SendAndCheck(*served, *client, "fc@GRAD", dense);
  // A 1.5-style descriptor that ends before `rows`: dense whatever follows it in memory.
  FleetTensor short_view = dense.View();
  short_view.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
  short_view.height = 3;
  FLEET_ASSERT_OK(client->Send("short@GRAD", short_view));
  HostTensor stored;
  ASSERT_TRUE(served->handler.Stored("short@GRAD", &stored));
  EXPECT_EQ(stored.height, -1);
  EXPECT_TRUE(stored.bytes == dense.bytes) << "the values differ at the server";
}

// A row outside [0, height) breaks the ABI's SelectedRows invariant: the rpc transport refuses
// it, naming the entry, and the handler never sees it.
TEST(TransportSparse, RowsOutsideTheHeightAreRefused) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  FLEET_REQUIRE_TRANSPORT(rec);
  if (rec->name != "rpc") GTEST_SKIP() << "the contract leaves bad rows to the host";
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  HostTensor bad = Sparse(FLEET_DTYPE_FLOAT32, {3, 2}, {0, 9, 1}, 9, 1);
  const Status s = client->Send("emb@GRAD", bad.View());
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("entry 1"), std::string::npos) << s.ToString();
  EXPECT_EQ(served->handler.send_calls(), 0);
}

// ---- prefetch ----

TEST(TransportPrefetch, ReturnsTheAskedRowsInOrder) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  const HostTensor emb = HostTensor::Random(FLEET_DTYPE_FLOAT32, {10, 4}, 1);
  const HostTensor bias = HostTensor::Random(FLEET_DTYPE_INT64, {5}, 2);
  const HostTensor cube = HostTensor::Random(FLEET_DTYPE_FLOAT64, {6, 2, 3}, 3);
  served->handler.ServePrefetch("emb", emb);
  served->handler.ServePrefetch("bias", bias);
  served->handler.ServePrefetch("cube", cube);
  auto client = Connect(served->endpoint(), 2, TestOptions());
  ASSERT_NE(client, nullptr);

  const std::vector<int64_t> ids = {3, 0, 3, 9, 7, 3};
  HostTensor out;
  FLEET_ASSERT_OK(client->Prefetch("emb", ids.data(), static_cast<int64_t>(ids.size()),
                                   SinkInto(&out)));
  ExpectRowsOf(emb, ids, out);
  const std::vector<int64_t> scalar_ids = {4, 4, 0};
  FLEET_ASSERT_OK(client->Prefetch("bias", scalar_ids.data(), 3, SinkInto(&out)));
  ExpectRowsOf(bias, scalar_ids, out);
  const std::vector<int64_t> one = {5};
  FLEET_ASSERT_OK(client->Prefetch("cube", one.data(), 1, SinkInto(&out)));
  ExpectRowsOf(cube, one, out);
  EXPECT_EQ(served->handler.prefetch_calls(), 3);
  EXPECT_TRUE(AllGetsReturned(served->handler)) << "a prefetched reply was never released";
}

TEST(TransportPrefetch, NoIdsGiveNoRows) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  served->handler.ServePrefetch("emb", HostTensor::Random(FLEET_DTYPE_FLOAT32, {10, 4}, 1));
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  HostTensor out = HostTensor::Random(FLEET_DTYPE_UINT8, {3}, 9);
  FLEET_ASSERT_OK(client->Prefetch("emb", nullptr, 0, SinkInto(&out)));
  EXPECT_EQ(out.dtype, FLEET_DTYPE_FLOAT32);
  EXPECT_EQ(out.dims, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(out.bytes.empty());
}

// 30000 ids are 240 KB of request and 960 KB of answer: several messages each way.
TEST(TransportPrefetch, ManyIdsInChunks) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  TransportOptions o = TestOptions();
  o.max_message_bytes = kSmallMessages;
  auto served = Serve(o);
  ASSERT_NE(served, nullptr);
  const HostTensor emb = HostTensor::Random(FLEET_DTYPE_FLOAT32, {1000, 8}, 1);
  served->handler.ServePrefetch("emb", emb);
  auto client = Connect(served->endpoint(), 0, o);
  ASSERT_NE(client, nullptr);
  std::vector<int64_t> ids = RandomRows(30000, 1000, 7);
  for (int64_t& id : ids) id = std::max<int64_t>(id, 0);
  HostTensor out;
  FLEET_ASSERT_OK(client->Prefetch("emb", ids.data(), static_cast<int64_t>(ids.size()),
                                   SinkInto(&out)));
  ExpectRowsOf(emb, ids, out);
  EXPECT_EQ(served->handler.prefetch_calls(), 1) << "the ids took more than one call";
  EXPECT_TRUE(AllGetsReturned(served->handler)) << "a prefetched reply was never released";
}

TEST(TransportPrefetch, HandlerErrorsComeBackWithTheirCode) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  served->handler.ServePrefetch("emb", HostTensor::Random(FLEET_DTYPE_FLOAT32, {10, 4}, 1));
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  const std::vector<int64_t> ids = {1, 12345};
  HostTensor out;
  const Status s = client->Prefetch("emb", ids.data(), 2, SinkInto(&out));
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("holds no row 12345"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(served->endpoint()), std::string::npos) << s.ToString();
  const Status missing = client->Prefetch("no_such_var", ids.data(), 1, SinkInto(&out));
  EXPECT_EQ(missing.code(), Code::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("no_such_var"), std::string::npos) << missing.ToString();
  // A handler's error is final: each prefetch reached it once.
  EXPECT_EQ(served->handler.prefetch_calls(), 2);
}

TEST(TransportPrefetch, AServerThatServesNoPrefetchIsUnimplemented) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());  // no ServePrefetch: the TransportHandler default
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  const int64_t id = 1;
  HostTensor out;
  const Status s = client->Prefetch("emb", &id, 1, SinkInto(&out));
  EXPECT_EQ(s.code(), Code::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("prefetch"), std::string::npos) << s.ToString();
}

TEST(TransportPrefetch, ASinkRefusalStopsThePrefetch) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  served->handler.ServePrefetch("emb", HostTensor::Random(FLEET_DTYPE_FLOAT32, {10, 4}, 1));
  auto client = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(client, nullptr);
  const std::vector<int64_t> ids = {1, 2};
  const Status s = client->Prefetch(
      "emb", ids.data(), 2,
      [](int32_t, const std::vector<int64_t>&) -> StatusOr<FleetTensor> {
        return InvalidArgument("prefetch: 'emb' rows are [2, 8] here, not what arrived");
      });
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not what arrived"), std::string::npos) << s.ToString();
  EXPECT_TRUE(AllGetsReturned(served->handler)) << "a refused reply was never released";
}

TEST(TransportPrefetch, AnUnreachableServerFailsWithinTheDeadline) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  TransportOptions o = TestOptions();
  o.timeout = milliseconds(1500);
  o.retries = 2;
  auto client = Connect("127.0.0.1:" + std::to_string(ClosedPort()), 0, o);
  ASSERT_NE(client, nullptr);
  const int64_t id = 1;
  HostTensor out;
  const auto start = std::chrono::steady_clock::now();
  const Status s = client->Prefetch("emb", &id, 1, SinkInto(&out));
  const int64_t took = ElapsedMs(start);
  EXPECT_TRUE(s.code() == Code::kUnavailable || s.code() == Code::kDeadlineExceeded)
      << s.ToString();
  // Three attempts of at most 1.5 s and their backoff (100 + 200 ms, jittered).
  EXPECT_LT(took, 3 * 1500 + 1000);
}

// A handler that does not answer runs into the client's deadline; the call does not hang.
TEST(TransportPrefetch, ABlockedHandlerRunsIntoTheDeadline) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  TransportOptions o = TestOptions();
  o.timeout = milliseconds(1000);
  auto served = Serve(o);
  ASSERT_NE(served, nullptr);
  served->handler.ServePrefetch("emb", HostTensor::Random(FLEET_DTYPE_FLOAT32, {10, 4}, 1));
  auto client = Connect(served->endpoint(), 0, o);
  ASSERT_NE(client, nullptr);
  served->handler.BlockCalls(milliseconds(8000));
  const int64_t id = 1;
  HostTensor out;
  const auto start = std::chrono::steady_clock::now();
  const Status s = client->Prefetch("emb", &id, 1, SinkInto(&out));
  const int64_t took = ElapsedMs(start);
  served->handler.Release();
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("prefetch 'emb'"), std::string::npos) << s.ToString();
  EXPECT_LT(took, 4000);
}

TEST(TransportPrefetch, ARestartedServerIsDataLoss) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  TransportOptions o = TestOptions();
  auto first = Serve(o);
  ASSERT_NE(first, nullptr);
  const HostTensor emb = HostTensor::Random(FLEET_DTYPE_FLOAT32, {10, 4}, 1);
  first->handler.ServePrefetch("emb", emb);
  const std::string endpoint = first->endpoint();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  auto client = Connect(endpoint, 1, o);
  ASSERT_NE(client, nullptr);
  const int64_t id = 2;
  HostTensor out;
  FLEET_ASSERT_OK(client->Prefetch("emb", &id, 1, SinkInto(&out)));

  first.reset();
  auto second = Serve(o, port);
  ASSERT_NE(second, nullptr);
  second->handler.ServePrefetch("emb", emb);
  const Status s = client->Prefetch("emb", &id, 1, SinkInto(&out));
  EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("restarted"), std::string::npos) << s.ToString();
  EXPECT_EQ(second->handler.prefetch_calls(), 0) << "the replacement's handler was called";
}

TEST(TransportPrefetch, NeedsTheToken) {
  FLEET_REQUIRE_TRANSPORT_ABI_1_7();
  TransportOptions server_options = TestOptions();
  server_options.token = "s3cret-token-value";
  auto served = Serve(server_options);
  ASSERT_NE(served, nullptr);
  const HostTensor emb = HostTensor::Random(FLEET_DTYPE_FLOAT32, {10, 4}, 1);
  served->handler.ServePrefetch("emb", emb);
  const std::vector<int64_t> ids = {9, 1};
  HostTensor out;
  auto none = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->Prefetch("emb", ids.data(), 2, SinkInto(&out)).code(),
            Code::kUnauthenticated);
  EXPECT_EQ(served->handler.prefetch_calls(), 0);
  auto good = Connect(served->endpoint(), 0, server_options);
  ASSERT_NE(good, nullptr);
  FLEET_ASSERT_OK(good->Prefetch("emb", ids.data(), 2, SinkInto(&out)));
  ExpectRowsOf(emb, ids, out);
}

}  // namespace
}  // namespace fleet::conformance::transport
