// reduce_max / min / prod / any / all (+ grads of max, min, prod), arg_max / arg_min, argsort
// (+ grad) and p_norm (+ grad), with the CPU plugin's semantics: the same groups (plugins/
// common/reduce_plan.h) and formulas (plugins/common/logic_formulas.h).
//
// Reductions run a warp per output element: lane l folds members l, l + 32, ... in order, then
// the lanes meet in a fixed shuffle tree, so results do not vary from run to run (max, min, any,
// all and arg_* are exact in any order; prod and p_norm's sums are rounded in this fixed order,
// which differs from the CPU's sequential one by rounding only). argsort sorts a row of up to
// 2048 elements in one block (a bitonic network over (key, index) pairs, which gives the stable
// order); a longer row sorts on one thread with the shared stable merge sort, through scratch
// asked for at prepare.
#include <algorithm>
#include <climits>
#include <memory>
#include <string>

#include "kernels/math_groups.h"
#include "logic_formulas.h"
#include "reduce_plan.h"

namespace fleet_cuda {
namespace math {
namespace {

using fleet::kernel::AxisPlan;
using fleet::kernel::GroupBase;
using fleet::kernel::GroupMember;
using fleet::kernel::ReduceGroups;
using fleet::kernel::ReduceOp;

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks for a warp per item, grid-stride beyond.
unsigned WarpBlocks(int64_t items) {
  return Blocks(items * kWarp);
}

// __shfl_down_sync for every element type used here (bytes travel as int).
template <typename T>
__device__ inline T ShflDown(T v, int offset) {
  if constexpr (sizeof(T) < sizeof(int)) {
    return static_cast<T>(__shfl_down_sync(kFullMask, static_cast<int>(v), offset));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(
        __shfl_down_sync(kFullMask, static_cast<long long>(v), offset));
  } else {
    return __shfl_down_sync(kFullMask, v, offset);
  }
}

// The warp's id and count over the grid; every lane of a warp sees the same.
#define FLEET_WARP_LOOP(k, n)                                                              \
  for (int64_t k = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; \
       k < (n); k += static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp)

// ---- reduce_* -------------------------------------------------------------------------------

template <ReduceOp op, typename T>
__global__ void ReduceKernel(ReduceGroups g, const T* x, T* out) {
  const int lane = threadIdx.x % kWarp;
  FLEET_WARP_LOOP(k, g.kept_count) {
    const int64_t base = GroupBase(g, k);
    T acc = fleet::kernel::ReduceIdentity<op, T>();
    for (int64_t r = lane; r < g.red_count; r += kWarp) {
      acc = fleet::kernel::ReduceCombine<op>(acc, x[base + GroupMember(g, r)]);
    }
    for (int off = kWarp / 2; off > 0; off /= 2) {
      acc = fleet::kernel::ReduceCombine<op>(acc, ShflDown(acc, off));
    }
    if (lane == 0) out[k] = acc;
  }
}

// reduce_max_grad / reduce_min_grad: every member equal to Out gets the whole gradient.
template <typename T>
__global__ void ExtremeGradKernel(ReduceGroups g, const T* x, const T* out, const T* grad,
                                  T* dx) {
  const int lane = threadIdx.x % kWarp;
  FLEET_WARP_LOOP(k, g.kept_count) {
    const int64_t base = GroupBase(g, k);
    for (int64_t r = lane; r < g.red_count; r += kWarp) {
      const int64_t i = base + GroupMember(g, r);
      dx[i] = fleet::kernel::ExtremeGrad(x[i], out[k], grad[k]);
    }
  }
}

// reduce_prod_grad: the warp counts the group's zeros and multiplies its other members, then
// writes every member's gradient.
template <typename T>
__global__ void ProdGradKernel(ReduceGroups g, const T* x, const T* grad, T* dx) {
  const int lane = threadIdx.x % kWarp;
  FLEET_WARP_LOOP(k, g.kept_count) {
    const int64_t base = GroupBase(g, k);
    int64_t zeros = 0;
    T product = T(1);
    for (int64_t r = lane; r < g.red_count; r += kWarp) {
      const T v = x[base + GroupMember(g, r)];
      if (v == T(0)) {
        ++zeros;
      } else {
        product *= v;
      }
    }
    for (int off = kWarp / 2; off > 0; off /= 2) {
      zeros += ShflDown(zeros, off);
      product *= ShflDown(product, off);
    }
    zeros = __shfl_sync(kFullMask, static_cast<long long>(zeros), 0);
    product = __shfl_sync(kFullMask, product, 0);
    for (int64_t r = lane; r < g.red_count; r += kWarp) {
      const int64_t i = base + GroupMember(g, r);
      dx[i] = fleet::kernel::ProdGrad(x[i], zeros, product, grad[k]);
    }
  }
}

FleetStatus* ReducePrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto g = std::make_unique<ReduceGroups>();
    if (FleetStatus* s = FromPlan(fleet::kernel::PlanReduce(kc, Input(kc, "X"), g.get()))) {
      return s;
    }
    *state = g.release();
    return nullptr;
  });
}

