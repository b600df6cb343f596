#include "job/train.h"

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <map>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <fstream>
#include <functional>
#include <optional>
#include <memory>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/init_from.h"
#include "job/pipeline.h"
#include "data/dataset.h"
#include "data/file_list.h"
#include "data/npy.h"
#include "data/prefetch.h"
#include "data/source.h"
#include "executor/executor.h"
#include "collective/parallel_runner.h"
#include "fleet/fleet_plugin.h"
#include "support/logging.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// The loss as a double: the first element of a float32 or float64 tensor.
StatusOr<double> LossValue(const exec::HostTensor& t, const std::string& name) {
  if (t.numel() < 1) return InvalidArgument("the loss '" + name + "' is empty");
  if (t.dtype == ir::DataType::kFloat32) return static_cast<double>(t.data<float>()[0]);
  if (t.dtype == ir::DataType::kFloat64) return t.data<double>()[0];
  return InvalidArgument("the loss '" + name + "' is " + std::string(ir::DataTypeName(t.dtype)) +
                         ", not a float");
}

// A csv or multislot dataset over this trainer's files: the file list expanded, then split
// across the `trainers` when data.shard says so.
StatusOr<std::unique_ptr<data::DataSource>> MakeTextDataset(
    const Config::Data& d, uint64_t seed, const std::vector<data::FeedSpec>& feeds, int64_t rank,
    int64_t trainers) {
  std::vector<std::string> patterns = d.filelist;
  if (d.source == "csv" && !d.csv_path.empty()) patterns.insert(patterns.begin(), d.csv_path);
  FLEET_ASSIGN_OR_RETURN(std::vector<std::filesystem::path> files,
                         data::ExpandFileList(patterns));
  const auto count = static_cast<int64_t>(files.size());
  const bool shard =
      d.shard == "true" || (d.shard == "auto" && trainers > 1 && count >= trainers);
  if (shard && trainers > 1) {
    FLEET_ASSIGN_OR_RETURN(files, data::ShardFiles(files, rank, trainers));
    Log().info("data: trainer {} of {} reads {} of {} files", rank, trainers, files.size(), count);
  }
  data::DatasetOptions options;
  options.format = d.source;
  options.files = std::move(files);
  options.sharded = shard;
  options.slots = d.slots;
  options.csv_header = d.csv_header;
  options.csv_columns = d.csv_columns;
  options.in_memory = d.dataset == "memory";
  options.shuffle = d.shuffle;
  options.seed = seed;
  options.last_batch = d.last_batch == "drop"  ? data::LastBatch::kDrop
                       : d.last_batch == "pad" ? data::LastBatch::kPad
                                               : data::LastBatch::kWrap;
  options.skip_bad_lines = d.bad_lines == "skip";
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<data::DataSource> source,
                         data::MakeDataset(feeds, options));
  if (d.queue_batches > 0) {
    data::PrefetchOptions prefetch;
    prefetch.depth = d.queue_batches;
    source = data::MakePrefetchSource(std::move(source), prefetch);
  }
  return source;
}

// The [data] source of trainer `rank` of `trainers` (a collective rank, a parameter-server
// trainer's id, or 0 of 1).
StatusOr<std::unique_ptr<data::DataSource>> MakeSource(const Config& config,
                                                       const frontend::ParsedProgram& programs,
                                                       const std::vector<data::FeedSpec>& feeds,
                                                       int64_t rank, int64_t trainers) {
  const Config::Data& d = config.data;
  const std::string where =
      "data source '" + d.source + "' (" + (d.where.empty() ? "the default" : d.where) + ")";
  StatusOr<std::unique_ptr<data::DataSource>> source = NotFound("");
  if (d.source == "csv" || d.source == "multislot") {
    source = MakeTextDataset(d, static_cast<uint64_t>(config.train.seed), feeds, rank, trainers);
  } else if (d.source == "npy") {
    source = data::MakeNpySource(feeds, d.files);
  } else {
    data::SyntheticOptions options;
    options.seed = static_cast<uint64_t>(config.train.seed);
    options.label = d.label;
    options.classes = d.classes;
    std::string label = d.label;
    if (label.empty() && feeds.size() >= 2) label = feeds.back().name;
    if (options.classes == 0 && !label.empty()) {
      options.classes = PredictionWidth(programs.main, label);
    }
    source = data::MakeSyntheticSource(feeds, options);
  }
  if (!source.ok()) return source.status().WithContext(where);
  return source;
}

