// Gloo's rendezvous::Store interface over the FleetStore a communicator is handed, under a key
// prefix (one per communicator and sub-group), with every wait bounded by the communicator's
// timeout. Gloo's store interface has no error channel but exceptions, so a failed store call
// throws StoreError carrying the Fleet code and message; the communicator turns it back into a
// FleetStatus at the ABI boundary.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "fleet/fleet_host.h"

namespace fleet_gloo {

// An error with a Fleet status code, thrown inside the plugin and caught at the ABI boundary.
struct CommError : std::runtime_error {
  CommError(int32_t code, const std::string& message) : std::runtime_error(message), code(code) {}
  int32_t code;
};

class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(const FleetHostApi* host, const FleetStore* store, std::string prefix,
               std::chrono::milliseconds timeout)
      : host_(host), store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Whether key exists now (a wait with the shortest deadline); errors other than a missed
  // deadline throw.
  bool Exists(const std::string& key);

 private:
  // Throws CommError for a non-NULL status (freeing it).
  void Check(FleetStatus* status, const std::string& what) const;

  const FleetHostApi* host_;
  const FleetStore* store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace fleet_gloo
