// The trainer's asynchronous communicator (pserver/async_communicator.h) against send and get
// functions that record what reaches them: merging, queue bounds, receiving and failures.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pserver/async_communicator.h"

namespace fleet {
namespace {

using std::chrono::milliseconds;

FleetTensor Dense(std::vector<float>& v, std::vector<int64_t>& dims) {
  FleetTensor t{};
  t.struct_size = sizeof(FleetTensor);
  t.dtype = FLEET_DTYPE_FLOAT32;
  t.ndim = static_cast<int32_t>(dims.size());
  t.dims = dims.data();
  t.data = v.data();
  t.device_type = FLEET_DEVICE_TYPE_HOST;
  t.height = -1;
  return t;
}

FleetTensor Sparse(std::vector<float>& v, std::vector<int64_t>& dims, std::vector<int64_t>& rows,
                   int64_t height) {
  FleetTensor t = Dense(v, dims);
  t.rows = rows.data();
  t.height = height;
  return t;
}

// What reached the "server": each send as (name, rows, values).
struct Sent {
  std::string name;
  std::string endpoint;
  std::vector<int64_t> rows;
  int64_t height = -1;
  std::vector<float> values;
};

class Recorder {
 public:
  AsyncCommunicator::SendFn Send() {
    return [this](const std::string& name, const std::string& ep, const FleetTensor& t) {
      if (block_.load()) std::this_thread::sleep_for(milliseconds(1500));
      Sent s;
      s.name = name;
      s.endpoint = ep;
      int64_t n = 1;
      for (int32_t d = 0; d < t.ndim; ++d) n *= t.dims[d];
      const float* v = static_cast<const float*>(t.data);
      s.values.assign(v, v + n);
      if (t.height >= 0) {
        s.rows.assign(t.rows, t.rows + t.dims[0]);
        s.height = t.height;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (!fail_on_.empty() && name == fail_on_) {
        return Status(Unavailable("send '" + name + "' to " + ep + ": the server is gone"));
      }
      sent_.push_back(std::move(s));
      return OkStatus();
    };
  }
  AsyncCommunicator::GetFn Get() {
    return [this](const std::string& name, const std::string&, const FleetTensor& into) {
      std::lock_guard<std::mutex> lock(mu_);
      float* out = static_cast<float*>(into.data);
      int64_t n = 1;
      for (int32_t d = 0; d < into.ndim; ++d) n *= into.dims[d];
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(gets_ + 1);
      ++gets_;
      got_names_.push_back(name);
      return OkStatus();
    };
  }
  std::vector<Sent> sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  int gets() {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }
  void FailOn(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_on_ = name;
  }
  std::atomic<bool> block_{false};

 private:
  std::mutex mu_;
  std::vector<Sent> sent_;
  std::vector<std::string> got_names_;
  int gets_ = 0;
  std::string fail_on_;
};

AsyncCommunicatorOptions Options(int64_t merge, int64_t queue = 16) {
  AsyncCommunicatorOptions o;
  o.max_merge_var_num = merge;
  o.send_queue_size = queue;
  o.send_wait_times = 100;  // a second for max_merge copies: the test pushes them at once
  o.timeout = milliseconds(5000);
  return o;
}

// Three dense gradients pushed at once with max_merge_var_num = 3 go out as one send, their
// elementwise sum; two vars are sent separately, each to its own server.
TEST(AsyncCommunicatorTest, SumsUpToMaxMergeCopiesOfEachVarIntoOneSend) {
  Recorder r;
  AsyncCommunicator comm(Options(3), r.Send(), r.Get());
  std::vector<int64_t> dims = {2, 2};
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, c = {100, 200, 300, 400};
  std::vector<int64_t> bias_dims = {2};
  std::vector<float> bias = {0.5f, -0.5f};
  ASSERT_TRUE(comm.Push("w@GRAD", "ps0", Dense(a, dims)).ok());
  ASSERT_TRUE(comm.Push("w@GRAD", "ps0", Dense(b, dims)).ok());
  ASSERT_TRUE(comm.Push("b@GRAD", "ps1", Dense(bias, bias_dims)).ok());
  ASSERT_TRUE(comm.Push("w@GRAD", "ps0", Dense(c, dims)).ok());
  // The copies were taken: changing the pushed buffers changes nothing.
  a.assign(4, -1.0f);
  ASSERT_TRUE(comm.Flush().ok());
  const std::vector<Sent> sent = r.sent();
  std::map<std::string, std::vector<Sent>> by_name;
  for (const Sent& s : sent) by_name[s.name].push_back(s);
  ASSERT_EQ(by_name["w@GRAD"].size(), 1u);
  EXPECT_EQ(by_name["w@GRAD"][0].endpoint, "ps0");
  EXPECT_EQ(by_name["w@GRAD"][0].values, (std::vector<float>{111, 222, 333, 444}));
  EXPECT_EQ(by_name["w@GRAD"][0].height, -1);
  ASSERT_EQ(by_name["b@GRAD"].size(), 1u);
  EXPECT_EQ(by_name["b@GRAD"][0].endpoint, "ps1");
  EXPECT_EQ(by_name["b@GRAD"][0].values, (std::vector<float>{0.5f, -0.5f}));
  const AsyncCommunicator::Stats st = comm.stats();
  EXPECT_EQ(st.pushed, 4);
  EXPECT_EQ(st.sends, 2);
}

// thread_pool_size vars are sent at once: every var still gets its own sum, once.
TEST(AsyncCommunicatorTest, SendsSeveralVarsAtOnce) {
  Recorder r;
  AsyncCommunicatorOptions o = Options(3);
  o.thread_pool_size = 4;
  AsyncCommunicator comm(o, r.Send(), r.Get());
  std::vector<int64_t> dims = {2};
  for (int copy = 1; copy <= 3; ++copy) {
    for (int var = 0; var < 6; ++var) {
      std::vector<float> v = {static_cast<float>(var), static_cast<float>(copy)};
      ASSERT_TRUE(comm.Push("g" + std::to_string(var), "ps" + std::to_string(var % 2),
                            Dense(v, dims))
                      .ok());
    }
  }
  ASSERT_TRUE(comm.Flush().ok());
  std::map<std::string, std::vector<float>> got;
  for (const Sent& s : r.sent()) {
    EXPECT_EQ(got.count(s.name), 0u) << s.name << " sent twice";
    got[s.name] = s.values;
  }
  ASSERT_EQ(got.size(), 6u);
  for (int var = 0; var < 6; ++var) {
    EXPECT_EQ(got["g" + std::to_string(var)], (std::vector<float>{3.0f * var, 6.0f}));
  }
}

// Sparse gradients: the entries of all merged copies that share a row become one entry, rows
// ascending; the height goes along.
TEST(AsyncCommunicatorTest, MergesTheRowsOfSparseCopies) {
  Recorder r;
  AsyncCommunicator comm(Options(2), r.Send(), r.Get());
  std::vector<int64_t> dims1 = {3, 2}, rows1 = {7, 2, 7};
  std::vector<float> v1 = {1, 1, 2, 2, 3, 3};
  std::vector<int64_t> dims2 = {2, 2}, rows2 = {2, 5};
  std::vector<float> v2 = {10, 10, 20, 20};
  ASSERT_TRUE(comm.Push("emb@GRAD", "ps0", Sparse(v1, dims1, rows1, 9)).ok());
  ASSERT_TRUE(comm.Push("emb@GRAD", "ps0", Sparse(v2, dims2, rows2, 9)).ok());
  ASSERT_TRUE(comm.Flush().ok());
  const std::vector<Sent> sent = r.sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].height, 9);
  EXPECT_EQ(sent[0].rows, (std::vector<int64_t>{2, 5, 7}));
  EXPECT_EQ(sent[0].values, (std::vector<float>{12, 12, 20, 20, 4, 4}));
}

// With max_merge_var_num = 1 every push is a send of its own, in order.
TEST(AsyncCommunicatorTest, WithoutMergingEachGradientIsSentInOrder) {
  Recorder r;
  AsyncCommunicator comm(Options(1), r.Send(), r.Get());
  std::vector<int64_t> dims = {1};
  for (int i = 0; i < 5; ++i) {
    std::vector<float> v = {static_cast<float>(i)};
    ASSERT_TRUE(comm.Push("g", "ps0", Dense(v, dims)).ok());
  }
  ASSERT_TRUE(comm.Flush().ok());
  const std::vector<Sent> sent = r.sent();
  ASSERT_EQ(sent.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sent[i].values[0], static_cast<float>(i));
}

// A registered parameter is received after each round of sends; Take copies the newest value
// and says when none arrived yet.
TEST(AsyncCommunicatorTest, TakeCopiesTheNewestReception) {
  for (const bool independent : {false, true}) {
    SCOPED_TRACE(independent ? "independent_recv_thread" : "after each round");
    Recorder r;
    AsyncCommunicatorOptions o = Options(1);
    o.independent_recv_thread = independent;
    AsyncCommunicator comm(o, r.Send(), r.Get());
    std::vector<int64_t> dims = {3};
    comm.Register("w", "ps0", FLEET_DTYPE_FLOAT32, dims);
    std::vector<float> out = {0, 0, 0};
    uint64_t version = 0;
    auto taken = comm.Take("w", "ps0", Dense(out, dims), &version);
    ASSERT_TRUE(taken.ok());
    EXPECT_FALSE(*taken) << "nothing was received yet";
    std::vector<float> g = {1, 1, 1};
    ASSERT_TRUE(comm.Push("w@GRAD", "ps0", Dense(g, dims)).ok());
    for (int i = 0; i < 500 && r.gets() == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
    ASSERT_GE(r.gets(), 1);
    taken = comm.Take("w", "ps0", Dense(out, dims), &version);
    ASSERT_TRUE(taken.ok());
    EXPECT_TRUE(*taken);
    EXPECT_EQ(out, (std::vector<float>{1, 1, 1}));
    EXPECT_EQ(version, 1u);
    // No new reception: the output is written again all the same (it may be a var whose
    // memory other ops reuse between steps).
    out.assign(3, 42.0f);
    taken = comm.Take("w", "ps0", Dense(out, dims), &version);
    ASSERT_TRUE(taken.ok());
    EXPECT_EQ(out, (std::vector<float>{1, 1, 1}));
    EXPECT_EQ(version, 1u);
    EXPECT_FALSE(comm.Take("v", "ps0", Dense(out, dims), &version).ok()) << "never registered";
    ASSERT_TRUE(comm.Flush().ok());
  }
}

// A failed background send is returned by the next Push and by Flush, naming the var.
TEST(AsyncCommunicatorTest, AFailedSendIsReturnedByTheNextCalls) {
  Recorder r;
  r.FailOn("bad@GRAD");
  AsyncCommunicator comm(Options(1), r.Send(), r.Get());
  std::vector<int64_t> dims = {1};
  std::vector<float> v = {1};
  ASSERT_TRUE(comm.Push("bad@GRAD", "ps0", Dense(v, dims)).ok());
  Status later;
  for (int i = 0; i < 500 && later.ok(); ++i) {
    later = comm.Push("good@GRAD", "ps0", Dense(v, dims));
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(later.code(), Code::kUnavailable) << later.ToString();
  EXPECT_NE(later.ToString().find("bad@GRAD"), std::string::npos) << later.ToString();
  const Status flushed = comm.Flush();
  EXPECT_NE(flushed.ToString().find("the server is gone"), std::string::npos)
      << flushed.ToString();
}

// A queue of send_queue_size copies that the servers do not drain makes Push wait, and fail
// at the deadline naming the var, instead of growing.
TEST(AsyncCommunicatorTest, AFullQueueWaitsUntilTheDeadline) {
  Recorder r;
  r.block_ = true;  // every send takes 1.5 s
  AsyncCommunicatorOptions o = Options(1, 2);
  o.send_wait_times = 0;
  o.timeout = milliseconds(300);
  AsyncCommunicator comm(o, r.Send(), r.Get());
  std::vector<int64_t> dims = {1};
  std::vector<float> v = {1};
  Status s;
  int pushed = 0;
  for (; pushed < 20 && s.ok(); ++pushed) s = comm.Push("g", "ps0", Dense(v, dims));
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.ToString().find("'g' stayed full (2 gradients"), std::string::npos)
      << s.ToString();
  EXPECT_LT(pushed, 20);
  comm.Stop();
}

// Only float and int64 tensors are summed; others are refused by name.
TEST(AsyncCommunicatorTest, RefusesTypesItCannotSum) {
  Recorder r;
  AsyncCommunicator comm(Options(1), r.Send(), r.Get());
  std::vector<int64_t> dims = {1};
  std::vector<float> v = {1};
  FleetTensor t = Dense(v, dims);
  t.dtype = FLEET_DTYPE_INT32;
  const Status s = comm.Push("mask", "ps0", t);
  EXPECT_EQ(s.code(), Code::kUnimplemented);
  EXPECT_NE(s.ToString().find("'mask' is int32"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace fleet