// Where a step's time went: the ops that took most, then the total per op type.
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

  out << "profile: " << Fixed(total / runs * 1e3, 3) << " ms per step in " << secs.size()
      << " ops (mean over " << p.runs() << " steps)\n";
  out << "  ms/step      %  op\n";
  for (size_t k = 0; k < order.size() && k < 12; ++k) {
    const size_t i = order[k];
    out << "  " << Fixed(secs[i] / runs * 1e3, 4) << "  " << Fixed(100 * secs[i] / total, 1)
        << "  #" << i << " " << p.kernel(i).op_type() << "\n";
  }
  std::vector<std::pair<double, std::string>> types;
  for (const auto& [type, t] : by_type) types.emplace_back(t, type);
  std::sort(types.rbegin(), types.rend());
  out << "  by type:";
  for (const auto& [t, type] : types) out << " " << type << " " << Fixed(100 * t / total, 1) << "%";
  out << "\n";
}

// Rows [rank * rows, (rank + 1) * rows) of every tensor of `global`, into `share` (whose storage
// is reused from step to step).
void ShareOfBatch(const exec::FeedMap& global, int64_t rank, int64_t rows, exec::FeedMap& share) {
  for (const auto& [name, t] : global) {
    exec::HostTensor& s = share[name];
    std::vector<int64_t> dims = t.dims;
    dims[0] = rows;
    s.Reshape(t.dtype, dims);
    const size_t row_bytes = s.bytes.size() / static_cast<size_t>(std::max<int64_t>(rows, 1));
    if (!s.bytes.empty()) {
      std::memcpy(s.bytes.data(), t.bytes.data() + static_cast<size_t>(rank) * row_bytes * rows,
                  s.bytes.size());
    }
  }
}

// The names of the program's parameters, sorted.
std::vector<std::string> ParamNames(const ir::Program& main) {
  std::vector<std::string> names;
  for (const auto& [name, var] : main.global().vars) {
    if (var.param.has_value()) names.push_back(name);
  }
  return names;
}

// A parameter's bytes on the host.
StatusOr<std::vector<uint8_t>> ParamBytes(const exec::Executor& executor,
                                          const std::string& name) {
  if (executor.scope().Find(name) == nullptr) {
    return NotFound("parameter '" + name + "' is not in the scope");
  }
  FLEET_ASSIGN_OR_RETURN(exec::HostTensor t, executor.scope().Read(name));
  return std::move(t.bytes);
}

// [train] check_replicas: every trainer hashes each parameter; the all-reduced MAX and MIN of
// a hash differ exactly when some trainer's copy differs.
Status CheckReplicas(Communicator& world, const exec::Executor& executor,
                     const std::vector<std::string>& params, int64_t step) {
  std::vector<int64_t> hi(params.size()), lo(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ParamBytes(executor, params[i]));
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
    hi[i] = lo[i] = static_cast<int64_t>(h >> 1);  // non-negative: any int64 order works
  }
  const auto n = static_cast<int64_t>(params.size());
  FLEET_RETURN_IF_ERROR(world.AllReduceHost(hi.data(), FLEET_DTYPE_INT64, n, FLEET_REDUCE_MAX)
                            .WithContext("check_replicas"));
  FLEET_RETURN_IF_ERROR(world.AllReduceHost(lo.data(), FLEET_DTYPE_INT64, n, FLEET_REDUCE_MIN)
                            .WithContext("check_replicas"));
  std::vector<std::string> differ;
  for (size_t i = 0; i < params.size(); ++i) {
    if (hi[i] != lo[i]) differ.push_back(params[i]);
  }
  if (differ.empty()) return OkStatus();
  std::string list;
  for (const auto& d : differ) list += (list.empty() ? "" : ", ") + d;
  return Internal("train.check_replicas: after step " + std::to_string(step) +
                  " the trainers hold different values of " + list);
}

// [train] save_params_dir: NAME.npy per parameter, each written to a temporary file and renamed,
// so a reader never sees half a file.
Status SaveParams(const exec::Executor& executor, const std::vector<std::string>& params,
                  const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable("train.save_params_dir: cannot create '" + dir.string() + "': " +
                             ec.message());
  for (const std::string& name : params) {
    const exec::ScopeVar* v = executor.scope().Find(name);
    if (v == nullptr) continue;  // a parameter the program never initialised
    data::NpyArray a;
    a.dtype = v->dtype;
    a.dims = v->dims;
    FLEET_ASSIGN_OR_RETURN(a.bytes, ParamBytes(executor, name));
    FLEET_RETURN_IF_ERROR(
        data::WriteNpy(dir / (name + ".npy"), a).WithContext("train.save_params_dir"));
  }
  return OkStatus();
}

