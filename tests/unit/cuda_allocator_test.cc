// The CUDA device's caching allocator, over a fake backend: plain C++, so it runs without a GPU.
#include "caching_allocator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace fleet_cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// What the fake backend saw. Shared with the test, so it outlives the allocator that owns the
// backend and the destructor's effect can be checked.
struct BackendLog {
  std::atomic<size_t> allocs{0};    // successful Allocate calls
  std::atomic<size_t> failures{0};  // Allocate calls refused
  std::atomic<size_t> frees{0};
  std::atomic<size_t> live_bytes{0};
  std::atomic<size_t> live_blocks{0};
  std::atomic<size_t> last_size{0};
  // Allocate fails when live_bytes would exceed this.
  std::atomic<size_t> capacity{SIZE_MAX};
  // Allocate fails this many more times regardless of capacity.
  std::atomic<int> fail_next{0};
  std::atomic<bool> concurrent_call{false};  // two backend calls overlapped (must not happen)
  std::atomic<int> in_call{0};
};

class FakeBackend final : public AllocatorBackend {
 public:
  explicit FakeBackend(std::shared_ptr<BackendLog> log) : log_(std::move(log)) {}

  void* Allocate(size_t bytes) override {
    Enter();
    void* ptr = nullptr;
    log_->last_size = bytes;
    if (log_->fail_next > 0) {
      --log_->fail_next;
    } else if (log_->live_bytes + bytes <= log_->capacity) {
      ptr = std::malloc(bytes);
    }
    if (ptr == nullptr) {
      ++log_->failures;
    } else {
      ++log_->allocs;
      log_->live_bytes += bytes;
      ++log_->live_blocks;
    }
    Leave();
    return ptr;
  }

  bool Free(void* ptr, size_t bytes) override {
    Enter();
    std::free(ptr);
    ++log_->frees;
    log_->live_bytes -= bytes;
    --log_->live_blocks;
    Leave();
    return true;
  }

 private:
  void Enter() {
    if (log_->in_call.fetch_add(1) != 0) log_->concurrent_call = true;
  }
  void Leave() { log_->in_call.fetch_sub(1); }

  std::shared_ptr<BackendLog> log_;
};

struct Fixture {
  std::shared_ptr<BackendLog> log = std::make_shared<BackendLog>();
  std::unique_ptr<CachingAllocator> allocator =
      std::make_unique<CachingAllocator>(std::make_unique<FakeBackend>(log));
};

TEST(CudaCachingAllocator, RoundsSizesToClasses) {
  EXPECT_EQ(CachingAllocator::RoundSize(0), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(kMiB - 1), kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(kMiB), kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(kMiB + 1), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(3 * kMiB), 4 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(SIZE_MAX), 0u);  // overflow: no such block

  Fixture f;
  void* p = f.allocator->Allocate(700);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(f.log->last_size, 1024u);  // the backend is asked for the rounded size
  void* q = f.allocator->Allocate(5 * kMiB);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(f.log->last_size, 6 * kMiB);
  EXPECT_EQ(f.allocator->Stats().in_use_bytes, 1024u + 6 * kMiB);
  EXPECT_TRUE(f.allocator->Free(p));
  EXPECT_TRUE(f.allocator->Free(q));
  EXPECT_EQ(f.allocator->Allocate(SIZE_MAX), nullptr);
  EXPECT_EQ(f.log->allocs + f.log->failures, 2u);  // an unroundable size never reaches it
}

TEST(CudaCachingAllocator, ReusesFreedBlockWithoutBackendCall) {
  Fixture f;
  void* p = f.allocator->Allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(f.allocator->Free(p));
  EXPECT_EQ(f.log->frees, 0u);  // cached, not returned

  void* q = f.allocator->Allocate(900);  // same class (1024)
  EXPECT_EQ(q, p);
  EXPECT_EQ(f.log->allocs, 1u);
  EXPECT_EQ(f.allocator->Stats().cache_hits, 1u);
  EXPECT_TRUE(f.allocator->Free(q));
}

TEST(CudaCachingAllocator, TakesSmallestFittingBlock) {
  Fixture f;
  void* big = f.allocator->Allocate(4608);
  void* exact = f.allocator->Allocate(4096);
  ASSERT_NE(big, nullptr);
  ASSERT_NE(exact, nullptr);
  EXPECT_TRUE(f.allocator->Free(big));
  EXPECT_TRUE(f.allocator->Free(exact));

  EXPECT_EQ(f.allocator->Allocate(4000), exact);  // 4096 fits best
  // 4608 exceeds 4096 by 512, within 1/8 of 4096: reused rather than a new block.
  EXPECT_EQ(f.allocator->Allocate(4096), big);
  EXPECT_EQ(f.log->allocs, 2u);
  EXPECT_EQ(f.allocator->Stats().in_use_bytes, 4096u + 4608u);
  EXPECT_TRUE(f.allocator->Free(big));
  EXPECT_TRUE(f.allocator->Free(exact));
}

