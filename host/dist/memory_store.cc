#include "dist/memory_store.h"

#include <charconv>

#include "support/text.h"

namespace fleet {

void MemoryStore::Set(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = std::move(value);
  }
  changed_.notify_all();
}

StatusOr<std::string> MemoryStore::Get(const std::string& key,
                                       std::chrono::milliseconds timeout) {
  FLEET_RETURN_IF_ERROR(Wait({key}, timeout));
  std::lock_guard<std::mutex> lock(mu_);
  return values_.at(key);
}

StatusOr<int64_t> MemoryStore::Add(const std::string& key, int64_t delta) {
  int64_t sum = delta;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    if (it != values_.end()) {
      int64_t current = 0;
      const std::string& text = it->second;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return InvalidArgument("store key '" + key + "' does not hold an integer");
      }
      sum += current;
    }
    values_[key] = std::to_string(sum);
  }
  changed_.notify_all();
  return sum;
}

Status MemoryStore::Wait(const std::vector<std::string>& keys,
                         std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_present = [&] {
    for (const std::string& k : keys) {
      if (values_.count(k) == 0) return false;
    }
    return true;
  };
  if (changed_.wait_for(lock, timeout, all_present)) return OkStatus();
  std::vector<std::string> missing;
  for (const std::string& k : keys) {
    if (values_.count(k) == 0) missing.push_back("'" + k + "'");
  }
  return DeadlineExceeded("store: timed out after " + std::to_string(timeout.count()) +
                          " ms waiting for " + JoinWords(missing));
}

}  // namespace fleet