// The mean loss and the summed samples/s over every trainer.
StatusOr<std::pair<double, double>> JobFigures(Communicator& world, double loss, double rate) {
  double values[2] = {loss, rate};
  FLEET_RETURN_IF_ERROR(world.AllReduceHost(values, FLEET_DTYPE_FLOAT64, 2, FLEET_REDUCE_SUM)
                            .WithContext("job metrics"));
  return std::pair<double, double>{values[0] / world.world_size(), values[1]};
}

// The progress of a training loop: a line every log_every steps (and after the last), the
// metrics file, and the closing summary. Rates count the samples of the whole job.
class ProgressLog {
 public:
  ProgressLog(const Config::Train& train, int64_t samples_per_step, std::string who,
              std::ostream& out)
      : train_(train), samples_per_step_(samples_per_step), who_(std::move(who)), out_(out) {}

  // Opens the metrics file when there is one and this process writes it.
  // `suffix` goes before the file's extension ("m.jsonl" -> "m.trainer1.jsonl"), so processes
  // that share a config but report for themselves do not write one file together. A resumed
  // job (StartAt first) keeps the records of the steps before the one it resumes at, and drops
  // those the killed job logged after its checkpoint, which it runs again.
  Status Open(bool write_metrics, const std::string& suffix = "") {
    if (train_.metrics_file.empty() || !write_metrics) return OkStatus();
    std::filesystem::path path = train_.metrics_file;
    if (!suffix.empty()) {
      path.replace_filename(path.stem().string() + suffix + path.extension().string());
    }
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

  bool Due(int64_t step) const { return step % train_.log_every == 0 || step == train_.steps; }

  // A resumed job runs from `step` on: rates and the ETA count only the steps run here.
  void StartAt(int64_t step) {
    first_step_ = step;
    last_logged_step_ = step - 1;
  }

  // Samples per second here since the last logged step.
  double Rate(int64_t step) const {
    const double interval = std::max(Seconds(last_log_, Clock::now()), 1e-9);
    return static_cast<double>((step - last_logged_step_) * samples_per_step_) / interval;
  }

  Status Log(int64_t step, double loss, double rate) {
    const Clock::time_point now = Clock::now();
    const double elapsed = Seconds(start_, now);
    const double eta = elapsed / static_cast<double>(step - first_step_ + 1) *
                       static_cast<double>(train_.steps - step);
    out_ << "step " << step << "/" << train_.steps << " loss " << Fixed(loss, 6) << " samples/s "
         << Fixed(rate, 1) << (who_.empty() ? "" : " (" + who_ + ")") << " eta " << Fixed(eta, 1)
         << "s\n";
    out_.flush();
    if (metrics_.is_open()) {
      metrics_ << "{\"step\": " << step << ", \"loss\": " << Fixed(loss, 9)
               << ", \"samples_per_sec\": " << Fixed(rate, 3)
               << ", \"elapsed_s\": " << Fixed(elapsed, 6) << "}\n";
      metrics_.flush();
      if (!metrics_) {
        return Unavailable("train.metrics_file: writing '" + train_.metrics_file + "' failed");
      }
    }
    summary_.logged_losses.push_back(loss);
    last_log_ = now;
    last_logged_step_ = step;
    return OkStatus();
  }

  // Prints "trained N steps in ..."; `job_samples_per_step` counts every trainer's samples.
  TrainSummary Finish(double final_loss, int64_t job_samples_per_step) {
    summary_.steps = train_.steps;
    summary_.final_loss = final_loss;
    summary_.elapsed_s = Seconds(start_, Clock::now());
    const int64_t ran = train_.steps - first_step_ + 1;
    out_ << "trained " << ran << " steps"
         << (first_step_ > 1 ? " (resumed at step " + std::to_string(first_step_) + ")" : "")
         << " in " << Fixed(summary_.elapsed_s, 2) << "s: final loss " << Fixed(final_loss, 6)
         << ", "
         << Fixed(static_cast<double>(ran * job_samples_per_step) /
                      std::max(summary_.elapsed_s, 1e-9),
                  1)
         << " samples/s"
         << (who_.empty() ? ""
             : who_.rfind("trainer ", 0) == 0 ? " (" + who_ + ")"  // one trainer's own figures
                                               : " over " + who_)
         << "\n";
    return summary_;
  }

 private:
  const Config::Train& train_;
  int64_t samples_per_step_;
  std::string who_;
  std::ostream& out_;
  std::ofstream metrics_;
  TrainSummary summary_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_log_ = start_;
  int64_t last_logged_step_ = 0;
  int64_t first_step_ = 1;
};

// [checkpoint]: where this trainer stands in the job's checkpoints.
class Checkpointing {
 public:
  // `saves`: this process writes checkpoints (rank 0 of a collective job, a lone trainer).
  // `pservers` > 0: the state lives on that many servers, which save it; this trainer only
  // learns where to resume.
  Checkpointing(const Config& config, std::string program_hash, int64_t world_size, bool saves,
                int64_t pservers, int64_t batch_per_next)
      : config_(config),
        hash_(std::move(program_hash)),
        world_size_(world_size),
        saves_(saves && pservers == 0 && !config.checkpoint.dir.empty()),
        pservers_(pservers),
        batch_per_next_(batch_per_next) {}

