// Closed-form checks of every collective: rank r contributes x_r[i] = f(op, r, i), small
// integers exact in every dtype, and the expected result is folded here in double precision.
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "comm_harness.h"

namespace fleet::conformance::comm {
namespace {

const int32_t kOps[] = {FLEET_REDUCE_SUM, FLEET_REDUCE_PROD, FLEET_REDUCE_MAX, FLEET_REDUCE_MIN,
                        FLEET_REDUCE_AVG};
const int64_t kSizes[] = {0, 1, 1023};

std::string OpName(int32_t op) {
  const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return (op >= 0 && op < 5) ? names[op] : "op " + std::to_string(op);
}

// What rank r contributes at element i for op (bounded so products and sums stay exact in
// bfloat16's 8-bit significand).
double Contribution(int32_t op, int r, int64_t i) {
  switch (op) {
    case FLEET_REDUCE_SUM: return (r + 1) + static_cast<double>(i % 7);
    case FLEET_REDUCE_PROD: return static_cast<double>((r + i) % 3) + 1;
    case FLEET_REDUCE_MAX:
    case FLEET_REDUCE_MIN: return static_cast<double>((r * 3 + i) % 5) - 2;
    default: return r + static_cast<double>(i % 3);  // avg: non-negative, odd sums
  }
}

// The reduction over ranks 0..size-1 of Contribution, in double (integers: avg truncates).
double Expected(int32_t op, int size, int64_t i, int32_t dtype) {
  double acc = Contribution(op, 0, i);
  for (int r = 1; r < size; ++r) {
    const double x = Contribution(op, r, i);
    switch (op) {
      case FLEET_REDUCE_PROD: acc *= x; break;
      case FLEET_REDUCE_MAX: acc = std::max(acc, x); break;
      case FLEET_REDUCE_MIN: acc = std::min(acc, x); break;
      default: acc += x; break;
    }
  }
  if (op == FLEET_REDUCE_AVG) {
    acc /= size;
    if (IsInteger(dtype)) acc = std::trunc(acc);
  }
  return acc;
}

// Payload values for the data-movement collectives: distinct per (rank, block, element) and
// exact in bfloat16 (< 256).
double Payload(int rank, int block, int64_t i) {
  return rank * 50 + block * 10 + static_cast<double>(i % 10);
}

std::string Where(const Rank& r, int32_t dtype, int64_t n, const std::string& what) {
  return what + " " + DtypeName(dtype) + " n=" + std::to_string(n) + " rank " +
         std::to_string(r.rank) + " of " + std::to_string(r.size);
}

class CommCollectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    std::string error;
    if (Comm(&error) == nullptr) FAIL() << error;
    FLEET_COMM_SKIP_UNLESS_WORLD_FITS(GetParam());
  }
};

TEST_P(CommCollectives, AllReduceEveryOpDtypeSizeAndInPlace) {
  World world(GetParam());
  world.Run([&](Rank& r) {
    for (int32_t dtype : ReducibleDtypes()) {
      for (int32_t op : kOps) {
        for (int64_t n : kSizes) {
          for (bool in_place : {false, true}) {
            const std::string where =
                Where(r, dtype, n, "all_reduce " + OpName(op) + (in_place ? " in place" : ""));
            Buf in(dtype, n), out(dtype, n);
            in.Fill([&](int64_t i) { return Contribution(op, r.rank, i); });
            out.Fill([](int64_t) { return -7; });
            Status s = in_place ? r.AllReduce(in.t(), in.t(), op)
                                : r.AllReduce(in.t(), out.t(), op);
            ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
            Buf& result = in_place ? in : out;
            for (int64_t i = 0; i < n; ++i) {
              if (!Near(result.Get(i), Expected(op, r.size, i, dtype), dtype,
                        where + " element " + std::to_string(i))) {
                break;
              }
            }
            if (!in_place) {
              for (int64_t i = 0; i < n; ++i) {
                if (!Near(in.Get(i), Contribution(op, r.rank, i), dtype, where + " input kept")) {
                  break;
                }
              }
            }
          }
        }
      }
    }
  });
}

TEST_P(CommCollectives, AllReduceLargeFloat32) {
  const int64_t n = int64_t{1} << 20;
  World world(GetParam());
  world.Run([&](Rank& r) {
    Buf buf(FLEET_DTYPE_FLOAT32, n);
    buf.Fill([&](int64_t i) { return (r.rank + 1) * 0.5 + static_cast<double>(i % 1000); });
    Status s = r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const double ranks = r.size * (r.size + 1) * 0.25;
    for (int64_t i = 0; i < n; ++i) {
      if (!Near(buf.Get(i), ranks + r.size * static_cast<double>(i % 1000), FLEET_DTYPE_FLOAT32,
                "element " + std::to_string(i))) {
        break;
      }
    }
  });
}

