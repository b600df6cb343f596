// sync_batch_norm: batch_norm over the batches of every rank of a collective job (Paddle's
// DistributedStrategy.sync_batch_norm), so that N ranks on batches of B train as one process on
// N * B. No options. Runs after the collective pass, whose ring 0 it all-reduces on.
//
// main (global block): each batch_norm that takes batch statistics (is_test and
// use_global_stats false) becomes
//   sync_batch_norm_stats(X) -> S
//   c_sync_calc_stream(X=Out=S), c_allreduce_sum(X=Out=S, ring_id=0),
//   c_sync_comm_stream(X=Out=S, ring_id=0)
//   sync_batch_norm(X, Scale, Bias, Mean, Variance, Stats=S) -> the batch_norm's outputs, with
//     its attributes
// and the batch_norm_grad reading its SavedMean becomes
//   sync_batch_norm_grad_stats(X, Y@GRAD, SavedMean, SavedVariance) -> G, Scale@GRAD, Bias@GRAD
//     (with the grad's op_role and op_role_var)
//   c_sync_calc_stream, c_allreduce_sum, c_sync_comm_stream on G, as for S
//   sync_batch_norm_grad(X, Scale, SavedMean, SavedVariance, Y@GRAD, Stats=S, GradStats=G)
//     -> X@GRAD (only when the grad wrote one)
// where S = "<SavedMean>@SYNC_STATS" (float64 [2C + 1]) and G = "<SavedMean>@SYNC_GRAD_STATS"
// (float64 [2C]). The ops are defined in host/ops/nn_norm_ops.cc. Scale@GRAD and Bias@GRAD
// stay this rank's sums, which the collective pass already all-reduces.
//
// Refused: a main program whose startup has no c_comm_init for ring 0 (no collective pass ran
// first), a batch_norm without SavedMean/SavedVariance, or one whose SavedMean two ops share.
#include <map>
#include <string>
#include <vector>

#include "passes/collective_util.h"

namespace fleet::passes {
namespace {

constexpr std::string_view kPass = "sync_batch_norm";

// The single var of a slot; "" when the slot is absent, empty or a placeholder.
std::string First(const ir::Op& op, std::string_view slot) {
  const std::string_view name = op.InputOne(slot);
  return name == ir::kEmptyVarName ? std::string() : std::string(name);
}
std::string FirstOut(const ir::Op& op, std::string_view slot) {
  const std::string_view name = op.OutputOne(slot);
  return name == ir::kEmptyVarName ? std::string() : std::string(name);
}

bool TakesBatchStats(const ir::Op& op) {
  auto flag = [&](const char* name) {
    auto it = op.attrs.find(name);
    return it != op.attrs.end() && std::holds_alternative<bool>(it->second) &&
           std::get<bool>(it->second);
  };
  return op.type == "batch_norm" && !flag("is_test") && !flag("use_global_stats");
}

// The all-reduce of `var` over ring 0 with the stream syncs around it, in `role`.
void AppendAllReduce(std::vector<ir::Op>& ops, const std::string& var, int32_t role) {
  ops.push_back(RoleOp("c_sync_calc_stream", {{"X", {var}}}, {{"Out", {var}}}, {}, role));
  ops.push_back(
      RoleOp("c_allreduce_sum", {{"X", {var}}}, {{"Out", {var}}}, {{"ring_id", int32_t{0}}}, role));
  ops.push_back(
      RoleOp("c_sync_comm_stream", {{"X", {var}}}, {{"Out", {var}}}, {{"ring_id", int32_t{0}}},
             role));
}

// Declares a float64 statistics vector of per_channel * C + extra elements beside `like`.
void DeclareStats(ir::Block& block, const std::string& name, const ir::Var* like,
                  int64_t per_channel, int64_t extra) {
  ir::Var v;
  v.name = name;
  v.dtype = ir::DataType::kFloat64;
  const int64_t c = like != nullptr && !like->shape.empty() ? like->shape[0] : -1;
  v.shape = {c >= 0 ? per_channel * c + extra : -1};
  block.vars[name] = std::move(v);
}

}  // namespace

Status RunSyncBatchNorm(ProgramSet& programs, const PassContextInfo& ctx,
                        const ir::AttrMap& /*options*/) {
  FLEET_RETURN_IF_ERROR(CheckRankAndWorld(ctx, kPass));
  FLEET_ASSIGN_OR_RETURN(ir::Program * startup, FindProgram(programs, "startup", kPass));
  FLEET_ASSIGN_OR_RETURN(ir::Program * main, FindProgram(programs, "main", kPass));
  bool ring0 = false;
  for (const ir::Op& op : startup->global().ops) {
    if (op.type != "c_comm_init") continue;
    auto it = op.attrs.find("ring_id");
    ring0 = ring0 || it == op.attrs.end() ||
            (std::holds_alternative<int32_t>(it->second) && std::get<int32_t>(it->second) == 0);
  }
  if (!ring0) {
    return FailedPrecondition(std::string(kPass) +
                              ": the startup program initialises no ring 0 (c_comm_init); run "
                              "a collective pass (grad_allreduce or local_sgd) before this one");
  }

  ir::Block& block = main->global();
  std::map<std::string, size_t> forward_of;  // SavedMean -> index of its batch_norm
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    if (!TakesBatchStats(op)) continue;
    const std::string saved = FirstOut(op, "SavedMean");
    const std::string where = std::string(kPass) + ": main block 0, op " + std::to_string(i) +
                              " (batch_norm)";
    if (saved.empty() || FirstOut(op, "SavedVariance").empty()) {
      return InvalidArgument(where + " writes no SavedMean/SavedVariance, which its gradient "
                                     "and the all-reduced statistics need");
    }
    if (!forward_of.emplace(saved, i).second) {
      return InvalidArgument(where + " writes SavedMean '" + saved + "', as op " +
                             std::to_string(forward_of[saved]) + " does");
    }
  }
  if (forward_of.empty()) return OkStatus();

