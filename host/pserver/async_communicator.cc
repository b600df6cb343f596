#include "pserver/async_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ir/program.h"
#include "pserver/trainer.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

template <typename T>
void AddInto(std::vector<uint8_t>& into, const std::vector<uint8_t>& from) {
  T* a = reinterpret_cast<T*>(into.data());
  const T* b = reinterpret_cast<const T*>(from.data());
  const size_t n = into.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

}  // namespace

AsyncCommunicator::AsyncCommunicator(AsyncCommunicatorOptions options, SendFn send, GetFn get)
    : options_(std::move(options)), send_(std::move(send)), get_(std::move(get)) {
  sender_ = std::thread([this] { SendLoop(); });
  if (options_.independent_recv_thread) receiver_ = std::thread([this] { RecvLoop(); });
}

AsyncCommunicator::~AsyncCommunicator() { Stop(); }

Status AsyncCommunicator::Push(const std::string& name, const std::string& endpoint,
                          const FleetTensor& x) {
  const bool sparse = x.struct_size >= FLEET_STRUCT_SIZE(FleetTensor, height) && x.height >= 0;
  if (x.dtype != FLEET_DTYPE_FLOAT32 && x.dtype != FLEET_DTYPE_FLOAT64 &&
      x.dtype != FLEET_DTYPE_INT64) {
    return Unimplemented("the communicator sums float32, float64 and int64 tensors; '" + name +
                         "' is " + std::string(ir::DataTypeName(static_cast<ir::DataType>(x.dtype))));
  }
  if (sparse && x.ndim < 1) return InvalidArgument("a sparse '" + name + "' without rows");
  const std::vector<int64_t> dims(x.dims, x.dims + x.ndim);
  const size_t bytes =
      static_cast<size_t>(Elements(dims)) * ir::DataTypeSize(static_cast<ir::DataType>(x.dtype));

  std::unique_lock<std::mutex> lock(mu_);
  std::unique_ptr<Queue>& entry = queues_[{name, endpoint}];
  if (entry == nullptr) {
    entry = std::make_unique<Queue>();
    entry->name = name;
    entry->endpoint = endpoint;
  }
  Queue& q = *entry;
  const auto deadline = Clock::now() + options_.timeout;
  const size_t limit = static_cast<size_t>(options_.send_queue_size);
  if (!room_cv_.wait_until(lock, deadline, [&] {
        return !error_.ok() || stopping_ || q.copies.size() < limit;
      })) {
    return DeadlineExceeded("the communicator's queue of '" + name + "' stayed full (" +
                            std::to_string(limit) + " gradients, send_queue_size) for " +
                            std::to_string(options_.timeout.count() / 1000) +
                            " s: the servers take the sends slower than this trainer makes them");
  }
  if (!error_.ok()) return error_;
  if (stopping_) return Aborted("the communicator was stopped");
  Copy copy;
  if (!q.spare.empty()) {
    copy = std::move(q.spare.back());
    q.spare.pop_back();
  }
  // The copy is made under the lock: it is a memcpy of one gradient, and the queues' buffers
  // then never change hands while being filled.
  copy.dtype = x.dtype;
  copy.dims = dims;
  copy.data.resize(bytes);
  if (bytes > 0) std::memcpy(copy.data.data(), x.data, bytes);
  copy.height = sparse ? x.height : -1;
  copy.rows.clear();
  if (sparse) copy.rows.assign(x.rows, x.rows + dims[0]);
  q.copies.push_back(std::move(copy));
  ++queued_;
  ++stats_.pushed;
  work_cv_.notify_all();
  return OkStatus();
}

void AsyncCommunicator::Register(const std::string& name, const std::string& endpoint,
                            int32_t dtype, const std::vector<int64_t>& dims) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = slots_[{name, endpoint}];
  if (slot != nullptr) return;
  slot = std::make_unique<Slot>();
  slot->name = name;
  slot->endpoint = endpoint;
  slot->dtype = dtype;
  slot->dims = dims;
  const size_t bytes =
      static_cast<size_t>(Elements(dims)) * ir::DataTypeSize(static_cast<ir::DataType>(dtype));
  slot->front.resize(bytes);
  slot->back.resize(bytes);
}

