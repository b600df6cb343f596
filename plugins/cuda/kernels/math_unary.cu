// The unary math ops and the activations of math_unary_ops.cc, prelu and cumsum, with their
// grads, computing the CPU plugin's formulas from plugins/common/unary_formulas.h.
// Element-wise ops and prelu's X parts run a thread per element. Alpha@GRAD of prelu is a group
// sum (math_groups.h) over each alpha's elements in a fixed order, planned at prepare. cumsum
// runs a thread per line along the summed axis, each adding its line in order (in double for
// floats), so results do not vary from run to run; neighbouring threads take neighbouring
// lines, which are adjacent in memory unless the axis is the innermost one. Lines of 512 or
// more scan in a block each (BlockScanKernel), still in a fixed order.
#include <algorithm>
#include <memory>
#include <string>

#include "kernels/math_groups.h"
#include "unary_formulas.h"

namespace fleet_cuda {
namespace math {
namespace {

using fleet::kernel::PreluPlan;
using fleet::kernel::ScanPlan;
using fleet::kernel::UnaryAttr;
using fleet::kernel::UnaryGradInput;
using fleet::kernel::UnaryOp;
using fleet::kernel::UnaryParams;

template <typename T>
UnaryParams<T> ReadParams(const FleetKernelContext* kc, UnaryOp op) {
  const auto attrs = fleet::kernel::UnaryAttrsOf(op);
  auto read = [&](const UnaryAttr& a) {
    return a.name != nullptr ? static_cast<T>(FloatAttr(kc, a.name, a.fallback)) : T(0);
  };
  UnaryParams<T> p;
  p.a = read(attrs.a);
  p.b = read(attrs.b);
  p.c = read(attrs.c);
  return p;
}

// ---- element-wise ---------------------------------------------------------------------------

template <UnaryOp op, typename T>
__global__ void UnaryKernel(const T* x, T* out, int64_t n, UnaryParams<T> p) {
  FLEET_CUDA_LOOP(i, n) { out[i] = fleet::kernel::UnaryForward<op>(x[i], p); }
}

// `v` is null for the ops whose gradient reads no forward tensor.
template <UnaryOp op, typename T>
__global__ void UnaryGradKernel(const T* v, const T* g, T* dx, int64_t n, UnaryParams<T> p) {
  FLEET_CUDA_LOOP(i, n) {
    dx[i] = fleet::kernel::UnaryBackward<op>(v != nullptr ? v[i] : T(0), g[i], p);
  }
}

template <UnaryOp op, typename T>
FleetStatus* UnaryLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if (n == 0) return nullptr;
    UnaryKernel<op, T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x), Data<T>(out), n,
                                                              ReadParams<T>(kc, op));
    return nullptr;
  });
}

template <UnaryOp op, typename T>
FleetStatus* UnaryGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    constexpr UnaryGradInput kReads = fleet::kernel::UnaryGradReads(op);
    const char* v_slot = kReads == UnaryGradInput::kOut ? "Out" : "X";
    if (FleetStatus* e = RequireSlots(kc, {"Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const int64_t n = Numel(dout);
    if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", n)) return e;
    const T* vs = nullptr;
    if (kReads != UnaryGradInput::kNone) {
      if (FleetStatus* e = RequireSlots(kc, {v_slot}, {})) return e;
      if (FleetStatus* e = ExpectNumel(kc, Input(kc, v_slot), v_slot, n)) return e;
      vs = Data<const T>(Input(kc, v_slot));
    }
    if (n == 0) return nullptr;
    UnaryGradKernel<op, T><<<Blocks(n), kThreads, 0, s->native>>>(
        vs, Data<const T>(dout), Data<T>(dx), n, ReadParams<T>(kc, op));
    return nullptr;
  });
}

template <UnaryOp op>
void AddUnary(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, UnaryLaunch<op, float>);
  Add(list, name, FLEET_DTYPE_FLOAT64, UnaryLaunch<op, double>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, UnaryGradLaunch<op, float>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, UnaryGradLaunch<op, double>);
}

// ---- prelu ----------------------------------------------------------------------------------

