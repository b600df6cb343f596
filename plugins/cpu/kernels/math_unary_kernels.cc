// The unary math ops and the activations of math_unary_ops.cc, prelu and cumsum, with their
// grads; the formulas and index plans are plugins/common/unary_formulas.h, shared with the CUDA
// plugin.
//
// float32 runs a oneDNN eltwise primitive, created at prepare, where oneDNN's algorithm is
// Paddle's function with the op's attributes; everywhere else (float64, and float32 without a
// prepared primitive) a plain loop over the shared formula runs. Left to the loop on purpose:
// round (oneDNN rounds halves to even, Paddle away from zero); softplus except with beta 1 and
// threshold 20, mish except with threshold 20 and hard_swish except with its default attributes
// (oneDNN's take no parameters; at those values the two agree to float32 precision); and the
// grads that read Out (rsqrt, reciprocal, selu, hard_sigmoid), as oneDNN's pow / elu backward
// read X. elu is oneDNN's for every alpha: both define it as x, or alpha * (exp(x) - 1) for
// x <= 0.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "kernels/math_util.h"
#include "unary_formulas.h"

namespace fleet_cpu::math {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using fleet::kernel::PreluPlan;
using fleet::kernel::ScanPlan;
using fleet::kernel::UnaryAttr;
using fleet::kernel::UnaryGradInput;
using fleet::kernel::UnaryOp;
using fleet::kernel::UnaryParams;

// Elements a loop thread takes at least; below two of these a loop runs inline.
constexpr int64_t kGrain = 1 << 14;

std::string OpName(const FleetKernelContext* kc) {
  return kc->op_type != nullptr ? kc->op_type : "kernel";
}

FleetStatus* ExpectNumel(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                         int64_t expected) {
  if (Numel(t) == expected) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot + " has " + std::to_string(Numel(t)) +
                         " elements, expected " + std::to_string(expected));
}

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

const char* GradSlot(UnaryOp op) {
  return fleet::kernel::UnaryGradReads(op) == UnaryGradInput::kOut ? "Out" : "X";
}

// ---- oneDNN eltwise -------------------------------------------------------------------------

struct EltwiseChoice {
  algorithm alg = algorithm::undef;
  float alpha = 0.0f, beta = 0.0f;
};

// oneDNN's algorithm for the forward or backward pass of `op` with attributes `p`, or undef
// where its definition is not Paddle's (see the file comment). A backward choice reads the
// tensor the schema's grad op reads: src for X, dst (a *_use_dst_for_bwd algorithm) for Out.
EltwiseChoice DnnlChoice(UnaryOp op, bool grad, const UnaryParams<float>& p) {
  switch (op) {
    case UnaryOp::kAbs: return {algorithm::eltwise_abs};
    case UnaryOp::kPow: return {algorithm::eltwise_pow, 1.0f, p.a};
    case UnaryOp::kRsqrt:
      return grad ? EltwiseChoice{} : EltwiseChoice{algorithm::eltwise_pow, 1.0f, -0.5f};
    case UnaryOp::kReciprocal:
      return grad ? EltwiseChoice{} : EltwiseChoice{algorithm::eltwise_pow, 1.0f, -1.0f};
    case UnaryOp::kClip: return {algorithm::eltwise_clip_v2, p.a, p.b};
    case UnaryOp::kRelu6: return {algorithm::eltwise_clip_v2_use_dst_for_bwd, 0.0f, p.a};
    case UnaryOp::kSwish: return {algorithm::eltwise_swish, p.a};
    case UnaryOp::kSilu: return {algorithm::eltwise_swish, 1.0f};
    case UnaryOp::kElu: return {algorithm::eltwise_elu, p.a};
    case UnaryOp::kHardSwish:
      if (p.a == 6.0f && p.b == 6.0f && p.c == 3.0f) return {algorithm::eltwise_hardswish};
      return {};
    case UnaryOp::kSoftplus:
      if (p.a == 1.0f && p.b == 20.0f) return {algorithm::eltwise_soft_relu};
      return {};
    case UnaryOp::kMish:
      if (p.a == 20.0f) return {algorithm::eltwise_mish};
      return {};
    case UnaryOp::kLogSigmoid: return {algorithm::eltwise_logsigmoid};
    default: return {};
  }
}

struct DnnlState {
  DnnlCall call;
  size_t scratch = 0;
  bool reads_dst = false;  // backward: the primitive reads Out (dst) rather than X (src)
};

void DnnlRelease(void*, void* state) { delete static_cast<DnnlState*>(state); }

FleetStatus* RunState(const FleetKernelContext* kc, DnnlState& st) {
  if (st.scratch > 0) {
    if (kc->scratch == nullptr) {
      return InvalidArgument(OpName(kc) + ": launched without its scratch memory");
    }
    st.call.Set(DNNL_ARG_SCRATCHPAD, kc->scratch);
  }
  st.call.Run();
  return nullptr;
}