StatusOr<bool> AsyncCommunicator::Take(const std::string& name, const std::string& endpoint,
                                  const FleetTensor& out, uint64_t* version) {
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok()) return error_;
    auto it = slots_.find({name, endpoint});
    if (it == slots_.end()) {
      return NotFound("'" + name + "' at " + endpoint + " is not a registered parameter");
    }
    slot = it->second.get();
  }
  std::lock_guard<std::mutex> lock(slot->mu);
  if (slot->version == 0) return false;
  if (out.dtype != slot->dtype || std::vector<int64_t>(out.dims, out.dims + out.ndim) !=
                                      slot->dims) {
    return InvalidArgument("'" + name + "' was registered with another dtype or shape");
  }
  // Copied even when not newer: the output may be a block var whose memory other ops reuse
  // between steps (the executor's planning), so it holds the value only if written each step.
  if (!slot->front.empty()) std::memcpy(out.data, slot->front.data(), slot->front.size());
  *version = slot->version;
  return true;
}

Status AsyncCommunicator::Flush() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    flushing_ = true;
    work_cv_.notify_all();
    const bool drained = done_cv_.wait_until(lock, Clock::now() + options_.timeout, [&] {
      return !error_.ok() || stopping_ || (queued_ == 0 && !in_flight_);
    });
    if (!drained && error_.ok()) {
      Fail(DeadlineExceeded(std::to_string(queued_) + " queued gradients were not sent within " +
                            std::to_string(options_.timeout.count() / 1000) + " s"));
    }
  }
  Stop();
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void AsyncCommunicator::Stop() {
  std::lock_guard<std::mutex> join(join_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  room_cv_.notify_all();
  done_cv_.notify_all();
  if (sender_.joinable()) sender_.join();
  if (receiver_.joinable()) receiver_.join();
}

AsyncCommunicator::Stats AsyncCommunicator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool AsyncCommunicator::EveryQueueFull() const {
  const size_t want = static_cast<size_t>(options_.max_merge_var_num);
  for (const auto& [key, q] : queues_) {
    if (!q->copies.empty() && q->copies.size() < want) return false;
  }
  return true;
}

void AsyncCommunicator::Fail(const Status& s) {
  if (error_.ok()) error_ = s;
  room_cv_.notify_all();
  done_cv_.notify_all();
  work_cv_.notify_all();
}

void AsyncCommunicator::SendLoop() {
  std::vector<Batch> batches;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stopping_ || !error_.ok() || queued_ > 0; });
    if (stopping_ || !error_.ok()) break;
    // Fewer copies than max_merge_var_num wait a little for company, unless a flush is on.
    const auto until = Clock::now() + std::chrono::milliseconds(10 * options_.send_wait_times);
    work_cv_.wait_until(lock, until,
                        [&] { return stopping_ || flushing_ || EveryQueueFull(); });
    if (stopping_) break;
    batches.clear();
    const size_t most = static_cast<size_t>(options_.max_merge_var_num);
    for (auto& [key, q] : queues_) {
      if (q->copies.empty()) continue;
      Batch& b = batches.emplace_back();
      b.queue = q.get();
      while (!q->copies.empty() && b.copies.size() < most) {
        b.copies.push_back(std::move(q->copies.front()));
        q->copies.pop_front();
        --queued_;
      }
    }
    in_flight_ = true;
    const bool receive = !options_.independent_recv_thread && !slots_.empty();
    room_cv_.notify_all();
    lock.unlock();
    Status s = SendRound(batches);
    if (s.ok() && receive) s = ReceiveAll();
    lock.lock();
    for (Batch& b : batches) {
      stats_.sends += 1;
      for (Copy& c : b.copies) {
        if (b.queue->spare.size() < static_cast<size_t>(options_.send_queue_size)) {
          b.queue->spare.push_back(std::move(c));
        }
      }
    }
    in_flight_ = false;
    ++rounds_;
    if (!s.ok()) Fail(s);
    done_cv_.notify_all();
  }
}

