// The math group (AddMathKernels, math_kernels.cu) is spread over one file per family so that
// each compiles on its own. This header declares each file's adder and what they share: the
// broadcast plan of elementwise ops and reductions (the same plan the CPU plugin walks), and a
// deterministic "sum over groups" engine that serves the elementwise grads (sums over broadcast
// dims), reduce_sum / reduce_mean and mean. Included by the math_*.cu files only (nvcc).
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>

#include "broadcast_plan.h"
#include "kernels/kernel_util.h"

namespace fleet_cuda {

void AddMathElementwiseKernels(KernelList& list);  // math_elementwise.cu: elementwise_* (+ grads)
void AddMathActivationKernels(KernelList& list);   // math_activation.cu: activations, softmax
void AddMathReduceKernels(KernelList& list);       // math_reduce.cu: sum, mean, reduce_*
void AddMathUnaryKernels(KernelList& list);        // math_unary.cu: unary math, activations,
                                                   // prelu, cumsum
void AddMathCompareKernels(KernelList& list);      // math_compare.cu: comparisons, logic, where
void AddMathReduceExtKernels(KernelList& list);    // math_reduce_ext.cu: reduce_max.., arg*, p_norm

namespace math {

// The broadcast plan (StridePlan, Coalesce, Paddle's axis rule) is shared with the CPU plugin
// (plugins/common/broadcast_plan.h), so both devices accept the same programs.
using fleet::kernel::Coalesce;
using fleet::kernel::StridePlan;
inline constexpr int kMaxRank = fleet::kernel::kMaxStrideRank;

inline std::string OpName(const FleetKernelContext* kc) {
  return kc->op_type != nullptr ? kc->op_type : "kernel";
}

// Runs `body` (returning FleetStatus*) outside a launch, e.g. a prepare, turning an exception
// into INTERNAL, since none may cross the ABI. Launches get the same from Run.
template <typename F>
FleetStatus* Guard(const FleetKernelContext* kc, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": " + e.what());
  } catch (...) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": unknown exception");
  }
}

// INVALID_ARGUMENT naming the first of the listed slots the op lacks, else nullptr; kernels check
// before touching tensors, so a malformed op gets an error, not a crash.
inline FleetStatus* RequireSlots(const FleetKernelContext* kc,
                                 std::initializer_list<const char*> inputs,
                                 std::initializer_list<const char*> outputs) {
  for (const char* slot : inputs) {
    if (Input(kc, slot) == nullptr) {
      return InvalidArgument(OpName(kc) + ": input " + slot + " is missing");
    }
  }
  for (const char* slot : outputs) {
    if (Output(kc, slot) == nullptr) {
      return InvalidArgument(OpName(kc) + ": output " + slot + " is missing");
    }
  }
  return nullptr;
}

// INVALID_ARGUMENT unless `t` holds `expected` elements.
inline FleetStatus* ExpectNumel(const FleetKernelContext* kc, const FleetTensor* t,
                                const char* slot, int64_t expected) {
  if (Numel(t) == expected) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot + " " + DimsText(t) + " has " +
                         std::to_string(Numel(t)) + " elements, expected " +
                         std::to_string(expected));
}

// Enqueues zeroing `bytes` at `data` (all-zero bits are 0.0 in float and double); the message is
// only built on failure, so the launch path stays free of allocations.
inline FleetStatus* ZeroAsync(const FleetKernelContext* kc, void* data, size_t bytes,
                              cudaStream_t stream, const char* what) {
  if (bytes == 0) return nullptr;
  const cudaError_t err = cudaMemsetAsync(data, 0, bytes, stream);
  if (err == cudaSuccess) return nullptr;
  return CudaStatus(err, OpName(kc) + ": zeroing " + what);
}

// ---- broadcast plans ------------------------------------------------------------------------

// The two offsets of row-major element `i` of `p` (every dim of `p` must be non-zero).
__device__ inline void PlanOffsets(const StridePlan& p, int64_t i, int64_t* a, int64_t* b) {
  int64_t oa = 0, ob = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t c = i % p.dims[d];
    i /= p.dims[d];
    oa += c * p.sa[d];
    ob += c * p.sb[d];
  }
  *a = oa;
  *b = ob;
}

// ---- sums over groups -----------------------------------------------------------------------