  // Restores the newest intact checkpoint, if [checkpoint] resume and there is one, and
  // returns the first step to run (1 without one). `world`: every trainer must resume the same
  // step. The source is moved past what it had delivered, and the prepared programs' launch
  // indices continue (local_sgd: `averages(s)` says which of the two ran at step s).
  StatusOr<int64_t> Resume(TrainingSetup& setup, Communicator* world,
                           const std::function<bool(int64_t)>& averages) {
    const Config::Checkpoint& c = config_.checkpoint;
    if (!c.resume || c.dir.empty()) return int64_t{1};
    std::vector<std::string> warnings;
    FLEET_ASSIGN_OR_RETURN(
        std::optional<checkpoint::LoadedCheckpoint> found,
        checkpoint::FindLatestCheckpoint(c.dir, hash_, pservers_ > 0 ? "pserver.0" : "",
                                         std::max<int64_t>(pservers_, 1), warnings));
    for (const std::string& w : warnings) Log().warn("checkpoint: {}", w);
    const int64_t step = found ? found->info.step : 0;
    if (world != nullptr) {
      int64_t range[2] = {step, -step};  // MAX of both: the largest and the smallest step
      FLEET_RETURN_IF_ERROR(
          world->AllReduceHost(range, FLEET_DTYPE_INT64, 2, FLEET_REDUCE_MAX)
              .WithContext("checkpoint resume"));
      if (range[0] != -range[1]) {
        return FailedPrecondition(
            "checkpoint resume: the trainers found different checkpoints in '" +
            c.dir.string() + "' (this one step " + std::to_string(step) + ", others up to step " +
            std::to_string(range[0]) + " and down to " + std::to_string(-range[1]) +
            "); every trainer must see the same checkpoint directory");
      }
    }
    if (!found) {
      Log().info("checkpoint: nothing to resume in {}; starting at step 1", c.dir.string());
      return int64_t{1};
    }
    const checkpoint::CheckpointInfo& info = found->info;
    if (pservers_ == 0) {
      FLEET_RETURN_IF_ERROR(checkpoint::RestoreScope(found->state, setup.executor->scope(),
                                                     "checkpoint '" + found->dir.string() + "'"));
    }
    if (info.world_size != world_size_) {
      Log().warn("checkpoint: {} was written by a job of {} trainers, this one has {}: the state "
                 "is resumed, but the batches will not be those of the original job",
                 found->dir.string(), info.world_size, world_size_);
    }
    // The source delivers next what it would have after the interrupted job's batches. A
    // server's shard records its rounds; the trainer knows its own batches.
    const int64_t batches = pservers_ > 0 ? step : info.data_batches;
    const int64_t batch_size = pservers_ > 0 ? batch_per_next_ : info.data_batch_size;
    if (Status s = setup.source->Skip(batches, batch_size); !s.ok()) {
      return s.WithContext("checkpoint resume: moving the data source past " +
                           std::to_string(batches) + " batches");
    }
    uint64_t main_runs = 0, local_runs = 0;
    for (int64_t s = 1; s <= step; ++s) ++(averages(s) ? main_runs : local_runs);
    setup.main->set_next_launch_index(main_runs);
    if (setup.main_local != nullptr) setup.main_local->set_next_launch_index(local_runs);
    Log().info("checkpoint: resumed from {} (step {})", found->dir.string(), step);
    last_saved_ = step;
    return step + 1;
  }