void GroupsRelease(void*, void* state) { delete static_cast<ReduceGroups*>(state); }

template <typename S>
FleetStatus* Prepared(const FleetKernelContext* kc, void* state, const S** out) {
  if (state == nullptr) {
    return Error(FLEET_CODE_FAILED_PRECONDITION, OpName(kc) + ": launched without prepare");
  }
  *out = static_cast<const S*>(state);
  return nullptr;
}

template <ReduceOp op, typename T>
FleetStatus* ReduceLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const ReduceGroups* g = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &g)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "Out"), "Out", g->kept_count)) return e;
    if (g->kept_count == 0) return nullptr;
    ReduceKernel<op, T><<<WarpBlocks(g->kept_count), kThreads, 0, s->native>>>(
        *g, Data<const T>(Input(kc, "X")), Data<T>(Output(kc, "Out")));
    return nullptr;
  });
}

template <bool kProd, typename T>
FleetStatus* ReduceGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Out", "Out@GRAD"}, {"X@GRAD"})) return e;
    const ReduceGroups* g = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &g)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Out"), "Out", g->kept_count)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Out@GRAD"), "Out@GRAD", g->kept_count)) {
      return e;
    }
    const int64_t n = Numel(Input(kc, "X"));
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "X@GRAD"), "X@GRAD", n)) return e;
    if (g->kept_count == 0 || n == 0) return nullptr;
    const T* xs = Data<const T>(Input(kc, "X"));
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    T* dxs = Data<T>(Output(kc, "X@GRAD"));
    if constexpr (kProd) {
      ProdGradKernel<T><<<WarpBlocks(g->kept_count), kThreads, 0, s->native>>>(*g, xs, gs, dxs);
    } else {
      ExtremeGradKernel<T><<<WarpBlocks(g->kept_count), kThreads, 0, s->native>>>(
          *g, xs, Data<const T>(Input(kc, "Out")), gs, dxs);
    }
    return nullptr;
  });
}

// ---- arg_max / arg_min / argsort / p_norm -----------------------------------------------------

enum class AxisOp { kArg, kSort, kNorm };

template <AxisOp kind>
FleetStatus* AxisPrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto plan = std::make_unique<AxisPlan>();
    const bool flat = kind == AxisOp::kArg    ? BoolAttr(kc, "flatten", false)
                      : kind == AxisOp::kNorm ? BoolAttr(kc, "asvector", false)
                                              : false;
    const int64_t fallback = kind == AxisOp::kArg ? 0 : -1;
    if (FleetStatus* s = FromPlan(
            fleet::kernel::PlanAxis(kc, Input(kc, "X"), "axis", fallback, flat, plan.get()))) {
      return s;
    }
    if (kind == AxisOp::kArg && plan->axis_len == 0 && plan->groups.kept_count > 0) {
      return InvalidArgument(OpName(kc) + ": X " + DimsText(Input(kc, "X")) +
                             " is empty along the axis; it has no arg");
    }
    // argsort: each row's thread sorts through its own index and merge buffers.
    if (kind == AxisOp::kSort && Output(kc, "Indices") != nullptr) {
      *scratch = static_cast<size_t>(plan->groups.kept_count * 2 * plan->axis_len) *
                 sizeof(int64_t);
    }
    *state = plan.release();
    return nullptr;
  });
}

void AxisRelease(void*, void* state) { delete static_cast<AxisPlan*>(state); }

