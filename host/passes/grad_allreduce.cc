// grad_allreduce: synchronous data parallelism by gradient all-reduce (Paddle's collective
// transpiler, GradAllReduce). Options: nrings (int, default 1, >= 1); sparse_exchange (string,
// "auto" (default), "gather" or "dense": how the sparse gradients' c_allgather moves them,
// collective_ops.cc).
//
// startup (appended): c_comm_init per ring, c_broadcast of every parameter from rank 0 (ring
//   k mod nrings for the k-th), c_sync_comm_stream per ring (collective_util.h).
// main (global block):
//   1. after every loss-gradient seed (op_role has the Backward and Loss bits):
//        scale(X=Out=<its output>, scale=1/world_size) {op_role=Backward}
//   2. scanning the ops in reverse, after each Backward op with a non-empty op_role_var
//      [p0, g0, p1, g1, ...]:
//        c_sync_calc_stream(X=Out=g0) {op_role=Backward}
//        c_allreduce_sum(X=Out=gi, ring_id) {op_role=Backward}   for each pair, in pair order
//      where ring_id counts (0, 1, ..., nrings-1, 0, ...) over the reverse scan, so the last
//      gradient produced gets ring 0;
//      A sparse gradient (selected_rows) is gathered instead, as Paddle exchanges SelectedRows:
//        c_allgather(X=gi, Out=gi@GATHER, ring_id, nranks=world_size, sparse_exchange)
//          {op_role=Backward}
//      and every later op reads (and writes) gi@GATHER in its place: the entries of every rank,
//      whose sum is the sum of the gradients;
//   3. before the first op whose role has the Optimize bit:
//        c_sync_comm_stream(X=Out=<last gradient seen by the scan>, ring_id=r) {op_role=Optimize}
//      for r in 0..nrings-1.
// The mean gradient follows: each rank's loss gradient is divided by world_size and the
// allreduce sums.
//
// Where it differs from Paddle:
//   - Paddle refuses nranks < 2; here world_size 1 is allowed and gives the same program shape
//     (scale by 1.0, one-rank rings), so a one-process run exercises the same path.
//   - Paddle inserts the allreduces of one op's pairs at the same position, which reverses them;
//     here they follow op_role_var's order (no effect on the result).
//   - Paddle silently does nothing without gradients and skips the stream sync without an
//     optimizer op; here a missing loss seed or missing gradients is INVALID_ARGUMENT, and
//     without an Optimize op the stream sync is appended at the end of the block (whatever
//     reads the gradients then sees the reduced values).
//   - There is no is_distributed parameter notion, so every parameter is broadcast and every
//     gradient reduced.
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/program.h"

#include "passes/collective_util.h"

namespace fleet::passes {
namespace {

constexpr std::string_view kGradAllReduce = "grad_allreduce";

bool HasRoleBits(const ir::Op& op, int32_t bits) { return (ir::OpRoleOf(op) & bits) == bits; }

// Step 1: the scale after each loss-gradient seed.
Status ScaleLossGrads(ir::Block& block, int32_t world_size) {
  const int32_t seed_bits = ir::op_role::kBackward | ir::op_role::kLoss;
  const float scale = static_cast<float>(1.0 / static_cast<double>(world_size));
  std::vector<ir::Op> ops;
  bool found = false;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    ops.push_back(block.ops[i]);
    if (!HasRoleBits(block.ops[i], seed_bits)) continue;
    std::vector<std::string> outs = block.ops[i].OutputVars();
    if (outs.empty()) {
      return InvalidArgument(std::string(kGradAllReduce) + ": main block 0, op " +
                             std::to_string(i) + " (" + block.ops[i].type +
                             ") is marked as the loss-gradient seed but writes nothing");
    }
    ops.push_back(RoleOp("scale", {{"X", {outs[0]}}}, {{"Out", {outs[0]}}}, {{"scale", scale}},
                         ir::op_role::kBackward));
    found = true;
  }
  if (!found) {
    return InvalidArgument(std::string(kGradAllReduce) +
                           ": the main program has no loss-gradient seed (an op whose op_role "
                           "has the Backward and Loss bits, 0x101); run autodiff before this "
                           "pass");
  }
  block.ops = std::move(ops);
  return OkStatus();
}

}  // namespace

