// What server.cc (setup, handlers) and server_loop.cc (rounds, exit) share: the
// definition of a server's optimize block. Not part of the server's interface.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pserver/growable_table.h"
#include "pserver/server.h"
#include "executor/executor.h"
#include "ir/program.h"

namespace fleet {

// One optimize (or LR) block of the pserver program, as a standalone program prepared once.
struct PsServer::Block {
  int32_t index = 0;   // in the pserver program
  int32_t parent = 0;
  std::string label;   // "optimize block 3", for errors
  ir::Program program;
  std::unique_ptr<exec::PreparedProgram> prepared;
  // The sync merge sum(X=[<m>.trainer_0 ...]) -> (Out=[<m>]) and its scale(1/N), when the
  // block has them: the sum's op index, the scale's (-1 when absent) and each trainer's
  // receive var. The merge is rebuilt for rounds some trainers no longer take part in.
  int64_t merge_op = -1;
  int64_t scale_op = -1;
  std::vector<std::string> merge_inputs;  // by trainer id
  struct Variant {
    ir::Program program;
    std::unique_ptr<exec::PreparedProgram> prepared;
  };
  std::map<std::vector<bool>, std::unique_ptr<Variant>> variants;  // by contributing trainers
  std::mutex mu;  // async: one update (or read of what it writes) at a time
  // A sparse receive var it reads got new memory: prepare again before the next run.
  std::atomic<bool> stale{false};
  Growable* growable = nullptr;  // the growable table it updates, if any
};

// A growable table's shard on this server. `table`, the vars' memory and the declared shapes
// in writer->program change only under `mu`, and while no update of the table runs (sync:
// between rounds; async: with writer->mu held first).
struct PsServer::Growable {
  std::string name;                  // the table's block, "emb.block0"
  std::vector<std::string> vars;     // the block, then the optimizer's per-row vars
  std::vector<RowInitializer> inits; // per var
  std::vector<std::string> receives; // the receive vars of its gradients
  std::vector<std::string> decls;    // writer->program's vars whose rows are its slots
  Block* writer = nullptr;
  ir::DataType dtype = ir::DataType::kFloat32;
  int64_t width = 0;
  int64_t capacity = 1;              // rows of each var (the prototype's one at first)
  GrowableTable table;
  std::vector<std::pair<int64_t, int64_t>> created;  // ResolveRows' (id, slot), reused
  std::mutex mu;
  explicit Growable(GrowableTableOptions o) : table(o) {}
};

// A sparse gradient the server receives: its declared (dense) shape, the block that reads it,
// and how many of its entries the last send filled (the entries past that are empty). `used`
// and the var's memory change only under `mu` (and, async, the reader's lock taken first).
struct PsServer::SparseReceive {
  std::vector<int64_t> shape;
  Block* reader = nullptr;
  Growable* growable = nullptr;  // rows are ids of this table, made slots on arrival
  std::vector<int64_t> ids, slots;  // a growable send's ids and their slots, reused
  std::mutex mu;
  int64_t used = 0;
};

// The handed-out value of a Get: a view of the scope var (counted, sync) or a host copy.
struct PsServer::GetToken {
  std::vector<int64_t> dims;
  std::vector<uint8_t> copy;
  bool counted = false;  // holds a place in outstanding_gets_
};

// "300 s", "0.2 s".
std::string PsSeconds(std::chrono::milliseconds ms);

}  // namespace fleet