TEST(CudaCachingAllocator, DoesNotReuseMuchLargerBlock) {
  Fixture f;
  void* big = f.allocator->Allocate(8 * kMiB);
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(f.allocator->Free(big));

  void* small = f.allocator->Allocate(kMiB);
  ASSERT_NE(small, nullptr);
  EXPECT_NE(small, big);
  EXPECT_EQ(f.log->allocs, 2u);
  EXPECT_EQ(f.log->last_size, kMiB);
  // Twice the size is far more than 1/8 waste, for small sizes too.
  void* kib = f.allocator->Allocate(1024);
  ASSERT_NE(kib, nullptr);
  EXPECT_TRUE(f.allocator->Free(kib));
  void* half = f.allocator->Allocate(512);
  ASSERT_NE(half, nullptr);
  EXPECT_NE(half, kib);
  EXPECT_EQ(f.log->allocs, 4u);
  EXPECT_EQ(f.allocator->Stats().cached_blocks, 2u);  // the 8 MiB and the 1 KiB block
  EXPECT_TRUE(f.allocator->Free(small));
  EXPECT_TRUE(f.allocator->Free(half));
}

TEST(CudaCachingAllocator, OutOfMemoryReleasesCacheAndRetries) {
  Fixture f;
  f.log->capacity = 4096;
  void* a = f.allocator->Allocate(2048);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(f.allocator->Free(a));
  EXPECT_EQ(f.allocator->Stats().cached_bytes, 2048u);

  // 2048 cached + 3072 new exceeds the capacity: the first try fails, the cache goes back,
  // the second try succeeds.
  void* b = f.allocator->Allocate(3000);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(f.log->failures, 1u);
  EXPECT_EQ(f.log->frees, 1u);
  EXPECT_EQ(f.log->allocs, 2u);
  const CachingAllocatorStats s = f.allocator->Stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.in_use_bytes, 3072u);
  EXPECT_EQ(s.backend_alloc_failures, 1u);
  EXPECT_TRUE(f.allocator->Free(b));
}

TEST(CudaCachingAllocator, OutOfMemoryWithNothingCachedFails) {
  Fixture f;
  f.log->capacity = 1024;
  EXPECT_EQ(f.allocator->Allocate(2048), nullptr);
  EXPECT_EQ(f.log->failures, 1u);  // nothing to release, so no second try
  const CachingAllocatorStats s = f.allocator->Stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.in_use_blocks, 0u);
  EXPECT_EQ(s.backend_allocs, 0u);
  EXPECT_EQ(s.backend_alloc_failures, 1u);

  // Failing even after releasing the cache.
  void* a = f.allocator->Allocate(512);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(f.allocator->Free(a));
  f.log->fail_next = 2;
  EXPECT_EQ(f.allocator->Allocate(1024), nullptr);
  EXPECT_EQ(f.log->failures, 3u);
  EXPECT_EQ(f.allocator->Stats().cached_bytes, 0u);
  EXPECT_EQ(f.log->live_bytes, 0u);
}

TEST(CudaCachingAllocator, KeepsStatistics) {
  Fixture f;
  void* a = f.allocator->Allocate(100);        // 512
  void* b = f.allocator->Allocate(kMiB + 1);   // 2 MiB
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CachingAllocatorStats s = f.allocator->Stats();
  EXPECT_EQ(s.in_use_bytes, 512u + 2 * kMiB);
  EXPECT_EQ(s.in_use_blocks, 2u);
  EXPECT_EQ(s.peak_in_use_bytes, 512u + 2 * kMiB);
  EXPECT_EQ(s.backend_allocs, 2u);

  EXPECT_TRUE(f.allocator->Free(b));
  s = f.allocator->Stats();
  EXPECT_EQ(s.in_use_bytes, 512u);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB);
  EXPECT_EQ(s.cached_blocks, 1u);
  EXPECT_EQ(s.peak_in_use_bytes, 512u + 2 * kMiB);  // the peak stays

  EXPECT_EQ(f.allocator->ReleaseCached(), 2 * kMiB);
  s = f.allocator->Stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.cached_blocks, 0u);
  EXPECT_EQ(s.backend_frees, 1u);
  EXPECT_EQ(f.log->frees, 1u);
  EXPECT_EQ(f.allocator->ReleaseCached(), 0u);

  EXPECT_TRUE(f.allocator->Free(a));
  EXPECT_EQ(f.allocator->Stats().in_use_bytes, 0u);
}

TEST(CudaCachingAllocator, RefusesUnknownPointers) {
  Fixture f;
  EXPECT_TRUE(f.allocator->Free(nullptr));  // a no-op
  int on_stack = 0;
  EXPECT_FALSE(f.allocator->Free(&on_stack));

  void* p = f.allocator->Allocate(64);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(f.allocator->Free(static_cast<char*>(p) + 8));  // inside a block is not a block
  EXPECT_TRUE(f.allocator->Free(p));
  EXPECT_FALSE(f.allocator->Free(p));  // twice
  const CachingAllocatorStats s = f.allocator->Stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 512u);
  EXPECT_EQ(s.cached_blocks, 1u);
}

