// Inference export: Paddle's save_inference_model and load_inference_model for Fleet. An export
// is a directory holding everything `fleet-host infer` (or another tool) needs to compute the
// fetches from the feeds, and nothing else:
//
//   model.ir             the inference program as text IR (docs/ir.md): the forward program
//                        pruned to the ops the fetches need, with training-only behaviour
//                        switched off (is_test = true on the ops that have it: dropout,
//                        batch_norm, ...)
//   params.safetensors   exactly the persistable vars the program uses, with their values
//   model.json           {"format": 1, "feeds": [{"name", "dtype", "shape"}],
//                        "fetches": [{"name", "var"}], "program": "model.ir",
//                        "params": "params.safetensors", "source": ...,
//                        "crc32": {"model.ir": "8 hex digits", "params.safetensors": ...}};
//                        a fetch's name is what the user asked for ("prediction"), its var
//                        the program's ("fc_2.tmp_2"). ReadExport checks both CRC-32s before
//                        it parses either file.
//
// The directory is written whole or not at all: into a temporary directory beside it, every
// file fsynced, then renamed into place.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "executor/scope.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet::checkpoint {

inline constexpr int kExportFormat = 1;

struct ExportedFeed {
  std::string name;
  ir::DataType dtype = ir::DataType::kFloat32;
  std::vector<int64_t> shape;  // as declared; -1 for the batch
};

struct ExportedFetch {
  std::string name;  // as the user asked for it
  std::string var;   // the program's var
};

// An export read back.
struct ExportedModel {
  ir::Program program;
  std::vector<ExportedFeed> feeds;
  std::vector<ExportedFetch> fetches;
  SafeTensors params;
};

struct InferenceProgram {
  ir::Program program;
  std::vector<std::string> feeds;  // as given, or the data vars the fetches need (sorted)
};

// Block 0 of `forward` (a program without backward or optimizer ops) pruned to the ops that
// compute `fetches` from `feeds` and the persistables, in their order, with is_test = true
// wherever the op's schema has that attribute, and only the vars those ops use. Empty `feeds`
// means every data var the fetches need. Errors name what is wrong: a fetch or feed that is no
// var of the program, a feed that is not a data var (a persistable, or something an op
// computes), a data var the fetches need that is not among the feeds, a feed the fetches do not
// need, an op with sub-blocks (control flow).
StatusOr<InferenceProgram> PruneForInference(const ir::Program& forward,
                                             const std::vector<std::string>& feeds,
                                             const std::vector<std::string>& fetches);

// The persistable vars the ops of `program` read or write, sorted: what an export stores.
std::vector<std::string> PersistablesUsed(const ir::Program& program);

// Writes the export of `program` (already pruned) to `out`, taking the values of
// PersistablesUsed(program) from `scope`. An existing `out` that is not empty is an error
// unless `force`, and is then replaced only once the new directory is complete. `source` is
// recorded in model.json (the program file it came from).
Status WriteExport(const std::filesystem::path& out, const ir::Program& program,
                   const std::vector<std::string>& feeds,
                   const std::vector<ExportedFetch>& fetches, const exec::Scope& scope,
                   const std::string& source, bool force);

// Reads and checks an export: the manifest's fields, the program (parsed and verified), and the
// parameters, which must be exactly the persistables the program uses, with their declared
// dtypes and shapes. Errors name the file and what is wrong.
StatusOr<ExportedModel> ReadExport(const std::filesystem::path& dir);

}  // namespace fleet::checkpoint