  // After step `step` ran: saves when one is due. `averaged`: the step left every trainer's
  // state the same (local_sgd's in-between steps do not, so a due save waits for the next
  // averaging step). `last`: the job's final step, always saved.
  Status AfterStep(const exec::Executor& executor, int64_t step, bool averaged, bool last) {
    if (!saves_) return OkStatus();
    if (step % config_.checkpoint.every_steps == 0 || last) pending_ = true;
    if (!pending_ || !averaged || step == last_saved_) return OkStatus();
    const auto start = Clock::now();
    FLEET_ASSIGN_OR_RETURN(checkpoint::SafeTensors state,
                           checkpoint::SnapshotScope(executor.scope()));
    checkpoint::CheckpointInfo info;
    info.step = step;
    info.program_hash = hash_;
    info.world_size = world_size_;
    info.data_batches = step;  // one batch per step
    info.data_batch_size = batch_per_next_;
    info.config = ConfigSummary();
    FLEET_RETURN_IF_ERROR(
        checkpoint::SaveCheckpoint(config_.checkpoint.dir, info, state, config_.checkpoint.keep));
    size_t bytes = 0;
    for (const auto& t : state.tensors) bytes += t.tensor.bytes.size();
    Log().info("checkpoint: saved {} ({} vars, {:.1f} MB) in {:.3f} s",
               (config_.checkpoint.dir / checkpoint::StepDirName(step)).string(),
               state.tensors.size(), static_cast<double>(bytes) / 1e6,
               Seconds(start, Clock::now()));
    pending_ = false;
    last_saved_ = step;
    return OkStatus();
  }

 private:
  // What the manifest says of the run that wrote it, for people reading it.
  std::string ConfigSummary() const {
    const Config::Train& t = config_.train;
    return nlohmann::json{{"source", config_.source},
                          {"device", config_.device.backend},
                          {"strategy", config_.strategy_mode},
                          {"steps", t.steps},
                          {"batch_size", t.batch_size},
                          {"seed", t.seed}}
        .dump();
  }

  const Config& config_;
  std::string hash_;
  int64_t world_size_;
  bool saves_;
  int64_t pservers_;
  int64_t batch_per_next_;
  bool pending_ = false;
  int64_t last_saved_ = -1;
};

// data.bad_lines = "skip": how many lines the run did without (this trainer's files only).
void ReportSkippedLines(const data::DataSource& source, std::ostream& out) {
  const int64_t n = source.skipped_lines();
  if (n > 0) out << "skipped " << n << " malformed line" << (n == 1 ? "" : "s") << " of data\n";
}

Status CheckLoss(double loss, int64_t step, const std::string& name) {
  if (std::isfinite(loss)) return OkStatus();
  return Aborted("step " + std::to_string(step) + ": the loss '" + name + "' is " +
                 Fixed(loss, 6) + " (try a smaller learning rate)");
}

}  // namespace

int64_t PredictionWidth(const ir::Program& main, const std::string& label) {
  for (const ir::Op& op : main.global().ops) {
    bool reads = false;
    std::string other;
    for (const auto& [slot, names] : op.inputs) {
      for (const auto& n : names) {
        if (n == label) {
          reads = true;
        } else if (other.empty()) {
          other = n;
        }
      }
    }
    if (!reads) continue;
    const ir::Var* v = main.FindVarRecursive(0, other);
    if (v == nullptr || v->shape.empty() || v->shape.back() < 1) return 0;
    return v->shape.back();
  }
  return 0;
}

// [train] init_from: the weights in that directory replace what startup gave them. `report`:
// log how many (once per process, not once per device).
Status InitFrom(const std::filesystem::path& dir, exec::Executor& executor,
                const frontend::ParsedProgram& programs, bool report = true) {
  FLEET_ASSIGN_OR_RETURN(
      std::vector<std::string> loaded,
      checkpoint::LoadInitialWeights(dir, executor.scope(), {&programs.startup, &programs.main}));
  if (report) Log().info("init_from: loaded {} vars from {}", loaded.size(), dir.string());
  return OkStatus();
}

