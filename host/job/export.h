// `fleet-host export` as a library: a program file's forward part, pruned to the fetches, with
// trained weights, written as an inference export (checkpoint/export.h).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "support/status.h"

namespace fleet {

struct ExportRequest {
  std::string program;               // the program file
  std::vector<std::string> fetches;  // vars or names the file gives its values ("prediction")
  std::vector<std::string> feeds;    // likewise; empty = every data var the fetches need
  std::string out;                   // the export directory
  std::string params_dir;            // weights from NAME.npy / *.safetensors here, or ...
  std::string checkpoint_root;       // ... from the newest intact checkpoint under here (a
                                     // parameter-server job's: gathered from the servers'
                                     // shards); with neither, the startup program's initial
                                     // values
  bool force = false;                // replace a non-empty `out`
};

// What was exported, for the user.
struct ExportReport {
  size_t ops = 0;
  size_t params = 0;
  std::string weights;             // where the weights came from
  std::vector<std::string> feeds;  // the export's feeds
  std::vector<std::string> warnings;
};

// Builds the program, runs its startup on the config's device, loads the weights the request
// names, prunes the forward program and writes the export whole or not at all. Errors name the
// program file, the option at fault (--params, --checkpoint) or the output directory; a model
// whose persistable state exceeds the memory this process can use is RESOURCE_EXHAUSTED before
// anything is allocated, naming its largest var.
StatusOr<ExportReport> ExportModel(const Config& config, const ExportRequest& request);

}  // namespace fleet
