#include "passes/pserver_plan.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

#include "passes/collective_util.h"
#include "support/text.h"

namespace fleet::passes::pserver {
namespace {

std::string Where(size_t i, const ir::Op& op) {
  return std::string(kPass) + ": main block 0, op " + std::to_string(i) + " (" + op.type + ")";
}

bool IsLrOp(const ir::Op& op) {
  if ((ir::OpRoleOf(op) & ir::op_role::kLRSched) != 0) return true;
  return op.type == "increment" && op.InputOne("X") == kLrCounter;
}

bool IsOptimizeOp(const ir::Op& op) {
  const int32_t role = ir::OpRoleOf(op);
  return (role & ir::op_role::kOptimize) != 0 && (role & ir::op_role::kLRSched) == 0;
}

// Paddle's test for an optimizer op: it has Param and LearningRate inputs.
bool IsOptimizerOp(const ir::Op& op) {
  return !op.Input("Param").empty() && !op.Input("LearningRate").empty();
}

// The accumulator slots an optimizer cuts like its parameter (Paddle's
// _get_optimizer_input_shape); nullptr for an optimizer without a rule.
const std::set<std::string>* SlicedSlots(const std::string& type) {
  static const std::map<std::string, std::set<std::string>> table = {
      {"sgd", {}},
      {"momentum", {"Velocity"}},
      {"adam", {"Moment1", "Moment2"}},
      {"adamw", {"Moment1", "Moment2"}},
      {"adagrad", {"Moment"}},
      {"rmsprop", {"Moment", "MeanSquare", "MeanGrad"}},
      {"adamax", {"Moment", "InfNorm"}},
  };
  auto it = table.find(type);
  return it == table.end() ? nullptr : &it->second;
}

StatusOr<bool> BoolOpt(const ir::AttrMap& options, const std::string& name) {
  auto it = options.find(name);
  std::optional<bool> v;
  if (it != options.end()) v = ir::AttrAsBool(it->second);
  if (!v) return InvalidArgument("pserver: option '" + name + "' is missing or not a bool");
  return *v;
}

StatusOr<std::string> StringOpt(const ir::AttrMap& options, const std::string& name) {
  auto it = options.find(name);
  const std::string* v = it != options.end() ? std::get_if<std::string>(&it->second) : nullptr;
  if (v == nullptr) {
    return InvalidArgument("pserver: option '" + name + "' is missing or not a string");
  }
  return *v;
}

}  // namespace

std::vector<int64_t> ParamPlan::BlockShape(size_t i) const {
  std::vector<int64_t> shape = param_var.shape;
  if (!shape.empty()) shape[0] = rows[i];
  return shape;
}

std::vector<int64_t> ParamPlan::GradShape(size_t i) const {
  std::vector<int64_t> shape = BlockShape(i);
  if (growable) shape[0] = kGrowableHeight;
  return shape;
}

std::string ParamPlan::BlockVar(const std::string& var, size_t i) const {
  return split() ? BlockName(var, i) : var;
}

const OwnedVar* ParamPlan::FindOwned(const std::string& var) const {
  for (const OwnedVar& o : owned) {
    if (o.name == var) return &o;
  }
  return nullptr;
}

std::vector<std::string> AllVars(const ir::Op& op) {
  std::vector<std::string> vars = op.InputVars();
  for (std::string& v : op.OutputVars()) vars.push_back(std::move(v));
  return vars;
}

void RenameVars(ir::Op& op, const std::map<std::string, std::string>& names) {
  auto rename = [&](std::string& v) {
    auto it = names.find(v);
    if (it != names.end()) v = it->second;
  };
  for (auto& [slot, vars] : op.inputs) std::for_each(vars.begin(), vars.end(), rename);
  for (auto& [slot, vars] : op.outputs) std::for_each(vars.begin(), vars.end(), rename);
  auto it = op.attrs.find(std::string(ir::op_role::kVarAttr));
  if (it != op.attrs.end()) {
    if (auto* v = std::get_if<std::vector<std::string>>(&it->second)) {
      std::for_each(v->begin(), v->end(), rename);
    }
  }
}

StatusOr<PassOptions> ReadOptions(const ir::AttrMap& options) {
  PassOptions o;
  FLEET_ASSIGN_OR_RETURN(o.sync, BoolOpt(options, "sync"));
  FLEET_ASSIGN_OR_RETURN(o.slice_var_up, BoolOpt(options, "slice_var_up"));
  FLEET_ASSIGN_OR_RETURN(int32_t min_block, IntOption(options, "min_block_size", 1, kPass));
  o.min_block_size = min_block;
  FLEET_ASSIGN_OR_RETURN(std::string method, StringOpt(options, "split_method"));
  FLEET_ASSIGN_OR_RETURN(o.split_method, ParseSplitMethod(method));
  FLEET_ASSIGN_OR_RETURN(std::string init, StringOpt(options, "init"));
  if (init == "full") {
    o.init = Init::kFull;
  } else if (init == "shard") {
    o.init = Init::kShard;
  } else {
    return InvalidArgument("pserver: option 'init' must be \"full\" or \"shard\", not \"" +
                           init + "\"");
  }
  FLEET_ASSIGN_OR_RETURN(int32_t geo, IntOption(options, "geo_k_steps", 0, kPass));
  o.geo_k_steps = geo;
  if (o.geo() && o.sync) {
    return InvalidArgument("pserver: GEO-SGD (geo_k_steps > 0) needs asynchronous servers "
                           "(sync = false): they add each trainer's delta as it arrives");
  }
  return o;
}

namespace {

// Paddle 1.8 fetches the rows of every is_sparse table (remote_prefetch) instead of receiving
// it; so does this pass, for each parameter whose gradient is sparse and whose only readers left
// on the trainer are lookups and their gradients. A table that must stay on the servers
// (is_distributed) and cannot is an error; a plain is_sparse one is received whole instead.
Status MarkPrefetchedTables(const ir::Program& main, Plan& plan) {
  const ir::Block& block = main.global();
  for (ParamPlan& p : plan.params) {
    bool lookups = false, distributed = false, growable = false;
    std::string other;  // an op that reads the table otherwise
    for (size_t i = 0; i < block.ops.size(); ++i) {
      const ir::Op& op = block.ops[i];
      if (plan.removed_ops.count(i) != 0) continue;
      const std::vector<std::string> vars = AllVars(op);
      if (std::find(vars.begin(), vars.end(), p.param) == vars.end()) continue;
      const bool reads_w = op.InputOne("W") == p.param;
      const std::vector<std::string> outs = op.OutputVars();
      const bool writes_w = std::find(outs.begin(), outs.end(), p.param) != outs.end();
      if (reads_w && !writes_w && IsLookup(op, /*grad=*/true)) {
        if (IsLookup(op)) {
          lookups = true;
          const ir::Attribute* d = op.FindAttr("is_distributed");
          auto b = d == nullptr ? std::optional<bool>() : ir::AttrAsBool(*d);
          distributed = distributed || (b && *b);
          const ir::Attribute* g = op.FindAttr("growable");
          auto gb = g == nullptr ? std::optional<bool>() : ir::AttrAsBool(*g);
          growable = growable || (gb && *gb);
        }
        continue;
      }
      if (other.empty()) other = "op " + std::to_string(i) + " (" + op.type + ") of main";
    }
    if (!lookups) continue;
    if (distributed && !p.grad_var.selected_rows) {
      return InvalidArgument("pserver: table '" + p.param + "' is looked up with "
                             "is_distributed, which keeps it on the servers, but its gradient "
                             "'" + p.grad + "' is dense: a lookup without is_sparse makes it "
                             "so, or the job's gradients are all dense (the log says why)");
    }
    if (distributed && !other.empty()) {
      return InvalidArgument("pserver: table '" + p.param + "' is looked up with "
                             "is_distributed, which keeps it on the servers, but " + other +
                             " reads it on the trainer too");
    }
    p.prefetch = p.grad_var.selected_rows && other.empty();
    p.growable = growable;
    if (growable && !p.prefetch) {
      return InvalidArgument("pserver: table '" + p.param + "' is growable (size [-1, dim]), "
                             "so it lives on the servers, but " +
                             (other.empty() ? "its gradient '" + p.grad + "' is dense"
                                            : other + " reads it on the trainer"));
    }
  }
  return OkStatus();
}

}  // namespace

bool IsLookup(const ir::Op& op, bool grad) {
  if (op.type == "lookup_table" || op.type == "lookup_table_v2") return true;
  return grad && (op.type == "lookup_table_grad" || op.type == "lookup_table_v2_grad");
}

StatusOr<Plan> MakePlan(const ir::Program& main, const PassContextInfo& ctx,
                        const PassOptions& options) {
  Plan plan;
  plan.options = options;
  plan.endpoints = ctx.pserver_endpoints;
  plan.trainers = ctx.world_size;
  plan.trainer_id = ctx.role == "pserver" ? 0 : ctx.rank;
  if (plan.endpoints.empty()) {
    return InvalidArgument("pserver: the job has no pserver endpoints; a pserver job needs "
                           "pserver_endpoints: [role] pserver_endpoints or "
                           "PADDLE_PSERVERS_IP_PORT_LIST");
  }
  for (size_t i = 0; i < plan.endpoints.size(); ++i) {
    const std::string& ep = plan.endpoints[i];
    if (ep.empty()) return InvalidArgument("pserver: pserver endpoint " + std::to_string(i) +
                                           " is empty");
    if (std::count(plan.endpoints.begin(), plan.endpoints.end(), ep) > 1) {
      return InvalidArgument("pserver: pserver endpoint '" + ep + "' is listed twice");
    }
  }
  if (ctx.world_size < 1 || plan.trainer_id < 0 || plan.trainer_id >= ctx.world_size) {
    return InvalidArgument("pserver: trainer id " + std::to_string(plan.trainer_id) +
                           " is not in [0, trainers) for " + std::to_string(ctx.world_size) +
                           " trainers");
  }

  const ir::Block& block = main.global();
  // Who writes what among the ops that stay on the trainer.
  std::set<std::string> trainer_written;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    if (IsLrOp(op)) {
      plan.lr_ops.push_back(i);
      plan.removed_ops.insert(i);
    } else if (IsOptimizeOp(op)) {
      plan.removed_ops.insert(i);
    } else {
      for (const std::string& v : op.OutputVars()) trainer_written.insert(v);
    }
  }
  // GEO trainers run their schedules themselves.
  if (!options.sync && !options.geo() && !plan.lr_ops.empty()) {
    return InvalidArgument("pserver: an asynchronous job (sync_mode = false) cannot use a "
                           "learning-rate schedule: the servers would each count steps of "
                           "their own; use sync_mode = true or a constant learning rate");
  }
  // The LR block is cloned op by op into the server program, where a block attribute would
  // point at one of the server's own blocks; Paddle clones such sub-blocks (piecewise_decay's
  // conditional_block), which the host's schedules never need (one lr_schedule op).
  for (size_t i : plan.lr_ops) {
    for (const auto& [name, value] : block.ops[i].attrs) {
      if (std::holds_alternative<ir::BlockRef>(value)) {
        return InvalidArgument(Where(i, block.ops[i]) + ": learning-rate op with a sub-block ('" +
                               name + "'), which a parameter server cannot run");
      }
    }
  }
  std::set<std::string> shared;  // the learning-rate ops' vars: every server has them
  for (size_t i : plan.lr_ops) {
    for (std::string& v : AllVars(block.ops[i])) shared.insert(std::move(v));
  }

