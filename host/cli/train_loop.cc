#include "cli/train_loop.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <fstream>
#include <memory>

#include "data/npy.h"
#include "data/source.h"
#include "executor/executor.h"

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

StatusOr<std::unique_ptr<data::DataSource>> MakeSource(const Config& config,
                                                       const frontend::ParsedProgram& programs,
                                                       const std::vector<data::FeedSpec>& feeds) {
  const Config::Data& d = config.data;
  const std::string where =
      "data source '" + d.source + "' (" + (d.where.empty() ? "the default" : d.where) + ")";
  StatusOr<std::unique_ptr<data::DataSource>> source = NotFound("");
  if (d.source == "csv") {
    data::CsvOptions csv{d.csv_path, d.csv_header, d.csv_columns};
    source = data::MakeCsvSource(feeds, csv);
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
  const exec::ScopeVar* v = executor.scope().Find(name);
  if (v == nullptr) return NotFound("parameter '" + name + "' is not in the scope");
  std::vector<uint8_t> bytes(v->bytes);
  if (!bytes.empty()) {
    FLEET_RETURN_IF_ERROR(executor.device().CopyToHost(executor.options().device_ordinal,
                                                       bytes.data(), v->data, bytes.size()));
  }
  return bytes;
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
  int64_t n = static_cast<int64_t>(params.size());
  auto tensor = [&](std::vector<int64_t>& v) {
    FleetTensor t{};
    t.struct_size = sizeof(FleetTensor);
    t.data = v.data();
    t.dtype = FLEET_DTYPE_INT64;
    t.ndim = 1;
    t.dims = &n;
    return t;
  };
  FleetTensor thi = tensor(hi), tlo = tensor(lo);
  FLEET_RETURN_IF_ERROR(world.AllReduce(thi, thi, FLEET_REDUCE_MAX).WithContext("check_replicas"));
  FLEET_RETURN_IF_ERROR(world.AllReduce(tlo, tlo, FLEET_REDUCE_MIN).WithContext("check_replicas"));
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
    const std::filesystem::path file = dir / (name + ".npy");
    const std::filesystem::path tmp = dir / (name + ".npy.tmp");
    FLEET_RETURN_IF_ERROR(data::WriteNpy(tmp, a).WithContext("train.save_params_dir"));
    std::filesystem::rename(tmp, file, ec);
    if (ec) return Unavailable("train.save_params_dir: cannot rename '" + tmp.string() + "': " +
                               ec.message());
  }
  return OkStatus();
}

