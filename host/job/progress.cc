#include "job/progress.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include <sys/resource.h>

#include "support/text.h"

namespace fleet {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Six significant digits: a learning rate of 1e-5 keeps them, where fixed notation would not.
std::string FormatGeneral(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

Status ProgressLog::Open(bool write_metrics, const std::string& own_name) {
  if (!write_metrics) return OkStatus();
  if (!train_.tensorboard_dir.empty()) {
    FLEET_ASSIGN_OR_RETURN(events_, EventFileWriter::Open(own_name.empty()
                                                              ? train_.tensorboard_dir
                                                              : train_.tensorboard_dir / own_name));
  }
  if (train_.metrics_file.empty()) return OkStatus();
  std::filesystem::path path = train_.metrics_file;
  if (!own_name.empty()) {
    path.replace_filename(path.stem().string() + "." + own_name + path.extension().string());
  }
  metrics_path_ = path.string();
  std::string kept;
  if (first_step_ > 1) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
          j["step"].get<int64_t>() < first_step_) {
        kept += line + "\n";
      }
    }
  }
  metrics_.open(path, std::ios::out | std::ios::trunc);
  metrics_ << kept;
  if (!metrics_) {
    return Unavailable("train.metrics_file: cannot open '" + path.string() + "' for writing");
  }
  return OkStatus();
}

StepReport ProgressLog::Measure(int64_t step) const {
  const double interval = std::max(Seconds(last_log_, Clock::now()), 1e-9);
  const auto steps = static_cast<double>(std::max<int64_t>(step - last_logged_step_, 1));
  StepReport r;
  r.ips = steps * static_cast<double>(samples_per_step_) / interval;
  r.reader_cost = reader_s_ / steps;
  r.batch_cost = interval / steps;
  return r;
}

Status ProgressLog::Log(int64_t step, const StepReport& r) {
  const Clock::time_point now = Clock::now();
  const double elapsed = Seconds(start_, now);
  const double eta = r.batch_cost * static_cast<double>(train_.steps - step);
  std::string line = "step " + std::to_string(step) + "/" + std::to_string(train_.steps) +
                     " loss " + FormatFixed(r.loss, 6);
  for (size_t i = 0; i < metric_names_.size(); ++i) {
    line += " " + metric_names_[i] + " " + FormatFixed(r.metrics[i], 6);
  }
  if (r.lr) line += " lr " + FormatGeneral(*r.lr);
  line += " reader_cost " + FormatFixed(r.reader_cost, 5) + "s batch_cost " +
          FormatFixed(r.batch_cost, 5) + "s ips " + FormatFixed(r.ips, 1) + " samples/s eta " +
          FormatFixed(eta, 1) + "s" + (who_.empty() ? "" : " (" + who_ + ")");
  out_ << line << "\n";
  if (r.eval) {
    std::string eval_line = "eval at step " + std::to_string(step) + ":";
    for (size_t i = 0; i < r.eval->names.size(); ++i) {
      eval_line += " " + r.eval->names[i] + " " + FormatFixed(r.eval->values[i], 6);
    }
    out_ << eval_line << " (" << r.eval->samples << " samples, "
         << FormatFixed(r.eval->seconds, 2) << "s)\n";
  }
  out_.flush();

  // Insertion order: the keys read as the line does.
  std::vector<std::pair<std::string, double>> scalars = {{"loss", r.loss}};
  for (size_t i = 0; i < metric_names_.size(); ++i) {
    scalars.emplace_back(metric_names_[i], r.metrics[i]);
  }
  if (r.lr) scalars.emplace_back("lr", *r.lr);
  scalars.insert(scalars.end(), {{"ips", r.ips},
                                 {"reader_cost", r.reader_cost},
                                 {"batch_cost", r.batch_cost},
                                 {"eta_s", eta}});
  if (r.eval) {
    for (size_t i = 0; i < r.eval->names.size(); ++i) {
      scalars.emplace_back("eval_" + r.eval->names[i], r.eval->values[i]);
    }
  }
  if (metrics_.is_open()) {
    nlohmann::ordered_json j;
    j["step"] = step;
    for (const auto& [key, v] : scalars) {
      if (key == "ips" && !r.lr) j["lr"] = nullptr;  // the key is there either way
      j[key] = v;  // nlohmann writes NaN and inf as null
    }
    j["elapsed_s"] = elapsed;
    metrics_ << j.dump() << "\n";
    metrics_.flush();
    if (!metrics_) {
      return Unavailable("train.metrics_file: writing '" + metrics_path_ + "' failed");
    }
  }
  if (events_ != nullptr) FLEET_RETURN_IF_ERROR(events_->WriteScalars(step, scalars));
  summary_.logged_losses.push_back(r.loss);
  last_log_ = now;
  last_logged_step_ = step;
  reader_s_ = 0;
  return OkStatus();
}

TrainSummary ProgressLog::Finish(double final_loss, int64_t job_samples_per_step) {
  summary_.steps = train_.steps;
  summary_.final_loss = final_loss;
  summary_.elapsed_s = Seconds(start_, Clock::now());
  const int64_t ran = train_.steps - first_step_ + 1;
  out_ << "trained " << ran << " steps"
       << (first_step_ > 1 ? " (resumed at step " + std::to_string(first_step_) + ")" : "")
       << " in " << FormatFixed(summary_.elapsed_s, 2) << "s: final loss "
       << FormatFixed(final_loss, 6) << ", "
       << FormatFixed(
              static_cast<double>(ran * job_samples_per_step) / std::max(summary_.elapsed_s, 1e-9),
              1)
       << " samples/s"
       << (who_.empty()                     ? ""
           : who_.rfind("trainer ", 0) == 0 ? " (" + who_ + ")"  // one trainer's own figures
                                            : " over " + who_);
  // This process's high-water mark (what sizing a trainer needs; a parameter-server trainer
  // holds no table the servers keep).
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    out_ << "; peak resident memory " << usage.ru_maxrss / 1024 << " MiB";
  }
  out_ << "\n";
  return summary_;
}

void PrintProfile(const exec::PreparedProgram& p, std::ostream& out) {
  const std::vector<double>& secs = p.op_seconds();
  const double runs = static_cast<double>(std::max<int64_t>(p.runs(), 1));
  double total = 0;
  for (double s : secs) total += s;
  total = std::max(total, 1e-12);
  std::vector<size_t> order(secs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return secs[a] > secs[b]; });
  std::map<std::string, double> by_type;
  for (size_t i = 0; i < secs.size(); ++i) by_type[p.kernel(i).op_type()] += secs[i];

  out << "profile: " << FormatFixed(total / runs * 1e3, 3) << " ms per step in " << secs.size()
      << " ops (mean over " << p.runs() << " steps)\n";
  out << "  ms/step      %  op\n";
  for (size_t k = 0; k < order.size() && k < 12; ++k) {
    const size_t i = order[k];
    out << "  " << FormatFixed(secs[i] / runs * 1e3, 4) << "  "
        << FormatFixed(100 * secs[i] / total, 1) << "  #" << i << " " << p.kernel(i).op_type()
        << "\n";
  }
  std::vector<std::pair<double, std::string>> types;
  for (const auto& [type, t] : by_type) types.emplace_back(t, type);
  std::sort(types.rbegin(), types.rend());
  out << "  by type:";
  for (const auto& [t, type] : types)
    out << " " << type << " " << FormatFixed(100 * t / total, 1) << "%";
  out << "\n";
}

}  // namespace fleet
