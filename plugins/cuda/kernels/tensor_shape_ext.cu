// More layout kernels, with the semantics of the CPU plugin's
// (plugins/cpu/kernels/tensor_shape_ext_kernels.cc): unsqueeze2, squeeze2, expand_v2,
// expand_as_v2, tile, stack, unstack, flip, roll, strided_slice and their copy-only gradients
// run as the copy plans of plugins/common/shape_plan.h through tensor_shape.cu's layout
// kernels; the repeat ops' gradients are sums over the repeats on the math group's
// deterministic group-sum engine (math_groups.h: a fixed order, in double, no atomics);
// tril_triu (+ grad) masks element by element with the shared TrilKeeps rule; pad3d (+ grad)
// and pad run pad_plan.h's per-element functions, a thread per element; pad_grad is a copy
// plan.
#include <memory>
#include <new>

#include "index_plan.h"
#include "kernels/math_groups.h"
#include "kernels/tensor_groups.h"
#include "pad_plan.h"
#include "shape_plan.h"

namespace fleet_cuda {
namespace {

namespace plan = fleet::kernel;
using plan::OpName;
using plan::TrilPlan;

// ---- expand_v2_grad / expand_as_v2_grad / tile_grad -----------------------------------------

struct RepeatSumState {
  math::GroupPlan group;
  math::GroupLaunch launch;
};

template <bool kTile>
FleetStatus* RepeatSumPrepare(void*, const FleetKernelContext* kc, void** state,
                              size_t* scratch_bytes) {
  return math::Guard(kc, [&]() -> FleetStatus* {
    plan::RepeatSumPlan p;
    if (FleetStatus* err = plan::ToFleetStatus(plan::BuildRepeatSum(kc, kTile, &p), Error)) {
      return err;
    }
    auto st = std::make_unique<RepeatSumState>();
    for (int i = 0; i < p.rank; ++i) {
      math::AddGroupDim(st->group, p.reduced[i], p.dims[i], p.strides[i]);
    }
    st->launch = math::PlanGroupLaunch(st->group, /*allow_split=*/true);
    *scratch_bytes = st->launch.scratch_bytes;
    *state = st.release();
    return nullptr;
  });
}

void RepeatSumRelease(void*, void* state) { delete static_cast<RepeatSumState*>(state); }

template <typename T>
struct OutGradTerm {
  const T* dout;
  __device__ T operator()(const int64_t* off) const { return dout[off[0]]; }
};

template <typename T>
FleetStatus* RepeatSumLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* st = static_cast<const RepeatSumState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": not prepared");
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (dx == nullptr) return nullptr;
  if (dout == nullptr || Numel(dx) != st->group.kept_count ||
      Numel(dout) != st->group.kept_count * st->group.red_count) {
    return InvalidArgument(OpName(kc) + ": shapes changed after prepare");
  }
  if (FleetStatus* err = math::CheckScratch(kc, st->launch.scratch_bytes)) return err;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    math::LaunchGroupSum<T>(st->group, st->launch, OutGradTerm<T>{Data<const T>(dout)},
                            Data<T>(dx), 1.0, kc->scratch, s->native);
    return nullptr;
  });
}

// ---- tril_triu ------------------------------------------------------------------------------

template <const char* kSrc, const char* kDst>
FleetStatus* TrilPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return math::Guard(kc, [&]() -> FleetStatus* {
    auto p = std::make_unique<TrilPlan>();
    if (FleetStatus* err = plan::ToFleetStatus(plan::PlanTrilTriu(kc, kSrc, kDst, p.get()),
                                               Error)) {
      return err;
    }
    *state = p.release();
    return nullptr;
  });
}

void TrilRelease(void*, void* state) { delete static_cast<TrilPlan*>(state); }

template <typename E>
__global__ void TrilKernel(TrilPlan p, const E* x, E* out, int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    const int64_t c = i % p.cols;
    const int64_t r = (i / p.cols) % p.rows;
    out[i] = fleet::kernel::TrilKeeps(p, r, c) ? x[i] : E(0);
  }
}

template <typename E, const char* kSrc, const char* kDst>
FleetStatus* TrilLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* p = static_cast<const TrilPlan*>(state);
  if (p == nullptr) return InvalidArgument(OpName(kc) + ": not prepared");
  const FleetTensor* src = Input(kc, kSrc);
  const FleetTensor* dst = Output(kc, kDst);
  if (dst == nullptr) return nullptr;
  const int64_t n = p->batch * p->rows * p->cols;
  if (src == nullptr || Numel(src) != n || Numel(dst) != n) {
    return InvalidArgument(OpName(kc) + ": shapes changed after prepare");
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (n > 0) {
      TrilKernel<E><<<Blocks(n), kThreads, 0, s->native>>>(*p, Data<const E>(src), Data<E>(dst),
                                                          n);
    }
    return nullptr;
  });
}

