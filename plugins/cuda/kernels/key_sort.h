// The stable sort of positions by the row they address, which the CUDA kernels that add several
// positions into one row use instead of float atomics (tensor_index.cu: the take grads and
// scatter; sparse_rows.cu: the sparse gradients' updates): after the sort each row's positions
// form a run in increasing order, so one thread per (run, column) adds them in the CPU plugin's
// order and the result is the same on every run.
//
// Keys are rows in [0, rows]; the key `rows` marks a skipped position (a padding id, a bad
// index) and sorts last. Keys and positions are 32-bit, so at most INT_MAX positions and
// UINT32_MAX - 1 rows (PlanSort refuses more, naming the op).
//
// Scratch, after the nn group's flag (nn_groups.h): [keys in | keys out | positions in |
// positions out | the radix sort's temporary storage], each part 256-byte aligned;
// SortScratch(plan) is where that ends, so a kernel may put more after it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_util.h"

namespace fleet_cuda {

struct SortPlan {
  int64_t n = 0;          // positions
  int64_t rows = 0;       // keys [0, rows) are rows; `rows` is skipped
  int end_bit = 1;        // bits the keys [0, rows] need
  size_t sort_bytes = 0;  // the radix sort's temporary storage
};

// Plans a sort of `n` positions over `rows` rows for kernel `kc`: sizes the radix sort on kc's
// device (so call it at prepare).
FleetStatus* PlanSort(const FleetKernelContext* kc, int64_t n, int64_t rows, SortPlan* s);

// Bytes of scratch from its start (the flag included) to the end of the sort's part.
size_t SortScratch(const SortPlan& s);

struct SortBuffers {
  uint32_t* keys_in;
  uint32_t* keys_out;
  uint32_t* pos_in;
  uint32_t* pos_out;
  void* temp;
};

// The sort's parts of kc's scratch.
SortBuffers BuffersOf(const FleetKernelContext* kc, const SortPlan& s);

// Enqueues the sort of (keys_in, pos_in) into (keys_out, pos_out), stably, on `stream`.
FleetStatus* SortKeys(const FleetKernelContext* kc, const SortPlan& s, const SortBuffers& b,
                      FleetStream* stream);

}  // namespace fleet_cuda