StatusOr<TrainingSetup> PrepareTraining(const Config& config,
                                        const frontend::ParsedProgram& programs,
                                        const PluginRegistry& registry,
                                        const std::string& device, const TrainDist& dist) {
  const Config::Train& train = config.train;
  const bool collective = dist.job != nullptr && dist.job->collectives() != nullptr;
  // A parameter-server trainer's startup receives its parameters from the servers, which load
  // init_from themselves (pserver/server.h).
  const bool pserver_trainer = !collective && dist.host_kernels != nullptr;
  if (programs.loss.empty()) {
    return InvalidArgument("the program has no minimize(...): run needs a loss to train");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<data::FeedSpec> feeds,
                         data::FeedSpecs(programs.main, programs.feeds));
  exec::FeedShapes shapes;
  for (const data::FeedSpec& f : feeds) {
    if (f.dims[0] >= 0 && f.dims[0] != train.batch_size) {
      return InvalidArgument("feed '" + f.name + "' is declared with batch dimension " +
                             std::to_string(f.dims[0]) + " but train.batch_size is " +
                             std::to_string(train.batch_size) + " (declare it -1)");
    }
    std::vector<int64_t> dims = f.dims;
    dims[0] = train.batch_size;
    shapes[f.name] = dims;
  }
  TrainingSetup setup;
  int64_t rank = 0, trainers = 1;
  if (collective) {
    rank = dist.job->role().rank;
    trainers = dist.job->role().world_size;
  } else if (dist.host_kernels != nullptr) {
    rank = dist.trainer_id;
    trainers = dist.trainers;
  }
  FLEET_ASSIGN_OR_RETURN(setup.source, MakeSource(config, programs, feeds, rank, trainers));

  exec::ExecutorOptions options;
  options.num_threads = static_cast<int32_t>(train.threads);
  options.seed = static_cast<uint64_t>(train.seed);
  options.profile = train.profile;
  if (collective) {
    options.host_kernels = dist.job->collectives();
    // One device per trainer on a machine; CPU trainers share the one host "device".
    if (device != "cpu") options.device_ordinal = static_cast<int32_t>(dist.job->role().local_rank);
  } else if (dist.host_kernels != nullptr) {
    options.host_kernels = dist.host_kernels;
  }
  FLEET_ASSIGN_OR_RETURN(setup.executor, exec::Executor::Create(registry, device, options));

  std::vector<exec::HostTensor> fetched;
  {
    auto startup = setup.executor->Prepare(programs.startup, {}, {});
    if (!startup.ok()) return startup.status().WithContext("startup program");
    setup.startup_ops = (*startup)->num_ops();
    if (Status s = setup.executor->Run(**startup, {}, fetched); !s.ok()) {
      return s.WithContext("startup program");
    }
  }
  if (!train.init_from.empty() && !pserver_trainer) {
    FLEET_RETURN_IF_ERROR(InitFrom(train.init_from, *setup.executor, programs));
  }
  auto prepared = setup.executor->Prepare(programs.main, shapes, {programs.loss});
  if (!prepared.ok()) return prepared.status().WithContext("main program");
  setup.main = std::move(*prepared);
  if (dist.main_local != nullptr) {
    auto local = setup.executor->Prepare(*dist.main_local, shapes, {programs.loss});
    if (!local.ok()) return local.status().WithContext("main.local program");
    setup.main_local = std::move(*local);
  }
  return setup;
}

