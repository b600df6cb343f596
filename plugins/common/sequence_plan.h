// Planning and formulas of the sequence kernels (sequence_pool, sequence_softmax,
// sequence_reverse, sequence_pad, sequence_mask, sequence_expand_as / sequence_expand,
// sequence_concat, sequence_slice, sequence_unpad and their grads), shared by
// the CPU and the CUDA plugin so the two read offsets, attributes and shapes the same way.
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
#include <string>

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

// ---- the other sequence ops --------------------------------------------------------------------

// The rows of a sequence tensor as a kernel walks them: sequence s is rows [lod[s], lod[s + 1])
// of `capacity`, each of `width` elements.
struct SequenceRows {
  const int64_t* lod = nullptr;  // device memory for device tensors
  int64_t sequences = 0;
  int64_t capacity = 0;
  int64_t width = 0;
};

// The rows of `t` (slot `slot` of the op, for messages), which must carry offsets.
PlanStatus PlanSequenceRows(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                            SequenceRows* rows);

// sequence_softmax (grad = false: X -> Out) and sequence_softmax_grad (Out, Out@GRAD -> X@GRAD):
// one value per row, every tensor of the same rows.
PlanStatus PlanSequenceSoftmax(const FleetKernelContext* kc, bool grad, SequenceRows* rows);

// sequence_reverse: X -> Y of the same shape.
PlanStatus PlanSequenceReverse(const FleetKernelContext* kc, SequenceRows* rows);

struct SequencePadPlan {
  SequenceRows rows;            // X's
  int64_t padded_length = 0;    // Out's second dim
  int64_t pad_width = 0;        // elements of PadValue: 1 (one value) or rows.width (one row)
};

// sequence_pad (grad = false: X, PadValue -> Out [S, L, ...], Length int64 [S]) and
// sequence_pad_grad (X, Out@GRAD -> X@GRAD). A sequence longer than padded_length is an error
// the kernel reports when it sees the offsets (SequencePadTooLong).
PlanStatus PlanSequencePad(const FleetKernelContext* kc, bool grad, SequencePadPlan* plan);
std::string SequencePadTooLong(const FleetKernelContext* kc, int64_t sequence, int64_t length,
                               int64_t padded_length);

struct SequenceMaskPlan {
  int64_t lengths = 0;  // elements of X
  int64_t maxlen = 0;   // Y's last dim
  int32_t out_dtype = FLEET_DTYPE_INT64;
};

// sequence_mask: X (int32 or int64 lengths) -> Y = X.dims + [maxlen] of out_dtype.
PlanStatus PlanSequenceMask(const FleetKernelContext* kc, SequenceMaskPlan* plan);

// sequence_expand_as and sequence_expand (grad = false: X [S, ...], Y (sequences) -> Out with
// Y's rows) and their grads (X, Y, Out@GRAD -> X@GRAD [S, ...]). rows: Y's offsets and
// capacity, X's row width.
PlanStatus PlanSequenceExpandAs(const FleetKernelContext* kc, bool grad, SequenceRows* rows);

// ---- ops whose output has offsets of its own (the host makes them before the launch) ----------

// sequence_concat (grad = false: X[0..n) -> Out) and sequence_concat_grad
// (X[0..n), Out@GRAD -> X@GRAD[0..n)): sequence s of Out is sequence s of X[0], then of X[1]...
// Every tensor carries its own offsets; `out` holds Out's (Out@GRAD's), `inputs` the count n.
struct SequenceConcatPlan {
  SequenceRows out;
  int64_t inputs = 0;
};
PlanStatus PlanSequenceConcat(const FleetKernelContext* kc, bool grad, SequenceConcatPlan* plan);

// sequence_slice (grad = false: X, Offset, Length -> Out) and sequence_slice_grad
// (X, Offset, Length, Out@GRAD -> X@GRAD): sequence s of Out is rows [Offset[s],
// Offset[s] + Length[s]) of sequence s of X. Offset and Length are int64, one per sequence; the
// host checked them against X's offsets when it made Out's.
struct SequenceSlicePlan {
  SequenceRows x;
  SequenceRows out;
};
PlanStatus PlanSequenceSlice(const FleetKernelContext* kc, bool grad, SequenceSlicePlan* plan);

// sequence_unpad (grad = false: X [S, L, ...], Length -> Out) and sequence_unpad_grad
// (X, Length, Out@GRAD -> X@GRAD [S, L, ...]): sequence s of Out is X[s, :Length[s]]; Out's
// offsets hold the lengths, which the host checked against L.
struct SequenceUnpadPlan {
  SequenceRows out;            // its width is that of one step of X: the product of dims[2:]
  int64_t padded_length = 0;  // L
};
PlanStatus PlanSequenceUnpad(const FleetKernelContext* kc, bool grad, SequenceUnpadPlan* plan);

// The sequence that holds `row`: the s with lod[s] <= row < lod[s + 1] (empty sequences are
// skipped), or -1 for a padding row (row >= lod[sequences]). A binary search, for kernels that
// run one thread per row.
FLEET_HOST_DEVICE inline int64_t SequenceOfRow(const int64_t* lod, int64_t sequences,
                                               int64_t row) {
  if (row < 0 || row >= lod[sequences]) return -1;
  int64_t lo = 0, hi = sequences - 1;  // the answer lies in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (lod[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// sequence_softmax of one sequence's values x[begin, end): the largest value is taken out first
// so exp never overflows, as in Paddle; exp in double, so float32 agrees across plugins.
template <typename T>
FLEET_HOST_DEVICE inline void SequenceSoftmaxRows(const T* x, T* out, int64_t begin,
                                                  int64_t end) {
  if (end <= begin) return;
  T top = x[begin];
  for (int64_t r = begin + 1; r < end; ++r) top = x[r] > top ? x[r] : top;
  T sum = T(0);
  for (int64_t r = begin; r < end; ++r) {
    out[r] = static_cast<T>(exp(static_cast<double>(x[r] - top)));
    sum += out[r];
  }
  for (int64_t r = begin; r < end; ++r) out[r] /= sum;
}

// Its gradient: dx = out * (dout - sum over the sequence of out * dout).
template <typename T>
FLEET_HOST_DEVICE inline void SequenceSoftmaxGradRows(const T* out, const T* dout, T* dx,
                                                      int64_t begin, int64_t end) {
  T dot = T(0);
  for (int64_t r = begin; r < end; ++r) dot += out[r] * dout[r];
  for (int64_t r = begin; r < end; ++r) dx[r] = out[r] * (dout[r] - dot);
}

}  // namespace fleet::kernel
