// The program pipeline shared by `run` and `show`: parse the program file, append the backward
// ops of its loss, then the optimizer's update ops. Each stage is a complete pair of programs.
#pragma once

#include <filesystem>
#include <string_view>

#include "frontend/frontend.h"
#include "support/status.h"

namespace fleet {

enum class Stage { kParsed, kBackward, kOptimized };

// "parsed", "backward" or "optimized"; anything else is INVALID_ARGUMENT listing those.
StatusOr<Stage> ParseStage(std::string_view name);

// The programs of `file` after `stage`. A file without minimize() stops after parsing (there is
// nothing to differentiate); `run` checks for a loss itself.
StatusOr<frontend::ParsedProgram> BuildPrograms(const std::filesystem::path& file, Stage stage);

}  // namespace fleet
