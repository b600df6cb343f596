// The pserver pass entry point and the trainer's side of it (get_trainer_program and the
// trainer startup rewrite of Paddle's DistributeTranspiler); see pserver_pass.h.
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "passes/collective_util.h"
#include "passes/pserver_pass.h"
#include "passes/pserver_plan.h"

namespace fleet::passes {
namespace pserver {
namespace {

ir::Var PlainVar(std::string name, ir::DataType dtype, std::vector<int64_t> shape,
               bool selected_rows = false) {
  ir::Var v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.selected_rows = selected_rows;
  return v;
}

// Declares `var` unless the block already has it.
void Declare(ir::Block& block, ir::Var var) {
  if (block.FindVar(var.name) == nullptr) block.vars.emplace(var.name, std::move(var));
}

std::vector<std::string> Epmap(const Plan& plan, const ParamPlan& p) {
  std::vector<std::string> eps;
  for (int32_t s : p.servers) eps.push_back(plan.endpoints[static_cast<size_t>(s)]);
  return eps;
}

std::vector<int32_t> Sections(const ParamPlan& p) {
  std::vector<int32_t> sections;
  for (int64_t r : p.rows) sections.push_back(static_cast<int32_t>(r));
  return sections;
}

std::vector<std::string> ParamBlocks(const ParamPlan& p) {
  std::vector<std::string> blocks;
  for (size_t b = 0; b < p.num_blocks(); ++b) blocks.push_back(p.BlockVar(p.param, b));
  return blocks;
}

// Declares the parameter's blocks (when it is cut) as plain vars of `block`.
void DeclareParamBlocks(ir::Block& block, const ParamPlan& p) {
  if (!p.split()) return;
  for (size_t b = 0; b < p.num_blocks(); ++b) {
    Declare(block, PlainVar(BlockName(p.param, b), p.param_var.dtype, p.BlockShape(b)));
  }
}

std::set<std::string> ReferencedVars(const std::vector<ir::Op>& ops) {
  std::set<std::string> vars;
  for (const ir::Op& op : ops) {
    for (std::string& v : AllVars(op)) vars.insert(std::move(v));
  }
  return vars;
}

// A lookup of a table the servers keep becomes distributed_lookup_table (same ids, same output,
// the forward op's attributes), and its gradient takes the table's height as an attribute
// instead of reading the table.
ir::Op PrefetchedLookup(const Plan& plan, const ParamPlan& p, ir::Op op) {
  if (op.type.ends_with("_grad")) {
    op.inputs.erase("W");
    op.attrs["table_height"] = p.growable ? kGrowableHeight : p.param_var.shape[0];
    return op;
  }
  ir::AttrMap attrs = {
      {"table_names", ParamBlocks(p)},
      {"height_sections", p.rows},
      {"endpoints", Epmap(plan, p)},
      {"padding_idx", int64_t{-1}},
      {"trainer_id", plan.trainer_id},
      {"lookup_table_version", op.type},
      {"emb_dim", p.param_var.shape[1]},
      {"dtype", static_cast<int32_t>(p.param_var.dtype)},
      {"growable", p.growable}};
  if (const ir::Attribute* pad = op.FindAttr("padding_idx")) {
    attrs["padding_idx"] = ir::AttrAsInt(*pad).value_or(-1);
  }
  if (const ir::Attribute* role = op.FindAttr(ir::op_role::kAttr)) {
    attrs[std::string(ir::op_role::kAttr)] = *role;
  }
  return ir::MakeOp("distributed_lookup_table", {{"Ids", op.Input("Ids")}},
                    {{"Outputs", op.Output("Out")}}, std::move(attrs));
}

// As Paddle's remote prefetch does, the lookups of one table become one call per server: the
// distributed_lookup_tables of a table with the same attributes, whose ids no op computes
// (feeds), join the first of them, which then fetches each distinct row once for all.
void MergePrefetches(std::vector<ir::Op>& ops) {
  std::set<std::string> computed;
  for (const ir::Op& op : ops) {
    for (std::string& v : op.OutputVars()) computed.insert(std::move(v));
  }
  // An op's table and the lookup attributes it came with -> the op the others join.
  std::map<std::tuple<std::vector<std::string>, std::string, int64_t>, size_t> first;
  std::vector<ir::Op> merged;
  for (ir::Op& op : ops) {
    if (op.type == "distributed_lookup_table" && computed.count(op.Input("Ids")[0]) == 0) {
      auto key = std::make_tuple(std::get<std::vector<std::string>>(op.attrs.at("table_names")),
                                 std::get<std::string>(op.attrs.at("lookup_table_version")),
                                 std::get<int64_t>(op.attrs.at("padding_idx")));
      auto [it, inserted] = first.emplace(std::move(key), merged.size());
      if (!inserted) {
        ir::Op& into = merged[it->second];
        into.inputs["Ids"].push_back(op.Input("Ids")[0]);
        into.outputs["Outputs"].push_back(op.Output("Outputs")[0]);
        continue;
      }
    }
    merged.push_back(std::move(op));
  }
  ops = std::move(merged);
}

}  // namespace

Status RewriteTrainerMain(const Plan& plan, ir::Program& main) {
  ir::Block& block = main.global();
  const int32_t tid = plan.trainer_id;
  const std::string suffix = ".trainer_" + std::to_string(tid);

  // A gradient sent whole is renamed in place when it carries the trainer suffix.
  std::map<std::string, std::string> rename;
  if (plan.trainer_suffix()) {
    for (const ParamPlan& p : plan.params) {
      if (!p.split()) rename[p.grad] = p.grad + suffix;
    }
  }
  std::map<std::string, const ParamPlan*> tables;  // the tables the trainer fetches rows of
  for (const ParamPlan& p : plan.params) {
    if (p.prefetch) tables.emplace(p.param, &p);
  }
  std::vector<ir::Op> kept;
  std::set<std::string> removed_vars;
  std::set<std::string> growable_grads;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    if (plan.removed_ops.count(i) != 0) {
      for (std::string& v : AllVars(block.ops[i])) removed_vars.insert(std::move(v));
      continue;
    }
    ir::Op op = block.ops[i];
    RenameVars(op, rename);
    auto table = tables.find(std::string(op.InputOne("W")));
    if (table != tables.end() && IsLookup(op, /*grad=*/true)) {
      op = PrefetchedLookup(plan, *table->second, std::move(op));
      // The gradient of a growable table stands for every id's row, as do the parts a
      // fan-out sums into it.
      if (table->second->growable && op.type.ends_with("_grad")) {
        for (const std::string& g : op.Output("W@GRAD")) growable_grads.insert(g);
      }
    }
    kept.push_back(std::move(op));
  }
  for (const auto& [name, p] : tables) {
    block.vars.erase(name);
    if (p->growable) growable_grads.insert(p->grad);
  }
  for (const std::string& g : growable_grads) {
    if (ir::Var* v = block.FindVar(g); v != nullptr && !v->shape.empty()) {
      v->shape[0] = kGrowableHeight;
    }
  }
  MergePrefetches(kept);
  for (const auto& [from, to] : rename) {
    auto node = block.vars.extract(from);
    if (node.empty()) continue;
    node.key() = to;
    node.mapped().name = to;
    block.vars.insert(std::move(node));
  }

