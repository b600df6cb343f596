// The rendezvous store as the plugin ABI sees it (FleetStore, fleet_host.h): a C table of four
// slots over any Store. The host hands these to communicators (FleetCommConfig.store) and to
// plugins asking for store_open; tests use them to drive a communicator plugin through the ABI.
//
// Lifetime: an AbiStore refers to `base` without owning it; both must outlive every user of
// table(). The table's address is stable for the AbiStore's life (it is not copyable or
// movable). Threading: as the base store (every Store is thread-safe).
#pragma once

#include <memory>
#include <string_view>

#include "rendezvous/store.h"
#include "fleet/fleet_host.h"

namespace fleet {

class AbiStore {
 public:
  // A view of `base` scoped under `scope` ("" = unscoped).
  AbiStore(Store* base, std::string_view scope);
  AbiStore(const AbiStore&) = delete;
  AbiStore& operator=(const AbiStore&) = delete;

  const FleetStore* table() const { return &table_; }
  Store* store() const { return view_; }

 private:
  std::unique_ptr<ScopedStore> scoped_;  // null when unscoped
  Store* view_;
  FleetStore table_{};
};

}  // namespace fleet