TEST_P(CommCollectives, BroadcastFromEveryRoot) {
  World world(GetParam());
  world.Run([&](Rank& r) {
    for (int root = 0; root < r.size; ++root) {
      for (int32_t dtype : ReducibleDtypes()) {
        for (int64_t n : kSizes) {
          const std::string where = Where(r, dtype, n, "broadcast from " + std::to_string(root));
          Buf buf(dtype, n);
          buf.Fill([&](int64_t i) { return r.rank == root ? Payload(root, 0, i) : -1.0; });
          Status s = r.Broadcast(buf.t(), root);
          ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
          for (int64_t i = 0; i < n; ++i) {
            if (!Near(buf.Get(i), Payload(root, 0, i), dtype, where)) break;
          }
        }
      }
    }
  });
}

TEST_P(CommCollectives, AllGatherLayoutAndInPlace) {
  World world(GetParam());
  world.Run([&](Rank& r) {
    for (int32_t dtype : ReducibleDtypes()) {
      for (int64_t n : kSizes) {
        for (bool in_place : {false, true}) {
          const std::string where =
              Where(r, dtype, n, in_place ? "all_gather in place" : "all_gather");
          Buf in(dtype, n), out(dtype, n * r.size);
          in.Fill([&](int64_t i) { return Payload(r.rank, 0, i); });
          out.Fill([](int64_t) { return -1.0; });
          Status s;
          if (in_place) {
            for (int64_t i = 0; i < n; ++i) out.Set(r.rank * n + i, Payload(r.rank, 0, i));
            s = r.AllGather(out.Slice(r.rank * n, n), out.t());
          } else {
            s = r.AllGather(in.t(), out.t());
          }
          ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
          for (int src = 0; src < r.size; ++src) {
            for (int64_t i = 0; i < n; ++i) {
              if (!Near(out.Get(src * n + i), Payload(src, 0, i), dtype,
                        where + " block " + std::to_string(src))) {
                break;
              }
            }
          }
        }
      }
    }
  });
}

TEST_P(CommCollectives, ReduceScatterBlocks) {
  World world(GetParam());
  world.Run([&](Rank& r) {
    for (int32_t dtype : ReducibleDtypes()) {
      for (int32_t op : kOps) {
        for (int64_t n : kSizes) {
          for (bool in_place : {false, true}) {
            const std::string where = Where(
                r, dtype, n, "reduce_scatter " + OpName(op) + (in_place ? " in place" : ""));
            Buf in(dtype, n * r.size), out(dtype, n);
            in.Fill([&](int64_t j) { return Contribution(op, r.rank, j); });
            // In place: out is this rank's block of in.
            Status s = r.ReduceScatter(in.t(), in_place ? in.Slice(r.rank * n, n) : out.t(), op);
            ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
            for (int64_t i = 0; i < n; ++i) {
              const double got = in_place ? in.Get(r.rank * n + i) : out.Get(i);
              if (!Near(got, Expected(op, r.size, r.rank * n + i, dtype), dtype, where)) break;
            }
          }
        }
      }
    }
  });
}

TEST_P(CommCollectives, ReduceToEveryRoot) {
  World world(GetParam());
  world.Run([&](Rank& r) {
    for (int root = 0; root < r.size; ++root) {
      for (int32_t dtype : ReducibleDtypes()) {
        for (int32_t op : kOps) {
          for (int64_t n : kSizes) {
            const std::string where =
                Where(r, dtype, n, "reduce " + OpName(op) + " to " + std::to_string(root));
            Buf in(dtype, n), out(dtype, n);
            in.Fill([&](int64_t i) { return Contribution(op, r.rank, i); });
            out.Fill([](int64_t) { return -9.0; });
            // Non-roots alternate between passing NULL and a buffer that must stay untouched.
            const bool pass_out = r.rank == root || (root % 2 == 0);
            Status s = r.Reduce(in.t(), pass_out ? out.t() : nullptr, op, root);
            ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
            for (int64_t i = 0; i < n; ++i) {
              const double want = r.rank == root ? Expected(op, r.size, i, dtype) : -9.0;
              if (!Near(out.Get(i), want, dtype,
                        where + (r.rank == root ? "" : " (non-root out)"))) {
                break;
              }
              if (!Near(in.Get(i), Contribution(op, r.rank, i), dtype, where + " input kept")) {
                break;
              }
            }
          }
        }
      }
    }
  });
}

