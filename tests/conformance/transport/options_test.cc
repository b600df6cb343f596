// TransportOptionsFrom: [transport] of fleet.toml (Config::rpc) to the options the transport
// receives, with the units converted (seconds to ms, MiB to bytes).
#include <set>

#include "fleet/fleet_transport.h"
#include "transport_harness.h"
#include "report/expect_ok.h"

namespace fleet::conformance::transport {
namespace {

TEST(TransportOptions, FromConfig) {
  Config config;
  config.rpc.timeout_s = 2.5;
  config.rpc.retries = 7;
  config.rpc.max_message_mb = 0.5;
  config.rpc.token = "t0k";
  config.rpc.tls = true;
  config.rpc.tls_cert = "/etc/fleet/server.pem";
  config.rpc.tls_key = "/etc/fleet/server.key";
  config.rpc.tls_ca = "/etc/fleet/ca.pem";
  config.rpc.tls_client_cert = "/etc/fleet/client.pem";
  config.rpc.tls_client_key = "/etc/fleet/client.key";
  const TransportOptions o = TransportOptionsFrom(config);
  EXPECT_EQ(o.timeout.count(), 2500);
  EXPECT_EQ(o.retries, 7);
  EXPECT_EQ(o.max_message_bytes, 524288);
  EXPECT_EQ(o.token, "t0k");
  EXPECT_TRUE(o.tls);
  EXPECT_EQ(o.tls_cert, "/etc/fleet/server.pem");
  EXPECT_EQ(o.tls_key, "/etc/fleet/server.key");
  EXPECT_EQ(o.tls_ca, "/etc/fleet/ca.pem");
  EXPECT_EQ(o.tls_client_cert, "/etc/fleet/client.pem");
  EXPECT_EQ(o.tls_client_key, "/etc/fleet/client.key");
}

// What the host passes is what fleet_transport.h promises (FLEET_TRANSPORT_HOST_OPTIONS), so a
// transport written against the header accepts everything fleet-host hands it.
TEST(TransportOptions, HostPassesOnlyDeclaredOptions) {
  const std::set<std::string> declared = {FLEET_TRANSPORT_HOST_OPTIONS};
  Config config;
  config.rpc.token = "t";
  config.rpc.tls = true;
  config.rpc.tls_cert = "c";
  config.rpc.tls_key = "k";
  config.rpc.tls_ca = "a";
  config.rpc.tls_client_cert = "cc";
  config.rpc.tls_client_key = "ck";
  const std::vector<std::string> all = TransportOptionNames(TransportOptionsFrom(config));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()), declared);
  for (const std::string& name : TransportOptionNames(TransportOptionsFrom(Config{}))) {
    EXPECT_TRUE(declared.count(name)) << name << " is not in FLEET_TRANSPORT_HOST_OPTIONS";
  }
}

TEST(TransportOptions, DefaultsOfAnEmptyConfig) {
  const TransportOptions o = TransportOptionsFrom(Config{});
  EXPECT_EQ(o.timeout.count(), 300000);
  EXPECT_EQ(o.retries, 3);
  EXPECT_EQ(o.max_message_bytes, 4 << 20);
  EXPECT_TRUE(o.token.empty());
  EXPECT_FALSE(o.tls);
  EXPECT_TRUE(o.tls_cert.empty());
}

// With a job secret and no [transport] token, every process derives the same token, which is
// not the secret; a token set in fleet.toml wins. Two jobs' tokens differ.
TEST(TransportOptions, TokenComesFromTheJobSecret) {
  const std::string secret = "a-job-secret-of-32-bytes-or-so..";
  const TransportOptions a = TransportOptionsFrom(Config{}, secret);
  const TransportOptions b = TransportOptionsFrom(Config{}, secret);
  EXPECT_EQ(a.token.size(), 64u);
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.token.find(secret), std::string::npos);
  EXPECT_NE(TransportOptionsFrom(Config{}, secret + "!").token, a.token);
  Config config;
  config.rpc.token = "set-by-hand";
  EXPECT_EQ(TransportOptionsFrom(config, secret).token, "set-by-hand");
}

// A cap from the config is honoured end to end: a 3 MiB tensor crosses in 1 MiB messages.
TEST(TransportOptions, ConfiguredCapChunksEndToEnd) {
  Config config;
  config.rpc.timeout_s = 10;
  config.rpc.max_message_mb = 1;
  const TransportOptions o = TransportOptionsFrom(config);
  auto served = Serve(o);
  ASSERT_NE(served, nullptr);
  auto client = Connect(served->endpoint(), 0, o);
  ASSERT_NE(client, nullptr);
  HostTensor t = HostTensor::Random(FLEET_DTYPE_FLOAT64, {3, 131072}, 21);
  FLEET_ASSERT_OK(client->Send("x", t.View()));
  HostTensor back;
  FLEET_ASSERT_OK(client->Get("x", SinkInto(&back)));
  EXPECT_TRUE(back.bytes == t.bytes) << "the tensor read back differs from the one sent";
}

}  // namespace
}  // namespace fleet::conformance::transport
