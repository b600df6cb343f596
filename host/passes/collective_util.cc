#include "passes/collective_util.h"

#include <cstdint>
#include <optional>
#include <set>
#include <utility>

#include "support/text.h"

namespace fleet::passes {

StatusOr<ir::Program*> FindProgram(ProgramSet& programs, std::string_view name,
                                   std::string_view pass) {
  auto it = programs.find(std::string(name));
  if (it != programs.end()) return &it->second;
  std::vector<std::string> names;
  for (const auto& [n, p] : programs) names.push_back("'" + n + "'");
  return InvalidArgument(std::string(pass) + ": the program set has no '" + std::string(name) +
                         "' program (it has " +
                         (names.empty() ? std::string("none") : JoinWords(names)) + ")");
}

StatusOr<int32_t> IntOption(const ir::AttrMap& options, std::string_view name, int32_t min,
                            std::string_view pass) {
  auto it = options.find(std::string(name));
  std::optional<int64_t> v;
  if (it != options.end()) v = ir::AttrAsInt(it->second);
  if (!v) return InvalidArgument(std::string(pass) + ": option '" + std::string(name) +
                                 "' is missing or not an integer");
  if (*v < min || *v > INT32_MAX) {
    return InvalidArgument(std::string(pass) + ": option '" + std::string(name) + "' must be >= " +
                           std::to_string(min) + ", got " + std::to_string(*v));
  }
  return static_cast<int32_t>(*v);
}

StatusOr<double> DoubleOption(const ir::AttrMap& options, std::string_view name,
                              std::string_view pass) {
  auto it = options.find(std::string(name));
  std::optional<double> v;
  if (it != options.end()) v = ir::AttrAsDouble(it->second);
  if (!v) return InvalidArgument(std::string(pass) + ": option '" + std::string(name) +
                                 "' is missing or not a number");
  return *v;
}

Status CheckRankAndWorld(const PassContextInfo& ctx, std::string_view pass) {
  if (ctx.world_size < 1 || ctx.rank < 0 || ctx.rank >= ctx.world_size) {
    return InvalidArgument(std::string(pass) + ": rank " + std::to_string(ctx.rank) +
                           " is not in [0, world_size) for world_size " +
                           std::to_string(ctx.world_size));
  }
  return OkStatus();
}

ir::Op RoleOp(std::string type, ir::SlotMap inputs, ir::SlotMap outputs, ir::AttrMap attrs,
              int32_t role) {
  attrs[std::string(ir::op_role::kAttr)] = role;
  return ir::MakeOp(std::move(type), std::move(inputs), std::move(outputs), std::move(attrs));
}

std::vector<std::string> StartupParams(const ir::Program& startup) {
  const ir::Block& block = startup.global();
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const ir::Op& op : block.ops) {
    for (const std::string& out : op.OutputVars()) {
      const ir::Var* v = block.FindVar(out);
      if (v != nullptr && v->param && seen.insert(out).second) order.push_back(out);
    }
  }
  for (const auto& [name, var] : block.vars) {
    if (var.param && seen.insert(name).second) order.push_back(name);
  }
  return order;
}

StatusOr<std::vector<std::string>> AppendCommInitAndBroadcast(ir::Program& startup,
                                                              const PassContextInfo& ctx,
                                                              int32_t nrings,
                                                              std::string_view pass) {
  ir::Block& block = startup.global();
  for (const ir::Op& op : block.ops) {
    if (op.type == "c_comm_init") {
      return FailedPrecondition(std::string(pass) +
                                ": the startup program already has a c_comm_init op (were the "
                                "programs transpiled twice?)");
    }
  }
  std::vector<std::string> params = StartupParams(startup);
  for (int32_t r = 0; r < nrings; ++r) {
    block.ops.push_back(ir::MakeOp("c_comm_init", {}, {},
                                   {{"ring_id", r},
                                    {"nranks", ctx.world_size},
                                    {"rank", ctx.rank}}));
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const int32_t ring = static_cast<int32_t>(k % static_cast<size_t>(nrings));
    block.ops.push_back(ir::MakeOp("c_broadcast", {{"X", {params[k]}}}, {{"Out", {params[k]}}},
                                   {{"ring_id", ring}, {"root", int32_t{0}}}));
  }
  if (!params.empty()) {
    for (int32_t r = 0; r < nrings; ++r) {
      block.ops.push_back(ir::MakeOp("c_sync_comm_stream", {{"X", {params.back()}}},
                                     {{"Out", {params.back()}}}, {{"ring_id", r}}));
    }
  }
  return params;
}

}  // namespace fleet::passes
