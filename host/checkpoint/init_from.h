// [train] init_from: start a model from weights made elsewhere. After the startup program has
// initialised the scope, the persistable vars found in a directory replace their initial values:
//   - every NAME.npy is the var NAME;
//   - every tensor of every *.safetensors file is the var of the tensor's name.
// Files with other extensions and subdirectories are ignored (a checkpoint's manifest may sit
// beside its tensors). Any subset of the persistables may be given; the rest keep the values
// startup gave them.
//
// Strict, so that a typo cannot silently leave a layer random: a file or tensor that names no
// persistable var of the programs is an error naming it; a dtype or shape unlike the var's is
// an error naming the var, the file and both; a var given twice (two .npy spellings cannot
// collide, but a .npy and a safetensors tensor, or two safetensors files, can) is an error
// naming both files; a directory with nothing to load is an error too.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "executor/scope.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet::checkpoint {

// Loads the weights in `dir` into `scope` and returns the names of the vars loaded, sorted.
// `programs` (e.g. startup and main) say which vars are persistable and, for a var the scope
// does not hold yet, its dtype and shape (all dims must then be known); for a var the scope
// holds, the scope's dtype and dims are the ones checked. Every file is read and checked before
// the scope is written, so an error leaves the scope as it was. The caller keeps `scope` alive
// and does not use it from another thread meanwhile.
StatusOr<std::vector<std::string>> LoadInitialWeights(
    const std::filesystem::path& dir, exec::Scope& scope,
    const std::vector<const ir::Program*>& programs);

// Where a parameter server keeps part of a var: rows [first_row, first_row + rows) of the whole
// var are its scope var `block` ("fc_0.w_0.block1").
struct RowBlock {
  std::string block;
  int64_t first_row = 0;
  int64_t rows = 0;
};
using RowBlocks = std::map<std::string, std::vector<RowBlock>>;  // by the whole var's name

// LoadInitialWeights for a parameter server, whose scope holds its share of the job's state:
// some vars whole, some in row blocks (`blocks`, from the split_byref ops of its startup). The
// files are those of LoadInitialWeights, and as strict: names, dtypes and shapes are checked
// against the whole vars of `programs` (every program of the job, so that every server refuses
// the same mistakes). A whole var that this server keeps in blocks writes the rows of those
// blocks; a var it does not hold (another server's) is skipped. Returns the vars this server
// wrote, a blocked one by its whole name, sorted. Every file is checked before the scope is
// written.
StatusOr<std::vector<std::string>> LoadInitialWeightsForServer(
    const std::filesystem::path& dir, exec::Scope& scope,
    const std::vector<const ir::Program*>& programs, const RowBlocks& blocks);

}  // namespace fleet::checkpoint