// Up to three arrays addressed together (for an elementwise grad: Out / Out@GRAD, X, Y).
inline constexpr int kGroupArrays = 3;

// A sum over groups: output element k (row-major over the kept dims) is the sum of a term over
// every combination of the reduced dims. Each kept and reduced dim carries the stride of every
// addressed array, so a term can read each array at its own offset.
struct GroupPlan {
  int kept_rank = 0;
  int red_rank = 0;
  bool inner_reduced = false;  // whether the innermost dim is a reduced one
  int64_t kept_count = 1;
  int64_t red_count = 1;
  int64_t kept_dims[kMaxRank] = {};
  int64_t red_dims[kMaxRank] = {};
  int64_t kept_strides[kGroupArrays][kMaxRank] = {};
  int64_t red_strides[kGroupArrays][kMaxRank] = {};
};

// Appends a dim (outer to inner) with the strides of arrays 0, 1, 2.
inline void AddGroupDim(GroupPlan& g, bool reduced, int64_t dim, int64_t s0, int64_t s1 = 0,
                        int64_t s2 = 0) {
  const int64_t s[kGroupArrays] = {s0, s1, s2};
  int& r = reduced ? g.red_rank : g.kept_rank;
  int64_t* dims = reduced ? g.red_dims : g.kept_dims;
  for (int a = 0; a < kGroupArrays; ++a) (reduced ? g.red_strides : g.kept_strides)[a][r] = s[a];
  dims[r] = dim;
  ++r;
  (reduced ? g.red_count : g.kept_count) *= dim;
  g.inner_reduced = reduced;
}

// How a GroupPlan is launched; fixed at prepare so every launch sums in the same order.
struct GroupLaunch {
  unsigned bx = kThreads;  // kept elements per block (threadIdx.x)
  unsigned by = 1;         // threads sharing one kept element's sum (threadIdx.y), a power of 2
  unsigned grid_x = 1;
  unsigned segments = 1;   // > 1: the reduced range is split, partial sums go to scratch
  int64_t seg_len = 0;     // reduced elements per segment
  size_t scratch_bytes = 0;
};

// Threads along the reduced range when it is contiguous in memory (so they read neighbours),
// a few when it is not (then neighbouring kept elements are, and threadIdx.x walks them); the
// reduced range is split into segments only when too few blocks would otherwise run, and only
// when `allow_split` (scratch memory was asked for).
inline GroupLaunch PlanGroupLaunch(const GroupPlan& g, bool allow_split) {
  GroupLaunch c;
  const int64_t cap = g.inner_reduced ? kThreads : 8;
  int64_t by = 1;
  while (by < cap && by < g.red_count) by *= 2;
  c.by = static_cast<unsigned>(by);
  c.bx = static_cast<unsigned>(kThreads / by);
  const int64_t tiles = (g.kept_count + c.bx - 1) / c.bx;
  c.grid_x = static_cast<unsigned>(tiles < 1 ? 1 : (tiles > 65535 ? 65535 : tiles));
  c.seg_len = g.red_count;
  constexpr int64_t kWorkPerThread = 64;  // reduced elements a thread sums before splitting pays
  constexpr int64_t kTargetBlocks = 512;
  if (allow_split && tiles > 0 && tiles < kTargetBlocks && g.red_count > kWorkPerThread * by) {
    const int64_t by_work = (g.red_count + kWorkPerThread * by - 1) / (kWorkPerThread * by);
    const int64_t by_blocks = (kTargetBlocks + tiles - 1) / tiles;
    const int64_t want = by_work < by_blocks ? by_work : by_blocks;
    if (want > 1) {
      c.seg_len = (g.red_count + want - 1) / want;
      const int64_t segments = (g.red_count + c.seg_len - 1) / c.seg_len;
      c.segments = static_cast<unsigned>(segments);
      c.scratch_bytes = static_cast<size_t>(g.kept_count * segments) * sizeof(double);
    }
  }
  return c;
}

// INVALID_ARGUMENT when a launch needs scratch memory the context does not carry.
inline FleetStatus* CheckScratch(const FleetKernelContext* kc, size_t bytes) {
  if (bytes == 0 || kc->scratch != nullptr) return nullptr;
  return InvalidArgument(OpName(kc) + ": launched without the " + std::to_string(bytes) +
                         " bytes of scratch memory asked for at prepare");
}

