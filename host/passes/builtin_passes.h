// host/passes: the transpile passes the host provides (collective, local SGD, fusion,
// parameter-server split), registered like plugin passes.
// Depends on: ir/, ops/, plugin/, support/.
//
// The transpile passes the host itself provides (plugin "host"), registered as ordinary
// FLEET_COMPONENT_PASS components so they are found, option-checked, run and verified through
// the same registry and RunPass as plugin passes. They edit the C++ IR directly (through
// ProgramSetBinding::Programs) rather than through the handle API.
//
//   grad_allreduce  {nrings: int = 1}
//       Paddle's collective GradAllReduce: communicator init and parameter broadcast in
//       "startup"; loss-gradient scaling by 1/world_size and one c_allreduce_sum per gradient in
//       "main". See passes/grad_allreduce.cc.
//   local_sgd       {nrings: int = 1, k_steps: int = 1}
//       Paddle's collective LocalSGD (parameter averaging after the update ops). With
//       k_steps > 1 it also adds "main.local", the plain local step: the trainer runs "main" on
//       every k_steps-th step and "main.local" on the others. See passes/local_sgd.cc.
//   fuse_allreduce  {bucket_mb: double = 32.0}
//       Merges c_allreduce_sum ops of "main" into buckets of at most bucket_mb MiB (Paddle's
//       fuse_grad_size_in_MB). See passes/fuse_allreduce.cc.
//   pserver         {sync: bool = true, slice_var_up: bool = true, min_block_size: int = 8192,
//                    split_method: string = "round_robin", init: string = "full"}
//       Paddle's DistributeTranspiler in pserver mode: rewrites main/startup into the trainer's
//       programs and adds pserver.<i> and pserver.<i>.startup per server. See
//       passes/pserver_pass.h.
//
// Every pass needs "main" and (except fuse_allreduce) "startup" in the program set; errors are
// INVALID_ARGUMENT naming what is missing.
#pragma once

#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// Registers the passes above as host components; call before loading plugins (a plugin
// pass of the same name is then refused). ALREADY_EXISTS if any is already registered.
Status RegisterBuiltinPasses(PluginRegistry& registry);

}  // namespace fleet