void AsyncCommunicator::RecvLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    done_cv_.wait(lock, [&] { return stopping_ || !error_.ok() || rounds_ > seen; });
    if (stopping_ || !error_.ok()) break;
    seen = rounds_;
    lock.unlock();
    Status s = ReceiveAll();
    lock.lock();
    if (!s.ok()) Fail(s);
  }
}

Status AsyncCommunicator::SendRound(std::vector<Batch>& batches) {
  const size_t workers =
      std::min(batches.size(), static_cast<size_t>(options_.thread_pool_size));
  std::atomic<size_t> next{0};
  return RunConcurrently(workers, [&](size_t) -> Status {
    for (size_t i = next++; i < batches.size(); i = next++) {
      FLEET_RETURN_IF_ERROR(SendBatch(batches[i]));
    }
    return OkStatus();
  });
}

Status AsyncCommunicator::SendBatch(Batch& batch) {
  Queue& q = *batch.queue;
  Copy& m = q.merged;
  const Copy& first = batch.copies.front();
  m.dtype = first.dtype;
  m.height = first.height;
  m.dims = first.dims;
  FleetTensor t{};
  t.struct_size = sizeof(FleetTensor);
  t.dtype = m.dtype;
  t.device_type = FLEET_DEVICE_TYPE_HOST;
  t.height = -1;
  if (first.height < 0) {
    m.data = first.data;
    for (size_t c = 1; c < batch.copies.size(); ++c) {
      const Copy& more = batch.copies[c];
      if (more.dims != m.dims || more.height >= 0 || more.dtype != m.dtype) {
        return InvalidArgument("'" + q.name + "' changed its type or shape between steps");
      }
      if (m.dtype == FLEET_DTYPE_FLOAT32) AddInto<float>(m.data, more.data);
      if (m.dtype == FLEET_DTYPE_FLOAT64) AddInto<double>(m.data, more.data);
      if (m.dtype == FLEET_DTYPE_INT64) AddInto<int64_t>(m.data, more.data);
    }
    t.data = m.data.data();
  } else {
    // Every copy's entries end to end, then one entry per row.
    m.data.clear();
    m.rows.clear();
    int64_t entries = 0;
    for (const Copy& c : batch.copies) {
      if (c.height != m.height || c.dtype != m.dtype || c.dims.size() != m.dims.size() ||
          !std::equal(c.dims.begin() + 1, c.dims.end(), m.dims.begin() + 1)) {
        return InvalidArgument("'" + q.name + "' changed its type or shape between steps");
      }
      m.data.insert(m.data.end(), c.data.begin(), c.data.end());
      m.rows.insert(m.rows.end(), c.rows.begin(), c.rows.end());
      entries += c.dims[0];
    }
    const size_t row_width = static_cast<size_t>(
        Elements(std::vector<int64_t>(m.dims.begin() + 1, m.dims.end())));
    if (MergeRows(m.dtype, m.rows.data(), m.data.data(), entries, row_width, q.rows)) {
      m.dims[0] = static_cast<int64_t>(q.rows.rows.size());
      t.data = q.rows.values.data();
      t.rows = q.rows.rows.data();
    } else {
      m.dims[0] = entries;
      t.data = m.data.data();
      t.rows = m.rows.data();
    }
    t.height = m.height;
  }
  t.ndim = static_cast<int32_t>(m.dims.size());
  t.dims = m.dims.data();
  return send_(q.name, q.endpoint, t);
}

Status AsyncCommunicator::ReceiveAll() {
  std::vector<Slot*> slots;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, slot] : slots_) slots.push_back(slot.get());
  }
  for (Slot* slot : slots) {
    FleetTensor into{};
    into.struct_size = sizeof(FleetTensor);
    into.dtype = slot->dtype;
    into.ndim = static_cast<int32_t>(slot->dims.size());
    into.dims = slot->dims.data();
    into.data = slot->back.data();
    into.device_type = FLEET_DEVICE_TYPE_HOST;
    into.height = -1;
    FLEET_RETURN_IF_ERROR(get_(slot->name, slot->endpoint, into));
    std::lock_guard<std::mutex> lock(slot->mu);
    slot->front.swap(slot->back);
    ++slot->version;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.receives;
  return OkStatus();
}

}  // namespace fleet
