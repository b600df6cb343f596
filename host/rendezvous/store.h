// host/rendezvous: the key-value stores the processes of a job meet in (memory, file, TCP)
// and the abortable wrapper. The plugin ABI's view of a store is plugin/store_abi.h.
// Depends on: support/.
//
// The rendezvous store: a key-value store shared by the ranks of one job (DESIGN.md §6). NCCL's
// unique id, Gloo's pair addresses and barrier counters travel through it.
//
// Contract shared by every store:
//   - Keys and values are arbitrary byte strings (a key may hold '\0' or '/'); a store may cap
//     their sizes and answers INVALID_ARGUMENT naming the key past its cap.
//   - Set replaces any previous value. A reader sees either the old or the new value, never a
//     part of one.
//   - Get waits until the key exists; Wait until every key exists. Both take a relative
//     deadline (negative counts as zero) and answer DEADLINE_EXCEEDED naming the keys still
//     missing when it passes.
//   - Add treats the value as a decimal int64 (0 when absent), adds delta atomically across all
//     users of the store and returns the sum; a value that is not an integer is
//     INVALID_ARGUMENT.
//   - A store whose backing (a directory, a server) has gone away answers UNAVAILABLE naming it;
//     no call blocks past its deadline.
//   - Threading: every method is thread-safe and may block; many threads may wait at once.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"
#include "support/text.h"
#include "support/text.h"

namespace fleet {

class Store {
 public:
  virtual ~Store() = default;

  Status Set(const std::string& key, std::string_view value) { return DoSet(key, value); }
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) {
    return DoGet(key, std::max(timeout, std::chrono::milliseconds(0)));
  }
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) { return DoAdd(key, delta); }
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    return DoWait(keys, std::max(timeout, std::chrono::milliseconds(0)));
  }

 protected:
  // The public methods forward here (so a store may also offer its own non-virtual overloads,
  // as MemoryStore's infallible Set does). Timeouts arrive clamped to >= 0.
  virtual Status DoSet(const std::string& key, std::string_view value) = 0;
  virtual StatusOr<std::string> DoGet(const std::string& key,
                                      std::chrono::milliseconds timeout) = 0;
  virtual StatusOr<int64_t> DoAdd(const std::string& key, int64_t delta) = 0;
  virtual Status DoWait(const std::vector<std::string>& keys,
                        std::chrono::milliseconds timeout) = 0;
};

// A view of another store whose keys are prefixed with "<scope>/": a job's store handed to one
// communicator, so keys of different jobs and communicators never collide. Scopes nest. The
// base store must outlive the view; error messages name the full (prefixed) keys.
class ScopedStore final : public Store {
 public:
  ScopedStore(Store* base, std::string_view scope)
      : base_(base), prefix_(std::string(scope) + "/") {}

  const std::string& prefix() const { return prefix_; }

 protected:
  Status DoSet(const std::string& key, std::string_view value) override {
    return base_->Set(prefix_ + key, value);
  }
  StatusOr<std::string> DoGet(const std::string& key,
                              std::chrono::milliseconds timeout) override {
    return base_->Get(prefix_ + key, timeout);
  }
  StatusOr<int64_t> DoAdd(const std::string& key, int64_t delta) override {
    return base_->Add(prefix_ + key, delta);
  }
  Status DoWait(const std::vector<std::string>& keys,
                std::chrono::milliseconds timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const std::string& k : keys) full.push_back(prefix_ + k);
    return base_->Wait(full, timeout);
  }

 private:
  Store* base_;
  std::string prefix_;
};

namespace store_internal {

// A key as error messages show it: quoted, with bytes outside printable ASCII escaped.
inline std::string QuoteKey(std::string_view key) { return QuoteForMessage(key, key.size()); }

// The DEADLINE_EXCEEDED every store answers when keys are still missing at the deadline.
inline Status MissingKeysError(std::string_view store, const std::vector<std::string>& missing,
                               std::chrono::milliseconds timeout) {
  std::vector<std::string> quoted;
  for (const std::string& k : missing) quoted.push_back(QuoteKey(k));
  return DeadlineExceeded(std::string(store) + ": timed out after " +
                          std::to_string(timeout.count()) + " ms waiting for " +
                          JoinWords(quoted));
}

// Parses the decimal integer Add keeps at a key.
inline StatusOr<int64_t> ParseCounter(std::string_view store, const std::string& key,
                                      std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return InvalidArgument(std::string(store) + ": key " + QuoteKey(key) +
                           " does not hold an integer");
  }
  return value;
}

}  // namespace store_internal
}  // namespace fleet