TEST_P(CommCollectives, ReduceInPlaceAtRoot) {
  World world(GetParam());
  world.Run([&](Rank& r) {
    for (int root = 0; root < r.size; ++root) {
      const int64_t n = 1023;
      Buf buf(FLEET_DTYPE_FLOAT32, n);
      buf.Fill([&](int64_t i) { return Contribution(FLEET_REDUCE_SUM, r.rank, i); });
      Status s = r.Reduce(buf.t(), r.rank == root ? buf.t() : nullptr, FLEET_REDUCE_SUM, root);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const std::string where =
          Where(r, FLEET_DTYPE_FLOAT32, n, "reduce in place to " + std::to_string(root));
      for (int64_t i = 0; i < n; ++i) {
        // Non-roots keep their input: only root's out is written.
        const double want = r.rank == root
                                ? Expected(FLEET_REDUCE_SUM, r.size, i, FLEET_DTYPE_FLOAT32)
                                : Contribution(FLEET_REDUCE_SUM, r.rank, i);
        if (!Near(buf.Get(i), want, FLEET_DTYPE_FLOAT32, where)) break;
      }
    }
  });
}

TEST_P(CommCollectives, AllToAllBlockPermutation) {
  World world(GetParam());
  world.Run([&](Rank& r) {
    for (int32_t dtype : ReducibleDtypes()) {
      for (int64_t n : kSizes) {
        for (bool in_place : {false, true}) {
          const std::string where =
              Where(r, dtype, n, in_place ? "all_to_all in place" : "all_to_all");
          Buf in(dtype, n * r.size), out(dtype, n * r.size);
          // Block j of rank i holds Payload(i, j, .); it must land in block i of rank j.
          const int64_t block = std::max<int64_t>(n, 1);
          in.Fill([&](int64_t k) {
            return Payload(r.rank, static_cast<int>(k / block), k % block);
          });
          Status s = in_place ? r.AllToAll(in.t(), in.t()) : r.AllToAll(in.t(), out.t());
          ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
          Buf& result = in_place ? in : out;
          for (int src = 0; src < r.size; ++src) {
            for (int64_t i = 0; i < n; ++i) {
              if (!Near(result.Get(src * n + i), Payload(src, r.rank, i), dtype,
                        where + " block " + std::to_string(src))) {
                break;
              }
            }
          }
        }
      }
    }
  });
}

TEST_P(CommCollectives, SendRecvRingInOrder) {
  if (GetParam() < 2) GTEST_SKIP() << "send/recv needs two ranks";
  World world(GetParam());
  world.Run([&](Rank& r) {
    const int next = (r.rank + 1) % r.size;
    const int prev = (r.rank + r.size - 1) % r.size;
    for (int32_t dtype : {FLEET_DTYPE_FLOAT32, FLEET_DTYPE_INT64}) {
      for (int64_t n : {int64_t{1}, int64_t{1023}}) {
        const std::string where = Where(r, dtype, n, "send/recv ring");
        Buf out0(dtype, n), out1(dtype, n), in0(dtype, n), in1(dtype, n);
        out0.Fill([&](int64_t i) { return Payload(r.rank, 0, i); });
        out1.Fill([&](int64_t i) { return Payload(r.rank, 1, i); });
        // Even ranks send first, odd ranks receive first, so a rendezvous send cannot deadlock;
        // two messages back to back must arrive in order.
        auto send = [&] {
          ASSERT_TRUE(r.Send(out0.t(), next).ok()) << where;
          ASSERT_TRUE(r.Send(out1.t(), next).ok()) << where;
        };
        auto recv = [&] {
          Status a = r.Recv(in0.t(), prev);
          ASSERT_TRUE(a.ok()) << where << ": " << a.ToString();
          Status b = r.Recv(in1.t(), prev);
          ASSERT_TRUE(b.ok()) << where << ": " << b.ToString();
        };
        if (r.rank % 2 == 0) {
          send();
          recv();
        } else {
          recv();
          send();
        }
        for (int64_t i = 0; i < n; ++i) {
          if (!Near(in0.Get(i), Payload(prev, 0, i), dtype, where + " first message") ||
              !Near(in1.Get(i), Payload(prev, 1, i), dtype, where + " second message")) {
            break;
          }
        }
      }
    }
  });
}

TEST_P(CommCollectives, BarrierSeparatesRounds) {
  World world(GetParam());
  std::atomic<int> arrived[3] = {0, 0, 0};
  world.Run([&](Rank& r) {
    for (int round = 0; round < 3; ++round) {
      arrived[round]++;
      Status s = r.Barrier();
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(arrived[round].load(), r.size) << "round " << round << " rank " << r.rank;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSize, CommCollectives, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

}  // namespace
}  // namespace fleet::conformance::comm
