#include "rendezvous/memory_store.h"

namespace fleet {

void MemoryStore::Set(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = std::move(value);
  }
  changed_.notify_all();
}

Status MemoryStore::DoSet(const std::string& key, std::string_view value) {
  Set(key, std::string(value));
  return OkStatus();
}

StatusOr<std::string> MemoryStore::DoGet(const std::string& key,
                                         std::chrono::milliseconds timeout) {
  FLEET_RETURN_IF_ERROR(DoWait({key}, timeout));
  std::lock_guard<std::mutex> lock(mu_);
  return values_.at(key);
}

StatusOr<int64_t> MemoryStore::DoAdd(const std::string& key, int64_t delta) {
  int64_t sum = delta;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    if (it != values_.end()) {
      FLEET_ASSIGN_OR_RETURN(int64_t current,
                             store_internal::ParseCounter("store", key, it->second));
      sum += current;
    }
    values_[key] = std::to_string(sum);
  }
  changed_.notify_all();
  return sum;
}

Status MemoryStore::DoWait(const std::vector<std::string>& keys,
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
    if (values_.count(k) == 0) missing.push_back(k);
  }
  return store_internal::MissingKeysError("store", missing, timeout);
}

}  // namespace fleet