  std::vector<ir::Op> ops;
  for (ir::Op& op : block.ops) {
    const int32_t role = ir::OpRoleOf(op);
    if (TakesBatchStats(op)) {
      const std::string saved = FirstOut(op, "SavedMean");
      const std::string stats = saved + "@SYNC_STATS";
      DeclareStats(block, stats, block.FindVar(saved), 2, 1);
      ops.push_back(RoleOp("sync_batch_norm_stats", {{"X", op.Input("X")}},
                           {{"Stats", {stats}}}, {}, role));
      AppendAllReduce(ops, stats, role);
      ir::Op sync = std::move(op);
      sync.type = "sync_batch_norm";
      sync.inputs["Stats"] = {stats};
      sync.outputs.erase("ReserveSpace");
      ops.push_back(std::move(sync));
      continue;
    }
    if (op.type == "batch_norm_grad" && forward_of.count(First(op, "SavedMean"))) {
      const std::string saved = First(op, "SavedMean");
      const std::string stats = saved + "@SYNC_STATS";
      const std::string grad_stats = saved + "@SYNC_GRAD_STATS";
      DeclareStats(block, grad_stats, block.FindVar(saved), 2, 0);
      ir::SlotMap stat_outs = {{"GradStats", {grad_stats}}};
      for (const char* slot : {"Scale@GRAD", "Bias@GRAD"}) {
        if (!FirstOut(op, slot).empty()) stat_outs[slot] = op.Output(slot);
      }
      ir::AttrMap attrs;
      for (const auto& [name, value] : op.attrs) {
        if (name.rfind("op_role", 0) == 0) attrs[name] = value;
      }
      ir::Op grad_stats_op;
      grad_stats_op.type = "sync_batch_norm_grad_stats";
      grad_stats_op.inputs = {{"X", op.Input("X")},
                              {"Y@GRAD", op.Input("Y@GRAD")},
                              {"SavedMean", op.Input("SavedMean")},
                              {"SavedVariance", op.Input("SavedVariance")}};
      grad_stats_op.outputs = std::move(stat_outs);
      grad_stats_op.attrs = std::move(attrs);
      ops.push_back(std::move(grad_stats_op));
      AppendAllReduce(ops, grad_stats, role);
      if (!FirstOut(op, "X@GRAD").empty()) {
        ops.push_back(RoleOp("sync_batch_norm_grad",
                             {{"X", op.Input("X")},
                              {"Scale", op.Input("Scale")},
                              {"SavedMean", op.Input("SavedMean")},
                              {"SavedVariance", op.Input("SavedVariance")},
                              {"Y@GRAD", op.Input("Y@GRAD")},
                              {"Stats", {stats}},
                              {"GradStats", {grad_stats}}},
                             {{"X@GRAD", op.Output("X@GRAD")}}, {}, role));
      }
      continue;
    }
    ops.push_back(std::move(op));
  }
  block.ops = std::move(ops);
  return OkStatus();
}

}  // namespace fleet::passes