  int32_t next_control = 0;
  auto control_var = [&]() {
    std::string name = "__control_var@" + std::to_string(next_control++);
    Declare(block, PlainVar(name, ir::DataType::kFloat32, {0}));
    return name;
  };

  // split_byref + send right after the last op that writes each gradient.
  std::vector<std::vector<ir::Op>> after(kept.size());
  std::vector<std::string> send_controls, sent_grad;
  for (const ParamPlan& p : plan.params) {
    auto it = rename.find(p.grad);
    const std::string grad = it != rename.end() ? it->second : p.grad;
    size_t writer = kept.size();
    for (size_t i = kept.size(); i-- > 0;) {
      const std::vector<std::string> outs = kept[i].OutputVars();
      if (std::find(outs.begin(), outs.end(), grad) != outs.end()) {
        writer = i;
        break;
      }
    }
    if (writer == kept.size()) {
      return InvalidArgument(std::string(kPass) + ": no op of main writes the gradient '" +
                             grad + "' of parameter '" + p.param + "'");
    }
    std::vector<std::string> send_vars = {grad};
    if (p.split()) {
      const bool sparse = p.grad_var.selected_rows;
      send_vars.clear();
      for (size_t b = 0; b < p.num_blocks(); ++b) {
        std::string name = BlockName(p.grad, b) + (plan.trainer_suffix() ? suffix : "");
        Declare(block, PlainVar(name, p.grad_var.dtype, p.GradShape(b), sparse));
        send_vars.push_back(std::move(name));
      }
      // A sparse gradient is cut by rows into sparse blocks (Paddle's split_selected_rows),
      // each sent with only the entries of its block.
      if (sparse && p.growable) {
        // Rows are ids: each goes to the server its hash names, unchanged.
        after[writer].push_back(RoleOp("split_selected_rows", {{"X", {grad}}},
                                       {{"Out", send_vars}}, {{"by_hash", true}},
                                       ir::op_role::kDist));
      } else if (sparse) {
        after[writer].push_back(RoleOp("split_selected_rows", {{"X", {grad}}},
                                       {{"Out", send_vars}}, {{"height_sections", p.rows}},
                                       ir::op_role::kDist));
      } else {
        after[writer].push_back(RoleOp("split_byref", {{"X", {grad}}}, {{"Out", send_vars}},
                                       {{"sections", Sections(p)}}, ir::op_role::kDist));
      }
    }
    std::string control = control_var();
    after[writer].push_back(RoleOp(
        "send", {{"X", send_vars}}, {{"Out", {control}}},
        {{"epmap", Epmap(plan, p)},
         {"sections", std::vector<int64_t>{}},
         {"send_varnames", std::vector<std::string>{}},
         {std::string(ir::op_role::kVarAttr), std::vector<std::string>{p.param, grad}}},
        ir::op_role::kRPC));
    send_controls.push_back(std::move(control));
    sent_grad.push_back(grad);
  }
  std::vector<ir::Op> ops;
  for (size_t i = 0; i < kept.size(); ++i) {
    ops.push_back(std::move(kept[i]));
    for (ir::Op& op : after[i]) ops.push_back(std::move(op));
  }