  // The (param, grad) pairs, from the optimizer ops.
  std::map<std::string, size_t> owner;  // var -> index into plan.params
  std::map<std::string, size_t> by_param;
  for (size_t i : plan.removed_ops) {
    const ir::Op& op = block.ops[i];
    if (!IsOptimizeOp(op) || !IsOptimizerOp(op)) continue;
    const std::set<std::string>* sliced = SlicedSlots(op.type);
    if (sliced == nullptr) {
      return InvalidArgument(Where(i, op) + ": optimizer '" + op.type + "' is not supported "
                             "for parameter-server training (supported: sgd, momentum, adam, "
                             "adamw, adagrad, rmsprop, adamax)");
    }
    ParamPlan p;
    p.param = std::string(op.InputOne("Param"));
    p.grad = std::string(op.InputOne("Grad"));
    const ir::Var* pv = block.FindVar(p.param);
    const ir::Var* gv = p.grad.empty() ? nullptr : block.FindVar(p.grad);
    if (pv == nullptr) {
      return InvalidArgument(Where(i, op) + ": parameter '" + p.param + "' is not declared");
    }
    if (gv == nullptr || trainer_written.count(p.grad) == 0) {
      return InvalidArgument(Where(i, op) + ": the gradient '" + p.grad + "' of parameter '" +
                             p.param + "' is missing: no forward or backward op of main " +
                             "produces it (run autodiff before the optimizer)");
    }
    if (by_param.count(p.param) != 0) {
      return InvalidArgument(Where(i, op) + ": parameter '" + p.param +
                             "' is updated by two optimizer ops");
    }
    if (gv->shape != pv->shape || gv->dtype != pv->dtype) {
      return InvalidArgument(Where(i, op) + ": gradient '" + p.grad + "' is " +
                             ir::TypeShapeText(gv->dtype, gv->shape) + " but parameter '" +
                             p.param + "' is " + ir::TypeShapeText(pv->dtype, pv->shape));
    }
    p.param_var = *pv;
    p.grad_var = *gv;
    const size_t index = plan.params.size();
    by_param[p.param] = index;
    owner[p.param] = index;
    owner[p.grad] = index;
    for (const auto& [slot, vars] : op.inputs) {
      if (slot == "Param" || slot == "Grad") continue;
      for (const std::string& v : vars) {
        const ir::Var* var = main.FindVarRecursive(0, v);
        if (var == nullptr) continue;  // the verifier reports it
        // The shared learning rate stays shared; a per-parameter scale of it moves.
        if (slot == "LearningRate" && (var->persistable || shared.count(v) != 0)) continue;
        OwnedVar o{v, sliced->count(slot) != 0, slot != "LearningRate"};
        p.owned.push_back(o);
        owner[v] = index;
      }
    }
    for (const std::string& v : op.OutputVars()) {
      if (owner.count(v) == 0 && shared.count(v) == 0) {
        p.owned.push_back(OwnedVar{v, false, false});
        owner[v] = index;
      }
    }
    plan.params.push_back(std::move(p));
  }
  if (plan.params.empty()) {
    return InvalidArgument("pserver: main has no optimizer op (an Optimize op with Param and "
                           "LearningRate inputs); a pserver job needs minimize(...)");
  }

