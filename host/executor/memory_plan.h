// The memory plan of a prepared program: which buffer of the arena each non-persistable var
// lives in. A var lives from the op that first writes it (or before op 0 for a feed) to the last
// op that reads it (or past the end for a fetch); a buffer is handed to another var once its var
// is dead. The outputs of an op are placed before the op's dying inputs are released, so an
// output never shares a buffer with an input of the same op (an in-place op writing the very
// var it reads is the same var, hence the same buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fleet::exec {

struct VarLifetime {
  std::string name;
  size_t bytes = 0;
  int first = 0;  // index of the op that first writes it; -1 for a feed
  int last = 0;   // index of the last op that reads or writes it; num_ops for a fetch
};

struct MemoryPlan {
  std::map<std::string, int> buffer_of;  // var -> buffer index
  std::vector<size_t> buffer_bytes;      // per buffer, rounded up to the alignment
  std::vector<size_t> buffer_offsets;    // per buffer, within the arena
  // Sums saturate at SIZE_MAX (sizes come from input): such an arena can never be allocated.
  size_t arena_bytes = 0;                // sum of buffer_bytes
  size_t unshared_bytes = 0;             // what one buffer per var would take (for reports)
};

// The most memory the executor hands out on its device: the device's memory, and for a device
// that computes in host memory also what the process can use (support/host_memory.h). Sizes
// that programs derive from input (a layer's size, the batch) are checked against it before
// they are allocated, so an impossible one is refused naming its var instead of failing inside
// the allocator.
struct MemoryLimit {
  uint64_t bytes = UINT64_MAX;
  std::string device;  // "device 'cpu' 0", for messages

  // "" when `need` fits, else "N bytes (X GiB), more than the Y GiB of memory of DEVICE".
  std::string Exceeded(uint64_t need) const;
};

// Assigns buffers best-fit: the smallest free buffer that is large enough, else the largest free
// one (grown), else a new one. `alignment` must be a power of two.
MemoryPlan PlanMemory(const std::vector<VarLifetime>& vars, size_t alignment);

}  // namespace fleet::exec
