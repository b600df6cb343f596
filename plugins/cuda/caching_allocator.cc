#include "caching_allocator.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace fleet_cuda {
namespace {

// A cached block is reused only when it exceeds the request by at most 1/kWasteDivisor of the
// request: enough slack for sizes that drift a little between steps, without letting a small
// tensor pin a large block that a large tensor will need next.
constexpr size_t kWasteDivisor = 8;

// `bytes` rounded up to a multiple of `granule`; 0 when that overflows.
size_t RoundUp(size_t bytes, size_t granule) {
  const size_t remainder = bytes % granule;
  if (remainder == 0) return bytes;
  const size_t pad = granule - remainder;
  if (bytes > std::numeric_limits<size_t>::max() - pad) return 0;
  return bytes + pad;
}

}  // namespace

size_t CachingAllocator::RoundSize(size_t bytes) {
  if (bytes == 0) return kSmallGranule;
  if (bytes <= kSmallLimit) return RoundUp(bytes, kSmallGranule);
  return RoundUp(bytes, kLargeGranule);
}

CachingAllocator::CachingAllocator(std::unique_ptr<AllocatorBackend> backend)
    : backend_(std::move(backend)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCachedLocked();
}

void* CachingAllocator::Allocate(size_t bytes) {
  const size_t size = RoundSize(bytes);
  if (size == 0) return nullptr;

  std::lock_guard<std::mutex> lock(mu_);
  // Best fit: the smallest cached block of at least `size` bytes, if it is not too big.
  auto it = cached_.lower_bound(size);
  if (it != cached_.end() && it->first - size <= size / kWasteDivisor) {
    const size_t block_size = it->first;
    void* ptr = it->second;
    cached_.erase(it);
    // Insert before updating the counters, so that a failed insert (bad_alloc) leaves them
    // consistent; the block then goes back to the cache.
    try {
      in_use_.emplace(ptr, block_size);
    } catch (...) {
      cached_.emplace(block_size, ptr);
      throw;
    }
    stats_.cached_bytes -= block_size;
    stats_.in_use_bytes += block_size;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    ++stats_.cache_hits;
    return ptr;
  }

  void* ptr = backend_->Allocate(size);
  if (ptr == nullptr) {
    ++stats_.backend_alloc_failures;
    // The cache may hold exactly the memory the backend lacks (blocks of other sizes).
    if (cached_.empty()) return nullptr;
    ReleaseCachedLocked();
    ptr = backend_->Allocate(size);
    if (ptr == nullptr) {
      ++stats_.backend_alloc_failures;
      return nullptr;
    }
  }
  ++stats_.backend_allocs;
  try {
    in_use_.emplace(ptr, size);
  } catch (...) {
    ++stats_.backend_frees;
    if (!backend_->Free(ptr, size)) ++stats_.backend_free_failures;
    throw;
  }
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return ptr;
}

bool CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return true;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) return false;
  const size_t size = it->second;
  // Cache first: if that throws, the block is still recorded as in use and nothing changed.
  cached_.emplace(size, ptr);
  in_use_.erase(it);
  stats_.in_use_bytes -= size;
  stats_.cached_bytes += size;
  return true;
}

size_t CachingAllocator::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mu_);
  return ReleaseCachedLocked();
}

size_t CachingAllocator::ReleaseCachedLocked() {
  size_t released = 0;
  // Each block leaves the cache before it goes back, so that even a backend breaking its
  // no-throw promise cannot leave a returned block in the cache to be handed out again.
  while (!cached_.empty()) {
    const auto it = cached_.begin();
    const size_t size = it->first;
    void* const ptr = it->second;
    cached_.erase(it);
    stats_.cached_bytes -= size;
    released += size;
    ++stats_.backend_frees;
    if (!backend_->Free(ptr, size)) ++stats_.backend_free_failures;
  }
  return released;
}

CachingAllocatorStats CachingAllocator::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CachingAllocatorStats s = stats_;
  s.in_use_blocks = in_use_.size();
  s.cached_blocks = cached_.size();
  return s;
}

}  // namespace fleet_cuda
