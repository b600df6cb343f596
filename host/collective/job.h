// The job this process belongs to: its resolved role, the job's rendezvous store, and the
// collective runtime over the configured communicator.
//
// Store (DESIGN.md §6): a job of one trainer keeps a store in memory. A larger one uses
// [comm] store:
//   - "tcp" (default): a TcpStore at the master address, which is role.master (MASTER_ADDR /
//     MASTER_PORT, or [role] master), else trainer 0's endpoint. Rank 0 serves it there (binding
//     and holding the port) unless FLEET_MASTER_SERVED=1 says a launcher already does; every
//     rank, rank 0 included, is then a client.
//   - "file": a FileStore in [comm] store_dir, a directory every rank can reach.
// Keys are scoped under "job/<FLEET_JOB_ID or fleet>/", then per ring by the runtime.
//
// The communicators compare the ranks' collectives as [comm] check says, or
// FLEET_COLLECTIVE_CHECK where set (collective/desync.h); a bad variable fails Open.
//
// The address the communicator advertises is [comm] hostname, else the host of
// current_endpoint, else this machine's address on the route to the master (127.0.0.1 when the
// master is loopback).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "config/config.h"
#include "collective/collective_runtime.h"
#include "roles/role.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

class Job {
 public:
  // Opens the store (serving it on rank 0 where that is the rule above). `comm` may be null
  // for a job without collectives; then collectives() is null too. Errors name the master
  // address and the rule that chose it. Nothing here waits for other ranks except TcpStore's
  // connect, which is bounded by [comm] timeout_s.
  // `device` is the device component the job's tensors live on (for the communicator's
  // placement; must outlive the job).
  static StatusOr<std::unique_ptr<Job>> Open(const Config& config, const Role& role,
                                             const ComponentRecord* comm,
                                             const ComponentRecord* device,
                                             const std::map<std::string, std::string>& env);
  ~Job();

  const Role& role() const { return role_; }
  Store* store() const { return scoped_.get(); }
  CollectiveRuntime* collectives() const { return collectives_.get(); }
  // How the store was chosen, for logs: "memory", "tcp 127.0.0.1:41234 (served here)", ...
  const std::string& store_description() const { return store_description_; }

 private:
  Job() = default;

  Role role_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> root_;
  std::unique_ptr<ScopedStore> scoped_;
  std::unique_ptr<CollectiveRuntime> collectives_;
  std::string store_description_;
};

// The local address a connection to host:port would leave from (no packet is sent), or the
// error; used to tell peers where this process's communicator listens.
StatusOr<std::string> LocalAddressToward(const std::string& host, int port);

}  // namespace fleet