Status RunGradAllReduce(ProgramSet& programs, const PassContextInfo& ctx,
                        const ir::AttrMap& options) {
  FLEET_ASSIGN_OR_RETURN(int32_t nrings, IntOption(options, "nrings", 1, kGradAllReduce));
  std::string exchange = "auto";
  if (auto it = options.find("sparse_exchange"); it != options.end()) {
    const std::string* v = std::get_if<std::string>(&it->second);
    if (v == nullptr || (*v != "auto" && *v != "gather" && *v != "dense")) {
      return InvalidArgument(std::string(kGradAllReduce) +
                             ": option 'sparse_exchange' must be \"auto\", \"gather\" or "
                             "\"dense\"");
    }
    exchange = *v;
  }
  FLEET_RETURN_IF_ERROR(CheckRankAndWorld(ctx, kGradAllReduce));
  FLEET_ASSIGN_OR_RETURN(ir::Program * startup, FindProgram(programs, "startup", kGradAllReduce));
  FLEET_ASSIGN_OR_RETURN(ir::Program * main, FindProgram(programs, "main", kGradAllReduce));

  ir::Block& block = main->global();
  FLEET_RETURN_IF_ERROR(ScaleLossGrads(block, ctx.world_size));

  // Step 2: what goes right after each op, collected by the reverse scan.
  std::vector<std::vector<ir::Op>> after(block.ops.size());
  // Sparse gradients: the op after which each is gathered, and the name it has from then on.
  std::vector<std::pair<size_t, std::pair<std::string, std::string>>> gathered;
  int32_t ring = -1;
  std::string last_grad;
  for (size_t i = block.ops.size(); i-- > 0;) {
    const ir::Op& op = block.ops[i];
    if (!HasRoleBits(op, ir::op_role::kBackward)) continue;
    std::vector<std::string> role_vars = ir::OpRoleVars(op);
    if (role_vars.empty()) continue;
    const std::string where = std::string(kGradAllReduce) + ": main block 0, op " +
                              std::to_string(i) + " (" + op.type + ")";
    if (role_vars.size() % 2 != 0) {
      return InvalidArgument(where + ": op_role_var holds " + std::to_string(role_vars.size()) +
                             " names, not [param, grad] pairs");
    }
    for (size_t k = 0; k < role_vars.size(); k += 2) {
      const std::string& grad = role_vars[k + 1];
      if (main->FindVarRecursive(0, grad) == nullptr) {
        return InvalidArgument(where + ": op_role_var names gradient '" + grad +
                               "', which block 0 does not declare");
      }
      if (k == 0) {
        after[i].push_back(RoleOp("c_sync_calc_stream", {{"X", {grad}}}, {{"Out", {grad}}}, {},
                                  ir::op_role::kBackward));
      }
      ring = (ring + 1) % nrings;
      const ir::Var* g = main->FindVarRecursive(0, grad);
      if (g->selected_rows) {
        ir::Var all = *g;
        all.name = grad + "@GATHER";
        if (main->FindVarRecursive(0, all.name) != nullptr) {
          return InvalidArgument(where + ": '" + all.name + "', the gathered '" + grad +
                                 "', is declared already");
        }
        FLEET_RETURN_IF_ERROR(block.AddVar(all).status());
        after[i].push_back(RoleOp("c_allgather", {{"X", {grad}}}, {{"Out", {all.name}}},
                                  {{"ring_id", ring},
                                   {"nranks", ctx.world_size},
                                   {"sparse_exchange", exchange}},
                                  ir::op_role::kBackward));
        gathered.push_back({i, {grad, all.name}});
        last_grad = all.name;
        continue;
      }
      after[i].push_back(RoleOp("c_allreduce_sum", {{"X", {grad}}}, {{"Out", {grad}}},
                                {{"ring_id", ring}}, ir::op_role::kBackward));
      last_grad = grad;
    }
  }
  if (last_grad.empty()) {
    return InvalidArgument(std::string(kGradAllReduce) +
                           ": the main program has no gradients to all-reduce (no Backward op "
                           "carries op_role_var [param, grad] pairs); run autodiff before this "
                           "pass");
  }

  // Step 3, while rebuilding the op list: the stream syncs before the first Optimize op.
  std::vector<ir::Op> syncs;
  for (int32_t r = 0; r < nrings; ++r) {
    syncs.push_back(RoleOp("c_sync_comm_stream", {{"X", {last_grad}}}, {{"Out", {last_grad}}},
                           {{"ring_id", r}}, ir::op_role::kOptimize));
  }
  // Ops after a sparse gradient's gather use the gathered name.
  for (const auto& [at, names] : gathered) {
    for (size_t i = at + 1; i < block.ops.size(); ++i) {
      for (ir::SlotMap* slots : {&block.ops[i].inputs, &block.ops[i].outputs}) {
        for (auto& [slot, vars] : *slots) {
          for (std::string& v : vars) {
            if (v == names.first) v = names.second;
          }
        }
      }
    }
  }
  std::vector<ir::Op> ops;
  bool synced = false;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    if (!synced && HasRoleBits(block.ops[i], ir::op_role::kOptimize)) {
      ops.insert(ops.end(), syncs.begin(), syncs.end());
      synced = true;
    }
    ops.push_back(std::move(block.ops[i]));
    for (ir::Op& extra : after[i]) ops.push_back(std::move(extra));
  }
  if (!synced) ops.insert(ops.end(), syncs.begin(), syncs.end());
  block.ops = std::move(ops);

  return AppendCommInitAndBroadcast(*startup, ctx, nrings, kGradAllReduce).status();
}

}  // namespace fleet::passes
