#include "job/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "checkpoint/export.h"
#include "job/data_sources.h"

namespace fleet {
namespace {

// The eval files read as [data] reads its own, once over in order: no shuffle, and a partial
// last batch left out so that every batch has the same weight.
Config EvalDataConfig(const Config& config) {
  Config c = config;
  c.data.filelist = config.eval.filelist;
  c.data.csv_path.clear();
  c.data.shuffle = false;
  c.data.last_batch = "drop";
  return c;
}

// A parameter-server trainer does not hold the tables its servers keep: its main looks their
// rows up with distributed_lookup_table, which writes what the forward program's lookup did.
// Those lookups become the trainer's ops, and the tables leave the program.
ir::Program WithTrainerPrefetches(const ir::Program& forward, const ir::Program& trainer_main) {
  std::map<std::string, const ir::Op*> by_output;
  for (const ir::Op& op : trainer_main.global().ops) {
    if (op.type != "distributed_lookup_table") continue;
    for (const std::string& out : op.Output("Outputs")) by_output.emplace(out, &op);
  }
  ir::Program program = forward;
  if (by_output.empty()) return program;
  ir::Block& block = program.global();
  // One op of the trainer's may stand for several lookups (the pserver pass merges those of a
  // table): it takes the place of the first.
  std::set<std::string> tables;
  std::set<const ir::Op*> placed;
  std::vector<ir::Op> ops;
  for (ir::Op& op : block.ops) {
    auto it = by_output.end();
    if (op.type == "lookup_table" || op.type == "lookup_table_v2") {
      it = by_output.find(std::string(op.OutputOne("Out")));
    }
    if (it == by_output.end()) {
      ops.push_back(std::move(op));
      continue;
    }
    tables.insert(std::string(op.InputOne("W")));
    // PruneForInference then sets is_test: on a growable table the lookup makes no row.
    if (placed.insert(it->second).second) ops.push_back(*it->second);
  }
  block.ops = std::move(ops);
  for (const ir::Op& op : block.ops) {
    for (const std::string& v : op.InputVars()) tables.erase(v);
  }
  for (const std::string& t : tables) block.vars.erase(t);
  return program;
}

// In the pruned program, each auc op counts into statistics fed from the host (`<stat>@EVAL`)
// and writes them to vars the evaluation fetches (`<stat>@EVAL.out`), in place of training's
// persistable ones. Returns the pairs, in op order.
StatusOr<std::vector<std::pair<std::string, std::string>>> DetachAucStatistics(
    ir::Program& program) {
  ir::Block& block = program.global();
  std::vector<std::pair<std::string, std::string>> renamed;  // (feed, out) per statistic
  std::set<std::string> originals;
  for (ir::Op& op : block.ops) {
    if (op.type != "auc") continue;
    for (auto [in_slot, out_slot] : {std::pair{"StatPos", "StatPosOut"},
                                     std::pair{"StatNeg", "StatNegOut"}}) {
      auto in = op.inputs.find(in_slot);
      if (in == op.inputs.end() || in->second.size() != 1) {
        return InvalidArgument("eval: an auc op without its " + std::string(in_slot) + " input");
      }
      const std::string stat = in->second[0];
      const ir::Var* var = block.FindVar(stat);
      if (var == nullptr) return Internal("eval: the auc statistics '" + stat + "' have no var");
      ir::Var feed = *var, out = *var;
      feed.name = stat + "@EVAL";
      out.name = stat + "@EVAL.out";
      feed.persistable = out.persistable = false;
      feed.param.reset();
      out.param.reset();
      if (block.FindVar(feed.name) == nullptr) FLEET_RETURN_IF_ERROR(block.AddVar(feed).status());
      if (block.FindVar(out.name) == nullptr) FLEET_RETURN_IF_ERROR(block.AddVar(out).status());
      in->second = {feed.name};
      op.outputs[out_slot] = {out.name};
      renamed.emplace_back(feed.name, out.name);
      originals.insert(stat);
    }
  }
  for (const std::string& stat : originals) block.vars.erase(stat);
  return renamed;
}

}  // namespace

StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const Config& config,
                                                       const ir::Program& forward,
                                                       const frontend::ParsedProgram& programs,
                                                       const std::vector<ReportedVar>& reported,
                                                       exec::Executor& executor, int64_t rank,
                                                       int64_t trainers) {
  const std::string where = config.eval.where.empty() ? "eval.filelist" : config.eval.where;
  if (config.data.source != "csv" && config.data.source != "multislot") {
    return InvalidArgument(where + ": [eval] reads files in the format of data.source, which "
                           "must then be \"csv\" or \"multislot\", not \"" + config.data.source +
                           "\"");
  }
  std::unique_ptr<Evaluator> e(new Evaluator(config, executor));
  e->batch_size_ = config.eval.batch_size > 0 ? config.eval.batch_size : config.train.batch_size;

  // The loss and the reported vars the forward program computes; the others (a var of the
  // backward or optimizer part) are training's alone.
  std::vector<std::string> fetches = {programs.loss};
  const ir::Block& fwd = forward.global();
  for (const ReportedVar& r : reported) {
    if (fwd.FindVar(r.var) == nullptr) continue;
    e->reported_.push_back(r);
    fetches.push_back(r.var);
  }
  // Records carry eval_<name> beside the reported names: none may be one of them.
  std::set<std::string> eval_keys = {"eval_loss"};
  for (const ReportedVar& r : e->reported_) eval_keys.insert("eval_" + r.name);
  for (const ReportedVar& r : reported) {
    if (eval_keys.count(r.name) != 0) {
      return InvalidArgument(r.what + ": '" + r.name + "' is also the record key of an "
                             "evaluation's figure (" + where + ")");
    }
  }
  auto pruned = checkpoint::PruneForInference(WithTrainerPrefetches(forward, programs.main), {},
                                              fetches);
  if (!pruned.ok()) return pruned.status().WithContext("eval: the forward program");
  e->program_ = std::move(pruned->program);
  FLEET_ASSIGN_OR_RETURN(auto renamed, DetachAucStatistics(e->program_));

  FLEET_ASSIGN_OR_RETURN(std::vector<data::FeedSpec> feeds,
                         data::FeedSpecs(e->program_, pruned->feeds));
  exec::FeedShapes shapes;
  exec::FeedSequences sequences;
  for (const data::FeedSpec& f : feeds) {
    std::vector<int64_t> dims = f.dims;
    dims[0] = e->batch_size_;
    if (f.lod_level != 0) {
      dims[0] = exec::SequenceCapacity(e->batch_size_);
      sequences[f.name] = e->batch_size_;
    }
    shapes[f.name] = dims;
  }
  for (const auto& [feed, out] : renamed) {
    const ir::Var* v = e->program_.global().FindVar(feed);
    shapes[feed] = v->shape;
    e->counts_[feed].Reshape(v->dtype, v->shape);
    e->stats_.push_back({feed, out, fetches.size()});
    fetches.push_back(out);
  }
  // The eval batch sizes memory as the training batch does: checked before anything is drawn
  // or prepared for it (a global draw holds every trainer's share).
  Config sized = EvalDataConfig(config);
  sized.train.batch_size = e->batch_size_;
  FLEET_ASSIGN_OR_RETURN(e->source_, MakeDataSource(sized, programs, feeds, rank, trainers));
  e->global_draw_ = trainers > 1 && !e->source_->sharded();
  FLEET_RETURN_IF_ERROR(CheckBatchMemory(sized, feeds, e->global_draw_ ? trainers : 1,
                                         "trainers", "eval.batch_size"));
  auto prepared = executor.Prepare(e->program_, shapes, fetches, sequences);
  if (!prepared.ok()) {
    return NameBatchSize(prepared.status().WithContext("eval: the forward program"), sized, 1, "",
                         "eval.batch_size");
  }
  e->prepared_ = std::move(*prepared);
  FLEET_ASSIGN_OR_RETURN(e->global_auc_,
                         GlobalAuc::Create(executor, e->program_, e->reported_));
  e->rank_ = rank;
  e->trainers_ = trainers;
  const int64_t draw = e->global_draw_ ? e->batch_size_ * trainers : e->batch_size_;
  e->batches_ = config.eval.batches;
  if (e->batches_ == 0) {
    const int64_t samples = e->source_->num_samples();
    if (samples == 0) {
      return InvalidArgument(where + ": data.dataset \"queue\" does not know how many samples "
                             "the eval files hold: set eval.batches");
    }
    e->batches_ = samples / draw;
    if (e->batches_ == 0) {
      return InvalidArgument(where + ": the eval files hold " + std::to_string(samples) +
                             " samples" + (e->source_->sharded() ? " for this trainer" : "") +
                             ", fewer than one batch of " + std::to_string(draw) +
                             " (eval.batch_size)");
    }
  }
  return e;
}

