#include "job/metrics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "support/text.h"

namespace fleet {
namespace {

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

template <typename T>
double First(const exec::HostTensor& t) {
  T v;
  std::memcpy(&v, t.bytes.data(), sizeof(T));
  return static_cast<double>(v);
}

bool IsNumberType(ir::DataType t) {
  switch (t) {
    case ir::DataType::kBool:
    case ir::DataType::kInt8:
    case ir::DataType::kUInt8:
    case ir::DataType::kInt16:
    case ir::DataType::kInt32:
    case ir::DataType::kInt64:
    case ir::DataType::kFloat32:
    case ir::DataType::kFloat64:
      return true;
    default:
      return false;
  }
}

}  // namespace

const std::vector<std::string>& ReservedRecordKeys() {
  static const std::vector<std::string> keys = {"step",       "loss",       "lr",
                                                "ips",        "reader_cost", "batch_cost",
                                                "eta_s",      "elapsed_s"};
  return keys;
}

StatusOr<std::vector<ReportedVar>> ReportedVars(const Config::Train& train,
                                                const frontend::ParsedProgram& programs) {
  std::vector<ReportedVar> out;
  for (const frontend::ReportedMetric& m : programs.metrics) {
    out.push_back({m.name, m.var, "metric \"" + m.name + "\" (" + m.where + ")"});
  }
  for (size_t i = 0; i < train.fetch.size(); ++i) {
    const std::string& name = train.fetch[i];
    const std::string what = "train.fetch[" + std::to_string(i) + "]";
    auto named = programs.names.find(name);
    const std::string var = named != programs.names.end() ? named->second : name;
    if (programs.main.global().FindVar(var) == nullptr) {
      std::vector<std::string> candidates;
      for (const auto& [file_name, v] : programs.names) candidates.push_back(file_name);
      const std::string close = ClosestMatch(name, candidates);
      return InvalidArgument(what + ": " + QuoteForMessage(name) +
                             " is neither a variable of the program file nor a var of its main "
                             "program" +
                             (close.empty() ? "" : " (did you mean '" + close + "'?)"));
    }
    out.push_back({name, var, what});
  }
  const std::vector<std::string>& reserved = ReservedRecordKeys();
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::find(reserved.begin(), reserved.end(), out[i].name) != reserved.end()) {
      return InvalidArgument(out[i].what + ": " + QuoteForMessage(out[i].name) +
                             " is a key every record has already; give the metric another name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (out[j].name == out[i].name) {
        return InvalidArgument(out[i].what + ": " + QuoteForMessage(out[i].name) +
                               " is reported already by " + out[j].what);
      }
    }
    // A metric the program declares may be dropped by a pass (a pruned branch).
    if (programs.main.global().FindVar(out[i].var) == nullptr) {
      return InvalidArgument(out[i].what + ": the main program has no var " +
                             QuoteForMessage(out[i].var));
    }
  }
  return out;
}

Status CheckReportedVar(const ReportedVar& r, ir::DataType dtype,
                        const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (n != 1) {
    return InvalidArgument(r.what + ": '" + r.var + "' has shape " + ShapeText(dims) +
                           " with train.batch_size; only a var holding one value can be "
                           "reported (reduce it, e.g. with mean(...))");
  }
  if (!IsNumberType(dtype)) {
    return InvalidArgument(r.what + ": '" + r.var + "' is " +
                           std::string(ir::DataTypeName(dtype)) +
                           "; report a float32, float64, int or bool var (cast it)");
  }
  return OkStatus();
}

Status CheckReportedVars(const std::vector<ReportedVar>& vars, const exec::PreparedProgram& main) {
  for (const ReportedVar& r : vars) {
    const ops::TensorInfo* info = main.VarInfo(r.var);
    if (info == nullptr) {
      return InvalidArgument(r.what + ": no op of the main program computes '" + r.var + "'");
    }
    FLEET_RETURN_IF_ERROR(CheckReportedVar(r, info->dtype, info->dims));
  }
  return OkStatus();
}

std::vector<std::string> FetchList(const std::string& loss, const std::vector<ReportedVar>& vars) {
  std::vector<std::string> fetch = {loss};
  for (const ReportedVar& r : vars) fetch.push_back(r.var);
  return fetch;
}

StatusOr<double> ScalarValue(const exec::HostTensor& t, const std::string& what) {
  if (t.numel() != 1 || t.bytes.size() != ir::DataTypeSize(t.dtype)) {
    return Internal(what + ": the fetched tensor has shape " + ShapeText(t.dims) +
                    ", not one value");
  }
  switch (t.dtype) {
    case ir::DataType::kBool:
    case ir::DataType::kUInt8:
      return First<uint8_t>(t);
    case ir::DataType::kInt8:
      return First<int8_t>(t);
    case ir::DataType::kInt16:
      return First<int16_t>(t);
    case ir::DataType::kInt32:
      return First<int32_t>(t);
    case ir::DataType::kInt64:
      return First<int64_t>(t);
    case ir::DataType::kFloat32:
      return First<float>(t);
    case ir::DataType::kFloat64:
      return First<double>(t);
    default:
      return Internal(what + ": cannot report a " + std::string(ir::DataTypeName(t.dtype)) +
                      " value");
  }
}

std::optional<std::string> LearningRateVar(const ir::Program& main) {
  for (const ir::Op& op : main.global().ops) {
    const std::string_view lr = op.InputOne("LearningRate");
    if (!lr.empty()) return std::string(lr);
  }
  return std::nullopt;
}

StatusOr<double> LearningRateValue(const exec::Executor& executor, const std::string& var) {
  if (executor.scope().Find(var) == nullptr) {
    return NotFound("the learning rate '" + var + "' is not in the scope");
  }
  FLEET_ASSIGN_OR_RETURN(exec::HostTensor t, executor.scope().Read(var));
  return ScalarValue(t, "the learning rate '" + var + "'");
}

}  // namespace fleet