FleetStatus* PreluPlanFor(const FleetKernelContext* kc, const FleetTensor* x,
                          const FleetTensor* alpha, PreluPlan* p) {
  const std::string_view mode = StringAttr(kc, "mode");
  const std::string_view format = StringAttr(kc, "data_format");
  if (!fleet::kernel::MakePreluPlan(x->dims, x->ndim, mode.empty() ? "all" : mode,
                                    format.empty() ? "NCHW" : format, p)) {
    return InvalidArgument(OpName(kc) + ": mode '" + std::string(mode) + "' / data_format '" +
                           std::string(format) + "' does not suit X " + DimsText(x));
  }
  if (Numel(alpha) != p->channels) {
    return InvalidArgument(OpName(kc) + ": Alpha " + DimsText(alpha) + " has " +
                           std::to_string(Numel(alpha)) + " elements, mode '" +
                           std::string(mode) + "' needs " + std::to_string(p->channels));
  }
  return nullptr;
}

template <typename T>
__global__ void PreluKernel(const T* x, const T* alpha, T* out, int64_t n, PreluPlan p) {
  FLEET_CUDA_LOOP(i, n) {
    out[i] = fleet::kernel::PreluForward(x[i], alpha[fleet::kernel::PreluAlphaIndex(p, i)]);
  }
}

template <typename T>
__global__ void PreluGradXKernel(const T* x, const T* alpha, const T* g, T* dx, int64_t n,
                                 PreluPlan p) {
  FLEET_CUDA_LOOP(i, n) {
    dx[i] = fleet::kernel::PreluGradX(x[i], alpha[fleet::kernel::PreluAlphaIndex(p, i)], g[i]);
  }
}

// A group-sum term: one element's contribution to its alpha's gradient (array 0 addresses X and
// Out@GRAD alike).
template <typename T>
struct PreluAlphaTerm {
  const T* x;
  const T* g;
  __device__ T operator()(const int64_t* off) const {
    return fleet::kernel::PreluGradAlphaTerm(x[off[0]], g[off[0]]);
  }
};

// What prelu_grad's prepare keeps: the alpha sum keeps the channel dim and sums outer and inner.
struct PreluGradState {
  PreluPlan plan;
  GroupPlan group;
  GroupLaunch launch;
};

FleetStatus* MakePreluGradState(const FleetKernelContext* kc, bool allow_split,
                                PreluGradState* st) {
  if (FleetStatus* e = RequireSlots(kc, {"X", "Alpha"}, {})) return e;
  if (FleetStatus* e = PreluPlanFor(kc, Input(kc, "X"), Input(kc, "Alpha"), &st->plan)) return e;
  const PreluPlan& p = st->plan;
  st->group = GroupPlan{};
  // Dims of 1 add nothing; an all-reduced plan keeps no dim (one alpha).
  if (p.outer > 1) AddGroupDim(st->group, true, p.outer, p.channels * p.inner);
  if (p.channels > 1) AddGroupDim(st->group, false, p.channels, p.inner);
  if (p.inner > 1) AddGroupDim(st->group, true, p.inner, 1);
  st->launch = PlanGroupLaunch(st->group, allow_split);
  return nullptr;
}

FleetStatus* PreluGradPrepare(void*, const FleetKernelContext* kc, void** state,
                              size_t* scratch_bytes) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto st = std::make_unique<PreluGradState>();
    if (FleetStatus* e = MakePreluGradState(kc, /*allow_split=*/true, st.get())) return e;
    *scratch_bytes = st->launch.scratch_bytes;
    *state = st.release();
    return nullptr;
  });
}

void PreluGradRelease(void*, void* state) { delete static_cast<PreluGradState*>(state); }

template <typename T>
FleetStatus* PreluLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Alpha"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    PreluPlan p;
    if (FleetStatus* e = PreluPlanFor(kc, x, Input(kc, "Alpha"), &p)) return e;
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if (n == 0) return nullptr;
    PreluKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(x), Data<const T>(Input(kc, "Alpha")), Data<T>(out), n, p);
    return nullptr;
  });
}

