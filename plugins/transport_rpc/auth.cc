#include "auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>
#include <stdexcept>

namespace fleet_rpc {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const unsigned char* p, size_t n) {
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 15];
  }
  return out;
}

// Appends a field framed by its length (8 bytes, little-endian), so that ("ab", "c") and
// ("a", "bc") are different messages.
void Field(std::string* msg, std::string_view bytes) {
  uint64_t n = bytes.size();
  for (int i = 0; i < 8; ++i) msg->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  msg->append(bytes);
}

std::string Word(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

std::string Mac(std::string_view key, const std::string& msg) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  // An empty key never reaches here: without a token there is no authentication at all.
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &n) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return Hex(out, n);
}

std::string Message(std::string_view label, std::string_view challenge) {
  std::string msg;
  Field(&msg, "fleet transport_rpc v1");
  Field(&msg, label);
  Field(&msg, challenge);
  return msg;
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string RandomHex(size_t n) {
  std::string bytes(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(n)) != 1) {
    throw std::runtime_error("the system's random generator failed");
  }
  return Hex(reinterpret_cast<const unsigned char*>(bytes.data()), n);
}

std::string HelloProof(std::string_view key, std::string_view challenge, std::string_view nonce) {
  std::string msg = Message("hello", challenge);
  Field(&msg, nonce);
  return Mac(key, msg);
}

std::string CallProof(std::string_view key, std::string_view challenge, uint64_t client_id,
                      uint64_t counter, std::string_view method) {
  std::string msg = Message("call", challenge);
  Field(&msg, Word(client_id));
  Field(&msg, Word(counter));
  Field(&msg, method);
  return Mac(key, msg);
}

std::string AnswerProof(std::string_view key, std::string_view challenge, uint64_t client_id,
                        uint64_t counter, int32_t code) {
  std::string msg = Message("answer", challenge);
  Field(&msg, Word(client_id));
  Field(&msg, Word(counter));
  Field(&msg, Word(static_cast<uint32_t>(code)));
  return Mac(key, msg);
}

bool ProofsEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string FormatCallAuth(const CallAuth& auth) {
  std::string id(16, '0');
  for (int i = 0; i < 16; ++i) id[15 - i] = kHex[(auth.client_id >> (4 * i)) & 15];
  return id + "." + std::to_string(auth.counter) + "." + auth.proof;
}

std::optional<CallAuth> ParseCallAuth(std::string_view text) {
  // 16 + 1 + (1..20) + 1 + 64 characters.
  if (text.size() < 83 || text.size() > 102) return std::nullopt;
  const std::string_view id = text.substr(0, 16);
  if (text[16] != '.' || !IsLowerHex(id)) return std::nullopt;
  const std::string_view rest = text.substr(17);
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 20) return std::nullopt;
  const std::string_view counter = rest.substr(0, dot);
  const std::string_view proof = rest.substr(dot + 1);
  if (counter[0] == '0' || proof.size() != 64 || !IsLowerHex(proof)) return std::nullopt;
  CallAuth out;
  for (char c : counter) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  auto [end, ec] = std::from_chars(counter.data(), counter.data() + counter.size(), out.counter);
  if (ec != std::errc() || end != counter.data() + counter.size()) return std::nullopt;
  std::from_chars(id.data(), id.data() + id.size(), out.client_id, 16);
  if (out.client_id == 0) return std::nullopt;
  out.proof = std::string(proof);
  return out;
}

ReplayWindow::Verdict ReplayWindow::Accept(uint64_t client_id, uint64_t counter) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(client_id);
  if (it == clients_.end()) {
    if (clients_.size() >= kMaxClients) return Verdict::kFull;
    it = clients_.emplace(client_id, Client{}).first;
  }
  Client& c = it->second;
  auto bit = [&](uint64_t v) -> uint64_t& { return c.seen[(v % kWindow) / 64]; };
  auto mask = [](uint64_t v) { return uint64_t{1} << (v % 64); };
  if (counter > c.highest) {
    // Slide the window up: the counters it leaves behind become "too old", and the slots they
    // free are cleared for the counters now inside it.
    const uint64_t shift = counter - c.highest;
    if (shift >= kWindow) {
      for (uint64_t& w : c.seen) w = 0;
    } else {
      for (uint64_t v = c.highest + 1; v <= counter; ++v) bit(v) &= ~mask(v);
    }
    c.highest = counter;
    bit(counter) |= mask(counter);
    return Verdict::kFresh;
  }
  if (c.highest - counter >= kWindow) return Verdict::kTooOld;
  if (bit(counter) & mask(counter)) return Verdict::kReplayed;
  bit(counter) |= mask(counter);
  return Verdict::kFresh;
}

}  // namespace fleet_rpc
