#include "job/train_state.h"

#include <cmath>

#include "checkpoint/init_from.h"
#include "data/npy.h"
#include "support/durable_file.h"
#include "support/logging.h"
#include "support/text.h"

namespace fleet {

StatusOr<double> LossValue(const exec::HostTensor& t, const std::string& name) {
  if (t.numel() < 1) return InvalidArgument("the loss '" + name + "' is empty");
  if (t.dtype == ir::DataType::kFloat32) return static_cast<double>(t.data<float>()[0]);
  if (t.dtype == ir::DataType::kFloat64) return t.data<double>()[0];
  return InvalidArgument("the loss '" + name + "' is " + std::string(ir::DataTypeName(t.dtype)) +
                         ", not a float");
}

Status CheckLoss(double loss, int64_t step, const std::string& name) {
  if (std::isfinite(loss)) return OkStatus();
  return Aborted("step " + std::to_string(step) + ": the loss '" + name + "' is " +
                 FormatFixed(loss, 6) + " (try a smaller learning rate)");
}

std::vector<std::string> ParamNames(const ir::Program& main) {
  std::vector<std::string> names;
  for (const auto& [name, var] : main.global().vars) {
    if (var.param.has_value()) names.push_back(name);
  }
  return names;
}

StatusOr<std::vector<uint8_t>> ParamBytes(const exec::Executor& executor,
                                          const std::string& name) {
  if (executor.scope().Find(name) == nullptr) {
    return NotFound("parameter '" + name + "' is not in the scope");
  }
  FLEET_ASSIGN_OR_RETURN(exec::HostTensor t, executor.scope().Read(name));
  return std::move(t.bytes);
}

Status SaveParams(const exec::Executor& executor, const std::vector<std::string>& params,
                  const std::filesystem::path& dir) {
  FLEET_RETURN_IF_ERROR(MakePrivateDirectories(dir).WithContext("train.save_params_dir"));
  for (const std::string& name : params) {
    const exec::ScopeVar* v = executor.scope().Find(name);
    if (v == nullptr) continue;  // a parameter the program never initialised
    // The name becomes a file name: one that could leave `dir` is never written.
    FLEET_RETURN_IF_ERROR(ir::CheckVarName(name).WithContext("train.save_params_dir"));
    data::NpyArray a;
    a.dtype = v->dtype;
    a.dims = v->dims;
    FLEET_ASSIGN_OR_RETURN(a.bytes, ParamBytes(executor, name));
    FLEET_RETURN_IF_ERROR(
        data::WriteNpy(dir / (name + ".npy"), a).WithContext("train.save_params_dir"));
  }
  return OkStatus();
}

Status InitFrom(const std::filesystem::path& dir, exec::Executor& executor,
                const frontend::ParsedProgram& programs, bool report) {
  FLEET_ASSIGN_OR_RETURN(
      std::vector<std::string> loaded,
      checkpoint::LoadInitialWeights(dir, executor.scope(), {&programs.startup, &programs.main}));
  if (report) Log().info("init_from: loaded {} vars from {}", loaded.size(), dir.string());
  return OkStatus();
}

void ReportSkippedLines(const data::DataSource& source, std::ostream& out) {
  const int64_t n = source.skipped_lines();
  if (n > 0) out << "skipped " << n << " malformed line" << (n == 1 ? "" : "s") << " of data\n";
}

}  // namespace fleet