template <typename T>
FleetStatus* PreluGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Alpha", "Out@GRAD"}, {})) return e;
    PreluGradState local;
    const PreluGradState* st = static_cast<const PreluGradState*>(state);
    if (st == nullptr) {
      if (FleetStatus* e = MakePreluGradState(kc, /*allow_split=*/false, &local)) return e;
      st = &local;
    }
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* alpha = Input(kc, "Alpha");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dalpha = Output(kc, "Alpha@GRAD");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, dout, "Out@GRAD", n)) return e;
    const T* xs = Data<const T>(x);
    const T* gs = Data<const T>(dout);
    if (dx != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", n)) return e;
      if (n > 0) {
        PreluGradXKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
            xs, Data<const T>(alpha), gs, Data<T>(dx), n, st->plan);
      }
    }
    if (dalpha != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dalpha, "Alpha@GRAD", st->plan.channels)) return e;
      if (n == 0) {
        return ZeroAsync(kc, dalpha->data, static_cast<size_t>(Numel(dalpha)) * sizeof(T),
                         s->native, "Alpha@GRAD");
      }
      if (FleetStatus* e = CheckScratch(kc, st->launch.scratch_bytes)) return e;
      LaunchGroupSum(st->group, st->launch, PreluAlphaTerm<T>{xs, gs}, Data<T>(dalpha), 1.0,
                     kc->scratch, s->native);
    }
    return nullptr;
  });
}

// ---- cumsum ---------------------------------------------------------------------------------

template <typename T>
__global__ void ScanKernel(ScanPlan p, const T* in, T* out, bool exclusive, bool reverse) {
  FLEET_CUDA_LOOP(line, p.outer * p.inner) {
    fleet::kernel::ScanLine(p, line, in, out, exclusive, reverse);
  }
}

// A long line scans in one block: each thread sums a contiguous chunk, a fixed tree
// (Hillis-Steele over the block) gives every chunk its exclusive prefix, then each thread scans
// its chunk from there. The sums are in ScanLine's accumulator type, added in a fixed order, so
// runs agree bit for bit; floats differ from the CPU's sequential sum by rounding only. Each
// thread reads its elements before it writes them and no other thread touches them, so X and
// Out may be one buffer.
constexpr int64_t kBlockScanMin = 512;

template <typename T>
__global__ void BlockScanKernel(ScanPlan p, const T* in, T* out, bool exclusive, bool reverse) {
  using Acc = fleet::kernel::ScanAcc<T>;
  __shared__ Acc sums[kThreads];
  const int64_t lines = p.outer * p.inner;
  const int64_t chunk = (p.dim + blockDim.x - 1) / blockDim.x;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    const int64_t base = (line / p.inner) * p.dim * p.inner + line % p.inner;
    const int64_t k0 = threadIdx.x * chunk;
    const int64_t k1 = k0 + chunk < p.dim ? k0 + chunk : p.dim;
    auto at = [&](int64_t k) { return base + (reverse ? p.dim - 1 - k : k) * p.inner; };
    Acc own = 0;
    for (int64_t k = k0; k < k1; ++k) own += static_cast<Acc>(in[at(k)]);
    sums[threadIdx.x] = own;
    __syncthreads();
    for (unsigned off = 1; off < blockDim.x; off <<= 1) {
      const Acc add = threadIdx.x >= off ? sums[threadIdx.x - off] : Acc(0);
      __syncthreads();
      sums[threadIdx.x] += add;
      __syncthreads();
    }
    Acc acc = threadIdx.x > 0 ? sums[threadIdx.x - 1] : Acc(0);
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t i = at(k);
      const Acc v = in[i];
      out[i] = static_cast<T>(exclusive ? acc : acc + v);
      acc += v;
    }
    __syncthreads();  // the next line reuses sums
  }
}

// cumsum scans X into Out; cumsum_grad scans Out@GRAD into X@GRAD the other way, over X's plan.
template <bool kGrad, typename T>
FleetStatus* CumsumLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const char* in_slot = kGrad ? "Out@GRAD" : "X";
    const char* out_slot = kGrad ? "X@GRAD" : "Out";
    if (FleetStatus* e = RequireSlots(kc, {"X", in_slot}, {out_slot})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* in = Input(kc, in_slot);
    const FleetTensor* out = Output(kc, out_slot);
    ScanPlan p;
    const int64_t axis = IntAttr(kc, "axis", -1);
    if (!fleet::kernel::MakeScanPlan(x->dims, x->ndim, axis, BoolAttr(kc, "flatten", false),
                                     &p)) {
      return InvalidArgument(OpName(kc) + ": axis " + std::to_string(axis) +
                             " is out of range for X " + DimsText(x));
    }
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, in, in_slot, n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, out, out_slot, n)) return e;
    if (n == 0) return nullptr;
    const bool exclusive = BoolAttr(kc, "exclusive", false);
    const bool reverse = BoolAttr(kc, "reverse", false) != kGrad;
    if (p.dim >= kBlockScanMin) {
      const unsigned grid = static_cast<unsigned>(std::min<int64_t>(p.outer * p.inner, 65535));
      BlockScanKernel<T><<<grid, kThreads, 0, s->native>>>(p, Data<const T>(in), Data<T>(out),
                                                            exclusive, reverse);
      return nullptr;
    }
    ScanKernel<T><<<Blocks(p.outer * p.inner), kThreads, 0, s->native>>>(
        p, Data<const T>(in), Data<T>(out), exclusive, reverse);
    return nullptr;
  });
}

}  // namespace
}  // namespace math