// Each lane keeps the best of its members (the first on ties, as lanes walk upwards); lanes
// then merge, a tie going to the lower index. A lane with no member holds index LLONG_MAX.
template <bool kMax, typename T, typename I>
__global__ void ArgKernel(ReduceGroups g, int64_t len, int64_t stride, const T* x, I* out) {
  const int lane = threadIdx.x % kWarp;
  FLEET_WARP_LOOP(k, g.kept_count) {
    const int64_t base = GroupBase(g, k);
    long long best_i = LLONG_MAX;
    T best = T(0);
    for (int64_t r = lane; r < len; r += kWarp) {
      const T v = x[base + r * stride];
      if (best_i == LLONG_MAX || fleet::kernel::ArgBetter<kMax>(v, best)) {
        best = v;
        best_i = r;
      }
    }
    for (int off = kWarp / 2; off > 0; off /= 2) {
      const T v = ShflDown(best, off);
      const long long vi = __shfl_down_sync(kFullMask, best_i, off);
      if (vi == LLONG_MAX) continue;
      const bool take = best_i == LLONG_MAX || fleet::kernel::ArgBetter<kMax>(v, best) ||
                        (!fleet::kernel::ArgBetter<kMax>(best, v) && vi < best_i);
      if (take) {
        best = v;
        best_i = vi;
      }
    }
    if (lane == 0) out[k] = static_cast<I>(best_i);
  }
}

template <bool kMax, typename T>
FleetStatus* ArgLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const FleetTensor* out = Output(kc, "Out");
    const int64_t kept = p->groups.kept_count;
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", kept)) return e;
    if (out->dtype != FLEET_DTYPE_INT32 && out->dtype != FLEET_DTYPE_INT64) {
      return InvalidArgument(OpName(kc) + ": Out must be int64 or int32");
    }
    if (kept == 0) return nullptr;
    const T* xs = Data<const T>(Input(kc, "X"));
    if (out->dtype == FLEET_DTYPE_INT32) {
      ArgKernel<kMax, T, int32_t><<<WarpBlocks(kept), kThreads, 0, s->native>>>(
          p->groups, p->axis_len, p->axis_stride, xs, Data<int32_t>(out));
    } else {
      ArgKernel<kMax, T, int64_t><<<WarpBlocks(kept), kThreads, 0, s->native>>>(
          p->groups, p->axis_len, p->axis_stride, xs, Data<int64_t>(out));
    }
    return nullptr;
  });
}

template <typename T>
__global__ void ArgsortKernel(ReduceGroups g, int64_t len, int64_t stride, bool descending,
                              const T* x, T* out, int64_t* indices, int64_t* scratch) {
  FLEET_CUDA_LOOP(k, g.kept_count) {
    const int64_t base = GroupBase(g, k);
    int64_t* idx = scratch + k * 2 * len;
    fleet::kernel::StableArgsortRow(x + base, len, stride, descending, idx, idx + len);
    for (int64_t r = 0; r < len; ++r) {
      out[base + r * stride] = x[base + idx[r] * stride];
      indices[base + r * stride] = idx[r];
    }
  }
}

// Rows up to kBlockSortMax long sort in one block: a bitonic network in shared memory over
// (key, index) pairs ordered by SortsBefore and then by index, which is a total order, so the
// network gives exactly the stable sort of StableArgsortRow (equal keys, NaNs among them, keep
// their order). Positions past the row are padding that sorts last.
constexpr int kBlockSortMax = 2048;
constexpr int kSortPad = INT_MAX;

template <typename T>
__device__ inline bool PairBefore(const T* keys, const int* ids, int a, int b, bool descending) {
  if (ids[a] == kSortPad) return false;
  if (ids[b] == kSortPad) return true;
  if (fleet::kernel::SortsBefore(keys[a], keys[b], descending)) return true;
  if (fleet::kernel::SortsBefore(keys[b], keys[a], descending)) return false;
  return ids[a] < ids[b];
}

template <typename T>
__global__ void BlockArgsortKernel(ReduceGroups g, int64_t len, int64_t stride, bool descending,
                                   const T* x, T* out, int64_t* indices) {
  __shared__ T keys[kBlockSortMax];
  __shared__ int ids[kBlockSortMax];
  int n = 1;
  while (n < len) n <<= 1;
  for (int64_t k = blockIdx.x; k < g.kept_count; k += gridDim.x) {
    const int64_t base = GroupBase(g, k);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      if (i < len) {
        keys[i] = x[base + i * stride];
        ids[i] = i;
      } else {
        ids[i] = kSortPad;
      }
    }
    __syncthreads();
    for (int size = 2; size <= n; size <<= 1) {
      for (int j = size >> 1; j > 0; j >>= 1) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
          const int l = i ^ j;
          if (l <= i) continue;
          // (i & size) == 0: this pair ends up in order i before l; else l before i.
          const bool swap = (i & size) == 0 ? PairBefore(keys, ids, l, i, descending)
                                            : PairBefore(keys, ids, i, l, descending);
          if (swap) {
            const T key = keys[i];
            keys[i] = keys[l];
            keys[l] = key;
            const int id = ids[i];
            ids[i] = ids[l];
            ids[l] = id;
          }
        }
        __syncthreads();
      }
    }
    for (int64_t r = threadIdx.x; r < len; r += blockDim.x) {
      out[base + r * stride] = keys[r];
      indices[base + r * stride] = ids[r];
    }
    __syncthreads();  // the next row reuses keys and ids
  }
}

