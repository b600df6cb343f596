// `fleet-host check [PROGRAM]`: everything start-up would do short of running a job — read and
// validate the config, load exactly the plugins it selects, resolve the selected components and
// ask the device what it has. With a program, also build it through every stage, verify it,
// run its startup program and prepare its main program for [train].batch_size, so a missing
// kernel or a shape that does not fit shows up before a job is launched. For a trainer or
// server of a distributed job (from the role, as `run` resolves it) the communicator or
// transport is loaded and the transpiled programs are built and verified too. With [checkpoint]
// dir, the checkpoint a resumed run would start from is found and verified. No socket is
// opened.
#include <optional>

#include "checkpoint/checkpoint.h"
#include "cli/cli.h"
#include "job/pipeline.h"
#include "job/train.h"
#include "roles/role.h"
#include "ops/verifier.h"
#include "passes/builtin_passes.h"
#include "plugin/device.h"
#include "plugin/registry.h"
#include "plugin/selection.h"

namespace fleet {

int CheckCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err) {
  if (args.size() > 1 || (!args.empty() && !args[0].empty() && args[0][0] == '-')) {
    err << "fleet-host check: unexpected argument '" << args.back()
        << "'; usage: fleet-host check [PROGRAM]\n";
    return kExitUsage;
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  // A program file may set [strategy] keys of its own (its DistributedStrategy).
  std::optional<frontend::ParsedProgram> programs;
  if (!args.empty()) {
    auto built = BuildPrograms(args[0], Stage::kOptimized);
    if (!built.ok()) return Fail(err, built.status());
    programs = std::move(*built);
    if (Status s = MergeProgramStrategy(*programs, *config); !s.ok()) return Fail(err, s);
  }
  // The role decides what "auto" means, and so which communicator or transport is loaded.
  auto role = ResolveRole(*config, ProcessEnvironment());
  if (!role.ok()) return Fail(err, role.status());
  config->strategy_mode = EffectiveStrategy(*config, *role);
  if (programs) {
    if (Status s = CheckFleetInit(*programs, config->strategy_mode); !s.ok()) {
      return Fail(err, s);
    }
  }
  PluginRegistry registry(LoadOptionsFor(*config));
  if (Status s = RegisterBuiltinPasses(registry); !s.ok()) return Fail(err, s);
  auto selection = LoadSelected(*config, registry);
  if (!selection.ok()) return Fail(err, selection.status());
  // strategy.passes and [passes.NAME] are checked as Transpile checks them, even when this job
  // would not transpile.
  if (Status s = CheckPasses(*config, registry); !s.ok()) return Fail(err, s);
  Device device(selection->device);
  auto count = device.Count();
  if (!count.ok()) return Fail(err, count.status());
  if (*count == 0) {
    err << "fleet-host: " << config->source << ": device.backend = \"" << device.name()
        << "\": no device of this kind is present on this machine\n";
    return kExitFailure;
  }
  auto props = device.Props(0);
  if (!props.ok()) return Fail(err, props.status());

  out << "config:    " << config->source << "\n";
  out << "device:    " << device.name() << " from plugin '" << selection->device->plugin << "' ("
      << *count << " present; #0: " << props->model << ")\n";
  if (selection->comm != nullptr) {
    out << "comm:      " << selection->comm->name << " from plugin '" << selection->comm->plugin
        << "'\n";
  }
  if (selection->transport != nullptr) {
    out << "transport: " << selection->transport->name << " from plugin '"
        << selection->transport->plugin << "'\n";
  }
  out << "strategy:  " << config->strategy_mode << "\n";
  out << "plugins:   ";
  for (size_t i = 0; i < registry.plugins().size(); ++i) {
    const PluginRecord& p = *registry.plugins()[i];
    out << (i ? ", " : "") << p.name << " " << p.version;
  }
  out << "\n";
  for (const auto& p : registry.plugins()) {
    for (const std::string& n : p->notes) out << "note:      " << p->name << ": " << n << "\n";
  }
  for (const std::string& w : selection->warnings) out << "warning:   " << w << "\n";
  if (!args.empty()) {
    const std::string& file = args[0];
    for (const auto& [name, program] : {std::pair{"startup", &programs->startup},
                                        std::pair{"main", &programs->main}}) {
      Status verified = ir::VerifyProgram(*program);
      if (!verified.ok()) return Fail(err, verified.WithContext(file + ": " + name));
    }
    if (config->strategy_mode == "collective" || config->strategy_mode == "pserver") {
      // The transpiled programs are verified by the passes; they are not prepared, since their
      // collective or RPC ops need the job's peers.
      auto transpiled = Transpile(*config, *role, *programs, registry);
      if (!transpiled.ok()) return Fail(err, transpiled.status().WithContext(file));
      out << "transpile: " << config->strategy_mode << " for " << role->role << " " << role->rank
          << " of a job of " << role->world_size << " trainers";
      if (config->strategy_mode == "pserver") {
        out << " and " << role->pserver_endpoints.size() << " pservers";
      }
      out << ": " << transpiled->size() << " programs verified\n";
    }
    // The untranspiled programs hold every kernel the job runs on this device.
    auto setup = PrepareTraining(*config, *programs, registry, selection->device->name);
    if (!setup.ok()) return Fail(err, setup.status().WithContext(file));
    out << "program:   " << file << ": startup " << setup->startup_ops << " ops, main "
        << setup->main->num_ops() << " ops prepared for batch " << config->train.batch_size
        << " on " << device.name() << "\n";
    if (!config->checkpoint.dir.empty()) {
      // What a resume would start from, checked as run checks it (every file's checksum).
      const bool ps = config->strategy_mode == "pserver";
      std::vector<std::string> warnings;
      auto found = checkpoint::FindLatestCheckpoint(
          config->checkpoint.dir, checkpoint::ProgramHash({&programs->startup, &programs->main}),
          ps ? "pserver.0" : "", ps ? static_cast<int64_t>(role->pserver_endpoints.size()) : 1,
          warnings);
      if (!found.ok()) return Fail(err, found.status());
      for (const std::string& w : warnings) out << "warning:   checkpoint: " << w << "\n";
      out << "checkpoint: " << config->checkpoint.dir.string() << ": ";
      if (found->has_value()) {
        out << (*found)->dir.filename().string() << " is the newest intact one; a resumed run "
            << "starts at step " << (*found)->info.step + 1 << "\n";
      } else {
        out << "none to resume from yet\n";
      }
    }
  }
  out << "check passed\n";
  return kExitOk;
}

}  // namespace fleet