void BindScratch(DnnlState& st, const memory::desc& sp) {
  st.scratch = sp.get_size();
  if (st.scratch > 0) st.call.Bind(DNNL_ARG_SCRATCHPAD, sp);
}

// Leaves *state null (the launch then loops) when oneDNN has no matching algorithm.
template <UnaryOp op, bool kGrad>
FleetStatus* UnaryPrepare(void*, const FleetKernelContext* kc, void** state,
                          size_t* scratch_bytes) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* t = Input(kc, kGrad ? "Out@GRAD" : "X");
    if (t == nullptr) {
      return InvalidArgument(OpName(kc) + ": input " + (kGrad ? "Out@GRAD" : "X") +
                             " is missing");
    }
    const int64_t n = Numel(t);
    const EltwiseChoice ch = DnnlChoice(op, kGrad, ReadParams<float>(kc, op));
    if (n == 0 || ch.alg == algorithm::undef) return nullptr;
    const memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
    auto st = std::make_unique<DnnlState>();
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, ch.alg, md, ch.alpha,
                                   ch.beta);
    dnnl::eltwise_forward::primitive_desc fpd(fd, UserScratchpad(), DnnlEngine());
    if constexpr (!kGrad) {
      st->call.prim = dnnl::eltwise_forward(fpd);
      st->call.Bind(DNNL_ARG_SRC, md);
      st->call.Bind(DNNL_ARG_DST, md);
      BindScratch(*st, fpd.scratchpad_desc());
    } else {
      dnnl::eltwise_backward::desc bd(ch.alg, md, md, ch.alpha, ch.beta);
      dnnl::eltwise_backward::primitive_desc bpd(bd, UserScratchpad(), DnnlEngine(), fpd);
      st->call.prim = dnnl::eltwise_backward(bpd);
      st->reads_dst = fleet::kernel::UnaryGradReads(op) == UnaryGradInput::kOut;
      st->call.Bind(st->reads_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, md);
      st->call.Bind(DNNL_ARG_DIFF_DST, md);
      st->call.Bind(DNNL_ARG_DIFF_SRC, md);
      BindScratch(*st, bpd.scratchpad_desc());
    }
    *scratch_bytes = st->scratch;
    *state = st.release();
    return nullptr;
  });
}

// ---- element-wise launches ------------------------------------------------------------------

template <UnaryOp op, typename T>
FleetStatus* UnaryLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if constexpr (std::is_same_v<T, float>) {
      if (auto* st = static_cast<DnnlState*>(state)) {
        st->call.Set(DNNL_ARG_SRC, x->data);
        st->call.Set(DNNL_ARG_DST, out->data);
        return RunState(kc, *st);
      }
    }
    const UnaryParams<T> p = ReadParams<T>(kc, op);
    const T* xs = Data<const T>(x);
    T* os = Data<T>(out);
    ParallelFor(kc, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) os[i] = fleet::kernel::UnaryForward<op>(xs[i], p);
    });
    return nullptr;
  });
}

template <UnaryOp op, typename T>
FleetStatus* UnaryGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const int64_t n = Numel(dout);
    if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", n)) return e;
    constexpr bool kReads = fleet::kernel::UnaryGradReads(op) != UnaryGradInput::kNone;
    const FleetTensor* v = kReads ? Input(kc, GradSlot(op)) : nullptr;
    if (kReads) {
      if (v == nullptr) {
        return InvalidArgument(OpName(kc) + ": input " + GradSlot(op) + " is missing");
      }
      if (FleetStatus* e = ExpectNumel(kc, v, GradSlot(op), n)) return e;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (auto* st = static_cast<DnnlState*>(state)) {
        st->call.Set(st->reads_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, v->data);
        st->call.Set(DNNL_ARG_DIFF_DST, dout->data);
        st->call.Set(DNNL_ARG_DIFF_SRC, dx->data);
        return RunState(kc, *st);
      }
    }
    const UnaryParams<T> p = ReadParams<T>(kc, op);
    const T* vs = kReads ? Data<const T>(v) : nullptr;
    const T* gs = Data<const T>(dout);
    T* dxs = Data<T>(dx);
    ParallelFor(kc, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        dxs[i] = fleet::kernel::UnaryBackward<op>(kReads ? vs[i] : T(0), gs[i], p);
      }
    });
    return nullptr;
  });
}

template <UnaryOp op>
void AddUnary(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, UnaryLaunch<op, float>, UnaryPrepare<op, false>,
      DnnlRelease);
  Add(list, name, FLEET_DTYPE_FLOAT64, UnaryLaunch<op, double>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, UnaryGradLaunch<op, float>, UnaryPrepare<op, true>,
      DnnlRelease);
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
                           std::string(format) + "' does not suit X of rank " +
                           std::to_string(x->ndim));
  }
  if (Numel(alpha) != p->channels) {
    return InvalidArgument(OpName(kc) + ": Alpha has " + std::to_string(Numel(alpha)) +
                           " elements, mode '" + std::string(mode) + "' needs " +
                           std::to_string(p->channels));
  }
  return nullptr;
}

