// Gloo's rendezvous::Store interface over a fleet::Store, for the "gloo" contender, which joins
// its group without the plugin. Gloo's interface reports failure only by exception, so a failed
// store call throws std::runtime_error with the store's message; gloo_allreduce.cc catches it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "rendezvous/store.h"

namespace fleet::bench {

class GlooStore final : public gloo::rendezvous::Store {
 public:
  // `base` must outlive this; every wait without a deadline of its own uses `timeout`.
  GlooStore(fleet::Store* base, std::chrono::milliseconds timeout)
      : base_(base), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  fleet::Store* base_;
  std::chrono::milliseconds timeout_;
};

}  // namespace fleet::bench
