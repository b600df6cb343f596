// all_reduce bus bandwidth (busbw = 2(n-1)/n * bytes / time, the nccl-tests convention) from
// 1 MiB to 64 MiB, ranks as threads on this machine. Skipped unless FLEET_CONFORMANCE_COMM_BENCH
// is set, since timings belong in a benchmark run, not in every test run; a communicator's
// options (FLEET_CONFORMANCE_COMM_OPTIONS, e.g. "hostname=127.0.0.1;algorithm=bcube") select
// what is compared.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm_harness.h"
#include "report/expect_ok.h"

namespace fleet::conformance::comm {
namespace {

TEST(CommBench, AllReduceBusBandwidth) {
  if (std::getenv("FLEET_CONFORMANCE_COMM_BENCH") == nullptr) {
    GTEST_SKIP() << "set FLEET_CONFORMANCE_COMM_BENCH=1 to measure";
  }
  for (int size : {2, 4}) {
    std::string why;
    if (!WorldFits(size, &why)) {
      std::printf("all_reduce world=%d skipped: %s\n", size, why.c_str());
      continue;
    }
    World world(size, 120000);
    world.Run([&](Rank& r) {
      for (int64_t bytes : {int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20,
                            int64_t{64} << 20}) {
        const int64_t n = bytes / 4;
        Buf buf(FLEET_DTYPE_FLOAT32, n);
        buf.Fill([&](int64_t i) { return static_cast<double>((i + r.rank) % 8); });
        ASSERT_TRUE(r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM).ok());  // warm-up
        const int iters = static_cast<int>(std::max<int64_t>(3, (int64_t{256} << 20) / bytes));
        FLEET_ASSERT_OK(r.Barrier());
        const auto start = std::chrono::steady_clock::now();
        for (int k = 0; k < iters; ++k) {
          FLEET_ASSERT_OK(r.AllReduce(buf.t(), buf.t(), FLEET_REDUCE_SUM));
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
            iters;
        if (r.rank == 0) {
          const double busbw = 2.0 * (size - 1) / size * static_cast<double>(bytes) / seconds;
          std::printf("all_reduce world=%d bytes=%lld time=%.3f ms busbw=%.2f GB/s\n", size,
                      static_cast<long long>(bytes), seconds * 1e3, busbw / 1e9);
        }
      }
    });
  }
}

}  // namespace
}  // namespace fleet::conformance::comm