  std::string barrier;
  if (plan.options.sync) {
    barrier = control_var();
    ops.push_back(RoleOp("send_barrier", {{"X", send_controls}}, {{"Out", {barrier}}},
                         {{"endpoints", plan.endpoints},
                          {"trainer_id", tid},
                          {"half_async", false}},
                         ir::op_role::kRPC));
  }
  std::vector<std::string> received;
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamPlan& p = plan.params[k];
    if (p.prefetch) continue;
    DeclareParamBlocks(block, p);
    std::vector<std::string> outs = ParamBlocks(p);
    received.insert(received.end(), outs.begin(), outs.end());
    ops.push_back(RoleOp(
        "recv", {{"X", {plan.options.sync ? barrier : send_controls[k]}}}, {{"Out", outs}},
        {{"epmap", Epmap(plan, p)},
         {"trainer_id", tid},
         {std::string(ir::op_role::kVarAttr), std::vector<std::string>{p.param, sent_grad[k]}}},
        ir::op_role::kRPC));
  }
  if (plan.options.sync) {
    ops.push_back(RoleOp("fetch_barrier", {{"X", {barrier}}}, {{"Out", received}},
                         {{"endpoints", plan.endpoints}, {"trainer_id", tid}},
                         ir::op_role::kRPC));
  }
  for (const ParamPlan& p : plan.params) {
    if (!p.split() || p.prefetch) continue;
    ops.push_back(RoleOp("concat", {{"X", ParamBlocks(p)}}, {{"Out", {p.param}}},
                         {{"axis", int32_t{0}}}, ir::op_role::kDist));
  }

  // Vars only the optimizer and learning-rate ops used leave the trainer.
  const std::set<std::string> used = ReferencedVars(ops);
  for (const std::string& v : removed_vars) {
    const ir::Var* var = block.FindVar(v);
    if (var != nullptr && !var->param && used.count(v) == 0) block.vars.erase(v);
  }
  block.ops = std::move(ops);
  return OkStatus();
}

Status GeoTrainerMain(const Plan& plan, ir::Program& main) {
  std::vector<std::string> params, names, epmap;
  std::vector<int64_t> blocks, sections, sparse;
  for (const ParamPlan& p : plan.params) {
    params.push_back(p.param);
    blocks.push_back(static_cast<int64_t>(p.num_blocks()));
    sparse.push_back(p.grad_var.selected_rows ? 1 : 0);
    const std::vector<std::string> eps = Epmap(plan, p);
    for (size_t b = 0; b < p.num_blocks(); ++b) {
      names.push_back(p.BlockVar(p.param, b));
      sections.push_back(p.rows[b]);
      epmap.push_back(eps[b]);
    }
  }
  if (params.empty()) return OkStatus();
  ir::Block& block = main.global();
  block.ops.insert(block.ops.begin(),
                   RoleOp("geo_sgd", {{"X", params}}, {{"Out", params}},
                          {{"k_steps", plan.options.geo_k_steps},
                           {"trainers", plan.trainers},
                           {"trainer_id", plan.trainer_id},
                           {"blocks", blocks},
                           {"block_names", names},
                           {"sections", sections},
                           {"epmap", epmap},
                           {"sparse", sparse}},
                          ir::op_role::kRPC));
  return OkStatus();
}

