// Planning and formulas of the sequence kernels (sequence_pool and its grad), shared by the CPU
// and the CUDA plugin so the two read offsets, attributes and shapes the same way.
//
// A sequence tensor arrives with FleetTensor.lod: lod_count = sequences + 1 offsets in the
// tensor's memory, sequence s being rows [lod[s], lod[s + 1]) of dims[0] (a capacity; rows past
// lod[sequences] are zero padding, see fleet_abi.h). The host validated the offsets of every
// feed before the run, so a kernel may trust that they rise from 0 to at most dims[0].
//
// Header functions are usable from g++ and nvcc (host_device.h); the planner is host code.
#pragma once

#include <cmath>
#include <cstdint>

#include "fleet/fleet_kernels.h"
#include "host_device.h"
#include "plan_status.h"

namespace fleet::kernel {

// Paddle's pooltype values.
enum class SequencePoolType : int32_t { kAverage, kSum, kSqrt, kMax, kLast, kFirst };

struct SequencePoolPlan {
  SequencePoolType type = SequencePoolType::kAverage;
  int64_t sequences = 0;      // rows of Out
  int64_t capacity = 0;       // rows of X (dims[0])
  int64_t width = 0;          // elements per row: the product of X's other dims
  float pad_value = 0.0f;     // Out of an empty sequence
  const int64_t* lod = nullptr;  // X's offsets (device memory for device tensors)
};

// Reads and checks a sequence_pool (grad = false) or sequence_pool_grad (grad = true) context:
// X carries offsets, Out (Out@GRAD) has one row per sequence and X's row width, MaxIndex is
// present for MAX. Data pointers may be NULL (prepare).
PlanStatus PlanSequencePool(const FleetKernelContext* kc, bool grad, SequencePoolPlan* plan);

// What a sequence's sum is multiplied by for Out (and Out@GRAD by for each row's gradient).
FLEET_HOST_DEVICE inline double SequencePoolScale(SequencePoolType type, int64_t length) {
  if (length <= 0) return 0.0;
  if (type == SequencePoolType::kAverage) return 1.0 / static_cast<double>(length);
  if (type == SequencePoolType::kSqrt) return 1.0 / sqrt(static_cast<double>(length));
  return 1.0;
}

// The one row a LAST or FIRST pool takes from sequence [begin, end) (end > begin).
FLEET_HOST_DEVICE inline int64_t SequencePoolPick(SequencePoolType type, int64_t begin,
                                                  int64_t end) {
  return type == SequencePoolType::kLast ? end - 1 : begin;
}

}  // namespace fleet::kernel