StatusOr<TrainSummary> Train(const Config& config, const frontend::ParsedProgram& programs,
                             const PluginRegistry& registry, const std::string& device,
                             std::ostream& out, const TrainDist& dist) {
  const Config::Train& train = config.train;
  FLEET_ASSIGN_OR_RETURN(TrainingSetup setup,
                         PrepareTraining(config, programs, registry, device, dist));
  exec::Executor* executor = setup.executor.get();
  data::DataSource* source = setup.source.get();
  std::vector<exec::HostTensor> fetched;

  // A collective job shares out one global batch and reports job-wide figures.
  Communicator* world = nullptr;
  int64_t rank = 0, world_size = 1;
  if (dist.job != nullptr && dist.job->collectives() != nullptr) {
    rank = dist.job->role().rank;
    world_size = dist.job->role().world_size;
    auto ring = dist.job->collectives()->Ring(0);
    if (!ring.ok()) return ring.status().WithContext("the transpiled startup program");
    world = *ring;
  } else if (dist.host_kernels != nullptr) {
    rank = dist.trainer_id;
    world_size = dist.trainers;
  }
  exec::FeedMap global_batch;
  const std::vector<std::string> params = ParamNames(programs.main);

  // Without a communicator (parameter-server trainers) every trainer reports for itself.
  std::string who;
  if (world_size > 1) {
    who = world != nullptr ? std::to_string(world_size) + " trainers"
                           : "trainer " + std::to_string(rank) + " of " +
                                 std::to_string(world_size);
  }
  // local_sgd with k_steps > 1: the averaging program runs every k-th step and on the last, so
  // every trainer ends with the same (averaged) parameters; the local one in between.
  auto averages = [&](int64_t step) {
    return setup.main_local == nullptr || step % dist.k_steps == 0 || step == train.steps;
  };
  const bool pserver_trainer = world == nullptr && dist.host_kernels != nullptr;
  Checkpointing checkpoints(
      config,
      dist.program_hash.empty() ? checkpoint::ProgramHash({&programs.startup, &programs.main})
                                : dist.program_hash,
      world_size, rank == 0, pserver_trainer ? std::max<int64_t>(dist.pservers, 1) : 0,
      world_size > 1 && !source->sharded() ? train.batch_size * world_size : train.batch_size);
  FLEET_ASSIGN_OR_RETURN(const int64_t first_step, checkpoints.Resume(setup, world, averages));

  if (first_step > train.steps) {
    out << "the checkpoint is at step " << first_step - 1 << ": all " << train.steps
        << " steps of train.steps are done\n";
    return TrainSummary{first_step - 1, 0.0, 0.0, {}};
  }
  ProgressLog progress(train, train.batch_size, who, out);
  progress.StartAt(first_step);
  FLEET_RETURN_IF_ERROR(progress.Open(
      rank == 0 || world == nullptr,
      world == nullptr && rank > 0 ? ".trainer" + std::to_string(rank) : ""));
  exec::FeedMap batch;
  double loss = 0;
  for (int64_t step = first_step; step <= train.steps; ++step) {
    if (world_size > 1 && !source->sharded()) {
      if (Status s = source->Next(train.batch_size * world_size, global_batch); !s.ok()) {
        return s.WithContext("data at step " + std::to_string(step));
      }
      ShareOfBatch(global_batch, rank, train.batch_size, batch);
    } else if (Status s = source->Next(train.batch_size, batch); !s.ok()) {
      return s.WithContext("data at step " + std::to_string(step));
    }
    const bool averaged = averages(step);
    exec::PreparedProgram* prepared = averaged ? setup.main.get() : setup.main_local.get();
    if (Status s = executor->Run(*prepared, batch, fetched); !s.ok()) {
      return s.WithContext("step " + std::to_string(step));
    }
    FLEET_ASSIGN_OR_RETURN(loss, LossValue(fetched[0], programs.loss));
    FLEET_RETURN_IF_ERROR(CheckLoss(loss, step, programs.loss));
    if (progress.Due(step)) {
      double rate = progress.Rate(step);
      if (world != nullptr) {
        // The job's figures: mean loss and summed throughput over trainers.
        FLEET_ASSIGN_OR_RETURN(std::tie(loss, rate), JobFigures(*world, loss, rate));
      }
      FLEET_RETURN_IF_ERROR(progress.Log(step, loss, rate));
      // Between averagings local_sgd's replicas differ by design.
      if (train.check_replicas && world != nullptr && averaged) {
        FLEET_RETURN_IF_ERROR(CheckReplicas(*world, *executor, params, step));
      }
    }
    FLEET_RETURN_IF_ERROR(
        checkpoints.AfterStep(*executor, step, averaged, step == train.steps));
  }
  if (!train.save_params_dir.empty() && rank == 0) {
    FLEET_RETURN_IF_ERROR(SaveParams(*executor, params, train.save_params_dir));
  }
  if (world != nullptr) {
    if (Status s = world->Barrier(); !s.ok()) return s.WithContext("after the last step");
  }
  // The last step is always logged, so `loss` is the job's mean there (this trainer's own
  // without a communicator, and so is the rate).
  TrainSummary summary =
      progress.Finish(loss, train.batch_size * (world != nullptr ? world_size : 1));
  ReportSkippedLines(*source, out);
  if (train.profile) PrintProfile(*setup.main, out);
  return summary;
}

