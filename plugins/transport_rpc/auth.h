// Challenge-response between the rpc transport's clients and servers, keyed by the shared token
// (transport.token, by default derived from the job secret by the host). The token itself never
// crosses the wire, and neither does anything that could be replayed.
//
// The exchange:
//   1. Hello. A client's first call asks the server for its challenge (32 random bytes chosen per
//      server process), sending a random nonce of its own. The server answers with the challenge
//      and a proof that it holds the token: HMAC(token, "hello" | challenge | nonce). The client
//      checks the proof, so a stranger listening at the endpoint (a server that died, a port
//      taken by someone else) learns nothing and gets no gradient.
//   2. Every later call carries (client id, counter, proof), the proof being
//      HMAC(token, "call" | challenge | client id | counter | method). The server checks it in
//      constant time, then that this (client id, counter) was not seen before (ReplayWindow),
//      so a recorded call cannot be played again, to this server or to any other.
//   3. Every answer to an authenticated call carries HMAC(token, "answer" | challenge |
//      client id | counter | status code); the client accepts an OK only with it, so nobody but
//      the server can tell a trainer that its send or barrier went through.
// What this does not protect: the payload bytes themselves (a variable's values) are not
// covered by the proofs; on a network where someone can alter traffic in flight, TLS
// (transport.tls) is what keeps them intact and private. SECURITY.md says the same.
//
// Threading: the functions are pure; ReplayWindow is safe to call from many threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fleet_rpc {

// Metadata keys (gRPC metadata keys are lowercase ASCII).
// Hello request: the client's nonce (hex).
constexpr const char* kHelloNonceKey = "x-fleet-hello-nonce";
// Hello answer: the server's challenge (hex) and, when it holds a token, its proof (hex).
constexpr const char* kChallengeKey = "x-fleet-challenge";
constexpr const char* kHelloProofKey = "x-fleet-hello-proof";
// Every authenticated call: "<client id, 16 hex>.<counter, decimal>.<proof, 64 hex>".
constexpr const char* kCallAuthKey = "x-fleet-auth";
// The answer to an authenticated call: its proof (hex).
constexpr const char* kAnswerProofKey = "x-fleet-answer";

// Random bytes from the system's generator, as lowercase hex (2 * n characters).
std::string RandomHex(size_t n);

// The proofs (64 lowercase hex characters each). `key` is the token; the fields are framed
// with their lengths, so no two different inputs share a proof.
std::string HelloProof(std::string_view key, std::string_view challenge, std::string_view nonce);
std::string CallProof(std::string_view key, std::string_view challenge, uint64_t client_id,
                      uint64_t counter, std::string_view method);
std::string AnswerProof(std::string_view key, std::string_view challenge, uint64_t client_id,
                        uint64_t counter, int32_t code);

// Compares two proofs in time that depends only on their lengths.
bool ProofsEqual(std::string_view a, std::string_view b);

// A call's credentials, parsed from kCallAuthKey.
struct CallAuth {
  uint64_t client_id = 0;
  uint64_t counter = 0;
  std::string proof;
};
std::string FormatCallAuth(const CallAuth& auth);
// Strict: exactly the format above (client id and counter non-zero, no leading zeros in the
// counter, the proof 64 lowercase hex characters); nullopt otherwise.
std::optional<CallAuth> ParseCallAuth(std::string_view text);

// The counters each client has used, so a call is accepted once. Per client: the highest counter
// seen and a window of the kWindow below it (calls of one client run concurrently and may arrive
// out of order); a counter below the window is refused as too old. Only calls whose proof
// checked are recorded, so a stranger cannot fill it. At most kMaxClients clients are tracked
// (each trainer's connection to this server is one, and each restart a new one: far fewer in any
// job); a new client beyond that is refused rather than making room, because a forgotten
// client's old calls could be replayed. Memory: about kWindow / 8 + 64 bytes per client.
class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 1024;
  static constexpr size_t kMaxClients = 16384;

  enum class Verdict { kFresh, kReplayed, kTooOld, kFull };
  Verdict Accept(uint64_t client_id, uint64_t counter);

 private:
  struct Client {
    uint64_t highest = 0;
    uint64_t seen[kWindow / 64] = {};  // bit (c % kWindow): counter c was used
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, Client> clients_;
};

}  // namespace fleet_rpc
