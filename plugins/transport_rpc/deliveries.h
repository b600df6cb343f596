// At-most-once delivery of sends (fleet_transport.h, "Delivery"): the server remembers the
// sends it delivered to on_send, by (client id, request id), with the answer it gave, so that a
// client retrying a send whose reply was lost gets that answer again instead of a second
// delivery.
//
// Memory is bounded: the newest kRemembered answers are kept. A retry arrives within the
// client's backoff (seconds), long before that many later sends push its entry out.
//
// Threading: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace fleet_rpc {

class DeliveryLog {
 public:
  static constexpr size_t kRemembered = 1 << 16;

  using Key = std::pair<uint64_t, uint64_t>;  // (client id, request id)
  // What the first delivery answered.
  struct Answer {
    int32_t code = 0;  // FLEET_CODE_*
    std::string message;
  };
  enum class Claim {
    kDeliver,   // the caller delivers and then calls Finish or Abandon
    kAnswered,  // delivered before: *answer holds what it answered
    kTimedOut,  // another attempt is delivering it and did not finish before the deadline
  };

  // Claims `key` for delivery. While another attempt of the same send is delivering it, waits
  // (until `deadline`) for that attempt to finish or abandon it.
  Claim Begin(const Key& key, std::chrono::system_clock::time_point deadline, Answer* answer);
  // The claimed send was delivered and answered `answer`.
  void Finish(const Key& key, Answer answer);
  // The claimed send was not delivered (its payload never arrived): a retry delivers it.
  void Abandon(const Key& key);

 private:
  struct Entry {
    bool done = false;
    Answer answer;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Entry> entries_;
  std::deque<Key> finished_;  // oldest first; what Finish recorded, for eviction
};

// Holds a claim and abandons it unless Finish is called: every path that leaves before the
// delivery (a bad chunk, a cancelled stream, an exception) frees the send for a retry.
class DeliveryClaim {
 public:
  DeliveryClaim(DeliveryLog* log, DeliveryLog::Key key) : log_(log), key_(key) {}
  ~DeliveryClaim() {
    if (log_ != nullptr) log_->Abandon(key_);
  }
  DeliveryClaim(const DeliveryClaim&) = delete;
  DeliveryClaim& operator=(const DeliveryClaim&) = delete;
  void Finish(DeliveryLog::Answer answer) {
    if (log_ != nullptr) log_->Finish(key_, std::move(answer));
    log_ = nullptr;
  }

 private:
  DeliveryLog* log_;
  DeliveryLog::Key key_;
};

}  // namespace fleet_rpc