// ---- pad3d ----------------------------------------------------------------------------------

template <bool kGrad>
FleetStatus* Pad3dPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return math::Guard(kc, [&]() -> FleetStatus* {
    auto p = std::make_unique<plan::Pad3dPlan>();
    if (FleetStatus* err = plan::ToFleetStatus(plan::PlanPad3d(kc, kGrad, p.get()), Error)) {
      return err;
    }
    *state = p.release();
    return nullptr;
  });
}

void Pad3dRelease(void*, void* state) { delete static_cast<plan::Pad3dPlan*>(state); }

// One thread per element, each running the CPU's per-element function (pad_plan.h); a
// gradient element sums its copies itself, in the CPU's order, so nothing is shared.
template <typename T, bool kGrad>
__global__ void Pad3dKernel(plan::Pad3dPlan p, int64_t n, const T* src, T* dst) {
  FLEET_CUDA_LOOP(e, n) {
    if constexpr (kGrad) {
      plan::Pad3dGradValue(p, e, src, dst);
    } else {
      plan::Pad3dValue(p, e, src, dst);
    }
  }
}

template <typename T, bool kGrad>
FleetStatus* Pad3dLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* p = static_cast<const plan::Pad3dPlan*>(state);
  if (p == nullptr) return InvalidArgument(OpName(kc) + ": not prepared");
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* o = kGrad ? Input(kc, "Out@GRAD") : Output(kc, "Out");
  const FleetTensor* dx = kGrad ? Output(kc, "X@GRAD") : nullptr;
  if (kGrad && dx == nullptr) return nullptr;
  const int64_t in_n = p->n * p->c * p->in[0] * p->in[1] * p->in[2];
  const int64_t out_n = p->n * p->c * p->out[0] * p->out[1] * p->out[2];
  if (x == nullptr || o == nullptr || Numel(x) != in_n || Numel(o) != out_n ||
      (kGrad && Numel(dx) != in_n)) {
    return InvalidArgument(OpName(kc) + ": shapes changed after prepare");
  }
  const int64_t n = kGrad ? in_n : out_n;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (n > 0) {
      if constexpr (kGrad) {
        Pad3dKernel<T, true><<<Blocks(n), kThreads, 0, s->native>>>(*p, n, Data<const T>(o),
                                                                    Data<T>(dx));
      } else {
        Pad3dKernel<T, false><<<Blocks(n), kThreads, 0, s->native>>>(*p, n, Data<const T>(x),
                                                                     Data<T>(o));
      }
    }
    return nullptr;
  });
}

// ---- pad ------------------------------------------------------------------------------------

FleetStatus* PadPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return math::Guard(kc, [&]() -> FleetStatus* {
    auto p = std::make_unique<plan::PadPlan>();
    if (FleetStatus* err = plan::ToFleetStatus(plan::PlanPad(kc, false, p.get()), Error)) {
      return err;
    }
    *state = p.release();
    return nullptr;
  });
}

void PadRelease(void*, void* state) { delete static_cast<plan::PadPlan*>(state); }

template <typename T>
__global__ void PadKernel(plan::PadPlan p, int64_t n, const T* x, T* out) {
  FLEET_CUDA_LOOP(e, n) { plan::PadValue(p, e, x, out); }
}

template <typename T>
FleetStatus* PadLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* p = static_cast<const plan::PadPlan*>(state);
  if (p == nullptr) return InvalidArgument(OpName(kc) + ": not prepared");
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  int64_t in_n = 1, out_n = 1;
  for (int k = 0; k < p->rank; ++k) {
    in_n *= p->in[k];
    out_n *= p->out[k];
  }
  if (x == nullptr || out == nullptr || Numel(x) != in_n || Numel(out) != out_n) {
    return InvalidArgument(OpName(kc) + ": shapes changed after prepare");
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (out_n > 0) {
      PadKernel<T><<<Blocks(out_n), kThreads, 0, s->native>>>(*p, out_n, Data<const T>(x),
                                                              Data<T>(out));
    }
    return nullptr;
  });
}

constexpr char kX[] = "X";
constexpr char kOut[] = "Out";
constexpr char kOutGrad[] = "Out@GRAD";
constexpr char kXGrad[] = "X@GRAD";

}  // namespace