template <typename T>
FleetStatus* ArgsortLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out", "Indices"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const FleetTensor* x = Input(kc, "X");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "Out"), "Out", n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "Indices"), "Indices", n)) return e;
    if (n == 0) return nullptr;
    if (FleetStatus* e = CheckScratch(kc, static_cast<size_t>(2 * n) * sizeof(int64_t))) {
      return e;
    }
    const bool descending = BoolAttr(kc, "descending", false);
    T* out = Data<T>(Output(kc, "Out"));
    int64_t* indices = Data<int64_t>(Output(kc, "Indices"));
    if (p->axis_len <= kBlockSortMax) {
      const unsigned grid =
          static_cast<unsigned>(std::min<int64_t>(p->groups.kept_count, 65535));
      BlockArgsortKernel<T><<<grid, kThreads, 0, s->native>>>(
          p->groups, p->axis_len, p->axis_stride, descending, Data<const T>(x), out, indices);
      return nullptr;
    }
    ArgsortKernel<T><<<Blocks(p->groups.kept_count), kThreads, 0, s->native>>>(
        p->groups, p->axis_len, p->axis_stride, descending, Data<const T>(x), out, indices,
        static_cast<int64_t*>(kc->scratch));
    return nullptr;
  });
}

// Element i of Out@GRAD goes back to where Indices says it came from along the axis; an index
// outside the axis is skipped (argsort never produces one).
template <typename T>
__global__ void ArgsortGradKernel(int64_t n, int64_t len, int64_t stride,
                                  const int64_t* indices, const T* g, T* dx) {
  FLEET_CUDA_LOOP(i, n) {
    const int64_t r = (i / stride) % len;
    const int64_t j = indices[i];
    if (j >= 0 && j < len) dx[i + (j - r) * stride] = g[i];
  }
}

template <typename T>
FleetStatus* ArgsortGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Indices", "Out@GRAD"}, {"X@GRAD"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const int64_t n = Numel(Input(kc, "X"));
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Indices"), "Indices", n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Out@GRAD"), "Out@GRAD", n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "X@GRAD"), "X@GRAD", n)) return e;
    if (n == 0) return nullptr;
    T* dxs = Data<T>(Output(kc, "X@GRAD"));
    if (FleetStatus* e = ZeroAsync(kc, dxs, static_cast<size_t>(n) * sizeof(T), s->native,
                                   "X@GRAD")) {
      return e;
    }
    ArgsortGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        n, p->axis_len, p->axis_stride, Data<const int64_t>(Input(kc, "Indices")),
        Data<const T>(Input(kc, "Out@GRAD")), dxs);
    return nullptr;
  });
}

template <typename T>
__global__ void PNormKernel(ReduceGroups g, int64_t len, int64_t stride, double porder,
                            const T* x, T* out) {
  const int lane = threadIdx.x % kWarp;
  FLEET_WARP_LOOP(k, g.kept_count) {
    const int64_t base = GroupBase(g, k);
    double acc = fleet::kernel::PNormInit(porder);
    for (int64_t r = lane; r < len; r += kWarp) {
      acc = fleet::kernel::PNormAccumulate(acc, static_cast<double>(x[base + r * stride]),
                                           porder);
    }
    for (int off = kWarp / 2; off > 0; off /= 2) {
      acc = fleet::kernel::PNormCombine(acc, __shfl_down_sync(kFullMask, acc, off), porder);
    }
    if (lane == 0) out[k] = static_cast<T>(fleet::kernel::PNormFinish(acc, porder));
  }
}