template <typename T>
FleetStatus* PreluLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Alpha"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    PreluPlan p;
    if (FleetStatus* e = PreluPlanFor(kc, x, Input(kc, "Alpha"), &p)) return e;
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    const T* xs = Data<const T>(x);
    const T* as = Data<const T>(Input(kc, "Alpha"));
    T* os = Data<T>(out);
    ParallelFor(kc, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        os[i] = fleet::kernel::PreluForward(xs[i], as[fleet::kernel::PreluAlphaIndex(p, i)]);
      }
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* PreluGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Alpha", "Out@GRAD"}, {})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* alpha = Input(kc, "Alpha");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dalpha = Output(kc, "Alpha@GRAD");
    PreluPlan p;
    if (FleetStatus* e = PreluPlanFor(kc, x, alpha, &p)) return e;
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Out@GRAD"), "Out@GRAD", n)) return e;
    const T* xs = Data<const T>(x);
    const T* as = Data<const T>(alpha);
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    if (dx != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", n)) return e;
      T* dxs = Data<T>(dx);
      ParallelFor(kc, n, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          dxs[i] = fleet::kernel::PreluGradX(xs[i], as[fleet::kernel::PreluAlphaIndex(p, i)],
                                             gs[i]);
        }
      });
    }
    if (dalpha != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dalpha, "Alpha@GRAD", p.channels)) return e;
      T* das = Data<T>(dalpha);
      // Each alpha sums its elements in (outer, inner) order in double, as the CUDA plugin's
      // group sum does, so the two agree to rounding.
      const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, p.outer * p.inner));
      ParallelFor(kc, p.channels, grain, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          double acc = 0;
          for (int64_t o = 0; o < p.outer; ++o) {
            const int64_t base = (o * p.channels + c) * p.inner;
            for (int64_t k = 0; k < p.inner; ++k) {
              acc += static_cast<double>(
                  fleet::kernel::PreluGradAlphaTerm(xs[base + k], gs[base + k]));
            }
          }
          das[c] = static_cast<T>(acc);
        }
      });
    }
    return nullptr;
  });
}

// ---- cumsum ---------------------------------------------------------------------------------

// cumsum scans X into Out; cumsum_grad scans Out@GRAD into X@GRAD the other way, over the plan
// of X (of Out@GRAD's elements when flattened, which are X's in the same order).
template <bool kGrad, typename T>
FleetStatus* CumsumLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
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
                             " is out of range for X of rank " + std::to_string(x->ndim));
    }
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, in, in_slot, n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, out, out_slot, n)) return e;
    const bool exclusive = BoolAttr(kc, "exclusive", false);
    const bool reverse = BoolAttr(kc, "reverse", false) != kGrad;
    const T* is = Data<const T>(in);
    T* os = Data<T>(out);
    const int64_t lines = p.outer * p.inner;
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, p.dim));
    ParallelFor(kc, lines, grain, [&](int64_t begin, int64_t end) {
      for (int64_t l = begin; l < end; ++l) {
        fleet::kernel::ScanLine(p, l, is, os, exclusive, reverse);
      }
    });
    return nullptr;
  });
}

}  // namespace

void AddUnaryKernels(KernelList& list) {
  AddUnary<UnaryOp::kRsqrt>(list, "rsqrt", "rsqrt_grad");
  AddUnary<UnaryOp::kAbs>(list, "abs", "abs_grad");
  Add(list, "abs", FLEET_DTYPE_INT32, UnaryLaunch<UnaryOp::kAbs, int32_t>);
  Add(list, "abs", FLEET_DTYPE_INT64, UnaryLaunch<UnaryOp::kAbs, int64_t>);
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
  for (auto dtype : {FLEET_DTYPE_FLOAT32, FLEET_DTYPE_FLOAT64}) {
    const bool f32 = dtype == FLEET_DTYPE_FLOAT32;
    Add(list, "prelu", dtype, f32 ? PreluLaunch<float> : PreluLaunch<double>);
    Add(list, "prelu_grad", dtype, f32 ? PreluGradLaunch<float> : PreluGradLaunch<double>);
    Add(list, "cumsum", dtype, f32 ? CumsumLaunch<false, float> : CumsumLaunch<false, double>);
    Add(list, "cumsum_grad", dtype,
        f32 ? CumsumLaunch<true, float> : CumsumLaunch<true, double>);
  }
  Add(list, "cumsum", FLEET_DTYPE_INT32, CumsumLaunch<false, int32_t>);
  Add(list, "cumsum", FLEET_DTYPE_INT64, CumsumLaunch<false, int64_t>);
}

}  // namespace fleet_cpu::math
