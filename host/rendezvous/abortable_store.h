// A view of a store whose blocking calls (Get, Wait) can be cut short from another thread: the
// rendezvous of a communicator that is still joining waits on the store, and a peer's failure
// must be able to release it at once rather than at its deadline.
//
// Waits are made of slices of at most kSlice against the base store, so Abort takes effect
// within a slice; a deadline that passes gives the base store's DEADLINE_EXCEEDED for the whole
// wait, naming the keys still missing. Set and Add are forwarded unchanged (they do not wait on
// peers). Threading: as the base store; Abort from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/store.h"

namespace fleet {

class AbortableStore final : public Store {
 public:
  static constexpr std::chrono::milliseconds kSlice{50};

  // `base` must outlive the view.
  explicit AbortableStore(Store* base) : base_(base) {}

  // Every Get and Wait in progress or to come returns ABORTED (within a slice).
  void Abort() { aborted_.store(true); }
  bool aborted() const { return aborted_.load(); }

 protected:
  Status DoSet(const std::string& key, std::string_view value) override {
    return base_->Set(key, value);
  }
  StatusOr<std::string> DoGet(const std::string& key, std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> DoAdd(const std::string& key, int64_t delta) override {
    return base_->Add(key, delta);
  }
  Status DoWait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  Store* base_;
  std::atomic<bool> aborted_{false};
};

}  // namespace fleet
