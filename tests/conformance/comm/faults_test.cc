// Faults: missing ranks, missing peers, abort from another thread, dead peers and bad
// arguments. Every wait here is bounded by a small timeout, and each test checks that the
// failure came in time, with the right code, naming what it waited for.
#include <gmock/gmock.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "comm_harness.h"

namespace fleet::conformance::comm {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class CommFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    if (Comm(&error) == nullptr) FAIL() << error;
  }
};

// Spins (briefly sleeping) until flag is set or a generous bound passes.
void AwaitFlag(const std::atomic<bool>& flag) {
  const auto start = Clock::now();
  while (!flag.load() && ElapsedMs(start) < 30000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_F(CommFaults, MissingRankFailsCreateNamingIt) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(3);  // the three ranks that do create
  const int64_t timeout = 1000;
  World world(4, timeout);
  const auto start = Clock::now();
  std::vector<Status> statuses = world.CreateOnly({0, 1, 2});
  const int64_t elapsed = ElapsedMs(start);
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_EQ(statuses[i].code(), Code::kDeadlineExceeded)
        << "rank " << i << ": " << statuses[i].ToString();
    EXPECT_THAT(statuses[i].message(), HasSubstr("3")) << "the missing rank must be named";
  }
  EXPECT_LT(elapsed, 2 * timeout + 500) << "create must give up near its deadline";
}

TEST_F(CommFaults, RecvWithoutSenderTimesOutNamingPeer) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(2);
  // The deadline bounds create too, and NCCL's init takes longer than half a second.
  const int64_t timeout = UsesHostMemory() ? 500 : 5000;
  World world(2, timeout);
  std::atomic<bool> done{false};
  world.Run([&](Rank& r) {
    if (r.rank == 1) {
      AwaitFlag(done);  // stays alive but never sends
      return;
    }
    Buf buf(FLEET_DTYPE_FLOAT32, 16);
    const auto start = Clock::now();
    Status s = r.Recv(buf.t(), 1);
    const int64_t elapsed = ElapsedMs(start);
    done = true;
    EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("1")) << "the peer must be named";
    EXPECT_GE(elapsed, timeout / 2);
    EXPECT_LT(elapsed, 2 * timeout + 500);
  });
}

TEST_F(CommFaults, AllReduceWithoutPeerTimesOut) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(2);
  // The deadline bounds create too, and NCCL's init takes longer than half a second.
  const int64_t timeout = UsesHostMemory() ? 500 : 5000;
  World world(2, timeout);
  std::atomic<bool> done{false};
  world.Run([&](Rank& r) {
    if (r.rank == 1) {
      AwaitFlag(done);  // never joins the collective
      return;
    }
    Buf buf(FLEET_DTYPE_FLOAT32, 1024);
    const auto start = Clock::now();
    Status s = r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM);
    const int64_t elapsed = ElapsedMs(start);
    done = true;
    EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
    EXPECT_LT(elapsed, 2 * timeout + 500);
    // The communicator is not usable after a failed collective, and says so.
    Status later = r.Barrier();
    EXPECT_FALSE(later.ok()) << "a barrier after a failed collective succeeded";
  });
}

// Rank 0 blocks in `call` (rank 1 never joins it) until a watchdog thread aborts rank 0's
// communicator; the call must return ABORTED long before the 20 s timeout, and so must every
// later call.
void CheckAbortReleases(const std::function<Status(const Rank&)>& call) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(2);  // skips the calling test: this is all it does
  World world(2, 20000);
  std::atomic<bool> done{false};
  world.Run([&](Rank& r) {
    if (r.rank == 1) {
      AwaitFlag(done);
      return;
    }
    std::thread watchdog([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto start = Clock::now();
      r.vt->abort(r.ctx, r.comm);
      EXPECT_LT(ElapsedMs(start), 100) << "abort must not block";
    });
    const auto start = Clock::now();
    Status s = call(r);
    const int64_t elapsed = ElapsedMs(start);
    watchdog.join();
    EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
    EXPECT_LT(elapsed, 3000) << "abort must release the blocked call promptly";
    Buf buf(FLEET_DTYPE_FLOAT32, 4);
    Status later = r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM);
    EXPECT_EQ(later.code(), Code::kAborted) << later.ToString();
    later = r.Barrier();
    EXPECT_EQ(later.code(), Code::kAborted) << later.ToString();
    done = true;
  });
}

TEST_F(CommFaults, AbortReleasesAllReduce) {
  CheckAbortReleases([](const Rank& r) {
    Buf buf(FLEET_DTYPE_FLOAT32, 1 << 16);
    return r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM);
  });
}

TEST_F(CommFaults, AbortReleasesBarrier) {
  CheckAbortReleases([](const Rank& r) { return r.Barrier(); });
}

TEST_F(CommFaults, AbortReleasesRecv) {
  CheckAbortReleases([](const Rank& r) {
    Buf buf(FLEET_DTYPE_INT64, 8);
    return r.Recv(buf.t(), 1);
  });
}

TEST_F(CommFaults, CallsAfterAbortReturnAborted) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(1);
  World world(1);
  world.Run([&](Rank& r) {
    r.vt->abort(r.ctx, r.comm);
    Buf buf(FLEET_DTYPE_FLOAT32, 4);
    EXPECT_EQ(r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM).code(), Code::kAborted);
    EXPECT_EQ(r.Broadcast(buf.t(), 0).code(), Code::kAborted);
    EXPECT_EQ(r.Barrier().code(), Code::kAborted);
  });
}

