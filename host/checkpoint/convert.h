// `fleet-host convert`: the tensors of checkpoints and exports as one .npy file per var, which
// any tool reads (numpy.load), and such files back into one safetensors file, which
// [train] init_from, export --params and the tools of other frameworks read.
#pragma once

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "support/status.h"

namespace fleet::checkpoint {

// The tensors of `src`: a .safetensors file; a directory holding persistables.safetensors (a
// checkpoint's step) or params.safetensors (an export); or a directory of NAME.npy files (each
// the var NAME). Sorted by name for a directory of .npy files; in file order otherwise.
StatusOr<SafeTensors> ReadTensors(const std::filesystem::path& src);

// Writes every tensor of `st` as DIR/NAME.npy, the directory whole or not at all (see
// CommitDirectory). A name that is no plain file name (empty, with '/', starting with '.') is
// refused, naming it: files must map back to the same var names.
Status WriteNpyDirectory(const std::filesystem::path& dir, const SafeTensors& st, bool replace);

}  // namespace fleet::checkpoint
