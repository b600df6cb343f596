// local_sgd: data parallelism by parameter averaging (Paddle's collective transpiler, LocalSGD).
// Options: nrings (int, default 1, >= 1), k_steps (int, default 1, >= 1).
//
// startup (appended): what grad_allreduce appends (c_comm_init per ring, c_broadcast of every
//   parameter, c_sync_comm_stream per ring), then for every parameter p, in the same order, a
//   persistable, stop_gradient var <p>@SNAPSHOT of p's type and `assign(X=p) -> (Out=snapshot)`.
// main (global block; every op added has op_role=Optimize; the loss gradient is NOT scaled):
//   1. scanning in reverse, after each update op (one with Param, Grad and LearningRate inputs)
//      of parameter p:
//        elementwise_sub(X=snapshot, Y=p) -> (Out=p)
//        c_sync_calc_stream(X=Out=p)
//        c_allreduce_sum(X=Out=p, ring_id)       ring_id counts 0, 1, .., nrings-1, 0, ...
//   2. appended: c_sync_comm_stream(X=Out=<last parameter of the scan>, ring_id=r) per ring;
//   3. appended, for each (p, snapshot) in program order of the update ops:
//        scale(X=Out=p, scale=1/world_size)
//        elementwise_sub(X=snapshot, Y=p) -> (Out=p)
//        assign(X=p) -> (Out=snapshot)
// So p = snap - mean_i(snap - p_i) = mean_i(p_i), the average of every rank's locally updated
// parameter, and the snapshot restarts from it.
//
// k_steps (Paddle's later fleet localsgd_configs.k_steps; the collective transpiler averages on
// every step): with k_steps > 1 the pass also adds the program "main.local", the main program as
// it was before this pass (a plain local step that neither averages nor touches the
// snapshots). The trainer runs "main" on every k_steps-th step and "main.local" on the others;
// it reads k_steps from the pass's options. With k_steps == 1 no program is added.
//
// Where it differs from Paddle: Paddle refuses nranks < 2 (here world_size 1 gives the same
// program, averaging over one rank); Paddle's startup snapshots default to float32 (here they
// take the parameter's dtype); there is no is_distributed notion; an update op found for a
// parameter the startup program does not declare, a parameter updated twice, an existing
// <p>@SNAPSHOT or "main.local", and a main program without update ops are INVALID_ARGUMENT.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "passes/collective_util.h"

