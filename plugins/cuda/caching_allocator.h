// A caching allocator over a slow backend (cudaMalloc/cudaFree for the CUDA device).
//
// cudaFree synchronises the whole device and cudaMalloc is slow, so a freed block is kept in a
// cache and handed to a later allocation of about its size instead of going back to the
// backend. Blocks are never split or merged: a block keeps the size it was allocated with.
//
// Sizes are rounded up to a size class (RoundSize): multiples of 512 bytes up to 1 MiB,
// multiples of 2 MiB above. An allocation takes the smallest cached block that is at least the
// rounded size, provided it wastes at most 1/8 of the rounded size (so a 4 MiB request may take
// a 4.5 MiB block but never an 8 MiB one); otherwise it asks the backend for a new block. When
// the backend fails and blocks are cached, the whole cache is returned to the backend and the
// allocation is tried once more.
//
// Contract with the caller:
//   - A freed block may be handed out again by the very next allocation, from any thread. So
//     memory is freed only when no queued work still uses it: the CUDA device's host
//     synchronises the stream that last used the memory before freeing it. The allocator knows
//     nothing about streams.
//   - Free takes only pointers this allocator returned and has not taken back; anything else is
//     refused (false) and changes nothing. Free(nullptr) is a no-op.
//   - Allocate(0) returns a unique pointer (a block of the smallest class).
//
// Threading: every member may be called from any thread; one mutex guards the allocator, and
// the backend is called with it held, so the backend sees one call at a time.
//
// Lifetime: the destructor returns every cached block to the backend. Blocks still in use are
// not freed (whoever holds them may still be using them) and stay allocated in the backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace fleet_cuda {

// Where the memory comes from. Implementations need not be thread-safe (the allocator calls
// them under its lock) and must not throw.
class AllocatorBackend {
 public:
  virtual ~AllocatorBackend() = default;
  // `bytes` bytes (a rounded size, never 0), or nullptr when they cannot be had.
  virtual void* Allocate(size_t bytes) = 0;
  // Returns a block Allocate gave, of that size. false when the backend reports an error; the
  // allocator forgets the block either way, because there is nothing else it could do with it.
  virtual bool Free(void* ptr, size_t bytes) = 0;
};

// A snapshot of the allocator's counters. Sizes are rounded block sizes, not requested sizes.
struct CachingAllocatorStats {
  uint64_t in_use_bytes = 0;        // handed out and not yet freed
  uint64_t cached_bytes = 0;        // freed, kept for reuse
  uint64_t peak_in_use_bytes = 0;   // highest in_use_bytes so far
  uint64_t in_use_blocks = 0;
  uint64_t cached_blocks = 0;
  uint64_t cache_hits = 0;          // allocations served from the cache
  uint64_t backend_allocs = 0;      // successful backend Allocate calls
  uint64_t backend_frees = 0;       // backend Free calls (failed ones included)
  uint64_t backend_alloc_failures = 0;
  uint64_t backend_free_failures = 0;
};

class CachingAllocator {
 public:
  static constexpr size_t kSmallGranule = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;  // sizes up to this use kSmallGranule
  static constexpr size_t kLargeGranule = size_t{2} << 20;

  // The size class of a request of `bytes` bytes: 0 becomes kSmallGranule; 0 is returned only
  // when rounding would overflow size_t (no such block can exist).
  static size_t RoundSize(size_t bytes);

  explicit CachingAllocator(std::unique_ptr<AllocatorBackend> backend);
  ~CachingAllocator();

  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` bytes, or nullptr when the backend cannot provide one even
  // after the cache was emptied (or the size cannot be rounded).
  void* Allocate(size_t bytes);

  // Takes back `ptr` into the cache. false (and no change) for a pointer that is not in use.
  bool Free(void* ptr);

  // Returns every cached block to the backend; the bytes released.
  size_t ReleaseCached();

  CachingAllocatorStats Stats() const;

 private:
  size_t ReleaseCachedLocked();

  const std::unique_ptr<AllocatorBackend> backend_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> cached_;         // block size -> block, for best fit
  std::unordered_map<void*, size_t> in_use_;    // block -> its size
  CachingAllocatorStats stats_;
};

}  // namespace fleet_cuda