// The mean loss and the summed samples/s over every trainer.
StatusOr<std::pair<double, double>> JobFigures(Communicator& world, double loss, double rate) {
  double values[2] = {loss, rate};
  int64_t dims[1] = {2};
  FleetTensor t{};
  t.struct_size = sizeof(FleetTensor);
  t.data = values;
  t.dtype = FLEET_DTYPE_FLOAT64;
  t.ndim = 1;
  t.dims = dims;
  FLEET_RETURN_IF_ERROR(world.AllReduce(t, t, FLEET_REDUCE_SUM).WithContext("job metrics"));
  return std::pair<double, double>{values[0] / world.world_size(), values[1]};
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

StatusOr<TrainingSetup> PrepareTraining(const Config& config,
                                        const frontend::ParsedProgram& programs,
                                        const PluginRegistry& registry,
                                        const std::string& device, const TrainDist& dist) {
  const Config::Train& train = config.train;
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
  FLEET_ASSIGN_OR_RETURN(setup.source, MakeSource(config, programs, feeds));

  exec::ExecutorOptions options;
  options.num_threads = static_cast<int32_t>(train.threads);
  options.seed = static_cast<uint64_t>(train.seed);
  options.profile = train.profile;
  if (dist.job != nullptr && dist.job->collectives() != nullptr) {
    options.host_kernels = dist.job->collectives();
    // One device per trainer on a machine; CPU trainers share the one host "device".
    if (device != "cpu") options.device_ordinal = static_cast<int32_t>(dist.job->role().local_rank);
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
  }
  exec::FeedMap global_batch;
  const std::vector<std::string> params = ParamNames(programs.main);

  std::ofstream metrics;
  if (!train.metrics_file.empty() && rank == 0) {
    metrics.open(train.metrics_file, std::ios::out | std::ios::trunc);
    if (!metrics) {
      return Unavailable("train.metrics_file: cannot open '" + train.metrics_file +
                         "' for writing");
    }
  }

  TrainSummary summary;
  exec::FeedMap batch;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_log = start;
  int64_t last_logged_step = 0;
  for (int64_t step = 1; step <= train.steps; ++step) {
    if (world_size > 1) {
      if (Status s = source->Next(train.batch_size * world_size, global_batch); !s.ok()) {
        return s.WithContext("data at step " + std::to_string(step));
      }
      ShareOfBatch(global_batch, rank, train.batch_size, batch);
    } else if (Status s = source->Next(train.batch_size, batch); !s.ok()) {
      return s.WithContext("data at step " + std::to_string(step));
    }
    exec::PreparedProgram* prepared = setup.main.get();
    if (setup.main_local != nullptr && step % dist.k_steps != 0) prepared = setup.main_local.get();
    if (Status s = executor->Run(*prepared, batch, fetched); !s.ok()) {
      return s.WithContext("step " + std::to_string(step));
    }
    FLEET_ASSIGN_OR_RETURN(double loss, LossValue(fetched[0], programs.loss));
    if (!std::isfinite(loss)) {
      return Aborted("step " + std::to_string(step) + ": the loss '" + programs.loss +
                     "' is " + Fixed(loss, 6) + " (try a smaller learning rate)");
    }
    if (step % train.log_every == 0 || step == train.steps) {
      const Clock::time_point now = Clock::now();
      const double elapsed = Seconds(start, now);
      const double interval = std::max(Seconds(last_log, now), 1e-9);
      double rate = static_cast<double>((step - last_logged_step) * train.batch_size) / interval;
      if (world != nullptr) {
        // The job's figures: mean loss and summed throughput over trainers.
        FLEET_ASSIGN_OR_RETURN(std::tie(loss, rate), JobFigures(*world, loss, rate));
      }
      const double eta = elapsed / static_cast<double>(step) *
                         static_cast<double>(train.steps - step);
      out << "step " << step << "/" << train.steps << " loss " << Fixed(loss, 6)
          << " samples/s " << Fixed(rate, 1);
      if (world_size > 1) out << " (" << world_size << " trainers)";
      out << " eta " << Fixed(eta, 1) << "s\n";
      out.flush();
      if (metrics.is_open()) {
        metrics << "{\"step\": " << step << ", \"loss\": " << Fixed(loss, 9)
                << ", \"samples_per_sec\": " << Fixed(rate, 3)
                << ", \"elapsed_s\": " << Fixed(elapsed, 6) << "}\n";
        metrics.flush();
        if (!metrics) {
          return Unavailable("train.metrics_file: writing '" + train.metrics_file + "' failed");
        }
      }
      summary.logged_losses.push_back(loss);
      if (train.check_replicas && world != nullptr) {
        FLEET_RETURN_IF_ERROR(CheckReplicas(*world, *executor, params, step));
      }
      last_log = now;
      last_logged_step = step;
    }
    summary.final_loss = loss;  // the job's mean on logged steps, so on the last one
  }
  if (!train.save_params_dir.empty() && rank == 0) {
    FLEET_RETURN_IF_ERROR(SaveParams(*executor, params, train.save_params_dir));
  }
  if (world != nullptr) {
    if (Status s = world->Barrier(); !s.ok()) return s.WithContext("after the last step");
  }
  summary.steps = train.steps;
  summary.elapsed_s = Seconds(start, Clock::now());
  out << "trained " << summary.steps << " steps in " << Fixed(summary.elapsed_s, 2)
      << "s: final loss " << Fixed(summary.final_loss, 6) << ", "
      << Fixed(static_cast<double>(summary.steps * train.batch_size * world_size) /
                   std::max(summary.elapsed_s, 1e-9),
               1)
      << " samples/s";
  if (world_size > 1) out << " over " << world_size << " trainers";
  out << "\n";
  if (train.profile) PrintProfile(*setup.main, out);
  return summary;
}

}  // namespace fleet
