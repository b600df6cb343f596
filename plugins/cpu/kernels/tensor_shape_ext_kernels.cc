// More layout kernels: unsqueeze2, squeeze2, expand_v2, expand_as_v2, tile, stack, unstack,
// flip, roll, strided_slice and their copy-only gradients run as copy plans
// (plugins/common/shape_plan.h, through the layout kernels of tensor_kernels.cc); the repeat
// ops' gradients sum with a RepeatSumPlan made at prepare; tril_triu (+ grad) masks with the
// shared TrilKeeps rule; pad3d (+ grad) and pad run pad_plan.h's per-element functions, and
// pad_grad is a copy plan.
#include <memory>
#include <string>
#include <vector>

#include "index_plan.h"
#include "kernels/tensor_kernel_util.h"
#include "pad_plan.h"
#include "shape_plan.h"

namespace fleet_cpu::tensor {
namespace {

namespace plan = fleet::kernel;
using plan::RepeatSumPlan;
using plan::TrilPlan;

// ---- expand_v2_grad / expand_as_v2_grad / tile_grad -----------------------------------------

// The kept entries of a RepeatSumPlan, and the Out@GRAD offset of every repeat.
struct RepeatSumState {
  std::vector<int64_t> kept_dims, kept_strides, red_offsets;
  int64_t kept_count = 1, red_count = 1;
};

// Offset of row-major element k of `dims` under `strides`.
int64_t OffsetOf(int64_t k, const std::vector<int64_t>& dims,
                 const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    off += (k % dims[d]) * strides[d];
    k /= dims[d];
  }
  return off;
}

template <bool kTile>
FleetStatus* RepeatSumPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    RepeatSumPlan p;
    if (FleetStatus* err = plan::ToFleetStatus(plan::BuildRepeatSum(kc, kTile, &p), Error)) {
      return err;
    }
    auto st = std::make_unique<RepeatSumState>();
    std::vector<int64_t> red_dims, red_strides;
    for (int i = 0; i < p.rank; ++i) {
      (p.reduced[i] ? red_dims : st->kept_dims).push_back(p.dims[i]);
      (p.reduced[i] ? red_strides : st->kept_strides).push_back(p.strides[i]);
    }
    st->kept_count = p.kept_count;
    st->red_count = p.red_count;
    st->red_offsets.resize(static_cast<size_t>(p.red_count));
    for (int64_t r = 0; r < p.red_count; ++r) {
      st->red_offsets[static_cast<size_t>(r)] = OffsetOf(r, red_dims, red_strides);
    }
    *state = st.release();
    return nullptr;
  });
}

void RepeatSumRelease(void*, void* state) { delete static_cast<RepeatSumState*>(state); }

// Each X@GRAD element sums its repeats in row-major order of the repeat entries, in double,
// so the result does not depend on threads.
template <typename T>
FleetStatus* RepeatSumLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* st = static_cast<const RepeatSumState*>(state);
    if (st == nullptr) return InvalidArgument(std::string(kc->op_type) + ": not prepared");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (dx == nullptr) return nullptr;
    if (dout == nullptr || Numel(dx) != st->kept_count ||
        Numel(dout) != st->kept_count * st->red_count) {
      return InvalidArgument(std::string(kc->op_type) + ": shapes changed after prepare");
    }
    const T* g = Data<const T>(dout);
    T* out = Data<T>(dx);
    for (int64_t k = 0; k < st->kept_count; ++k) {
      const T* base = g + OffsetOf(k, st->kept_dims, st->kept_strides);
      double acc = 0;
      for (int64_t off : st->red_offsets) acc += static_cast<double>(base[off]);
      out[k] = static_cast<T>(acc);
    }
    return nullptr;
  });
}

// ---- tril_triu ------------------------------------------------------------------------------

template <const char* kSrc, const char* kDst>
FleetStatus* TrilPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
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

