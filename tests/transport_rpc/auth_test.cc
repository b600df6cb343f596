// The handshake's pieces on their own: the proofs against an HMAC computed independently (the
// openssl CLI), the strict parsing of a call's credentials and the replay window.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "auth.h"

namespace fleet_rpc {
namespace {

// HMAC-SHA256 of the file `message` under `key`, by `openssl dgst` (hex), or "" when the CLI
// is missing.
std::string OpensslHmac(const std::string& key, const std::string& message) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fleet-auth-test-" + std::to_string(::getpid()));
  {
    std::ofstream out(path, std::ios::binary);
    out << message;
  }
  const std::string cmd = "openssl dgst -sha256 -mac HMAC -macopt key:" + key + " -r " +
                          path.string() + " 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    ::pclose(p);
  }
  std::filesystem::remove(path);
  return out.substr(0, out.find(' '));
}

std::string Framed(const std::string& bytes) {
  std::string out;
  const uint64_t n = bytes.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + bytes;
}

std::string Word(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

TEST(RpcAuth, ProofsAreHmacSha256OfTheFramedFields) {
  const std::string key = "0123456789abcdef0123456789abcdef";
  const std::string challenge = "c0ffee";
  const std::string head = Framed("fleet transport_rpc v1");
  const std::string hello = head + Framed("hello") + Framed(challenge) + Framed("n0nce");
  const std::string reference = OpensslHmac(key, hello);
  if (reference.empty()) GTEST_SKIP() << "the openssl CLI is missing";
  EXPECT_EQ(HelloProof(key, challenge, "n0nce"), reference);

  const std::string call = head + Framed("call") + Framed(challenge) + Framed(Word(7)) +
                           Framed(Word(42)) + Framed("/fleet.transport_rpc.Transport/Send");
  EXPECT_EQ(CallProof(key, challenge, 7, 42, "/fleet.transport_rpc.Transport/Send"),
            OpensslHmac(key, call));
  const std::string answer = head + Framed("answer") + Framed(challenge) + Framed(Word(7)) +
                             Framed(Word(42)) + Framed(Word(16));
  EXPECT_EQ(AnswerProof(key, challenge, 7, 42, 16), OpensslHmac(key, answer));
}

TEST(RpcAuth, EveryFieldChangesTheProof) {
  const std::string base = CallProof("key-one-key-one!", "ch", 1, 2, "/m");
  EXPECT_NE(base, CallProof("key-one-key-one?", "ch", 1, 2, "/m"));
  EXPECT_NE(base, CallProof("key-one-key-one!", "cH", 1, 2, "/m"));
  EXPECT_NE(base, CallProof("key-one-key-one!", "ch", 3, 2, "/m"));
  EXPECT_NE(base, CallProof("key-one-key-one!", "ch", 1, 3, "/m"));
  EXPECT_NE(base, CallProof("key-one-key-one!", "ch", 1, 2, "/n"));
  // The same bytes split differently between fields are a different message.
  EXPECT_NE(HelloProof("k", "ab", "c"), HelloProof("k", "a", "bc"));
  EXPECT_NE(AnswerProof("k", "ch", 1, 2, 0), AnswerProof("k", "ch", 1, 2, 14));
}

TEST(RpcAuth, CallCredentialsRoundTripAndParseStrictly) {
  CallAuth a;
  a.client_id = 0x00ab00cd00ef0012ULL;
  a.counter = 18446744073709551615ULL;
  a.proof = std::string(64, 'e');
  const std::string text = FormatCallAuth(a);
  EXPECT_EQ(text, "00ab00cd00ef0012.18446744073709551615." + std::string(64, 'e'));
  const auto back = ParseCallAuth(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->client_id, a.client_id);
  EXPECT_EQ(back->counter, a.counter);
  EXPECT_EQ(back->proof, a.proof);

  const std::string proof(64, '1');
  const char* bad[] = {
      "",
      "00ab00cd00ef0012.1",
      "00ab00cd00ef001.1.",                                       // short id
      "0000000000000000.1.",                                      // client id 0
      "00ab00cd00ef0012.0.",                                      // counter 0
      "00ab00cd00ef0012.01.",                                     // leading zero
      "00ab00cd00ef0012.18446744073709551616.",                   // counter overflows
      "00ab00cd00ef0012.-1.",
      "00AB00CD00EF0012.1.",                                      // upper case
      "00ab00cd00ef0012.1+.",
  };
  for (const char* prefix : bad) {
    const std::string candidate = std::string(prefix) + (std::string(prefix).empty() ? "" : proof);
    EXPECT_FALSE(ParseCallAuth(candidate).has_value()) << candidate;
  }
  EXPECT_FALSE(ParseCallAuth("00ab00cd00ef0012.1." + std::string(63, '1')).has_value());
  EXPECT_FALSE(ParseCallAuth("00ab00cd00ef0012.1." + std::string(65, '1')).has_value());
  EXPECT_FALSE(ParseCallAuth("00ab00cd00ef0012.1." + std::string(63, '1') + "g").has_value());
  EXPECT_TRUE(ParseCallAuth("00ab00cd00ef0012.1." + proof).has_value());
}

TEST(RpcAuth, ProofsEqualNeedsTheSameLengthAndBytes) {
  EXPECT_TRUE(ProofsEqual("abc", "abc"));
  EXPECT_FALSE(ProofsEqual("abc", "abd"));
  EXPECT_FALSE(ProofsEqual("abc", "abcd"));
  EXPECT_FALSE(ProofsEqual("", "a"));
}

TEST(RpcReplayWindow, EachCounterIsAcceptedOnceInAnyOrder) {
  using V = ReplayWindow::Verdict;
  ReplayWindow w;
  EXPECT_EQ(w.Accept(9, 5), V::kFresh);
  EXPECT_EQ(w.Accept(9, 3), V::kFresh);  // late, but inside the window
  EXPECT_EQ(w.Accept(9, 5), V::kReplayed);
  EXPECT_EQ(w.Accept(9, 3), V::kReplayed);
  EXPECT_EQ(w.Accept(9, 4), V::kFresh);
  EXPECT_EQ(w.Accept(10, 5), V::kFresh);  // another client has counters of its own
  // Sliding by less than the window keeps what is still inside it.
  EXPECT_EQ(w.Accept(9, 5 + ReplayWindow::kWindow - 1), V::kFresh);
  EXPECT_EQ(w.Accept(9, 5), V::kReplayed);
  EXPECT_EQ(w.Accept(9, 6), V::kFresh);
  EXPECT_EQ(w.Accept(9, 4), V::kTooOld);
  // A counter whose slot was reused by the slide is fresh, the one that left is too old.
  const uint64_t top = 5 + ReplayWindow::kWindow - 1;
  EXPECT_EQ(w.Accept(9, top + 3), V::kFresh);
  EXPECT_EQ(w.Accept(9, 7), V::kTooOld);
  EXPECT_EQ(w.Accept(9, top + 2), V::kFresh);
  EXPECT_EQ(w.Accept(9, top + 2), V::kReplayed);
  // A jump past the whole window forgets every slot but refuses everything below it.
  EXPECT_EQ(w.Accept(9, top + 3 * ReplayWindow::kWindow), V::kFresh);
  EXPECT_EQ(w.Accept(9, top + 3), V::kTooOld);
  EXPECT_EQ(w.Accept(9, top + 3 * ReplayWindow::kWindow - 1), V::kFresh);
}

TEST(RpcReplayWindow, NewClientsBeyondTheCapAreRefused) {
  using V = ReplayWindow::Verdict;
  ReplayWindow w;
  for (uint64_t id = 1; id <= ReplayWindow::kMaxClients; ++id) {
    ASSERT_EQ(w.Accept(id, 1), V::kFresh) << id;
  }
  EXPECT_EQ(w.Accept(ReplayWindow::kMaxClients + 1, 1), V::kFull);
  // Known clients go on.
  EXPECT_EQ(w.Accept(1, 2), V::kFresh);
  EXPECT_EQ(w.Accept(1, 1), V::kReplayed);
}

}  // namespace
}  // namespace fleet_rpc