// The CPU plugin's list, op for op and dtype for dtype.
void AddTensorShapeExtKernels(KernelList& list) {
  for (const char* op : {"unsqueeze2", "squeeze2"}) {
    AddLayoutKernel(list, op, PrepareLayoutWith<plan::BuildXToOut>);
  }
  AddLayoutKernel(list, "unsqueeze2_grad", PrepareLayoutWith<plan::BuildGradToXGrad>);
  AddLayoutKernel(list, "squeeze2_grad", PrepareLayoutWith<plan::BuildGradToXGrad>);
  AddLayoutKernel(list, "expand_v2", PrepareLayoutWith<plan::BuildExpand>);
  AddLayoutKernel(list, "expand_as_v2", PrepareLayoutWith<plan::BuildExpand>);
  AddLayoutKernel(list, "tile", PrepareLayoutWith<plan::BuildTile>);
  AddLayoutKernel(list, "stack", PrepareLayoutWith<plan::BuildStack>);
  AddLayoutKernel(list, "stack_grad", PrepareLayoutWith<plan::BuildStackGrad>);
  AddLayoutKernel(list, "unstack", PrepareLayoutWith<plan::BuildUnstack>);
  AddLayoutKernel(list, "unstack_grad", PrepareLayoutWith<plan::BuildUnstackGrad>);
  AddLayoutKernel(list, "flip", PrepareLayoutWith<plan::BuildFlip>);
  AddLayoutKernel(list, "roll", PrepareLayoutWith<plan::BuildRoll>);
  AddLayoutKernel(list, "roll_grad", PrepareLayoutWith<plan::BuildRollGrad>);
  AddLayoutKernel(list, "strided_slice", PrepareLayoutWith<plan::BuildStridedSlice>);
  AddLayoutKernel(list, "strided_slice_grad", PrepareLayoutWith<plan::BuildStridedSliceGrad>);

  for (const char* op : {"expand_v2_grad", "expand_as_v2_grad"}) {
    Add(list, op, FLEET_DTYPE_FLOAT32, RepeatSumLaunch<float>, RepeatSumPrepare<false>,
        RepeatSumRelease);
    Add(list, op, FLEET_DTYPE_FLOAT64, RepeatSumLaunch<double>, RepeatSumPrepare<false>,
        RepeatSumRelease);
  }
  Add(list, "tile_grad", FLEET_DTYPE_FLOAT32, RepeatSumLaunch<float>, RepeatSumPrepare<true>,
      RepeatSumRelease);
  Add(list, "tile_grad", FLEET_DTYPE_FLOAT64, RepeatSumLaunch<double>, RepeatSumPrepare<true>,
      RepeatSumRelease);

  Add(list, "pad3d", FLEET_DTYPE_FLOAT32, Pad3dLaunch<float, false>, Pad3dPrepare<false>,
      Pad3dRelease);
  Add(list, "pad3d", FLEET_DTYPE_FLOAT64, Pad3dLaunch<double, false>, Pad3dPrepare<false>,
      Pad3dRelease);
  Add(list, "pad3d_grad", FLEET_DTYPE_FLOAT32, Pad3dLaunch<float, true>, Pad3dPrepare<true>,
      Pad3dRelease);
  Add(list, "pad3d_grad", FLEET_DTYPE_FLOAT64, Pad3dLaunch<double, true>, Pad3dPrepare<true>,
      Pad3dRelease);

  Add(list, "pad", FLEET_DTYPE_FLOAT32, PadLaunch<float>, PadPrepare, PadRelease);
  Add(list, "pad", FLEET_DTYPE_FLOAT64, PadLaunch<double>, PadPrepare, PadRelease);
  AddLayoutKernel(list, "pad_grad", PrepareLayoutWith<plan::BuildPadGrad>);

  constexpr auto fwd = TrilPrepare<kX, kOut>;
  Add(list, "tril_triu", FLEET_DTYPE_BOOL, TrilLaunch<uint8_t, kX, kOut>, fwd, TrilRelease);
  Add(list, "tril_triu", FLEET_DTYPE_INT32, TrilLaunch<uint32_t, kX, kOut>, fwd, TrilRelease);
  Add(list, "tril_triu", FLEET_DTYPE_INT64, TrilLaunch<uint64_t, kX, kOut>, fwd, TrilRelease);
  Add(list, "tril_triu", FLEET_DTYPE_FLOAT32, TrilLaunch<uint32_t, kX, kOut>, fwd, TrilRelease);
  Add(list, "tril_triu", FLEET_DTYPE_FLOAT64, TrilLaunch<uint64_t, kX, kOut>, fwd, TrilRelease);
  constexpr auto bwd = TrilPrepare<kOutGrad, kXGrad>;
  Add(list, "tril_triu_grad", FLEET_DTYPE_FLOAT32, TrilLaunch<uint32_t, kOutGrad, kXGrad>, bwd,
      TrilRelease);
  Add(list, "tril_triu_grad", FLEET_DTYPE_FLOAT64, TrilLaunch<uint64_t, kOutGrad, kXGrad>, bwd,
      TrilRelease);
}

}  // namespace fleet_cuda