template <typename T>
__global__ void PNormGradKernel(ReduceGroups g, int64_t len, int64_t stride, double porder,
                                double eps, const T* x, const T* out, const T* grad, T* dx) {
  const int lane = threadIdx.x % kWarp;
  FLEET_WARP_LOOP(k, g.kept_count) {
    const int64_t base = GroupBase(g, k);
    for (int64_t r = lane; r < len; r += kWarp) {
      const int64_t i = base + r * stride;
      dx[i] = static_cast<T>(fleet::kernel::PNormGrad(x[i], out[k], grad[k], porder, eps));
    }
  }
}

template <typename T>
FleetStatus* PNormLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const int64_t kept = p->groups.kept_count;
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "Out"), "Out", kept)) return e;
    if (kept == 0) return nullptr;
    PNormKernel<T><<<WarpBlocks(kept), kThreads, 0, s->native>>>(
        p->groups, p->axis_len, p->axis_stride, FloatAttr(kc, "porder", 2.0),
        Data<const T>(Input(kc, "X")), Data<T>(Output(kc, "Out")));
    return nullptr;
  });
}

template <typename T>
FleetStatus* PNormGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Out", "Out@GRAD"}, {"X@GRAD"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const int64_t kept = p->groups.kept_count;
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Out"), "Out", kept)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Out@GRAD"), "Out@GRAD", kept)) return e;
    const int64_t n = Numel(Input(kc, "X"));
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "X@GRAD"), "X@GRAD", n)) return e;
    if (kept == 0 || n == 0) return nullptr;
    PNormGradKernel<T><<<WarpBlocks(kept), kThreads, 0, s->native>>>(
        p->groups, p->axis_len, p->axis_stride, FloatAttr(kc, "porder", 2.0),
        FloatAttr(kc, "epsilon", 1e-12), Data<const T>(Input(kc, "X")),
        Data<const T>(Input(kc, "Out")), Data<const T>(Input(kc, "Out@GRAD")),
        Data<T>(Output(kc, "X@GRAD")));
    return nullptr;
  });
}

template <typename T>
void AddNumeric(KernelList& list, int32_t dtype) {
  Add(list, "reduce_max", dtype, ReduceLaunch<ReduceOp::kMax, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_min", dtype, ReduceLaunch<ReduceOp::kMin, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_prod", dtype, ReduceLaunch<ReduceOp::kProd, T>, ReducePrepare,
      GroupsRelease);
  Add(list, "arg_max", dtype, ArgLaunch<true, T>, AxisPrepare<AxisOp::kArg>, AxisRelease);
  Add(list, "arg_min", dtype, ArgLaunch<false, T>, AxisPrepare<AxisOp::kArg>, AxisRelease);
  Add(list, "argsort", dtype, ArgsortLaunch<T>, AxisPrepare<AxisOp::kSort>, AxisRelease);
}

template <typename T>
void AddFloat(KernelList& list, int32_t dtype) {
  Add(list, "reduce_max_grad", dtype, ReduceGradLaunch<false, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_min_grad", dtype, ReduceGradLaunch<false, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_prod_grad", dtype, ReduceGradLaunch<true, T>, ReducePrepare, GroupsRelease);
  Add(list, "argsort_grad", dtype, ArgsortGradLaunch<T>, AxisPrepare<AxisOp::kSort>,
      AxisRelease);
  Add(list, "p_norm", dtype, PNormLaunch<T>, AxisPrepare<AxisOp::kNorm>, AxisRelease);
  Add(list, "p_norm_grad", dtype, PNormGradLaunch<T>, AxisPrepare<AxisOp::kNorm>, AxisRelease);
}

}  // namespace
}  // namespace math

void AddMathReduceExtKernels(KernelList& list) {
  using namespace math;
  AddNumeric<float>(list, FLEET_DTYPE_FLOAT32);
  AddNumeric<double>(list, FLEET_DTYPE_FLOAT64);
  AddNumeric<int32_t>(list, FLEET_DTYPE_INT32);
  AddNumeric<int64_t>(list, FLEET_DTYPE_INT64);
  AddFloat<float>(list, FLEET_DTYPE_FLOAT32);
  AddFloat<double>(list, FLEET_DTYPE_FLOAT64);
  Add(list, "reduce_any", FLEET_DTYPE_BOOL, ReduceLaunch<ReduceOp::kAny, uint8_t>, ReducePrepare,
      GroupsRelease);
  Add(list, "reduce_all", FLEET_DTYPE_BOOL, ReduceLaunch<ReduceOp::kAll, uint8_t>, ReducePrepare,
      GroupsRelease);
}

}  // namespace fleet_cuda