StatusOr<TrainSummary> TrainOnDevices(const Config& config,
                                      const frontend::ParsedProgram& programs,
                                      const PluginRegistry& registry, const std::string& device,
                                      int32_t num_devices, std::ostream& out) {
  const Config::Train& train = config.train;
  if (programs.loss.empty() || !programs.optimizer) {
    return InvalidArgument(
        "strategy.collective_mode single_process_multi_thread needs a program with "
        "minimize(..., optimizer=...)");
  }
  if (!config.checkpoint.dir.empty()) {
    return Unimplemented("checkpoint.dir: checkpoints are not supported with strategy."
                         "collective_mode \"single_process_multi_thread\" yet; run the devices "
                         "as trainers of a collective job instead (fleet-host launch --nproc N)");
  }
  const ComponentRecord* comm = registry.Find(FLEET_COMPONENT_COMMUNICATOR, config.comm.backend);
  if (comm == nullptr) {
    return NotFound("communicator '" + config.comm.backend + "' is not registered (is plugin '" +
                    config.comm.plugin + "' loaded?)");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<data::FeedSpec> feeds,
                         data::FeedSpecs(programs.main, programs.feeds));
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<data::DataSource> source,
                         MakeSource(config, programs, feeds, 0, 1));

  exec::ParallelOptions options;
  options.num_devices = num_devices;
  options.executor.num_threads = static_cast<int32_t>(train.threads);
  options.executor.seed = static_cast<uint64_t>(train.seed);
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.comm_timeout_s * 1e3));
  // Every device is rank d of num_devices of a grad_allreduce job (Paddle's
  // SingleProcessMultiThread is GradAllReduce with the process's places as the ranks).
  auto transpile = [&](int32_t rank, int32_t world) -> StatusOr<exec::ProgramSet> {
    Config c = config;
    c.strategy_mode = "collective";
    Role role;
    role.rank = rank;
    role.world_size = world;
    return Transpile(c, role, programs, registry);
  };
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<exec::ParallelRunner> runner,
                         exec::ParallelRunner::Create(registry, device, *comm, options, transpile));
  FLEET_RETURN_IF_ERROR(runner->RunStartup().WithContext("startup program"));
  if (!train.init_from.empty()) {
    for (int32_t d = 0; d < runner->num_devices(); ++d) {
      FLEET_RETURN_IF_ERROR(InitFrom(train.init_from, runner->executor(d), programs, d == 0));
    }
  }

  // [train] batch_size is per device, as it is per trainer: each step draws batch_size * N rows
  // and every device gets batch_size of them.
  const int64_t rows = train.batch_size * num_devices;
  exec::FeedShapes shapes;
  for (const data::FeedSpec& f : feeds) {
    std::vector<int64_t> dims = f.dims;
    dims[0] = rows;
    shapes[f.name] = dims;
  }
  FLEET_RETURN_IF_ERROR(runner->Prepare(shapes, {programs.loss}).WithContext("main program"));

  ProgressLog progress(train, rows, std::to_string(num_devices) + " devices", out);
  FLEET_RETURN_IF_ERROR(progress.Open(true));
  exec::FeedMap batch;
  exec::ParallelFetch fetched;
  double loss = 0;
  for (int64_t step = 1; step <= train.steps; ++step) {
    if (Status s = source->Next(rows, batch); !s.ok()) {
      return s.WithContext("data at step " + std::to_string(step));
    }
    if (Status s = runner->Run(batch, {programs.loss}, fetched); !s.ok()) {
      return s.WithContext("step " + std::to_string(step));
    }
    // The loss of the step: the mean of the devices' losses.
    loss = 0;
    for (int32_t d = 0; d < num_devices; ++d) {
      FLEET_ASSIGN_OR_RETURN(double l, LossValue(fetched.per_device[static_cast<size_t>(d)][0],
                                                 programs.loss));
      loss += l / num_devices;
    }
    FLEET_RETURN_IF_ERROR(CheckLoss(loss, step, programs.loss));
    if (progress.Due(step)) FLEET_RETURN_IF_ERROR(progress.Log(step, loss, progress.Rate(step)));
  }
  if (!train.save_params_dir.empty()) {
    FLEET_RETURN_IF_ERROR(
        SaveParams(runner->executor(0), ParamNames(programs.main), train.save_params_dir));
  }
  TrainSummary summary = progress.Finish(loss, rows);
  ReportSkippedLines(*source, out);
  return summary;
}

}  // namespace fleet