TEST_F(CommFaults, PeerThatAbortedFailsOthersPromptly) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(2);
  World world(2, 20000);
  std::atomic<bool> aborted{false};
  std::atomic<bool> done{false};
  world.Run([&](Rank& r) {
    if (r.rank == 0) {
      r.vt->abort(r.ctx, r.comm);
      aborted = true;
      AwaitFlag(done);
      return;
    }
    AwaitFlag(aborted);
    Buf buf(FLEET_DTYPE_FLOAT32, 1 << 16);
    const auto start = Clock::now();
    Status s = r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM);
    const int64_t elapsed = ElapsedMs(start);
    done = true;
    EXPECT_THAT(s.code(), ::testing::AnyOf(Code::kUnavailable, Code::kAborted)) << s.ToString();
    EXPECT_LT(elapsed, 5000) << "a dead peer must fail the call long before the timeout";
  });
}

TEST_F(CommFaults, BadArgumentsAreInvalidAndLeaveTheCommunicatorUsable) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(2);
  World world(2, 5000);
  world.Run([&](Rank& r) {
    auto expect_invalid = [&](const Status& s, const char* what) {
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << what << ": " << s.ToString();
    };
    Buf a(FLEET_DTYPE_FLOAT32, 8), b(FLEET_DTYPE_FLOAT32, 6), wide(FLEET_DTYPE_FLOAT32, 16);
    Buf other(FLEET_DTYPE_INT64, 8), flags(FLEET_DTYPE_BOOL, 8), odd(FLEET_DTYPE_FLOAT32, 7);
    expect_invalid(r.Broadcast(a.t(), 2), "broadcast root 2 of 2");
    expect_invalid(r.Broadcast(a.t(), -1), "broadcast root -1");
    expect_invalid(r.Reduce(a.t(), a.t(), FLEET_REDUCE_SUM, 5), "reduce root 5");
    expect_invalid(r.AllReduce(a.t(), b.t(), FLEET_REDUCE_SUM), "all_reduce 8 into 6");
    expect_invalid(r.AllReduce(a.t(), other.t(), FLEET_REDUCE_SUM), "all_reduce float into int");
    expect_invalid(r.AllReduce(a.t(), a.t(), 99), "all_reduce op 99");
    expect_invalid(r.AllGather(a.t(), a.t()), "all_gather out too small");
    expect_invalid(r.ReduceScatter(a.t(), a.t(), FLEET_REDUCE_SUM), "reduce_scatter in too small");
    expect_invalid(r.AllToAll(odd.t(), odd.t()), "all_to_all 7 over 2 ranks");
    expect_invalid(r.Send(a.t(), 7), "send to peer 7");
    expect_invalid(r.Recv(a.t(), -1), "recv from peer -1");
    expect_invalid(r.AllReduce(a.t(), nullptr, FLEET_REDUCE_SUM), "all_reduce NULL out");
    Status s = r.AllReduce(flags.t(), flags.t(), FLEET_REDUCE_SUM);
    expect_invalid(s, "all_reduce bool");
    EXPECT_THAT(s.message(), HasSubstr("bool")) << "fleet_comm.h: the dtype must be named";
    EXPECT_THAT(s.message(), HasSubstr("all_reduce")) << "fleet_comm.h: the call must be named";
    // Still usable afterwards.
    wide.Fill([&](int64_t i) { return r.rank + static_cast<double>(i); });
    s = r.AllReduce(wide.t(), wide.t(), FLEET_REDUCE_SUM);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (int64_t i = 0; i < wide.numel(); ++i) {
      if (!Near(wide.Get(i), 1 + 2.0 * i, FLEET_DTYPE_FLOAT32, "after bad calls")) break;
    }
  });
}

// A rank may destroy its communicator the moment create returns; that must not break a peer
// still finishing its own create.
TEST_F(CommFaults, DestroyRightAfterCreateLeavesPeersIntact) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(2);
  // A device communicator's create costs far more than a host one's (NCCL sets up a
  // communicator on every GPU), so fewer rounds keep the test within its time limit.
  const int rounds = UsesHostMemory() ? 40 : 6;
  const int odd_size = WorldFits(3, nullptr) ? 3 : 2;
  for (int round = 0; round < rounds; ++round) {
    World world(round % 2 == 0 ? 2 : odd_size, 5000);
    world.Run([](Rank&) {});
    if (HasFailure()) break;
  }
}

// The host passes these to every communicator (fleet_comm.h); refusing one makes a communicator
// that passes the rest of this suite fail under fleet-host run.
TEST_F(CommFaults, HostProvidedOptionsAreAccepted) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(1);
  for (const char* key : {FLEET_COMM_HOST_OPTIONS}) {
    World world(1, 2000);
    Status s = world.CreateWithOptions({{key, "127.0.0.1"}});
    EXPECT_TRUE(s.ok()) << "host-provided option '" << key
                        << "' (FLEET_COMM_HOST_OPTIONS) refused: " << s.ToString();
  }
}

TEST_F(CommFaults, UnknownOptionIsInvalidNamingTheKey) {
  FLEET_COMM_SKIP_UNLESS_WORLD_FITS(1);
  World world(1, 2000);
  Status s = world.CreateWithOptions({{"no_such_option_xyz", "1"}});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("no_such_option_xyz"));
}

}  // namespace
}  // namespace fleet::conformance::comm