bool Evaluator::Due(int64_t step) const {
  const int64_t every = config_.eval.every_steps;
  return step == config_.train.steps || (every > 0 && step % every == 0);
}

StatusOr<EvalReport> Evaluator::Run(Communicator* world) {
  const auto start = std::chrono::steady_clock::now();
  for (auto& [name, t] : counts_) std::fill(t.bytes.begin(), t.bytes.end(), uint8_t{0});
  const size_t n = 1 + reported_.size();
  sums_.assign(n + 1, 0.0);  // the values summed over batches, then the batch count
  std::vector<double> last(n, 0.0);
  for (int64_t b = 0; b < batches_; ++b) {
    if (global_draw_) {
      if (Status s = source_->Next(batch_size_ * trainers_, global_); !s.ok()) {
        return s.WithContext("eval data, batch " + std::to_string(b + 1));
      }
      for (const auto& [name, t] : global_) {
        data::SliceSamples(t, rank_ * batch_size_, batch_size_, batch_[name]);
      }
    } else if (Status s = source_->Next(batch_size_, batch_); !s.ok()) {
      return s.WithContext("eval data, batch " + std::to_string(b + 1));
    }
    // The sources refill the whole map: the counts join the batch for the run only.
    for (auto& [name, t] : counts_) batch_[name] = std::move(t);
    Status run = executor_.Run(*prepared_, batch_, fetched_);
    for (auto& [name, t] : counts_) t = std::move(batch_[name]);
    if (Status s = run; !s.ok()) {
      return source_->origin().Annotate(s, 0, -1).WithContext("eval, batch " +
                                                               std::to_string(b + 1));
    }
    for (size_t i = 0; i < n; ++i) {
      const std::string what = i == 0 ? "eval loss" : "eval " + reported_[i - 1].what;
      FLEET_ASSIGN_OR_RETURN(last[i], ScalarValue(fetched_[i], what));
      sums_[i] += last[i];
    }
    // The statistics the clone counted into feed its next batch.
    for (const Statistic& s : stats_) {
      exec::HostTensor& in = counts_[s.feed];
      const exec::HostTensor& out = fetched_[s.fetch];
      if (out.bytes.size() != in.bytes.size()) {
        return Internal("eval: the auc statistics '" + s.out + "' changed size");
      }
      std::memcpy(in.bytes.data(), out.bytes.data(), in.bytes.size());
    }
  }
  sums_[n] = static_cast<double>(batches_);
  if (world != nullptr) {
    FLEET_RETURN_IF_ERROR(world
                              ->AllReduceHost(sums_.data(), FLEET_DTYPE_FLOAT64,
                                              static_cast<int64_t>(sums_.size()),
                                              FLEET_REDUCE_SUM)
                              .WithContext("eval figures"));
  }
  EvalReport report;
  report.names.push_back("loss");
  for (const ReportedVar& r : reported_) report.names.push_back(r.name);
  const double batches = std::max(sums_[n], 1.0);
  for (size_t i = 0; i < n; ++i) report.values.push_back(sums_[i] / batches);
  // An AUC is the evaluation's whole: that of its statistics after the last batch, summed
  // over the ranks in a collective job, not a mean of per-batch values.
  std::vector<double> metrics(last.begin() + 1, last.end());
  if (world != nullptr) {
    std::map<std::string, exec::HostTensor> stats;
    for (const Statistic& s : stats_) stats[s.out] = counts_[s.feed];
    FLEET_RETURN_IF_ERROR(global_auc_->Compute(*world, metrics, &stats));
  }
  for (size_t i = 0; i < reported_.size(); ++i) {
    if (global_auc_->Covers(i)) report.values[1 + i] = metrics[i];
  }
  report.samples = static_cast<int64_t>(sums_[n]) * batch_size_;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace fleet
