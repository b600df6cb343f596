// The trainer's asynchronous communicator: Fleet 2.x's a_sync = true (Paddle's
// AsyncCommunicator, reference §9.2). The training step hands its gradients to per-var queues
// and goes on; background threads merge and send them, and bring the parameters back into
// staging buffers that the step takes from.
//
//   Push       a send op's tensor is copied into the queue of its (var, server). A full queue
//              (send_queue_size copies) makes the step wait for room, until the deadline.
//   sending    one thread takes up to max_merge_var_num copies of every var that has some
//              (first waiting up to send_wait_times x 10 ms for that many), sums them (the
//              entries of a sparse gradient that share a row into one) and sends each var
//              once, thread_pool_size vars at a time. The sum is Paddle's merge for SGD
//              (communicator_is_sgd_optimizer = 1, its default): k merged gradients move the
//              parameters as k sends of them would.
//   receiving  after each round of sends, the sending thread gets every registered parameter
//              into a back buffer and swaps it to the front; with independent_recv_thread, a
//              thread of its own does so whenever a round ended since its last pass.
//   Take       a recv op copies the front buffer of its (var, server) into its output, every
//              step (its output need not keep a value between steps). Before anything arrived,
//              Take says so and the op gets the var itself.
//
// Errors: the first failed send or receive stops the communicator, and every later Push, Take
// and Flush returns it (the send and get functions name the var and the server).
//
// Threading: Push, Register, Take, Flush and Stop may be called from any thread. The send and
// get functions are called from the communicator's threads, several at once for different vars.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fleet/fleet_abi.h"
#include "pserver/merge_rows.h"
#include "support/status.h"

namespace fleet {

struct AsyncCommunicatorOptions {
  int64_t max_merge_var_num = 1;  // >= 1
  int64_t send_queue_size = 1;    // >= 1
  bool independent_recv_thread = false;
  int64_t thread_pool_size = 1;   // >= 1
  int64_t send_wait_times = 1;    // >= 0
  // The longest a Push waits for room in a queue, and a Flush for the queues to drain.
  std::chrono::milliseconds timeout{180000};
};

class AsyncCommunicator {
 public:
  // Sends `t` (host memory: dense, or sparse with rows and height) as `name` to `endpoint`.
  using SendFn = std::function<Status(const std::string& name, const std::string& endpoint,
                                      const FleetTensor& t)>;
  // Gets `name` from `endpoint` into `into` (host memory of the registered dtype and dims).
  using GetFn = std::function<Status(const std::string& name, const std::string& endpoint,
                                     const FleetTensor& into)>;

  // Starts the threads. `send` and `get` must stay callable until Stop returned.
  AsyncCommunicator(AsyncCommunicatorOptions options, SendFn send, GetFn get);
  ~AsyncCommunicator();  // Stop()
  AsyncCommunicator(const AsyncCommunicator&) = delete;
  AsyncCommunicator& operator=(const AsyncCommunicator&) = delete;

  // Queues a copy of `x` (host memory; float32, float64 or int64; sparse when x.height >= 0,
  // with its dims[0] entries) to be sent as `name` to `endpoint`. Waits while that queue is
  // full, at most options.timeout (DEADLINE_EXCEEDED). Returns the communicator's error, if it
  // failed, instead of queueing.
  Status Push(const std::string& name, const std::string& endpoint, const FleetTensor& x);

  // Makes `name` at `endpoint` a parameter the receiving refreshes, of `dtype` and `dims`.
  // Calling it again for the same pair changes nothing.
  void Register(const std::string& name, const std::string& endpoint, int32_t dtype,
                const std::vector<int64_t>& dims);

  // Copies the newest received value of a registered (name, endpoint) into `out` (host memory,
  // its registered dtype and dims) and sets *version to that value's reception count. False
  // (nothing copied) when no value has arrived yet. NOT_FOUND for a pair never registered.
  StatusOr<bool> Take(const std::string& name, const std::string& endpoint,
                      const FleetTensor& out, uint64_t* version);

  // Sends everything queued, waits for those sends (at most options.timeout), then stops.
  // Returns the first error of the communicator's life.
  Status Flush();

  // Stops the threads after the call in flight; what is still queued is dropped. Idempotent.
  void Stop();

  struct Stats {
    int64_t pushed = 0;    // copies queued
    int64_t sends = 0;     // sends made (each of one or more merged copies)
    int64_t receives = 0;  // passes over the registered parameters
  };
  Stats stats() const;

 private:
  // One queued copy of a tensor (its buffers are reused once sent).
  struct Copy {
    int32_t dtype = FLEET_DTYPE_INVALID;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
    std::vector<int64_t> rows;  // sparse only
    int64_t height = -1;        // >= 0: sparse
  };
  struct Queue {
    std::string name, endpoint;
    std::deque<Copy> copies;  // guarded by mu_
    std::vector<Copy> spare;  // guarded by mu_: sent copies whose buffers Push reuses
    // The merge of a round; only the sending threads touch it, one at a time per queue.
    Copy merged;
    MergedRows rows;
  };
  struct Batch {
    Queue* queue;
    std::vector<Copy> copies;
  };
  struct Slot {
    std::string name, endpoint;
    int32_t dtype = FLEET_DTYPE_INVALID;
    std::vector<int64_t> dims;
    std::mutex mu;              // guards front and version
    std::vector<uint8_t> front, back;  // back: only the receiving thread
    uint64_t version = 0;       // 0: nothing received yet
  };

  void SendLoop();
  void RecvLoop();
  Status SendRound(std::vector<Batch>& batches);
  Status SendBatch(Batch& batch);
  Status ReceiveAll();
  bool EveryQueueFull() const;  // with mu_ held
  void Fail(const Status& s);   // with mu_ held

  const AsyncCommunicatorOptions options_;
  const SendFn send_;
  const GetFn get_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // queued copies, flushing_, stopping_
  std::condition_variable room_cv_;  // room in a queue, or a failure
  std::condition_variable done_cv_;  // a round ended
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Queue>> queues_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Slot>> slots_;
  int64_t queued_ = 0;
  bool in_flight_ = false;
  bool flushing_ = false;
  bool stopping_ = false;
  uint64_t rounds_ = 0;
  Status error_;
  Stats stats_;

  std::mutex join_mu_;  // one Stop joins
  std::thread sender_, receiver_;
};

}  // namespace fleet
