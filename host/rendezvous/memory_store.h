// A key-value rendezvous store inside one process: the store of a job whose ranks are threads
// of this process (and of any single-process run). Every wait has a deadline. See store.h for
// the contract.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "rendezvous/store.h"
#include "support/status.h"

namespace fleet {

class MemoryStore final : public Store {
 public:
  // Setting a key in memory cannot fail, so a caller holding a MemoryStore gets no Status;
  // through Store& the same call answers OK.
  void Set(const std::string& key, std::string value);
  using Store::Add;
  using Store::Get;
  using Store::Wait;

 protected:
  Status DoSet(const std::string& key, std::string_view value) override;
  StatusOr<std::string> DoGet(const std::string& key,
                              std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> DoAdd(const std::string& key, int64_t delta) override;
  Status DoWait(const std::vector<std::string>& keys,
                std::chrono::milliseconds timeout) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace fleet
