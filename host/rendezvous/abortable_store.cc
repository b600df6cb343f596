#include "rendezvous/abortable_store.h"

#include <algorithm>

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

Status AbortedWaiting(const std::vector<std::string>& keys) {
  std::vector<std::string> quoted;
  for (const std::string& k : keys) quoted.push_back(store_internal::QuoteKey(k));
  return Aborted("store: aborted while waiting for " + JoinWords(quoted));
}

}  // namespace

Status AbortableStore::DoWait(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    if (aborted_.load()) return AbortedWaiting(keys);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= kSlice) {
      // The last slice: its answer, a timeout included, is the whole wait's. Its message
      // gives the slice's length, so restate it with the caller's.
      Status s = base_->Wait(keys, std::max(left, std::chrono::milliseconds(0)));
      if (s.code() != Code::kDeadlineExceeded) return s;
      std::vector<std::string> missing;
      for (const std::string& k : keys) {
        if (!base_->Wait({k}, std::chrono::milliseconds(0)).ok()) missing.push_back(k);
      }
      return store_internal::MissingKeysError("store", missing, timeout);
    }
    Status s = base_->Wait(keys, kSlice);
    if (s.code() != Code::kDeadlineExceeded) return s;
  }
}

StatusOr<std::string> AbortableStore::DoGet(const std::string& key,
                                            std::chrono::milliseconds timeout) {
  FLEET_RETURN_IF_ERROR(DoWait({key}, timeout));
  if (aborted_.load()) return AbortedWaiting({key});
  return base_->Get(key, std::chrono::milliseconds(0));
}

}  // namespace fleet
