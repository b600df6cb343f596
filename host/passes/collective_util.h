// Pieces shared by the built-in collective passes (builtin_passes.h): the pass entry points,
// option and context checks, and the startup rewrite GradAllReduce and LocalSGD have in common.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/program.h"
#include "plugin/pass.h"
#include "support/status.h"

namespace fleet::passes {

using ProgramSet = std::map<std::string, ir::Program>;

// A pass body: edits `programs` in place (RunPass hands it a scratch copy and verifies the
// result). `options` holds every declared option, already converted to its declared type.
using PassBody = Status (*)(ProgramSet& programs, const PassContextInfo& ctx,
                            const ir::AttrMap& options);

Status RunGradAllReduce(ProgramSet& programs, const PassContextInfo& ctx,
                        const ir::AttrMap& options);
Status RunLocalSgd(ProgramSet& programs, const PassContextInfo& ctx, const ir::AttrMap& options);
Status RunFuseAllReduce(ProgramSet& programs, const PassContextInfo& ctx,
                        const ir::AttrMap& options);
Status RunSyncBatchNorm(ProgramSet& programs, const PassContextInfo& ctx,
                        const ir::AttrMap& options);

// The program `name` of the set; INVALID_ARGUMENT "PASS: the program set has no 'NAME'
// program (it has ...)" when absent.
StatusOr<ir::Program*> FindProgram(ProgramSet& programs, std::string_view name,
                                   std::string_view pass);

// An integer option that must be >= `min`; INVALID_ARGUMENT naming the option otherwise.
StatusOr<int32_t> IntOption(const ir::AttrMap& options, std::string_view name, int32_t min,
                            std::string_view pass);
StatusOr<double> DoubleOption(const ir::AttrMap& options, std::string_view name,
                              std::string_view pass);

// world_size >= 1 and 0 <= rank < world_size.
Status CheckRankAndWorld(const PassContextInfo& ctx, std::string_view pass);

// An op carrying op_role = `role` (Paddle marks every op a transpiler inserts in "main").
ir::Op RoleOp(std::string type, ir::SlotMap inputs, ir::SlotMap outputs, ir::AttrMap attrs,
              int32_t role);

// The parameters of the startup program's global block in creation order: the order of the
// first op that writes each (its initializer), then parameters no op writes, by name. Vars are
// stored by name, so the initializers are the only record of the order Paddle uses.
std::vector<std::string> StartupParams(const ir::Program& startup);

// Paddle's Collective._transpile_startup_program, appended to the startup block:
//   c_comm_init(ring_id=r, nranks=world_size, rank=rank)            for r in 0..nrings-1
//   c_broadcast(X=Out=p, ring_id=k mod nrings, root=0)             for the k-th parameter
//   c_sync_comm_stream(X=Out=<last parameter>, ring_id=r)          for r in 0..nrings-1
// The broadcast and stream sync are left out when there is no parameter. Returns the
// parameters in broadcast order. FAILED_PRECONDITION when startup already has a c_comm_init
// (the programs were transpiled before).
StatusOr<std::vector<std::string>> AppendCommInitAndBroadcast(ir::Program& startup,
                                                              const PassContextInfo& ctx,
                                                              int32_t nrings,
                                                              std::string_view pass);

}  // namespace fleet::passes
