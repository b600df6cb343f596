#include "deliveries.h"

namespace fleet_rpc {

DeliveryLog::Claim DeliveryLog::Begin(const Key& key,
                                      std::chrono::system_clock::time_point deadline,
                                      Answer* answer) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto [it, inserted] = entries_.try_emplace(key);
    if (inserted) return Claim::kDeliver;
    if (it->second.done) {
      *answer = it->second.answer;
      return Claim::kAnswered;
    }
    // The earlier attempt is still receiving or delivering (its connection dropped while the
    // handler ran, say): its outcome decides what this one answers.
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      auto again = entries_.find(key);
      if (again != entries_.end() && !again->second.done) return Claim::kTimedOut;
    }
  }
}

void DeliveryLog::Finish(const Key& key, Answer answer) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[key];
  e.done = true;
  e.answer = std::move(answer);
  finished_.push_back(key);
  while (finished_.size() > kRemembered) {
    entries_.erase(finished_.front());
    finished_.pop_front();
  }
  cv_.notify_all();
}

void DeliveryLog::Abandon(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && !it->second.done) entries_.erase(it);
  cv_.notify_all();
}

}  // namespace fleet_rpc
