#include "data/prefetch.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fleet::data {
namespace {

class PrefetchSource : public DataSource {
 public:
  PrefetchSource(std::unique_ptr<DataSource> inner, const PrefetchOptions& options)
      : inner_(std::move(inner)),
        timeout_(options.timeout),
        slots_(static_cast<size_t>(std::max<int64_t>(options.depth, 1))) {}

  ~PrefetchSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  Status Next(int64_t batch_size, exec::FeedMap& feeds) override {
    if (!error_.ok()) return error_;
    if (batch_size <= 0) return InvalidArgument("batch size must be > 0");
    if (!thread_.joinable()) {
      batch_size_ = batch_size;
      thread_ = std::thread([this] { ReadLoop(); });
    } else if (batch_size != batch_size_) {
      return InvalidArgument("a prefetching source reads batches of " +
                             std::to_string(batch_size_) + " and cannot switch to " +
                             std::to_string(batch_size));
    }
    Slot* slot = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!ready_.wait_for(lock, timeout_, [&] { return head_ < tail_; })) {
        return DeadlineExceeded(
            "no batch from the data reader thread within " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
            "s");
      }
      slot = &slots_[head_ % slots_.size()];
    }
    // The slot is ours until head_ moves past it: the reader only fills slots below head_ +
    // depth.
    Status status = std::move(slot->status);
    slot->status = OkStatus();
    if (status.ok()) {
      feeds.swap(slot->feeds);
      std::swap(origin_, slot->origin);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++head_;
    }
    space_.notify_one();
    if (!status.ok()) error_ = status;
    return status;
  }

  Status Skip(int64_t batches, int64_t batch_size) override {
    if (thread_.joinable()) {
      return FailedPrecondition("Skip must come before the first Next of a prefetching source");
    }
    return inner_->Skip(batches, batch_size);
  }

  int64_t num_samples() const override { return inner_->num_samples(); }
  bool sharded() const override { return inner_->sharded(); }
  int64_t skipped_lines() const override { return inner_->skipped_lines(); }

 private:
  struct Slot {
    exec::FeedMap feeds;
    BatchOrigin origin;  // of the batch in `feeds`, copied from inner_'s
    Status status;
  };

  void ReadLoop() {
    while (true) {
      Slot* slot = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        space_.wait(lock, [&] { return stop_ || tail_ - head_ < slots_.size(); });
        if (stop_) return;
        slot = &slots_[tail_ % slots_.size()];
      }
      // Outside the lock: the consumer does not touch slots at or beyond tail_.
      slot->status = inner_->Next(batch_size_, slot->feeds);
      const bool failed = !slot->status.ok();
      if (!failed) slot->origin = inner_->origin();  // into the slot's kept storage
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++tail_;
      }
      ready_.notify_one();
      if (failed) return;  // the error is the last thing this source yields
    }
  }

  std::unique_ptr<DataSource> inner_;
  std::chrono::milliseconds timeout_;
  int64_t batch_size_ = 0;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable ready_;  // tail_ moved
  std::condition_variable space_;  // head_ moved, or stop_
  size_t head_ = 0;                // slots taken by the consumer
  size_t tail_ = 0;                // slots filled by the reader
  bool stop_ = false;
  Status error_;                   // sticky: the first error handed out
  std::thread thread_;             // last: started after, joined before, everything above
};

}  // namespace

std::unique_ptr<DataSource> MakePrefetchSource(std::unique_ptr<DataSource> inner,
                                               const PrefetchOptions& options) {
  return std::make_unique<PrefetchSource>(std::move(inner), options);
}

}  // namespace fleet::data