namespace fleet::passes {
namespace {

constexpr std::string_view kLocalSgd = "local_sgd";
constexpr std::string_view kSnapshotSuffix = "@SNAPSHOT";

bool IsUpdateOp(const ir::Op& op) {
  return !op.Input("Param").empty() && !op.Input("Grad").empty() &&
         !op.Input("LearningRate").empty();
}

// Declares <param>@SNAPSHOT in `block` with the parameter's type.
Status AddSnapshotVar(ir::Block& block, const ir::Var& param, const std::string& snapshot,
                      std::string_view program) {
  ir::Var var;
  var.name = snapshot;
  var.dtype = param.dtype;
  var.shape = param.shape;
  var.persistable = true;
  var.stop_gradient = true;
  if (!block.AddVar(std::move(var)).ok()) {
    return InvalidArgument(std::string(kLocalSgd) + ": the " + std::string(program) +
                           " program already declares '" + snapshot + "'");
  }
  return OkStatus();
}

}  // namespace

Status RunLocalSgd(ProgramSet& programs, const PassContextInfo& ctx, const ir::AttrMap& options) {
  FLEET_ASSIGN_OR_RETURN(int32_t nrings, IntOption(options, "nrings", 1, kLocalSgd));
  FLEET_ASSIGN_OR_RETURN(int32_t k_steps, IntOption(options, "k_steps", 1, kLocalSgd));
  FLEET_RETURN_IF_ERROR(CheckRankAndWorld(ctx, kLocalSgd));
  FLEET_ASSIGN_OR_RETURN(ir::Program * startup, FindProgram(programs, "startup", kLocalSgd));
  FLEET_ASSIGN_OR_RETURN(ir::Program * main, FindProgram(programs, "main", kLocalSgd));
  if (k_steps > 1 && programs.count("main.local") != 0) {
    return InvalidArgument(std::string(kLocalSgd) +
                           ": the program set already has a 'main.local' program");
  }
  const ir::Program local = *main;

  // Main, step 1: the reverse scan.
  ir::Block& block = main->global();
  const int32_t opt = ir::op_role::kOptimize;
  std::vector<std::vector<ir::Op>> after(block.ops.size());
  std::vector<std::pair<std::string, std::string>> scanned;  // (param, snapshot), reverse order
  std::set<std::string> seen;
  int32_t ring = -1;
  for (size_t i = block.ops.size(); i-- > 0;) {
    const ir::Op& op = block.ops[i];
    if (!IsUpdateOp(op)) continue;
    const std::string param(op.InputOne("Param"));
    const std::string where = std::string(kLocalSgd) + ": main block 0, op " + std::to_string(i) +
                              " (" + op.type + ")";
    const ir::Var* var = block.FindVar(param);
    if (var == nullptr) {
      return InvalidArgument(where + " updates '" + param + "', which block 0 does not declare");
    }
    if (startup->global().FindVar(param) == nullptr) {
      return InvalidArgument(where + " updates '" + param +
                             "', which the startup program does not declare (no snapshot can "
                             "be initialized)");
    }
    if (!seen.insert(param).second) {
      return InvalidArgument(where + " updates '" + param +
                             "' a second time; local SGD averages each parameter once");
    }
    const std::string snapshot = param + std::string(kSnapshotSuffix);
    FLEET_RETURN_IF_ERROR(AddSnapshotVar(block, *var, snapshot, "main"));
    after[i].push_back(RoleOp("elementwise_sub", {{"X", {snapshot}}, {"Y", {param}}},
                              {{"Out", {param}}}, {}, opt));
    after[i].push_back(RoleOp("c_sync_calc_stream", {{"X", {param}}}, {{"Out", {param}}}, {}, opt));
    ring = (ring + 1) % nrings;
    after[i].push_back(RoleOp("c_allreduce_sum", {{"X", {param}}}, {{"Out", {param}}},
                              {{"ring_id", ring}}, opt));
    scanned.emplace_back(param, snapshot);
  }
  if (scanned.empty()) {
    return InvalidArgument(std::string(kLocalSgd) +
                           ": the main program has no update ops (ops with Param, Grad and "
                           "LearningRate inputs); apply the optimizer before this pass");
  }
  std::vector<ir::Op> ops;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    ops.push_back(std::move(block.ops[i]));
    for (ir::Op& extra : after[i]) ops.push_back(std::move(extra));
  }

  // Steps 2 and 3.
  const std::string& last = scanned.back().first;
  for (int32_t r = 0; r < nrings; ++r) {
    ops.push_back(RoleOp("c_sync_comm_stream", {{"X", {last}}}, {{"Out", {last}}},
                         {{"ring_id", r}}, opt));
  }
  const float scale = static_cast<float>(1.0 / static_cast<double>(ctx.world_size));
  for (auto it = scanned.rbegin(); it != scanned.rend(); ++it) {
    const auto& [param, snapshot] = *it;
    ops.push_back(RoleOp("scale", {{"X", {param}}}, {{"Out", {param}}}, {{"scale", scale}}, opt));
    ops.push_back(RoleOp("elementwise_sub", {{"X", {snapshot}}, {"Y", {param}}},
                         {{"Out", {param}}}, {}, opt));
    ops.push_back(RoleOp("assign", {{"X", {param}}}, {{"Out", {snapshot}}}, {}, opt));
  }
  block.ops = std::move(ops);

  // Startup: the communicator, the broadcast, then the snapshots.
  FLEET_ASSIGN_OR_RETURN(std::vector<std::string> params,
                         AppendCommInitAndBroadcast(*startup, ctx, nrings, kLocalSgd));
  ir::Block& sblock = startup->global();
  for (const std::string& p : params) {
    const std::string snapshot = p + std::string(kSnapshotSuffix);
    FLEET_RETURN_IF_ERROR(AddSnapshotVar(sblock, *sblock.FindVar(p), snapshot, "startup"));
    sblock.ops.push_back(ir::MakeOp("assign", {{"X", {p}}}, {{"Out", {snapshot}}}));
  }

  if (k_steps > 1) programs.emplace("main.local", local);
  return OkStatus();
}

}  // namespace fleet::passes
