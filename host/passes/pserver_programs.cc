// The programs of one parameter server: "pserver.<i>" (Paddle's get_pserver_program) and
// "pserver.<i>.startup" (get_startup_program, or the whole startup with init = full); see
// pserver_pass.h for their shape.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "passes/collective_util.h"
#include "passes/pserver_plan.h"

namespace fleet::passes::pserver {
namespace {

// Initializers whose `shape` attribute init = shard sets to the block's shape.
bool IsShapedInitializer(const std::string& type) {
  return type == "fill_constant" || type == "uniform_random" || type == "gaussian_random" ||
         type == "truncated_gaussian_random";
}

// A sparse var (a merged sparse gradient, its decayed copy) lives for one update only: the
// executor keeps it out of the scope, where it could not be written. Receive vars are the
// exception (DeclareReceive).
void DeclarePersistable(ir::Block& block, ir::Var var) {
  var.persistable = !var.selected_rows;
  if (block.FindVar(var.name) == nullptr) block.vars.emplace(var.name, std::move(var));
}

// What a trainer sends: persistable, so the server keeps it from its arrival to the round's
// update, sparse or not (the server holds a sparse one's entries in its scope).
void DeclareReceive(ir::Block& block, ir::Var var) {
  var.persistable = true;
  if (block.FindVar(var.name) == nullptr) block.vars.emplace(var.name, std::move(var));
}

ir::Var BlockVarDecl(const ir::Var& source, std::string name, std::vector<int64_t> shape) {
  ir::Var v;
  v.name = std::move(name);
  v.dtype = source.dtype;
  v.shape = std::move(shape);
  v.selected_rows = source.selected_rows;
  return v;
}

}  // namespace

StatusOr<ir::Program> ServerMain(const Plan& plan, const ir::Program& main, int32_t server) {
  const ir::Block& src = main.global();
  ir::Program prog;
  std::vector<std::string> receive;
  std::vector<std::string> grad_to_block;
  std::vector<int32_t> optimize_blocks;
  // Every var the cloned ops touch lives in block 0, persistable: the server keeps it between
  // a receive and the optimize round.
  auto declare_from_main = [&](const std::string& name) -> Status {
    const ir::Var* v = src.FindVar(name);
    if (v == nullptr) {
      return InvalidArgument(std::string(kPass) + ": main does not declare '" + name +
                             "', which an optimize or learning-rate op uses");
    }
    DeclarePersistable(prog.global(), *v);
    return OkStatus();
  };

  int32_t parent = 0;
  int32_t lr_block = -1;
  if (!plan.lr_ops.empty()) {
    lr_block = prog.AddBlock(0);
    for (size_t i : plan.lr_ops) {
      prog.block(lr_block).ops.push_back(src.ops[i]);
      for (const std::string& v : AllVars(src.ops[i])) FLEET_RETURN_IF_ERROR(declare_from_main(v));
    }
    optimize_blocks.push_back(lr_block);
    parent = lr_block;
  }

  const float inv_trainers = static_cast<float>(1.0 / static_cast<double>(plan.trainers));
  std::vector<std::string> sparse_grad_to_param;
  std::vector<std::string> growable_tables;
  for (const ParamPlan& p : plan.params) {
    for (size_t b = 0; b < p.num_blocks(); ++b) {
      if (p.servers[b] != server) continue;
      const std::string param = p.BlockVar(p.param, b);
      const std::string merged = p.BlockVar(p.grad, b);
      ir::Block& g0 = prog.global();
      DeclarePersistable(g0, p.split() ? BlockVarDecl(p.param_var, param, p.BlockShape(b))
                                       : p.param_var);
      // A growable table's gradient arrives keyed by id and is made one by slot of the block
      // (server.h), so the server declares it like the block.
      const ir::Var merged_decl = BlockVarDecl(p.grad_var, merged, p.BlockShape(b));
      if (plan.trainer_suffix()) {
        DeclarePersistable(g0, merged_decl);
      } else {
        DeclareReceive(g0, merged_decl);
      }
      if (p.grad_var.selected_rows) sparse_grad_to_param.push_back(merged + ":" + param);
      std::map<std::string, std::string> rename = {{p.param, param}, {p.grad, merged}};
      std::string growable = param;  // the block, then the vars that grow with it
      for (const OwnedVar& o : p.owned) {
        const ir::Var* v = src.FindVar(o.name);
        if (v == nullptr) {
          return InvalidArgument(std::string(kPass) + ": main does not declare '" + o.name +
                                 "', which the optimizer of '" + p.param + "' uses");
        }
        const std::string name = p.BlockVar(o.name, b);
        ir::Var decl = *v;
        decl.name = name;
        if (o.sliced) decl.shape = p.BlockShape(b);
        if (o.sliced && p.growable) growable += " " + name;
        DeclarePersistable(g0, std::move(decl));
        rename[o.name] = name;
      }

      const int32_t index = prog.AddBlock(parent);
      std::vector<ir::Op> ops;
      if (plan.trainer_suffix()) {
        std::vector<std::string> parts;
        for (int32_t t = 0; t < plan.trainers; ++t) {
          std::string part = merged + ".trainer_" + std::to_string(t);
          DeclareReceive(prog.global(), BlockVarDecl(p.grad_var, part, p.BlockShape(b)));
          parts.push_back(part);
          receive.push_back(std::move(part));
        }
        ops.push_back(RoleOp("sum", {{"X", parts}}, {{"Out", {merged}}}, {},
                             ir::op_role::kOptimize));
        ops.push_back(RoleOp("scale", {{"X", {merged}}}, {{"Out", {merged}}},
                             {{"scale", inv_trainers}}, ir::op_role::kOptimize));
      } else {
        receive.push_back(merged);
      }
      for (size_t i : p.ops) {
        ir::Op op = src.ops[i];
        RenameVars(op, rename);
        for (const std::string& v : AllVars(op)) {
          if (prog.global().FindVar(v) == nullptr) FLEET_RETURN_IF_ERROR(declare_from_main(v));
        }
        ops.push_back(std::move(op));
      }
      prog.block(index).ops = std::move(ops);
      optimize_blocks.push_back(index);
      grad_to_block.push_back(merged + ":" + std::to_string(index));
      if (p.growable) growable_tables.push_back(std::move(growable));
    }
  }
  if (grad_to_block.empty()) {
    // Paddle's "pserver has no optimize block": one empty block keeps the program's shape.
    optimize_blocks.push_back(prog.AddBlock(parent));
  }
  prog.global().ops.push_back(ir::MakeOp(
      "listen_and_serv", {{"X", receive}}, {},
      {{"endpoint", plan.endpoints[static_cast<size_t>(server)]},
       {"pserver_id", server},
       {"Fanin", plan.trainers},
       {"distributed_mode", int32_t{plan.options.sync ? 0 : 1}},
       {"optimize_blocks", optimize_blocks},
       {"grad_to_block_id", grad_to_block},
       {"lr_decay_block_id", lr_block},
       {"sparse_grad_to_param", sparse_grad_to_param}}));
  if (!growable_tables.empty()) {
    prog.global().ops.back().attrs["growable_tables"] = std::move(growable_tables);
  }
  return prog;
}

StatusOr<ir::Program> GeoServerMain(const Plan& plan, int32_t server) {
  ir::Program prog;
  std::vector<std::string> receive;
  std::vector<std::string> grad_to_block, sparse_grad_to_param;
  std::vector<int32_t> optimize_blocks;
  for (const ParamPlan& p : plan.params) {
    for (size_t b = 0; b < p.num_blocks(); ++b) {
      if (p.servers[b] != server) continue;
      const std::string param = p.BlockVar(p.param, b);
      const std::string delta = param + ".delta";
      ir::Var decl = p.split() ? BlockVarDecl(p.param_var, param, p.BlockShape(b)) : p.param_var;
      DeclarePersistable(prog.global(), decl);
      // A table whose gradient is sparse gets the rows that changed, as a sparse delta.
      const bool sparse = p.grad_var.selected_rows;
      ir::Var delta_decl = BlockVarDecl(decl, delta, decl.shape);
      delta_decl.selected_rows = sparse;
      DeclareReceive(prog.global(), std::move(delta_decl));
      // Each trainer's delta is already divided by the number of trainers: the block adds it
      // (sum adds a sparse one's entries to their rows).
      const int32_t index = prog.AddBlock(0);
      if (sparse) {
        prog.block(index).ops.push_back(RoleOp("sum", {{"X", {param, delta}}},
                                               {{"Out", {param}}}, {}, ir::op_role::kOptimize));
        sparse_grad_to_param.push_back(delta + ":" + param);
      } else {
        prog.block(index).ops.push_back(RoleOp("elementwise_add",
                                               {{"X", {param}}, {"Y", {delta}}},
                                               {{"Out", {param}}}, {{"axis", int32_t{-1}}},
                                               ir::op_role::kOptimize));
      }
      optimize_blocks.push_back(index);
      grad_to_block.push_back(delta + ":" + std::to_string(index));
      receive.push_back(delta);
    }
  }
  if (grad_to_block.empty()) optimize_blocks.push_back(prog.AddBlock(0));
  prog.global().ops.push_back(ir::MakeOp(
      "listen_and_serv", {{"X", receive}}, {},
      {{"endpoint", plan.endpoints[static_cast<size_t>(server)]},
       {"pserver_id", server},
       {"Fanin", plan.trainers},
       {"distributed_mode", int32_t{3}},
       {"optimize_blocks", optimize_blocks},
       {"grad_to_block_id", grad_to_block},
       {"lr_decay_block_id", int32_t{-1}},
       {"sparse_grad_to_param", sparse_grad_to_param}}));
  return prog;
}

namespace {

// init = full: the whole startup, with what is not this server's made temporary, then the
// blocks cut out of the full values.
StatusOr<ir::Program> FullStartup(const Plan& plan, const ir::Program& startup,
                                  const ir::Program& server_main, int32_t server) {
  const ir::Block& mine = server_main.global();
  ir::Program prog = startup;
  ir::Block& block = prog.global();
  for (auto& [name, var] : block.vars) {
    if (mine.FindVar(name) == nullptr) {
      var.persistable = false;
      var.param.reset();
    }
  }
  for (const ParamPlan& p : plan.params) {
    if (!p.split()) continue;
    std::vector<size_t> here;
    for (size_t b = 0; b < p.num_blocks(); ++b) {
      if (p.servers[b] == server) here.push_back(b);
    }
    if (here.empty()) continue;
    std::vector<std::pair<std::string, bool>> cut = {{p.param, true}};
    for (const OwnedVar& o : p.owned) {
      if (o.accumulator) cut.emplace_back(o.name, o.sliced);
    }
    for (const auto& [var_binding, sliced] : cut) {
      const std::string& var = var_binding;  // a lambda may not capture a binding (clang 14)
      const ir::Var* source = block.FindVar(var);
      if (source == nullptr) {
        return InvalidArgument(std::string(kPass) + ": startup does not declare '" + var +
                               "' of parameter '" + p.param + "', so server " +
                               std::to_string(server) + " cannot initialise its blocks");
      }
      const ir::Var decl = *source;
      auto declare_block = [&](size_t b, std::vector<int64_t> shape) {
        std::string name = BlockName(var, b);
        const ir::Var* server_var = mine.FindVar(name);
        if (server_var != nullptr) {
          block.vars.emplace(name, *server_var);
        } else {
          block.vars.emplace(name, BlockVarDecl(decl, name, std::move(shape)));
        }
        return name;
      };
      if (sliced && !p.growable) {
        std::vector<std::string> outs;
        std::vector<int32_t> sections;
        for (size_t b = 0; b < p.num_blocks(); ++b) {
          outs.push_back(declare_block(b, p.BlockShape(b)));
          sections.push_back(static_cast<int32_t>(p.rows[b]));
        }
        block.ops.push_back(RoleOp("split_byref", {{"X", {var}}}, {{"Out", outs}},
                                   {{"sections", sections}}, ir::op_role::kDist));
      } else {
        // A whole accumulator (a beta power): each block updates a copy of its own. So does
        // each block of a growable table, of its one-row prototype.
        for (size_t b : here) {
          std::string name = declare_block(b, decl.shape);
          block.ops.push_back(RoleOp("assign", {{"X", {var}}}, {{"Out", {name}}}, {},
                                     ir::op_role::kDist));
        }
      }
    }
  }
  return prog;
}

// init = shard: only the initializers of this server's vars, cut to the block's shape.
StatusOr<ir::Program> ShardStartup(const Plan& plan, const ir::Program& startup,
                                   const ir::Program& server_main, int32_t server) {
  const ir::Block& mine = server_main.global();
  // var -> (its parameter, sliced?) for the vars of cut parameters.
  std::map<std::string, std::pair<const ParamPlan*, bool>> cut;
  for (const ParamPlan& p : plan.params) {
    if (!p.split()) continue;
    cut[p.param] = {&p, true};
    for (const OwnedVar& o : p.owned) {
      if (o.accumulator) cut[o.name] = {&p, o.sliced};
    }
  }
  ir::Program prog;
  ir::Block& block = prog.global();
  for (size_t i = 0; i < startup.global().ops.size(); ++i) {
    const ir::Op& op = startup.global().ops[i];
    const std::vector<std::string> outs = op.OutputVars();
    auto it = outs.size() == 1 ? cut.find(outs[0]) : cut.end();
    if (it == cut.end()) {
      bool keep = false;
      for (const std::string& v : outs) keep = keep || mine.FindVar(v) != nullptr;
      if (!keep) continue;
      for (const std::string& v : outs) {
        if (const ir::Var* var = mine.FindVar(v)) DeclarePersistable(block, *var);
      }
      block.ops.push_back(op);
      continue;
    }
    const auto& [p, sliced] = it->second;
    for (size_t b = 0; b < p->num_blocks(); ++b) {
      if (p->servers[b] != server) continue;
      const std::string name = BlockName(outs[0], b);
      ir::Op clone = op;
      RenameVars(clone, {{outs[0], name}});
      if (sliced) {
        if (!IsShapedInitializer(op.type) || op.FindAttr("shape") == nullptr) {
          return InvalidArgument(std::string(kPass) + ": startup op " + std::to_string(i) +
                                 " (" + op.type + ") initialises '" + outs[0] +
                                 "', which is cut into blocks, but init = \"shard\" can only "
                                 "reshape fill_constant and random initializers; use init = "
                                 "\"full\"");
        }
        clone.attrs["shape"] = p->BlockShape(b);
      }
      const ir::Var* var = mine.FindVar(name);
      if (var == nullptr) {
        return Internal(std::string(kPass) + ": server " + std::to_string(server) +
                        " lacks its block '" + name + "'");
      }
      DeclarePersistable(block, *var);
      block.ops.push_back(std::move(clone));
    }
  }
  return prog;
}

}  // namespace

StatusOr<ir::Program> ServerStartup(const Plan& plan, const ir::Program& startup,
                                    const ir::Program& server_main, int32_t server) {
  if (plan.options.init == Init::kFull) return FullStartup(plan, startup, server_main, server);
  return ShardStartup(plan, startup, server_main, server);
}

}  // namespace fleet::passes::pserver
