// `fleet-host infer` as a library: an inference export (checkpoint/export.h) run on .npy inputs.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "executor/tensor.h"
#include "support/status.h"

namespace fleet {

struct InferenceResult {
  std::vector<std::string> names;  // each fetch as the export names it, in the export's order
  std::vector<exec::HostTensor> fetched;
};

// Runs the export in `dir` on the config's device. `inputs` pairs feed names with .npy files; the
// name "" stands for the only feed of a model that has one (and must then be the only input). Every
// feed needs exactly one input with its dtype and shape (any batch where the feed declares -1),
// all inputs the same batch, and no input may name something that is not a feed. With `out_dir`,
// each fetch is also written there as NAME.npy.
StatusOr<InferenceResult> RunInference(
    const Config& config, const std::filesystem::path& dir,
    const std::vector<std::pair<std::string, std::filesystem::path>>& inputs,
    const std::filesystem::path& out_dir);

// A short text of a tensor for people: its type and shape and its first values.
std::string TensorSummary(const exec::HostTensor& t);

}  // namespace fleet
