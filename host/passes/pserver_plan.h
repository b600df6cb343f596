// The analysis the pserver pass (pserver_pass.h) builds before rewriting anything: which ops of
// "main" are learning-rate and optimize ops, which (param, grad) pairs there are, how each
// parameter is cut into blocks and which server gets each block, and which vars and ops move
// with each parameter to its servers. The trainer rewrite (pserver_transpile.cc) and the
// server programs (pserver_programs.cc) both read it; nothing here edits a program.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"
#include "passes/pserver_slicing.h"
#include "plugin/pass.h"
#include "support/status.h"

namespace fleet::passes::pserver {

inline constexpr std::string_view kPass = "pserver";
inline constexpr std::string_view kLrCounter = "@LR_DECAY_COUNTER@";
using ir::kGrowableHeight;

enum class Init { kFull, kShard };

struct PassOptions {
  bool sync = true;
  bool slice_var_up = true;
  int64_t min_block_size = 8192;
  SplitMethod split_method = SplitMethod::kRoundRobin;
  Init init = Init::kFull;
  // > 0: GEO-SGD. Trainers keep their optimizers and every geo_k_steps steps exchange each
  // block's change with its server, which adds it (sync must be false).
  int64_t geo_k_steps = 0;
  bool geo() const { return geo_k_steps > 0; }
};

// A var that moves to the servers with its parameter (an accumulator or a temporary of the
// parameter's optimize ops). `sliced`: cut like the parameter (one block per parameter block);
// otherwise each block gets a whole copy.
struct OwnedVar {
  std::string name;
  bool sliced = false;
  bool accumulator = false;  // an optimizer input (initialised in startup), not a temporary
};

struct ParamPlan {
  std::string param;
  std::string grad;
  ir::Var param_var;                    // as declared in main
  ir::Var grad_var;
  std::vector<int64_t> rows;            // dim-0 size of each block; one entry = not cut
  std::vector<int32_t> servers;         // the server of each block
  std::vector<size_t> ops;              // main's optimize ops of this param, in program order
  std::vector<OwnedVar> owned;          // by name
  // A table the trainers never hold (Paddle's remote prefetch): its gradient is sparse and the
  // trainer's main reads it only in lookup ops (replaced by distributed_lookup_table, which
  // fetches the batch's rows) and their gradients (which then take its height as an attribute).
  bool prefetch = false;
  // A growable table (its lookups carry growable; always prefetched): one block per server,
  // block k holding the ids of fleet_row_shard(id, servers) == k, each declared as the one-row
  // prototype [1, dim]; its gradients stand for [kGrowableHeight, dim], rows being the ids.
  bool growable = false;

  size_t num_blocks() const { return rows.size(); }
  bool split() const { return rows.size() > 1; }
  // The shape of block `i` of a var shaped like the parameter.
  std::vector<int64_t> BlockShape(size_t i) const;
  // The shape block `i` of the gradient stands for: BlockShape(i), or for a growable table
  // [kGrowableHeight, dim].
  std::vector<int64_t> GradShape(size_t i) const;
  // Block i's name for `var` (the param, the grad or an owned var): the var itself when the
  // parameter is not cut, else "<var>.block<i>".
  std::string BlockVar(const std::string& var, size_t i) const;
  const OwnedVar* FindOwned(const std::string& var) const;
};

struct Plan {
  PassOptions options;
  std::vector<std::string> endpoints;   // the servers, in index order
  int32_t trainers = 1;
  int32_t trainer_id = 0;
  std::vector<ParamPlan> params;        // sorted by parameter name
  std::vector<size_t> lr_ops;           // main's learning-rate ops, in program order
  std::set<size_t> removed_ops;         // lr_ops and every optimize op

  // Gradients carry ".trainer_<id>" on the wire (sync mode with several trainers).
  bool trainer_suffix() const { return options.sync && trainers > 1; }
  int32_t num_servers() const { return static_cast<int32_t>(endpoints.size()); }
};

// The options of the pass, checked (INVALID_ARGUMENT naming the option).
StatusOr<PassOptions> ReadOptions(const ir::AttrMap& options);

// Analyses `main` (see the file comment). Errors are INVALID_ARGUMENT naming the op or var: no
// optimizer op, an optimizer type without a slicing rule, a gradient that no op of main
// produces, an optimize op that touches several parameters' vars (clipping by global norm) or
// forward values, async mode with a learning-rate schedule, a table looked up with
// is_distributed that cannot stay on the servers (a dense gradient, or another op reads it).
StatusOr<Plan> MakePlan(const ir::Program& main, const PassContextInfo& ctx,
                        const PassOptions& options);

// Renames vars in every slot and in op_role_var.
void RenameVars(ir::Op& op, const std::map<std::string, std::string>& names);

// lookup_table or lookup_table_v2; with `grad`, their gradient ops.
bool IsLookup(const ir::Op& op, bool grad = false);

// Every var an op reads or writes.
std::vector<std::string> AllVars(const ir::Op& op);

// The trainer's programs, rewritten in place (pserver_transpile.cc). `original_main` is main
// before RewriteTrainerMain.
Status RewriteTrainerMain(const Plan& plan, ir::Program& main);
Status RewriteTrainerStartup(const Plan& plan, const ir::Program& original_main,
                             const ir::Program& main, ir::Program& startup);

// The programs of server `server` (pserver_programs.cc), from the original (untranspiled)
// main and startup.
StatusOr<ir::Program> ServerMain(const Plan& plan, const ir::Program& main, int32_t server);
// GEO-SGD: server `server`'s blocks, each with a block that adds the trainers' deltas
// ("<block>.delta") to it as they arrive: elementwise_add, or for a table whose gradient is
// sparse sum(X=[block, delta]) of a selected_rows delta (listed in sparse_grad_to_param).
StatusOr<ir::Program> GeoServerMain(const Plan& plan, int32_t server);
// GEO-SGD: main keeps every op and starts with one geo_sgd op over every parameter, `sparse`
// flagging those whose gradient is sparse (they exchange changed rows only).
Status GeoTrainerMain(const Plan& plan, ir::Program& main);
StatusOr<ir::Program> ServerStartup(const Plan& plan, const ir::Program& startup,
                                    const ir::Program& server_main, int32_t server);

}  // namespace fleet::passes::pserver
