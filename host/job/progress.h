// What the user watches while a job trains: a line every [train] log_every steps (and after the
// last), one JSON record per logged step in [train] metrics_file, the same scalars in
// TensorBoard event files under [train] tensorboard_dir (job/tensorboard.h), the closing
// summary, and with [train] profile where a step's time went.
//
// A logged step reports, as Paddle's logs do:
//   loss         the step's loss
//   <metric>     each reported var (job/metrics.h), in order
//   lr           the learning rate the step used; null where the process does not hold it
//   ips          samples per second over the interval since the last logged step
//   reader_cost  seconds per step spent waiting for a batch, averaged over that interval
//   batch_cost   seconds per step, all included, averaged over that interval
//   eta_s        the steps left times batch_cost
//   elapsed_s    seconds since the loop started
// A step followed by an evaluation ([eval], job/evaluation.h) also reports eval_loss and
// eval_<metric> for each reported var the evaluation computes, and prints them on a line of
// their own:
//   eval at step 100: loss 0.480112 auc 0.772301 (3000 samples, 0.21s)
// The metrics record is one JSON object of exactly these keys (and "step"); a value that is
// not finite is null. The line reads
//   step 20/200 loss 0.512345 auc 0.731200 lr 0.01 reader_cost 0.00002s batch_cost 0.00310s
//   ips 41290.3 samples/s eta 0.6s (2 trainers)
// (one line), with lr left out where it is null.
//
// Threading: a ProgressLog belongs to the thread running the loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "executor/executor.h"
#include "job/tensorboard.h"
#include "support/status.h"

namespace fleet {

// How a training loop ended: what `fleet-host run` and the tests read.
struct TrainSummary {
  int64_t steps = 0;
  double final_loss = 0.0;
  double elapsed_s = 0.0;
  std::vector<double> logged_losses;  // the loss of every logged step, in order
};

// The figures of one evaluation (job/evaluation.h): names ("loss" first, then the reported vars
// the forward program computes) and their values, in the same order.
struct EvalReport {
  std::vector<std::string> names;
  std::vector<double> values;
  int64_t samples = 0;  // this process's, or the job's in a collective job
  double seconds = 0.0;
};

// The figures of one logged step other than those ProgressLog measures itself.
struct StepReport {
  double loss = 0.0;
  std::vector<double> metrics;  // one per name given to ProgressLog, in order
  std::optional<double> lr;
  double ips = 0.0;
  double reader_cost = 0.0;
  double batch_cost = 0.0;
  std::optional<EvalReport> eval;  // when the step was followed by an evaluation
};

class ProgressLog {
 public:
  // `who` says whose figures the lines are ("2 trainers", "trainer 1 of 2", "" for a lone
  // process); `metric_names` are the keys of the reported vars; `train` and `out` must outlive
  // the log.
  ProgressLog(const Config::Train& train, int64_t samples_per_step, std::string who,
              std::ostream& out, std::vector<std::string> metric_names = {})
      : train_(train), samples_per_step_(samples_per_step), who_(std::move(who)), out_(out),
        metric_names_(std::move(metric_names)) {}

  // Opens the metrics file and the TensorBoard event file when they are configured and this
  // process writes them. A process that reports for itself beside others sharing its config
  // gives `own_name` ("trainer1"): it goes before the metrics file's extension
  // ("m.jsonl" -> "m.trainer1.jsonl") and names a subdirectory of tensorboard_dir (which
  // TensorBoard shows as a run of its own). A resumed job (StartAt first) keeps the records of
  // the steps before the one it resumes at, and drops those the killed job logged after its
  // checkpoint, which it runs again; its event file is a new one beside the killed job's.
  Status Open(bool write_metrics, const std::string& own_name = "");

  bool Due(int64_t step) const { return step % train_.log_every == 0 || step == train_.steps; }

  // A resumed job runs from `step` on: rates and the ETA count only the steps run here.
  void StartAt(int64_t step) {
    first_step_ = step;
    last_logged_step_ = step - 1;
  }

  // Seconds this step waited for its batch; called every step.
  void AddReaderTime(double seconds) { reader_s_ += seconds; }

  // ips, reader_cost and batch_cost of this process over the interval that `step` closes
  // (loss, metrics and lr are left for the caller).
  StepReport Measure(int64_t step) const;

  Status Log(int64_t step, const StepReport& report);

  // Prints "trained N steps in ..."; `job_samples_per_step` counts every trainer's samples.
  TrainSummary Finish(double final_loss, int64_t job_samples_per_step);

 private:
  using Clock = std::chrono::steady_clock;

  const Config::Train& train_;
  int64_t samples_per_step_;
  std::string who_;
  std::ostream& out_;
  std::vector<std::string> metric_names_;
  std::ofstream metrics_;
  std::string metrics_path_;
  std::unique_ptr<EventFileWriter> events_;
  TrainSummary summary_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_log_ = start_;
  int64_t last_logged_step_ = 0;
  int64_t first_step_ = 1;
  double reader_s_ = 0.0;  // since the last logged step
};

// Where a step's time went ([train] profile): the ops that took most, then the total per op
// type, from the timings `p` collected.
void PrintProfile(const exec::PreparedProgram& p, std::ostream& out);

}  // namespace fleet