Status RewriteTrainerStartup(const Plan& plan, const ir::Program& original_main,
                             const ir::Program& main, ir::Program& startup) {
  // Paddle's _delete_trainer_optimizer: the initializers of vars only the optimizer and the
  // learning-rate schedule read (the learning rate, accumulators, the step counter).
  const ir::Block& orig = original_main.global();
  const std::set<std::string> used = ReferencedVars(main.global().ops);
  std::set<std::string> optimizer_only;
  for (size_t i : plan.removed_ops) {
    for (std::string& v : AllVars(orig.ops[i])) {
      const ir::Var* var = orig.FindVar(v);
      if (var != nullptr && !var->param && used.count(v) == 0) optimizer_only.insert(v);
    }
  }
  // The tables the servers keep are not initialised here either (Paddle's fake_init).
  for (const ParamPlan& p : plan.params) {
    if (p.prefetch) optimizer_only.insert(p.param);
  }
  ir::Block& block = startup.global();
  std::vector<ir::Op> ops;
  for (ir::Op& op : block.ops) {
    const std::vector<std::string> outs = op.OutputVars();
    bool drop = !outs.empty();
    for (const std::string& v : outs) drop = drop && optimizer_only.count(v) != 0;
    if (!drop) ops.push_back(std::move(op));
  }
  const std::set<std::string> still = ReferencedVars(ops);
  for (const std::string& v : optimizer_only) {
    if (still.count(v) == 0) block.vars.erase(v);
  }

  const int32_t tid = plan.trainer_id;
  for (const ParamPlan& p : plan.params) {
    if (p.prefetch) continue;
    DeclareParamBlocks(block, p);
    ops.push_back(RoleOp("recv", {{"X", {}}}, {{"Out", ParamBlocks(p)}},
                         {{"epmap", Epmap(plan, p)}, {"trainer_id", tid}}, ir::op_role::kRPC));
  }
  ops.push_back(RoleOp("fetch_barrier", {{"X", {}}}, {{"Out", {}}},
                       {{"endpoints", plan.endpoints}, {"trainer_id", tid}}, ir::op_role::kRPC));
  for (const ParamPlan& p : plan.params) {
    if (!p.split() || p.prefetch) continue;
    ops.push_back(RoleOp("concat", {{"X", ParamBlocks(p)}}, {{"Out", {p.param}}},
                         {{"axis", int32_t{0}}}, ir::op_role::kDist));
  }
  block.ops = std::move(ops);
  return OkStatus();
}

}  // namespace pserver

Status RunPserver(ProgramSet& programs, const PassContextInfo& ctx, const ir::AttrMap& options) {
  using namespace pserver;
  FLEET_ASSIGN_OR_RETURN(PassOptions opts, ReadOptions(options));
  FLEET_ASSIGN_OR_RETURN(ir::Program * startup, FindProgram(programs, "startup", kPass));
  FLEET_ASSIGN_OR_RETURN(ir::Program * main, FindProgram(programs, "main", kPass));
  for (const auto& [name, program] : programs) {
    if (name.rfind("pserver.", 0) == 0) {
      return FailedPrecondition("pserver: the program set already has '" + name +
                                "' (were the programs transpiled twice?)");
    }
  }
  for (const ir::Op& op : main->global().ops) {
    if (op.type == "send" || op.type == "listen_and_serv" || op.type == "geo_sgd") {
      return FailedPrecondition("pserver: main already has a " + op.type +
                                " op (were the programs transpiled twice?)");
    }
  }
  FLEET_ASSIGN_OR_RETURN(Plan plan, MakePlan(*main, ctx, opts));
  const ir::Program original_main = *main;
  const ir::Program original_startup = *startup;
  std::map<std::string, ir::Program> servers;
  // GEO-SGD: the servers hold the parameters only (the optimizers and their state stay with
  // the trainers), and the trainers keep every initializer and then take the servers' values.
  Plan params_only = plan;
  if (opts.geo()) {
    for (ParamPlan& p : params_only.params) p.owned.clear();
    params_only.removed_ops.clear();
  }
  const Plan& startup_plan = opts.geo() ? params_only : plan;
  for (int32_t s = 0; s < plan.num_servers(); ++s) {
    const std::string name = "pserver." + std::to_string(s);
    FLEET_ASSIGN_OR_RETURN(ir::Program server_main, opts.geo()
                                                        ? GeoServerMain(plan, s)
                                                        : ServerMain(plan, original_main, s));
    FLEET_ASSIGN_OR_RETURN(ir::Program server_startup,
                           ServerStartup(startup_plan, original_startup, server_main, s));
    servers.emplace(name, std::move(server_main));
    servers.emplace(name + ".startup", std::move(server_startup));
  }
  FLEET_RETURN_IF_ERROR(opts.geo() ? GeoTrainerMain(plan, *main) : RewriteTrainerMain(plan, *main));
  FLEET_RETURN_IF_ERROR(
      RewriteTrainerStartup(startup_plan, original_main, *main, *startup));
  for (auto& [name, program] : servers) programs.emplace(name, std::move(program));
  return OkStatus();
}

}  // namespace fleet::passes
