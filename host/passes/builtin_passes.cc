#include "passes/builtin_passes.h"

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fleet/fleet_pass.h"
#include "fleet/fleet_plugin.h"
#include "passes/collective_util.h"
#include "passes/pserver_pass.h"
#include "plugin/host_api.h"
#include "plugin/program_api.h"

namespace fleet {
namespace {

// One built-in pass: its vtable and options (static, so they outlive every registry) and the
// C++ body the vtable's run slot dispatches to through ctx.
struct BuiltinPass {
  const char* name = nullptr;
  const char* summary = nullptr;
  passes::PassBody body = nullptr;
  std::vector<FleetAttr> options;
  std::vector<const FleetAttr*> option_ptrs;
  FleetPassVTable vtable{};
};

FleetAttr IntOptionAttr(const char* name, int64_t value) {
  FleetAttr a{};
  a.struct_size = sizeof(FleetAttr);
  a.name = name;
  a.type = FLEET_ATTR_INT;
  a.i = value;
  return a;
}

FleetAttr DoubleOptionAttr(const char* name, double value) {
  FleetAttr a{};
  a.struct_size = sizeof(FleetAttr);
  a.name = name;
  a.type = FLEET_ATTR_DOUBLE;
  a.f = value;
  return a;
}

FleetAttr BoolOptionAttr(const char* name, bool value) {
  FleetAttr a{};
  a.struct_size = sizeof(FleetAttr);
  a.name = name;
  a.type = FLEET_ATTR_BOOL;
  a.i = value ? 1 : 0;
  return a;
}

// `value` must be a string literal: the attribute keeps the pointer.
FleetAttr StringOptionAttr(const char* name, const char* value) {
  FleetAttr a{};
  a.struct_size = sizeof(FleetAttr);
  a.name = name;
  a.type = FLEET_ATTR_STRING;
  a.s = value;
  a.s_len = std::strlen(value);
  return a;
}

BuiltinPass MakePass(const char* name, const char* summary, passes::PassBody body,
                     std::vector<FleetAttr> options) {
  BuiltinPass pass;
  pass.name = name;
  pass.summary = summary;
  pass.body = body;
  pass.options = std::move(options);
  return pass;
}

Status RunBody(const BuiltinPass& pass, FleetProgramSet* handle, const FleetPassContext* pc,
               size_t num_options, const FleetAttr* const* options) {
  std::map<std::string, ir::Program>* programs = ProgramSetBinding::Programs(handle);
  if (programs == nullptr) {
    return Internal(std::string(pass.name) + ": the program set handle is not the host's");
  }
  if (pc == nullptr || !FLEET_HAS_FIELD(pc, FleetPassContext, world_size)) {
    return Internal(std::string(pass.name) + ": no pass context (rank, world_size)");
  }
  PassContextInfo ctx;
  ctx.rank = pc->rank;
  ctx.world_size = pc->world_size;
  if (FLEET_HAS_FIELD(pc, FleetPassContext, role) && pc->role != nullptr) ctx.role = pc->role;
  if (FLEET_HAS_FIELD(pc, FleetPassContext, pserver_endpoints) && pc->pserver_endpoints) {
    for (size_t i = 0; i < pc->num_pservers; ++i) {
      ctx.pserver_endpoints.emplace_back(pc->pserver_endpoints[i]);
    }
  }
  ir::AttrMap attrs;
  for (size_t i = 0; i < num_options; ++i) {
    if (options == nullptr || options[i] == nullptr || options[i]->name == nullptr) {
      return Internal(std::string(pass.name) + ": option " + std::to_string(i) + " is NULL");
    }
    FLEET_ASSIGN_OR_RETURN(
        ir::Attribute value,
        FromFleetAttr(*options[i], std::string(pass.name) + ": option '" +
                                       std::string(options[i]->name) + "'"));
    attrs[options[i]->name] = std::move(value);
  }
  return pass.body(*programs, ctx, attrs);
}

FleetStatus* RunSlot(void* ctx, const FleetProgramApi* /*api*/, FleetProgramSet* programs,
                     const FleetPassContext* pass_context, size_t num_options,
                     const FleetAttr* const* options) {
  const auto* pass = static_cast<const BuiltinPass*>(ctx);
  // Called through the C ABI: nothing may be thrown across it.
  try {
    return MakeFleetStatus(RunBody(*pass, programs, pass_context, num_options, options));
  } catch (const std::exception& e) {
    return MakeFleetStatus(Internal(std::string(pass->name) + ": " + e.what()));
  }
}

std::vector<BuiltinPass>& Passes() {
  // Never destroyed: registries hold pointers into it until the process ends.
  static std::vector<BuiltinPass>* passes = [] {
    auto* v = new std::vector<BuiltinPass>();
    v->push_back(MakePass("grad_allreduce",
                  "data parallelism: broadcast parameters, scale the loss gradient by "
                  "1/world_size and all-reduce every gradient (Paddle's GradAllReduce)",
                  passes::RunGradAllReduce,
                  {IntOptionAttr("nrings", 1), StringOptionAttr("sparse_exchange", "auto")}));
    v->push_back(MakePass("local_sgd",
                  "data parallelism by averaging parameters after the update ops every "
                  "k_steps steps (Paddle's LocalSGD)",
                  passes::RunLocalSgd,
                  {IntOptionAttr("nrings", 1), IntOptionAttr("k_steps", 1)}));
    v->push_back(MakePass("fuse_allreduce",
                  "merges c_allreduce_sum ops of one ring into buckets of at most bucket_mb MiB",
                  passes::RunFuseAllReduce,
                  {DoubleOptionAttr("bucket_mb", 32.0)}));
    v->push_back(MakePass("sync_batch_norm",
                  "batch_norm with the statistics of every rank: all-reduces per-channel sums "
                  "forward and backward (Paddle's DistributedStrategy.sync_batch_norm); runs "
                  "after grad_allreduce or local_sgd",
                  passes::RunSyncBatchNorm, {}));
    v->push_back(MakePass("pserver",
                  "parameter-server training: trainers send gradients (cut into blocks) to "
                  "the servers, which run the optimizer (Paddle's DistributeTranspiler), or with "
                  "geo_k_steps > 0 train locally and exchange deltas every k steps (GEO-SGD); "
                  "adds pserver.<i> and pserver.<i>.startup",
                  passes::RunPserver,
                  {BoolOptionAttr("sync", true), BoolOptionAttr("slice_var_up", true),
                   IntOptionAttr("min_block_size", 8192),
                   StringOptionAttr("split_method", "round_robin"),
                   StringOptionAttr("init", "full"), IntOptionAttr("geo_k_steps", 0)}));
    // The pointers are taken once the vector no longer grows.
    for (BuiltinPass& p : *v) {
      for (const FleetAttr& a : p.options) p.option_ptrs.push_back(&a);
      p.vtable.struct_size = sizeof(FleetPassVTable);
      p.vtable.num_options = p.option_ptrs.size();
      p.vtable.options = p.option_ptrs.data();
      p.vtable.run = RunSlot;
    }
    return v;
  }();
  return *passes;
}

}  // namespace

Status RegisterBuiltinPasses(PluginRegistry& registry) {
  // All or nothing: check every name before registering any.
  for (const BuiltinPass& pass : Passes()) {
    if (registry.Find(FLEET_COMPONENT_PASS, pass.name) != nullptr) {
      return AlreadyExists(std::string("pass '") + pass.name + "' is already registered");
    }
  }
  for (BuiltinPass& pass : Passes()) {
    auto record = std::make_unique<ComponentRecord>();
    record->kind = FLEET_COMPONENT_PASS;
    record->name = pass.name;
    record->summary = pass.summary;
    record->ctx = &pass;
    record->vtable_size = sizeof(FleetPassVTable);
    const size_t words =
        (sizeof(FleetPassVTable) + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
    record->vtable_copy.assign(words, std::max_align_t{});
    std::memcpy(record->vtable_copy.data(), &pass.vtable, sizeof(FleetPassVTable));
    FLEET_RETURN_IF_ERROR(registry.RegisterHostComponent(std::move(record)));
  }
  return OkStatus();
}

}  // namespace fleet
