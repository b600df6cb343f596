// PsServer: the sync rounds, the async watch, running optimize blocks, and the exit.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "data/npy.h"
#include "pserver/server.h"
#include "pserver/server_internal.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

// "trainer 1" or "trainers 1, 3".
std::string Trainers(const std::vector<int32_t>& ids) {
  std::string out = ids.size() == 1 ? "trainer " : "trainers ";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out;
}

// fn(0) .. fn(n - 1) on up to `workers` threads (the caller's among them); the first error in
// index order once all returned.
Status RunBounded(size_t n, size_t workers, const std::function<Status(size_t)>& fn) {
  std::vector<Status> results(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) results[i] = fn(i);
  };
  std::vector<std::thread> threads;
  for (size_t w = 1; w < std::min(n, workers); ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return OkStatus();
}

bool All(const std::vector<bool>& v) {
  return std::all_of(v.begin(), v.end(), [](bool b) { return b; });
}

}  // namespace

Status PsServer::Serve() {
  Status s = sync_ ? ServeSync() : ServeAsync();
  if (!s.ok()) return s;
  if (!options_.save_params_dir.empty()) {
    s = SaveParams();
    if (!s.ok()) return s.WithContext(label_);
  }
  return OkStatus();
}

Status PsServer::WaitArrivals(std::unique_lock<std::mutex>& lock,
                              const std::vector<bool>& arrived, const char* what) {
  const auto deadline = Clock::now() + options_.timeout;
  auto ready = [&] {
    if (failed_) return true;
    for (size_t t = 0; t < live_.size(); ++t) {
      if (live_[t] && !arrived[t]) return false;
    }
    return true;
  };
  if (!cv_.wait_until(lock, deadline, ready)) {
    std::vector<int32_t> missing;
    for (size_t t = 0; t < live_.size(); ++t) {
      if (live_[t] && !arrived[t]) missing.push_back(static_cast<int32_t>(t));
    }
    return FailLocked(DeadlineExceeded(
        label_ + ": " + Trainers(missing) + " did not reach the " + what + " of round " +
        std::to_string(round_) + (round_ == 0 ? " (the trainers' startup)" : "") + " within " +
        PsSeconds(options_.timeout) + " (dead or stuck?)"));
  }
  return Failure();
}

Status PsServer::ServeSync() {
  std::unique_lock<std::mutex> lock(mu_);
  // Round 0: the trainers' startups fetch the initial parameters.
  FLEET_RETURN_IF_ERROR(WaitArrivals(lock, fetch_, "fetch barrier"));
  while (num_live_ > 0) {
    std::fill(fetch_.begin(), fetch_.end(), false);
    phase_ = Phase::kSend;
    ++round_;
    cv_.notify_all();
    FLEET_RETURN_IF_ERROR(WaitArrivals(lock, batch_, "batch barrier"));
    if (num_live_ == 0) break;
    std::vector<bool> contributors(live_.size());
    for (size_t t = 0; t < live_.size(); ++t) contributors[t] = live_[t] && batch_[t];
    // A Get answered in the last phase may still be being read out by the transport, and a
    // prefetch or a send may still be copying.
    const auto deadline = Clock::now() + options_.timeout;
    if (!cv_.wait_until(lock, deadline, [&] { return failed_ || outstanding_gets_ == 0; })) {
      return FailLocked(DeadlineExceeded(label_ + ": a get, prefetch or send was still in "
                                         "progress " + PsSeconds(options_.timeout) +
                                         " after the last batch barrier of round " +
                                         std::to_string(round_)));
    }
    FLEET_RETURN_IF_ERROR(Failure());
    const int64_t round = round_;
    updating_ = true;
    lock.unlock();
    Status s = RunRound(contributors);
    // Between the update and the Get phase nothing touches the scope: the round's state is
    // whole, and the trainers wait for their parameters.
    if (s.ok()) s = SaveCheckpoint(round);
    lock.lock();
    updating_ = false;
    cv_.notify_all();
    if (!s.ok()) return FailLocked(s.WithContext("round " + std::to_string(round_)));
    std::fill(batch_.begin(), batch_.end(), false);
    phase_ = Phase::kGet;
    cv_.notify_all();
    FLEET_RETURN_IF_ERROR(WaitArrivals(lock, fetch_, "fetch barrier"));
  }
  return Failure();
}