__device__ inline void GroupKeptOffsets(const GroupPlan& g, int64_t k, int64_t* off) {
#pragma unroll
  for (int a = 0; a < kGroupArrays; ++a) off[a] = 0;
  for (int d = g.kept_rank - 1; d >= 0; --d) {
    const int64_t c = k % g.kept_dims[d];
    k /= g.kept_dims[d];
#pragma unroll
    for (int a = 0; a < kGroupArrays; ++a) off[a] += c * g.kept_strides[a][d];
  }
}

__device__ inline void GroupRedOffsets(const GroupPlan& g, int64_t r, const int64_t* base,
                                       int64_t* off) {
#pragma unroll
  for (int a = 0; a < kGroupArrays; ++a) off[a] = base[a];
  for (int d = g.red_rank - 1; d >= 0; --d) {
    const int64_t c = r % g.red_dims[d];
    r /= g.red_dims[d];
#pragma unroll
    for (int a = 0; a < kGroupArrays; ++a) off[a] += c * g.red_strides[a][d];
  }
}

// Block (bx, by): thread (x, y) sums the term of kept element tile * bx + x over reduced indices
// y, y + by, ... of segment blockIdx.y, in double; the by partial sums then meet in a fixed
// tree. With one segment the result (divided by `divisor`) goes to out[k], else to
// partial[k * segments + segment]. The tile loop's bound is the same for the whole block, so
// every thread reaches every barrier.
template <typename T, typename Term>
__global__ void GroupSumKernel(GroupPlan g, Term term, int64_t seg_len, double* partial, T* out,
                               double divisor) {
  __shared__ double sums[kThreads];
  const unsigned tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * seg_len;
  const int64_t r_end = r_begin + seg_len < g.red_count ? r_begin + seg_len : g.red_count;
  for (int64_t tile = blockIdx.x; tile * bx < g.kept_count; tile += gridDim.x) {
    const int64_t k = tile * bx + tx;
    double acc = 0;
    if (k < g.kept_count) {
      int64_t base[kGroupArrays];
      int64_t off[kGroupArrays];
      GroupKeptOffsets(g, k, base);
      for (int64_t r = r_begin + ty; r < r_end; r += by) {
        GroupRedOffsets(g, r, base, off);
        acc += static_cast<double>(term(off));
      }
    }
    sums[ty * bx + tx] = acc;
    __syncthreads();
    for (unsigned half = by / 2; half > 0; half /= 2) {
      if (ty < half) sums[ty * bx + tx] += sums[(ty + half) * bx + tx];
      __syncthreads();
    }
    if (ty == 0 && k < g.kept_count) {
      if (partial != nullptr) {
        partial[k * gridDim.y + blockIdx.y] = sums[tx];
      } else {
        out[k] = static_cast<T>(sums[tx] / divisor);
      }
    }
    __syncthreads();  // the next tile overwrites `sums`
  }
}

// Adds each kept element's segment sums in segment order.
template <typename T>
__global__ void GroupSumFinishKernel(const double* partial, int64_t kept, int64_t segments, T* out,
                                     double divisor) {
  FLEET_CUDA_LOOP(k, kept) {
    double acc = 0;
    for (int64_t s = 0; s < segments; ++s) acc += partial[k * segments + s];
    out[k] = static_cast<T>(acc / divisor);
  }
}

// Enqueues out[k] = (sum over the group of k of term(offsets)) / divisor for every kept k.
// `scratch` must hold c.scratch_bytes (CheckScratch). `term` is a functor with
// `__device__ T operator()(const int64_t* offsets) const`.
template <typename T, typename Term>
void LaunchGroupSum(const GroupPlan& g, const GroupLaunch& c, const Term& term, T* out,
                    double divisor, void* scratch, cudaStream_t stream) {
  if (g.kept_count == 0) return;
  double* partial = c.segments > 1 ? static_cast<double*>(scratch) : nullptr;
  const dim3 grid(c.grid_x, c.segments);
  const dim3 block(c.bx, c.by);
  GroupSumKernel<T, Term><<<grid, block, 0, stream>>>(g, term, c.seg_len, partial, out, divisor);
  if (partial != nullptr) {
    GroupSumFinishKernel<T><<<Blocks(g.kept_count), kThreads, 0, stream>>>(
        partial, g.kept_count, c.segments, out, divisor);
  }
}

}  // namespace math
}  // namespace fleet_cuda