  // The other optimize ops (regularization, clipping, per-parameter learning rates) go with the
  // one parameter whose vars they touch; their temporaries go along. A fixed point, because a
  // temporary may be written before the op that ties it to a parameter reads it.
  std::map<size_t, size_t> op_param;
  for (size_t i : plan.removed_ops) {
    if (IsOptimizeOp(block.ops[i]) && IsOptimizerOp(block.ops[i])) {
      op_param[i] = by_param[std::string(block.ops[i].InputOne("Param"))];
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i : plan.removed_ops) {
      const ir::Op& op = block.ops[i];
      if (op_param.count(i) != 0 || !IsOptimizeOp(op)) continue;
      std::set<size_t> params;
      for (const std::string& v : AllVars(op)) {
        auto it = owner.find(v);
        if (it != owner.end()) params.insert(it->second);
      }
      if (params.size() > 1) {
        std::vector<std::string> names;
        for (size_t k : params) names.push_back("'" + plan.params[k].param + "'");
        return InvalidArgument(Where(i, op) + " combines values of several parameters (" +
                               JoinWords(names) + "), so it cannot be split across servers; "
                               "clipping by global norm is not supported in a pserver job");
      }
      if (params.empty()) continue;
      const size_t k = *params.begin();
      op_param[i] = k;
      changed = true;
      for (const std::string& v : AllVars(op)) {
        const ir::Var* var = main.FindVarRecursive(0, v);
        if (owner.count(v) != 0 || shared.count(v) != 0 || var == nullptr || var->persistable) {
          continue;
        }
        if (trainer_written.count(v) != 0) {
          return InvalidArgument(Where(i, op) + " reads '" + v + "', which the forward or "
                                 "backward ops compute; the servers do not have it");
        }
        owner[v] = k;
        plan.params[k].owned.push_back(
            OwnedVar{v, var->shape == plan.params[k].param_var.shape, false});
      }
    }
  }
  for (size_t i : plan.removed_ops) {
    const ir::Op& op = block.ops[i];
    if (IsLrOp(op)) continue;
    auto it = op_param.find(i);
    if (it == op_param.end()) {
      return InvalidArgument(Where(i, op) + " is an optimize op that touches no parameter's "
                             "gradient or accumulators, so no server can run it");
    }
    plan.params[it->second].ops.push_back(i);
  }

