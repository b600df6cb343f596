// A key-value rendezvous store inside one process: the store of a job whose ranks are threads
// of this process (and of any single-process run). Every wait has a deadline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "support/status.h"

namespace fleet {

class MemoryStore {
 public:
  void Set(const std::string& key, std::string value);
  // Waits up to `timeout` for the key; DEADLINE_EXCEEDED names it.
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
  // Adds delta to the decimal integer at key (0 if absent) and returns the sum.
  StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // Waits for every key; DEADLINE_EXCEEDED names those still missing.
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace fleet
