// Security options: the shared token, TLS with a CA made at test time by the openssl CLI,
// client certificates, and mismatches of either kind, which must fail fast and say why.
#include "transport_harness.h"
#include "report/expect_ok.h"

namespace fleet::conformance::transport {
namespace {

using std::chrono::milliseconds;

TEST(TransportSecurity, TokenIsRequiredAndNotEchoed) {
  TransportOptions server_options = TestOptions();
  server_options.token = "s3cret-token-value";
  auto served = Serve(server_options);
  ASSERT_NE(served, nullptr);
  HostTensor t = HostTensor::Random(FLEET_DTYPE_FLOAT32, {16}, 2);

  TransportOptions wrong = TestOptions();
  wrong.token = "guess-42";
  auto bad = Connect(served->endpoint(), 0, wrong);
  ASSERT_NE(bad, nullptr);
  const Status s = bad->Send("w", t.View());
  EXPECT_EQ(s.code(), Code::kUnauthenticated) << s.ToString();
  EXPECT_NE(s.message().find("wrong or missing token"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find("s3cret"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find("guess-42"), std::string::npos) << s.ToString();

  auto none = Connect(served->endpoint(), 0, TestOptions());
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->Barrier(FLEET_BARRIER_BATCH).code(), Code::kUnauthenticated);
  HostTensor back;
  EXPECT_EQ(none->Get("w", SinkInto(&back)).code(), Code::kUnauthenticated);
  EXPECT_TRUE(served->handler.senders().empty())
      << "the server's handler saw a sender";
  EXPECT_TRUE(served->handler.barriers().empty())
      << "the server's barrier handler was called";

  auto good = Connect(served->endpoint(), 0, server_options);
  ASSERT_NE(good, nullptr);
  FLEET_ASSERT_OK(good->Send("w", t.View()));
  FLEET_ASSERT_OK(good->Get("w", SinkInto(&back)));
  EXPECT_TRUE(back.bytes == t.bytes) << "the tensor read back differs from the one sent";
}

class TransportTls : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    files_ = Certificates(&error);
    ASSERT_NE(files_, nullptr) << "cannot make test certificates with openssl: " << error;
  }
  TransportOptions ServerOptions(bool require_client_cert) const {
    TransportOptions o = TestOptions();
    o.tls = true;
    o.tls_cert = files_->server_cert.string();
    o.tls_key = files_->server_key.string();
    if (require_client_cert) o.tls_ca = files_->ca.string();
    return o;
  }
  TransportOptions ClientOptions(bool with_cert) const {
    TransportOptions o = TestOptions();
    o.timeout = milliseconds(3000);
    o.retries = 1;
    o.tls = true;
    o.tls_ca = files_->ca.string();
    if (with_cert) {
      o.tls_client_cert = files_->client_cert.string();
      o.tls_client_key = files_->client_key.string();
    }
    return o;
  }
  const TlsFiles* files_ = nullptr;
};

TEST_F(TransportTls, EchoWithClientCertificates) {
  auto served = Serve(ServerOptions(/*require_client_cert=*/true));
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 4, ClientOptions(/*with_cert=*/true));
  ASSERT_NE(client, nullptr);
  HostTensor t = HostTensor::Random(FLEET_DTYPE_BFLOAT16, {300, 700}, 11);
  FLEET_ASSERT_OK(client->Send("emb.block0", t.View()));
  HostTensor back;
  const Status s = client->Get("emb.block0", SinkInto(&back));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(back.bytes == t.bytes) << "the tensor read back differs from the one sent";
  EXPECT_EQ(served->handler.senders().at("emb.block0"), 4);
}

TEST_F(TransportTls, ServerWithoutClientVerification) {
  auto served = Serve(ServerOptions(/*require_client_cert=*/false));
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, ClientOptions(/*with_cert=*/false));
  ASSERT_NE(client, nullptr);
  FLEET_EXPECT_OK(client->Barrier(FLEET_BARRIER_BATCH));
}

TEST_F(TransportTls, MissingClientCertificateIsRefused) {
  auto served = Serve(ServerOptions(/*require_client_cert=*/true));
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, ClientOptions(/*with_cert=*/false));
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const Status s = client->Barrier(FLEET_BARRIER_BATCH);
  EXPECT_LT(ElapsedMs(start), 8000);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.code() == Code::kUnavailable || s.code() == Code::kUnauthenticated ||
              s.code() == Code::kDeadlineExceeded)
      << s.ToString();
  EXPECT_TRUE(served->handler.barriers().empty())
      << "the server's barrier handler was called";
}

TEST_F(TransportTls, PlaintextClientAgainstTlsServer) {
  auto served = Serve(ServerOptions(/*require_client_cert=*/false));
  ASSERT_NE(served, nullptr);
  TransportOptions o = TestOptions();
  o.timeout = milliseconds(3000);
  o.retries = 1;
  auto client = Connect(served->endpoint(), 0, o);
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const Status s = client->Barrier(FLEET_BARRIER_BATCH);
  EXPECT_LT(ElapsedMs(start), 8000);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("TLS"), std::string::npos) << s.ToString();
}

TEST_F(TransportTls, TlsClientAgainstPlaintextServer) {
  auto served = Serve(TestOptions());
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, ClientOptions(/*with_cert=*/true));
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const Status s = client->Barrier(FLEET_BARRIER_BATCH);
  EXPECT_LT(ElapsedMs(start), 8000);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("TLS"), std::string::npos) << s.ToString();
}

TEST_F(TransportTls, UnreadableCertificateNamesThePath) {
  FLEET_REQUIRE_TRANSPORT(rec);
  TransportOptions o = ServerOptions(false);
  o.tls_cert = (files_->dir / "no-such-cert.pem").string();
  RecordingHandler handler;
  auto server = TransportServer::Start(*rec, "127.0.0.1:0", &handler, o);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), Code::kInvalidArgument) << server.status().ToString();
  EXPECT_NE(server.status().message().find(o.tls_cert), std::string::npos)
      << server.status().ToString();

  TransportOptions c = ClientOptions(true);
  c.tls_client_key = (files_->dir / "missing.key").string();
  auto client = TransportClient::Connect(*rec, "127.0.0.1:1", 0, c);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kInvalidArgument);
  EXPECT_NE(client.status().message().find(c.tls_client_key), std::string::npos)
      << client.status().ToString();
}

}  // namespace
}  // namespace fleet::conformance::transport