  std::sort(plan.params.begin(), plan.params.end(),
            [](const ParamPlan& a, const ParamPlan& b) { return a.param < b.param; });
  // Flattened blocks in parameter order; a block's placement key is its parameter block's
  // name, so a gradient block lands where its parameter block does on every trainer.
  // GEO trainers hold every table and train it locally.
  if (!options.geo()) {
    FLEET_RETURN_IF_ERROR(MarkPrefetchedTables(main, plan));
  } else {
    for (size_t i = 0; i < block.ops.size(); ++i) {
      const ir::Attribute* g = block.ops[i].FindAttr("growable");
      if (IsLookup(block.ops[i]) && g != nullptr && ir::AttrAsBool(*g).value_or(false)) {
        return InvalidArgument(Where(i, block.ops[i]) + " looks up a growable table, which "
                               "lives on the servers; GEO-SGD trainers hold every table");
      }
    }
  }
  std::vector<std::string> flat;
  for (ParamPlan& p : plan.params) {
    std::sort(p.owned.begin(), p.owned.end(),
              [](const OwnedVar& a, const OwnedVar& b) { return a.name < b.name; });
    if (p.growable) {
      // Sharded by the hash of the id, one block per server, whatever slice_var_up says.
      p.rows.assign(static_cast<size_t>(plan.num_servers()), 1);
      for (int32_t s = 0; s < plan.num_servers(); ++s) p.servers.push_back(s);
      continue;
    }
    if (options.slice_var_up) {
      FLEET_ASSIGN_OR_RETURN(p.rows, SliceRows(p.param_var.shape, plan.num_servers(),
                                               options.min_block_size,
                                               "pserver: parameter '" + p.param + "'"));
    } else {
      FLEET_ASSIGN_OR_RETURN(p.rows, SliceRows(p.param_var.shape, 1, 1,
                                               "pserver: parameter '" + p.param + "'"));
    }
    for (size_t b = 0; b < p.num_blocks(); ++b) flat.push_back(p.BlockVar(p.param, b));
  }
  std::vector<int32_t> servers = Dispatch(flat, plan.num_servers(), options.split_method);
  size_t k = 0;
  for (ParamPlan& p : plan.params) {
    if (p.growable) continue;
    for (size_t b = 0; b < p.num_blocks(); ++b) p.servers.push_back(servers[k++]);
  }
  return plan;
}

}  // namespace fleet::passes::pserver
