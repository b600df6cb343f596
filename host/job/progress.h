// What the user watches while a job trains: a line every [train] log_every steps (and after the
// last), one JSON record per logged step in [train] metrics_file, the closing summary, and with
// [train] profile where a step's time went. Rates count the samples of the whole job.
//
// Threading: a ProgressLog belongs to the thread running the loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "executor/executor.h"
#include "support/status.h"

namespace fleet {

// How a training loop ended: what `fleet-host run` and the tests read.
struct TrainSummary {
  int64_t steps = 0;
  double final_loss = 0.0;
  double elapsed_s = 0.0;
  std::vector<double> logged_losses;  // the loss of every logged step, in order
};

class ProgressLog {
 public:
  // `who` says whose figures the lines are ("2 trainers", "trainer 1 of 2", "" for a lone
  // process); `train` and `out` must outlive the log.
  ProgressLog(const Config::Train& train, int64_t samples_per_step, std::string who,
              std::ostream& out)
      : train_(train), samples_per_step_(samples_per_step), who_(std::move(who)), out_(out) {}

  // Opens the metrics file when there is one and this process writes it.
  // `suffix` goes before the file's extension ("m.jsonl" -> "m.trainer1.jsonl"), so processes
  // that share a config but report for themselves do not write one file together. A resumed
  // job (StartAt first) keeps the records of the steps before the one it resumes at, and drops
  // those the killed job logged after its checkpoint, which it runs again.
  Status Open(bool write_metrics, const std::string& suffix = "");

  bool Due(int64_t step) const { return step % train_.log_every == 0 || step == train_.steps; }

  // A resumed job runs from `step` on: rates and the ETA count only the steps run here.
  void StartAt(int64_t step) {
    first_step_ = step;
    last_logged_step_ = step - 1;
  }

  // Samples per second here since the last logged step.
  double Rate(int64_t step) const;

  Status Log(int64_t step, double loss, double rate);

  // Prints "trained N steps in ..."; `job_samples_per_step` counts every trainer's samples.
  TrainSummary Finish(double final_loss, int64_t job_samples_per_step);

 private:
  using Clock = std::chrono::steady_clock;

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

// Where a step's time went ([train] profile): the ops that took most, then the total per op
// type, from the timings `p` collected.
void PrintProfile(const exec::PreparedProgram& p, std::ostream& out);

}  // namespace fleet
