// The rpc transport's challenge-response against its real server (the plugin, loaded as the
// host loads it), with calls made by hand the way a stranger or an eavesdropper would make
// them: a recorded call played again, credentials made for another method or another server,
// the old bearer token, and clients and servers that hold different tokens.
#include <gtest/gtest.h>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "auth.h"
#include "transport_harness.h"
#include "wire.h"

namespace fleet::conformance::transport {
namespace {

using fleet_rpc::AnswerProof;
using fleet_rpc::CallAuth;
using fleet_rpc::CallProof;
using fleet_rpc::FormatCallAuth;
using fleet_rpc::HelloProof;

constexpr char kToken[] = "a-job-token-of-64-hex-characters-in-real-jobs-but-any-bytes-here";
constexpr char kHello[] = "/fleet.transport_rpc.Transport/Hello";
constexpr char kBarrier[] = "/fleet.transport_rpc.Transport/Barrier";
constexpr char kComplete[] = "/fleet.transport_rpc.Transport/Complete";

struct RawResult {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  std::map<std::string, std::string> trailers;
  std::string Trailer(const std::string& key) const {
    const auto it = trailers.find(key);
    return it == trailers.end() ? "" : it->second;
  }
};

// One call with the given metadata and at most one request, as any gRPC client could make it.
RawResult RawCall(const std::string& endpoint, const char* method,
                  const std::vector<std::pair<std::string, std::string>>& metadata,
                  const std::optional<fleet_rpc::WireHeader>& request) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer> stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
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
    if (alive && request) {
      call->Write(fleet_rpc::EncodeMessage(*request, nullptr, 0, nullptr), tag);
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
  RawResult out;
  out.code = status.error_code();
  out.message = status.error_message();
  for (const auto& [key, value] : ctx.GetServerTrailingMetadata()) {
    out.trailers.emplace(std::string(key.data(), key.size()),
                         std::string(value.data(), value.size()));
  }
  return out;
}

// The server's challenge, from a Hello whose proof is checked against the token.
std::string HelloFor(const std::string& endpoint) {
  const std::string nonce = "0123456789abcdef0123";
  const RawResult r = RawCall(endpoint, kHello, {{fleet_rpc::kHelloNonceKey, nonce}}, {});
  EXPECT_EQ(r.code, grpc::StatusCode::OK) << r.message;
  const std::string challenge = r.Trailer(fleet_rpc::kChallengeKey);
  EXPECT_EQ(r.Trailer(fleet_rpc::kHelloProofKey), HelloProof(kToken, challenge, nonce));
  return challenge;
}

std::pair<std::string, std::string> Credentials(const std::string& challenge, uint64_t client,
                                                uint64_t counter, const char* method,
                                                const char* proof_method = nullptr) {
  CallAuth a;
  a.client_id = client;
  a.counter = counter;
  a.proof = CallProof(kToken, challenge, client, counter,
                      proof_method != nullptr ? proof_method : method);
  return {fleet_rpc::kCallAuthKey, FormatCallAuth(a)};
}

fleet_rpc::WireHeader BarrierRequest() {
  fleet_rpc::WireHeader h;
  h.trainer_id = 0;
  h.barrier_kind = FLEET_BARRIER_BATCH;
  return h;
}

TransportOptions WithToken(const std::string& token) {
  TransportOptions o = TestOptions();
  o.token = token;
  return o;
}

TEST(RpcHandshake, HelloGivesAChallengeOfThisProcessWithAProof) {
  auto a = Serve(WithToken(kToken));
  auto b = Serve(WithToken(kToken));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::string ca = HelloFor(a->endpoint());
  const std::string cb = HelloFor(b->endpoint());
  EXPECT_EQ(ca.size(), 64u);
  EXPECT_NE(ca, cb) << "two servers gave the same challenge";
  EXPECT_EQ(HelloFor(a->endpoint()), ca) << "the challenge is per process, not per hello";

  const RawResult no_nonce = RawCall(a->endpoint(), kHello, {}, {});
  EXPECT_EQ(no_nonce.code, grpc::StatusCode::INVALID_ARGUMENT) << no_nonce.message;
  EXPECT_TRUE(no_nonce.Trailer(fleet_rpc::kHelloProofKey).empty());
}

TEST(RpcHandshake, ACallIsTakenOnceAndItsReplayIsRefused) {
  auto served = Serve(WithToken(kToken));
  ASSERT_NE(served, nullptr);
  const std::string challenge = HelloFor(served->endpoint());
  const auto creds = Credentials(challenge, 0x5eed, 1, kBarrier);

  const RawResult first = RawCall(served->endpoint(), kBarrier, {creds}, BarrierRequest());
  ASSERT_EQ(first.code, grpc::StatusCode::OK) << first.message;
  EXPECT_EQ(first.Trailer(fleet_rpc::kAnswerProofKey),
            AnswerProof(kToken, challenge, 0x5eed, 1, 0));
  EXPECT_EQ(served->handler.barriers().size(), 1u);

  const RawResult replay = RawCall(served->endpoint(), kBarrier, {creds}, BarrierRequest());
  EXPECT_EQ(replay.code, grpc::StatusCode::UNAUTHENTICATED) << replay.message;
  EXPECT_NE(replay.message.find("replayed"), std::string::npos) << replay.message;
  EXPECT_EQ(served->handler.barriers().size(), 1u) << "the replayed barrier reached the handler";
  EXPECT_TRUE(replay.Trailer(fleet_rpc::kAnswerProofKey).empty());

  // The same client's next counter is good.
  const RawResult next = RawCall(served->endpoint(), kBarrier,
                                 {Credentials(challenge, 0x5eed, 2, kBarrier)}, BarrierRequest());
  EXPECT_EQ(next.code, grpc::StatusCode::OK) << next.message;
  EXPECT_EQ(served->handler.barriers().size(), 2u);
}

TEST(RpcHandshake, CredentialsForAnotherCallOrServerAndBearerTokensAreRefused) {
  auto served = Serve(WithToken(kToken));
  auto other = Serve(WithToken(kToken));
  ASSERT_NE(served, nullptr);
  ASSERT_NE(other, nullptr);
  const std::string challenge = HelloFor(served->endpoint());
  const std::string other_challenge = HelloFor(other->endpoint());

  struct Attempt {
    const char* what;
    std::vector<std::pair<std::string, std::string>> metadata;
  };
  const std::vector<Attempt> attempts = {
      {"no credentials", {}},
      {"the token itself, as a bearer header", {{"x-fleet-token", kToken}}},
      {"a proof made for Complete", {Credentials(challenge, 7, 1, kBarrier, kComplete)}},
      {"a proof for another server's challenge", {Credentials(other_challenge, 7, 2, kBarrier)}},
      {"malformed credentials", {{fleet_rpc::kCallAuthKey, "0000000000000007.3.xyz"}}},
  };
  for (const Attempt& a : attempts) {
    const RawResult r = RawCall(served->endpoint(), kBarrier, a.metadata, BarrierRequest());
    EXPECT_EQ(r.code, grpc::StatusCode::UNAUTHENTICATED) << a.what << ": " << r.message;
    EXPECT_NE(r.message.find("wrong or missing token"), std::string::npos)
        << a.what << ": " << r.message;
  }
  EXPECT_TRUE(served->handler.barriers().empty()) << "a refused barrier reached the handler";
  // Refused credentials spend no counter: the same client's first good call is taken.
  const RawResult good = RawCall(served->endpoint(), kBarrier,
                                 {Credentials(challenge, 7, 1, kBarrier)}, BarrierRequest());
  EXPECT_EQ(good.code, grpc::StatusCode::OK) << good.message;
}

TEST(RpcHandshake, ClientAndServerMustHoldTheSameToken) {
  auto served = Serve(WithToken(kToken));
  ASSERT_NE(served, nullptr);
  auto wrong = Connect(served->endpoint(), 0, WithToken("another-token-of-another-job"));
  ASSERT_NE(wrong, nullptr);
  Status s = wrong->Barrier(FLEET_BARRIER_BATCH);
  EXPECT_EQ(s.code(), Code::kUnauthenticated) << s.ToString();
  EXPECT_NE(s.message().find("another token"), std::string::npos) << s.ToString();

  // A server that holds no token cannot prove one: a client with a token refuses to talk to it
  // (it could be anyone listening at the endpoint).
  auto open = Serve(TestOptions());
  ASSERT_NE(open, nullptr);
  auto careful = Connect(open->endpoint(), 0, WithToken(kToken));
  ASSERT_NE(careful, nullptr);
  s = careful->Barrier(FLEET_BARRIER_BATCH);
  EXPECT_EQ(s.code(), Code::kUnauthenticated) << s.ToString();
  EXPECT_NE(s.message().find("does not prove"), std::string::npos) << s.ToString();
  EXPECT_TRUE(open->handler.barriers().empty());
  EXPECT_TRUE(served->handler.barriers().empty());

  // And the right token works, the Hello included, for calls of every kind.
  auto right = Connect(served->endpoint(), 3, WithToken(kToken));
  ASSERT_NE(right, nullptr);
  HostTensor t = HostTensor::Random(FLEET_DTYPE_FLOAT32, {64}, 5);
  EXPECT_TRUE(right->Send("w", t.View()).ok());
  HostTensor back;
  EXPECT_TRUE(right->Get("w", SinkInto(&back)).ok());
  EXPECT_TRUE(back.bytes == t.bytes);
  EXPECT_TRUE(right->Barrier(FLEET_BARRIER_BATCH).ok());
  EXPECT_TRUE(right->Complete().ok());
  EXPECT_EQ(served->handler.barriers().size(), 1u);
}

}  // namespace
}  // namespace fleet::conformance::transport
