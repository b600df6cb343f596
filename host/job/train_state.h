// What both training loops (train.h, train_devices.h) do with a step's results and with the
// trained state: read and check the loss, list and save the parameters, load [train] init_from,
// report the data lines a run skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "data/source.h"
#include "executor/executor.h"
#include "executor/tensor.h"
#include "frontend/frontend.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet {

// The loss as a double: the first element of a float32 or float64 tensor.
StatusOr<double> LossValue(const exec::HostTensor& t, const std::string& name);

// ABORTED naming the step when the loss is not finite (with a hint at the learning rate).
Status CheckLoss(double loss, int64_t step, const std::string& name);

// The names of the program's parameters, sorted.
std::vector<std::string> ParamNames(const ir::Program& main);

// A parameter's bytes on the host.
StatusOr<std::vector<uint8_t>> ParamBytes(const exec::Executor& executor,
                                          const std::string& name);

// [train] save_params_dir: NAME.npy per parameter, each written to a temporary file and renamed,
// so a reader never sees half a file.
Status SaveParams(const exec::Executor& executor, const std::vector<std::string>& params,
                  const std::filesystem::path& dir);

// [train] init_from: the weights in that directory replace what startup gave them. `report`:
// log how many (once per process, not once per device).
Status InitFrom(const std::filesystem::path& dir, exec::Executor& executor,
                const frontend::ParsedProgram& programs, bool report = true);

// data.bad_lines = "skip": how many lines the run did without (this trainer's files only).
void ReportSkippedLines(const data::DataSource& source, std::ostream& out);

}  // namespace fleet