template <typename E, const char* kSrc, const char* kDst>
FleetStatus* TrilLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const TrilPlan*>(state);
    if (p == nullptr) return InvalidArgument(std::string(kc->op_type) + ": not prepared");
    const FleetTensor* src = Input(kc, kSrc);
    const FleetTensor* dst = Output(kc, kDst);
    if (dst == nullptr) return nullptr;
    const int64_t n = p->batch * p->rows * p->cols;
    if (src == nullptr || Numel(src) != n || Numel(dst) != n) {
      return InvalidArgument(std::string(kc->op_type) + ": shapes changed after prepare");
    }
    const E* x = Data<const E>(src);
    E* out = Data<E>(dst);
    for (int64_t b = 0; b < p->batch; ++b) {
      for (int64_t r = 0; r < p->rows; ++r) {
        const int64_t row = (b * p->rows + r) * p->cols;
        for (int64_t c = 0; c < p->cols; ++c) {
          out[row + c] = plan::TrilKeeps(*p, r, c) ? x[row + c] : E(0);
        }
      }
    }
    return nullptr;
  });
}

// ---- pad3d ----------------------------------------------------------------------------------

template <bool kGrad>
FleetStatus* Pad3dPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto p = std::make_unique<plan::Pad3dPlan>();
    if (FleetStatus* err = plan::ToFleetStatus(plan::PlanPad3d(kc, kGrad, p.get()), Error)) {
      return err;
    }
    *state = p.release();
    return nullptr;
  });
}

void Pad3dRelease(void*, void* state) { delete static_cast<plan::Pad3dPlan*>(state); }

// Every element is computed by the shared per-element functions of pad_plan.h.
template <typename T, bool kGrad>
FleetStatus* Pad3dLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const plan::Pad3dPlan*>(state);
    if (p == nullptr) return InvalidArgument(std::string(kc->op_type) + ": not prepared");
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* o = kGrad ? Input(kc, "Out@GRAD") : Output(kc, "Out");
    const FleetTensor* dx = kGrad ? Output(kc, "X@GRAD") : nullptr;
    if (kGrad && dx == nullptr) return nullptr;
    const int64_t in_n = p->n * p->c * p->in[0] * p->in[1] * p->in[2];
    const int64_t out_n = p->n * p->c * p->out[0] * p->out[1] * p->out[2];
    if (x == nullptr || o == nullptr || Numel(x) != in_n || Numel(o) != out_n ||
        (kGrad && Numel(dx) != in_n)) {
      return InvalidArgument(std::string(kc->op_type) + ": shapes changed after prepare");
    }
    if constexpr (kGrad) {
      for (int64_t e = 0; e < in_n; ++e) plan::Pad3dGradValue(*p, e, Data<const T>(o), Data<T>(dx));
    } else {
      for (int64_t e = 0; e < out_n; ++e) plan::Pad3dValue(*p, e, Data<const T>(x), Data<T>(o));
    }
    return nullptr;
  });
}

// ---- pad ------------------------------------------------------------------------------------

FleetStatus* PadPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
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
FleetStatus* PadLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const plan::PadPlan*>(state);
    if (p == nullptr) return InvalidArgument(std::string(kc->op_type) + ": not prepared");
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    int64_t in_n = 1, out_n = 1;
    for (int k = 0; k < p->rank; ++k) {
      in_n *= p->in[k];
      out_n *= p->out[k];
    }
    if (x == nullptr || out == nullptr || Numel(x) != in_n || Numel(out) != out_n) {
      return InvalidArgument(std::string(kc->op_type) + ": shapes changed after prepare");
    }
    for (int64_t e = 0; e < out_n; ++e) plan::PadValue(*p, e, Data<const T>(x), Data<T>(out));
    return nullptr;
  });
}

constexpr char kX[] = "X";
constexpr char kOut[] = "Out";
constexpr char kOutGrad[] = "Out@GRAD";
constexpr char kXGrad[] = "X@GRAD";

}  // namespace

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

  // Masking only moves elements or writes zero bits, so the element size is all that matters.
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

}  // namespace fleet_cpu::tensor