Status PsServer::ServeAsync() {
  std::unique_lock<std::mutex> lock(mu_);
  while (num_live_ > 0 && !failed_) {
    const auto now = Clock::now();
    auto earliest = Clock::time_point::max();
    std::vector<int32_t> silent;
    for (size_t t = 0; t < live_.size(); ++t) {
      if (!live_[t]) continue;
      const auto due = last_heard_[t] + options_.timeout;
      if (due <= now) silent.push_back(static_cast<int32_t>(t));
      earliest = std::min(earliest, due);
    }
    if (!silent.empty()) {
      return FailLocked(DeadlineExceeded(label_ + ": " + Trainers(silent) + " sent nothing for " +
                                         PsSeconds(options_.timeout) + " (dead or stuck?)"));
    }
    cv_.wait_until(lock, earliest);
  }
  return Failure();
}

StatusOr<exec::PreparedProgram*> PsServer::PreparedFor(Block& block,
                                                       const std::vector<bool>* contributors) {
  if (block.stale.exchange(false)) {
    // A sparse receive var it reads has new memory (WriteSparse): every preparation of the
    // block points at the old one.
    std::lock_guard<std::mutex> lock(prepare_mu_);
    block.variants.clear();
    auto prepared = executor_->Prepare(block.program, {}, {});
    if (!prepared.ok()) {
      block.stale = true;
      return prepared.status().WithContext(block.label);
    }
    block.prepared = std::move(*prepared);
  }
  if (contributors == nullptr || block.merge_op < 0 || All(*contributors)) {
    return block.prepared.get();
  }
  auto it = block.variants.find(*contributors);
  if (it != block.variants.end()) return it->second->prepared.get();
  // The merge over the trainers still taking part: sum of their receive vars, scaled by one
  // over their number.
  auto variant = std::make_unique<Block::Variant>();
  variant->program = block.program;
  std::vector<ir::Op>& ops = variant->program.global().ops;
  std::vector<std::string> inputs;
  for (size_t t = 0; t < contributors->size(); ++t) {
    if ((*contributors)[t]) inputs.push_back(block.merge_inputs[t]);
  }
  if (inputs.empty()) return block.prepared.get();  // nobody contributed: nothing is read
  ops[static_cast<size_t>(block.merge_op)].inputs["X"] = inputs;
  if (block.scale_op >= 0) {
    ops[static_cast<size_t>(block.scale_op)].attrs["scale"] =
        1.0f / static_cast<float>(inputs.size());
  }
  std::lock_guard<std::mutex> lock(prepare_mu_);
  auto prepared = executor_->Prepare(variant->program, {}, {});
  if (!prepared.ok()) {
    return prepared.status().WithContext(block.label + " merged over " +
                                         std::to_string(inputs.size()) + " trainers");
  }
  variant->prepared = std::move(*prepared);
  exec::PreparedProgram* raw = variant->prepared.get();
  block.variants.emplace(*contributors, std::move(variant));
  return raw;
}

Status PsServer::RunBlock(Block& block, const std::vector<bool>* contributors) {
  FLEET_ASSIGN_OR_RETURN(exec::PreparedProgram * prepared, PreparedFor(block, contributors));
  std::vector<exec::HostTensor> none;
  FLEET_RETURN_IF_ERROR(executor_->Run(*prepared, {}, none).WithContext(block.label));
  if (block.growable != nullptr) {
    std::lock_guard<std::mutex> lock(block.growable->mu);
    block.growable->table.EndUpdate();
  }
  return OkStatus();
}

Status PsServer::RunRound(const std::vector<bool>& contributors) {
  size_t workers = options_.max_parallel_blocks > 0
                       ? static_cast<size_t>(options_.max_parallel_blocks)
                       : std::max<size_t>(1, std::thread::hardware_concurrency());
  for (const std::vector<Block*>& group : groups_) {
    // Preparing is not for concurrent use: every variant this round needs is made first.
    for (Block* b : group) FLEET_RETURN_IF_ERROR(PreparedFor(*b, &contributors).status());
    FLEET_RETURN_IF_ERROR(RunBounded(group.size(), workers, [&](size_t i) {
      return RunBlock(*group[i], &contributors);
    }));
  }
  return OkStatus();
}

Status PsServer::SaveParams() const {
  const std::filesystem::path& dir = options_.save_params_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Unavailable("train.save_params_dir: cannot create '" + dir.string() + "': " +
                       ec.message());
  }
  for (const auto& [name, g] : growable_) {
    FLEET_RETURN_IF_ERROR(SaveGrowableParams(*g).WithContext("train.save_params_dir"));
  }
  for (const std::string& name : params_) {
    FLEET_ASSIGN_OR_RETURN(exec::HostTensor t, Read(name));
    data::NpyArray a;
    a.dtype = t.dtype;
    a.dims = t.dims;
    a.bytes = std::move(t.bytes);
    FLEET_RETURN_IF_ERROR(
        data::WriteNpy(dir / (name + ".npy"), a).WithContext("train.save_params_dir"));
  }
  return OkStatus();
}

}  // namespace fleet