void AddMathUnaryKernels(KernelList& list) {
  using fleet::kernel::UnaryOp;
  using math::AddUnary;
  AddUnary<UnaryOp::kRsqrt>(list, "rsqrt", "rsqrt_grad");
  AddUnary<UnaryOp::kAbs>(list, "abs", "abs_grad");
  Add(list, "abs", FLEET_DTYPE_INT32, math::UnaryLaunch<UnaryOp::kAbs, int32_t>);
  Add(list, "abs", FLEET_DTYPE_INT64, math::UnaryLaunch<UnaryOp::kAbs, int64_t>);
  AddUnary<UnaryOp::kSin>(list, "sin", "sin_grad");
  AddUnary<UnaryOp::kCos>(list, "cos", "cos_grad");
  AddUnary<UnaryOp::kFloor>(list, "floor", "floor_grad");
  AddUnary<UnaryOp::kCeil>(list, "ceil", "ceil_grad");
  AddUnary<UnaryOp::kRound>(list, "round", "round_grad");
  AddUnary<UnaryOp::kReciprocal>(list, "reciprocal", "reciprocal_grad");
  AddUnary<UnaryOp::kLog1p>(list, "log1p", "log1p_grad");
  AddUnary<UnaryOp::kErf>(list, "erf", "erf_grad");
  AddUnary<UnaryOp::kPow>(list, "pow", "pow_grad");
  AddUnary<UnaryOp::kClip>(list, "clip", "clip_grad");
  AddUnary<UnaryOp::kRelu6>(list, "relu6", "relu6_grad");
  AddUnary<UnaryOp::kSwish>(list, "swish", "swish_grad");
  AddUnary<UnaryOp::kSilu>(list, "silu", "silu_grad");
  AddUnary<UnaryOp::kElu>(list, "elu", "elu_grad");
  AddUnary<UnaryOp::kSelu>(list, "selu", "selu_grad");
  AddUnary<UnaryOp::kHardSwish>(list, "hard_swish", "hard_swish_grad");
  AddUnary<UnaryOp::kHardSigmoid>(list, "hard_sigmoid", "hard_sigmoid_grad");
  AddUnary<UnaryOp::kSoftplus>(list, "softplus", "softplus_grad");
  AddUnary<UnaryOp::kSoftsign>(list, "softsign", "softsign_grad");
  AddUnary<UnaryOp::kMish>(list, "mish", "mish_grad");
  AddUnary<UnaryOp::kLogSigmoid>(list, "logsigmoid", "logsigmoid_grad");
  Add(list, "prelu", FLEET_DTYPE_FLOAT32, math::PreluLaunch<float>);
  Add(list, "prelu", FLEET_DTYPE_FLOAT64, math::PreluLaunch<double>);
  Add(list, "prelu_grad", FLEET_DTYPE_FLOAT32, math::PreluGradLaunch<float>,
      math::PreluGradPrepare, math::PreluGradRelease);
  Add(list, "prelu_grad", FLEET_DTYPE_FLOAT64, math::PreluGradLaunch<double>,
      math::PreluGradPrepare, math::PreluGradRelease);
  for (auto dtype : {FLEET_DTYPE_FLOAT32, FLEET_DTYPE_FLOAT64}) {
    const bool f32 = dtype == FLEET_DTYPE_FLOAT32;
    Add(list, "cumsum", dtype,
        f32 ? math::CumsumLaunch<false, float> : math::CumsumLaunch<false, double>);
    Add(list, "cumsum_grad", dtype,
        f32 ? math::CumsumLaunch<true, float> : math::CumsumLaunch<true, double>);
  }
  Add(list, "cumsum", FLEET_DTYPE_INT32, math::CumsumLaunch<false, int32_t>);
  Add(list, "cumsum", FLEET_DTYPE_INT64, math::CumsumLaunch<false, int64_t>);
}

}  // namespace fleet_cuda