TEST(CudaCachingAllocator, ZeroBytesGiveUniquePointers) {
  Fixture f;
  void* a = f.allocator->Allocate(0);
  void* b = f.allocator->Allocate(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(f.allocator->Stats().in_use_bytes, 1024u);
  EXPECT_TRUE(f.allocator->Free(a));
  EXPECT_TRUE(f.allocator->Free(b));
}

TEST(CudaCachingAllocator, DestructorReturnsCachedBlocks) {
  Fixture f;
  void* a = f.allocator->Allocate(1000);
  void* b = f.allocator->Allocate(3 * kMiB);
  void* kept = f.allocator->Allocate(2000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(kept, nullptr);
  EXPECT_TRUE(f.allocator->Free(a));
  EXPECT_TRUE(f.allocator->Free(b));
  f.allocator.reset();
  EXPECT_EQ(f.log->frees, 2u);
  // A block still in use is left alone: its owner may still be using it.
  EXPECT_EQ(f.log->live_blocks, 1u);
  EXPECT_EQ(f.log->live_bytes, 2048u);
  std::free(kept);
}

TEST(CudaCachingAllocator, ConcurrentAllocAndFreeKeepStatsConsistent) {
  Fixture f;
  constexpr int kThreads = 4;
  constexpr int kIterations = 3000;
  constexpr size_t kSizes[] = {0, 100, 512, 4000, 70000, kMiB, kMiB + 5, 3 * kMiB};
  std::atomic<bool> corrupted{false};

  auto worker = [&](int id) {
    uint32_t rng = 12345u + static_cast<uint32_t>(id) * 7919u;
    auto next = [&rng] {
      rng = rng * 1664525u + 1013904223u;
      return rng >> 8;
    };
    struct Live {
      unsigned char* ptr;
      size_t size;
      unsigned char tag;
    };
    std::vector<Live> live;
    for (int i = 0; i < kIterations; ++i) {
      if (live.size() < 8 && (live.empty() || next() % 2 == 0)) {
        const size_t size = kSizes[next() % (sizeof kSizes / sizeof kSizes[0])];
        auto* p = static_cast<unsigned char*>(f.allocator->Allocate(size));
        if (p == nullptr) {
          corrupted = true;
          return;
        }
        const auto tag = static_cast<unsigned char>(id * 64 + i % 64);
        // Touch the first and last byte of the rounded block: another thread writing into it
        // at the same time would show up as a changed tag.
        const size_t block = CachingAllocator::RoundSize(size);
        p[0] = tag;
        p[block - 1] = tag;
        live.push_back({p, block, tag});
      } else {
        const size_t k = next() % live.size();
        const Live l = live[k];
        if (l.ptr[0] != l.tag || l.ptr[l.size - 1] != l.tag) corrupted = true;
        if (!f.allocator->Free(l.ptr)) corrupted = true;
        live[k] = live.back();
        live.pop_back();
      }
    }
    for (const Live& l : live) {
      if (l.ptr[0] != l.tag || l.ptr[l.size - 1] != l.tag) corrupted = true;
      if (!f.allocator->Free(l.ptr)) corrupted = true;
    }
  };

  std::atomic<bool> done{false};
  std::atomic<bool> stats_bad{false};
  // Snapshots taken while the workers run must add up.
  std::thread reader([&] {
    while (!done) {
      const CachingAllocatorStats s = f.allocator->Stats();
      if (s.backend_allocs - s.backend_frees != s.in_use_blocks + s.cached_blocks) {
        stats_bad = true;
      }
      if (s.in_use_bytes > s.peak_in_use_bytes) stats_bad = true;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& t : threads) t.join();
  done = true;
  reader.join();

  EXPECT_FALSE(corrupted);
  EXPECT_FALSE(stats_bad);
  EXPECT_FALSE(f.log->concurrent_call);
  const CachingAllocatorStats s = f.allocator->Stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.in_use_blocks, 0u);
  EXPECT_EQ(s.cached_bytes, f.log->live_bytes.load());
  EXPECT_EQ(s.cached_blocks, f.log->live_blocks.load());
  EXPECT_EQ(s.backend_allocs, f.log->allocs.load());
  EXPECT_EQ(s.backend_allocs - s.backend_frees, s.cached_blocks);
  EXPECT_GT(s.cache_hits, 0u);
  EXPECT_LE(s.peak_in_use_bytes, size_t{kThreads} * 8 * 4 * kMiB);

  f.allocator->ReleaseCached();
  EXPECT_EQ(f.log->live_bytes, 0u);
  EXPECT_EQ(f.log->live_blocks, 0u);
}

}  // namespace
}  // namespace fleet_cuda
