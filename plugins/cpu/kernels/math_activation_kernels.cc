// Activations, softmax and log_softmax with their grads. float32 runs oneDNN eltwise / softmax
// / logsoftmax primitives created at prepare; float64 (and float32 when no state was prepared)
// runs plain loops with the same formulas.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "kernels/math_util.h"

namespace fleet_cpu::math {
namespace {

using dnnl::algorithm;
using dnnl::memory;

enum class Act { kRelu, kTanh, kSigmoid, kSqrt, kExp, kGelu, kLeakyRelu, kSquare, kLog };

// ---- plain formulas ------------------------------------------------------------------------

template <typename T>
constexpr T kSqrt2OverPi = T(0.7978845608028654);
template <typename T>
constexpr T kGeluCoeff = T(0.044715);

template <Act a, typename T>
inline T Forward(T x, bool approximate, T alpha) {
  if constexpr (a == Act::kRelu) return x > T(0) ? x : T(0);
  if constexpr (a == Act::kTanh) return std::tanh(x);
  if constexpr (a == Act::kSigmoid) return T(1) / (T(1) + std::exp(-x));
  if constexpr (a == Act::kSqrt) return std::sqrt(x);
  if constexpr (a == Act::kExp) return std::exp(x);
  if constexpr (a == Act::kGelu) {
    if (approximate) {
      return T(0.5) * x * (T(1) + std::tanh(kSqrt2OverPi<T> * (x + kGeluCoeff<T> * x * x * x)));
    }
    return T(0.5) * x * (T(1) + std::erf(x / std::sqrt(T(2))));
  }
  if constexpr (a == Act::kLeakyRelu) return x > T(0) ? x : alpha * x;
  if constexpr (a == Act::kSquare) return x * x;
  if constexpr (a == Act::kLog) return std::log(x);
}

// dX from `v` (Out for the ops whose grad reads Out, X otherwise) and dOut.
template <Act a, typename T>
inline T Backward(T v, T g, bool approximate, T alpha) {
  if constexpr (a == Act::kRelu) return v > T(0) ? g : T(0);
  if constexpr (a == Act::kTanh) return g * (T(1) - v * v);
  if constexpr (a == Act::kSigmoid) return g * v * (T(1) - v);
  if constexpr (a == Act::kSqrt) return g * T(0.5) / v;
  if constexpr (a == Act::kExp) return g * v;
  if constexpr (a == Act::kGelu) {
    if (approximate) {
      const T u = kSqrt2OverPi<T> * (v + kGeluCoeff<T> * v * v * v);
      const T t = std::tanh(u);
      const T du = kSqrt2OverPi<T> * (T(1) + T(3) * kGeluCoeff<T> * v * v);
      return g * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
    }
    const T cdf = T(0.5) * (T(1) + std::erf(v / std::sqrt(T(2))));
    const T pdf = std::exp(T(-0.5) * v * v) / std::sqrt(T(2) * T(M_PI));
    return g * (cdf + v * pdf);
  }
  if constexpr (a == Act::kLeakyRelu) return v > T(0) ? g : alpha * g;
  if constexpr (a == Act::kSquare) return g * T(2) * v;
  if constexpr (a == Act::kLog) return g / v;
}

constexpr bool GradReadsOut(Act a) {
  return a == Act::kRelu || a == Act::kTanh || a == Act::kSigmoid || a == Act::kSqrt ||
         a == Act::kExp;
}

// ---- oneDNN eltwise ------------------------------------------------------------------------

// The oneDNN algorithm and alpha for an activation; the *_use_dst_for_bwd variants where the
// grad reads Out.
algorithm DnnlAlgorithm(Act a, bool approximate) {
  switch (a) {
    case Act::kRelu: return algorithm::eltwise_relu_use_dst_for_bwd;
    case Act::kTanh: return algorithm::eltwise_tanh_use_dst_for_bwd;
    case Act::kSigmoid: return algorithm::eltwise_logistic_use_dst_for_bwd;
    case Act::kSqrt: return algorithm::eltwise_sqrt_use_dst_for_bwd;
    case Act::kExp: return algorithm::eltwise_exp_use_dst_for_bwd;
    case Act::kGelu:
      return approximate ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf;
    case Act::kLeakyRelu: return algorithm::eltwise_relu;
    case Act::kSquare: return algorithm::eltwise_square;
    case Act::kLog: return algorithm::eltwise_log;
  }
  return algorithm::undef;
}

struct DnnlState {
  DnnlCall call;
  size_t scratch = 0;
};

void DnnlRelease(void*, void* state) { delete static_cast<DnnlState*>(state); }

FleetStatus* RunState(const FleetKernelContext* kc, DnnlState& st) {
  if (st.scratch > 0) {
    if (kc->scratch == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": launched without its scratch memory");
    }
    st.call.Set(DNNL_ARG_SCRATCHPAD, kc->scratch);
  }
  UseThreads(kc);
  st.call.Run();
  return nullptr;
}

void BindScratch(DnnlState& st, const memory::desc& sp) {
  st.scratch = sp.get_size();
  if (st.scratch > 0) st.call.Bind(DNNL_ARG_SCRATCHPAD, sp);
}

template <Act a, bool kGrad>
FleetStatus* EltwisePrepare(void*, const FleetKernelContext* kc, void** state,
                            size_t* scratch_bytes) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    if (Input(kc, "Out@GRAD") == nullptr && Input(kc, "X") == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": input X / Out@GRAD is missing");
    }
    const int64_t n = Numel(Input(kc, "Out@GRAD") != nullptr ? Input(kc, "Out@GRAD")
                                                             : Input(kc, "X"));
    if (n == 0) return nullptr;
    const algorithm alg = DnnlAlgorithm(a, BoolAttr(kc, "approximate", false));
    const float alpha = a == Act::kLeakyRelu ? static_cast<float>(FloatAttr(kc, "alpha", 0.02))
                                             : 0.0f;
    const memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
    auto st = std::make_unique<DnnlState>();
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, alg, md, alpha, 0.0f);
    dnnl::eltwise_forward::primitive_desc fpd(fd, UserScratchpad(), DnnlEngine());
    if (!kGrad) {
      st->call.prim = dnnl::eltwise_forward(fpd);
      st->call.Bind(DNNL_ARG_SRC, md);
      st->call.Bind(DNNL_ARG_DST, md);
      BindScratch(*st, fpd.scratchpad_desc());
    } else {
      dnnl::eltwise_backward::desc bd(alg, md, md, alpha, 0.0f);
      dnnl::eltwise_backward::primitive_desc bpd(bd, UserScratchpad(), DnnlEngine(), fpd);
      st->call.prim = dnnl::eltwise_backward(bpd);
      st->call.Bind(GradReadsOut(a) ? DNNL_ARG_DST : DNNL_ARG_SRC, md);
      st->call.Bind(DNNL_ARG_DIFF_DST, md);
      st->call.Bind(DNNL_ARG_DIFF_SRC, md);
      BindScratch(*st, bpd.scratchpad_desc());
    }
    *scratch_bytes = st->scratch;
    *state = st.release();
    return nullptr;
  });
}

template <Act a, typename T>
FleetStatus* ActLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    if constexpr (std::is_same_v<T, float>) {
      if (auto* st = static_cast<DnnlState*>(state)) {
        st->call.Set(DNNL_ARG_SRC, x->data);
        st->call.Set(DNNL_ARG_DST, out->data);
        return RunState(kc, *st);
      }
    }
    const bool approximate = BoolAttr(kc, "approximate", false);
    const T alpha = static_cast<T>(FloatAttr(kc, "alpha", 0.02));
    const T* xs = Data<const T>(x);
    T* os = Data<T>(out);
    const int64_t n = Numel(x);
    for (int64_t i = 0; i < n; ++i) os[i] = Forward<a>(xs[i], approximate, alpha);
    return nullptr;
  });
}

template <Act a, typename T>
FleetStatus* ActGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* v = Input(kc, GradReadsOut(a) ? "Out" : "X");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (v == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": input " +
                             (GradReadsOut(a) ? "Out" : "X") + " is missing");
    }
    if constexpr (std::is_same_v<T, float>) {
      if (auto* st = static_cast<DnnlState*>(state)) {
        st->call.Set(GradReadsOut(a) ? DNNL_ARG_DST : DNNL_ARG_SRC, v->data);
        st->call.Set(DNNL_ARG_DIFF_DST, dout->data);
        st->call.Set(DNNL_ARG_DIFF_SRC, dx->data);
        return RunState(kc, *st);
      }
    }
    const bool approximate = BoolAttr(kc, "approximate", false);
    const T alpha = static_cast<T>(FloatAttr(kc, "alpha", 0.02));
    const T* vs = Data<const T>(v);
    const T* gs = Data<const T>(dout);
    T* dxs = Data<T>(dx);
    const int64_t n = Numel(dout);
    for (int64_t i = 0; i < n; ++i) dxs[i] = Backward<a>(vs[i], gs[i], approximate, alpha);
    return nullptr;
  });
}

template <Act a>
void AddActivation(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, ActLaunch<a, float>, EltwisePrepare<a, false>,
      DnnlRelease);
  Add(list, name, FLEET_DTYPE_FLOAT64, ActLaunch<a, double>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, ActGradLaunch<a, float>, EltwisePrepare<a, true>,
      DnnlRelease);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, ActGradLaunch<a, double>);
}

// ---- softmax / log_softmax -----------------------------------------------------------------

// The tensor as [outer, axis dim, inner] around the normalised axis.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};

FleetStatus* SplitAxis(const FleetKernelContext* kc, const FleetTensor* t, AxisSplit* s) {
  const int64_t rank = t->ndim;
  int64_t axis = IntAttr(kc, "axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return InvalidArgument(std::string(kc->op_type) + ": axis " +
                           std::to_string(IntAttr(kc, "axis", -1)) + " is out of range for rank " +
                           std::to_string(rank));
  }
  s->outer = s->inner = 1;
  for (int64_t i = 0; i < axis; ++i) s->outer *= t->dims[i];
  s->dim = t->dims[axis];
  for (int64_t i = axis + 1; i < rank; ++i) s->inner *= t->dims[i];
  return nullptr;
}

template <bool kLog, bool kGrad>
FleetStatus* SoftmaxPrepare(void*, const FleetKernelContext* kc, void** state,
                            size_t* scratch_bytes) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {kGrad ? "Out" : "X"}, {})) return e;
    AxisSplit s;
    if (FleetStatus* e = SplitAxis(kc, Input(kc, kGrad ? "Out" : "X"), &s)) return e;
    if (s.outer * s.dim * s.inner == 0) return nullptr;
    const memory::desc md =
        s.inner == 1
            ? memory::desc({s.outer, s.dim}, memory::data_type::f32, memory::format_tag::ab)
            : memory::desc({s.outer, s.dim, s.inner}, memory::data_type::f32,
                           memory::format_tag::abc);
    auto st = std::make_unique<DnnlState>();
    const auto training = dnnl::prop_kind::forward_training;
    if constexpr (!kLog) {
      dnnl::softmax_forward::primitive_desc fpd({training, md, 1}, UserScratchpad(),
                                                DnnlEngine());
      if constexpr (kGrad) {
        dnnl::softmax_backward::primitive_desc bpd({md, md, 1}, UserScratchpad(), DnnlEngine(),
                                                   fpd);
        st->call.prim = dnnl::softmax_backward(bpd);
        BindScratch(*st, bpd.scratchpad_desc());
      } else {
        st->call.prim = dnnl::softmax_forward(fpd);
        BindScratch(*st, fpd.scratchpad_desc());
      }
    } else {
      dnnl::logsoftmax_forward::primitive_desc fpd({training, md, 1}, UserScratchpad(),
                                                   DnnlEngine());
      if constexpr (kGrad) {
        dnnl::logsoftmax_backward::primitive_desc bpd({md, md, 1}, UserScratchpad(),
                                                      DnnlEngine(), fpd);
        st->call.prim = dnnl::logsoftmax_backward(bpd);
        BindScratch(*st, bpd.scratchpad_desc());
      } else {
        st->call.prim = dnnl::logsoftmax_forward(fpd);
        BindScratch(*st, fpd.scratchpad_desc());
      }
    }
    if (kGrad) {
      st->call.Bind(DNNL_ARG_DST, md);
      st->call.Bind(DNNL_ARG_DIFF_DST, md);
      st->call.Bind(DNNL_ARG_DIFF_SRC, md);
    } else {
      st->call.Bind(DNNL_ARG_SRC, md);
      st->call.Bind(DNNL_ARG_DST, md);
    }
    *scratch_bytes = st->scratch;
    *state = st.release();
    return nullptr;
  });
}

template <bool kLog, typename T>
FleetStatus* SoftmaxLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    if constexpr (std::is_same_v<T, float>) {
      if (auto* st = static_cast<DnnlState*>(state)) {
        st->call.Set(DNNL_ARG_SRC, x->data);
        st->call.Set(DNNL_ARG_DST, out->data);
        return RunState(kc, *st);
      }
    }
    AxisSplit s;
    if (FleetStatus* e = SplitAxis(kc, x, &s)) return e;
    const T* xs = Data<const T>(x);
    T* os = Data<T>(out);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t in = 0; in < s.inner; ++in) {
        const int64_t base = o * s.dim * s.inner + in;
        T mx = xs[base];
        for (int64_t d = 1; d < s.dim; ++d) mx = std::max(mx, xs[base + d * s.inner]);
        T sum = 0;
        for (int64_t d = 0; d < s.dim; ++d) sum += std::exp(xs[base + d * s.inner] - mx);
        const T log_sum = std::log(sum);
        for (int64_t d = 0; d < s.dim; ++d) {
          const int64_t i = base + d * s.inner;
          os[i] = kLog ? xs[i] - mx - log_sum : std::exp(xs[i] - mx) / sum;
        }
      }
    }
    return nullptr;
  });
}

template <bool kLog, typename T>
FleetStatus* SoftmaxGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Out", "Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* out = Input(kc, "Out");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if constexpr (std::is_same_v<T, float>) {
      if (auto* st = static_cast<DnnlState*>(state)) {
        st->call.Set(DNNL_ARG_DST, out->data);
        st->call.Set(DNNL_ARG_DIFF_DST, dout->data);
        st->call.Set(DNNL_ARG_DIFF_SRC, dx->data);
        return RunState(kc, *st);
      }
    }
    AxisSplit s;
    if (FleetStatus* e = SplitAxis(kc, out, &s)) return e;
    const T* os = Data<const T>(out);
    const T* gs = Data<const T>(dout);
    T* dxs = Data<T>(dx);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t in = 0; in < s.inner; ++in) {
        const int64_t base = o * s.dim * s.inner + in;
        // softmax: dX = Out * (dOut - sum(dOut * Out)); log_softmax: dX = dOut - exp(Out) *
        // sum(dOut).
        T dot = 0;
        for (int64_t d = 0; d < s.dim; ++d) {
          const int64_t i = base + d * s.inner;
          dot += kLog ? gs[i] : gs[i] * os[i];
        }
        for (int64_t d = 0; d < s.dim; ++d) {
          const int64_t i = base + d * s.inner;
          dxs[i] = kLog ? gs[i] - std::exp(os[i]) * dot : os[i] * (gs[i] - dot);
        }
      }
    }
    return nullptr;
  });
}

template <bool kLog>
void AddSoftmax(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, SoftmaxLaunch<kLog, float>, SoftmaxPrepare<kLog, false>,
      DnnlRelease);
  Add(list, name, FLEET_DTYPE_FLOAT64, SoftmaxLaunch<kLog, double>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, SoftmaxGradLaunch<kLog, float>,
      SoftmaxPrepare<kLog, true>, DnnlRelease);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, SoftmaxGradLaunch<kLog, double>);
}

template <typename T>
FleetStatus* SignLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const T* x = Data<const T>(Input(kc, "X"));
    T* out = Data<T>(Output(kc, "Out"));
    const int64_t n = Numel(Input(kc, "X"));
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>((x[i] > T(0)) - (x[i] < T(0)));
    return nullptr;
  });
}

}  // namespace

void AddActivationKernels(KernelList& list) {
  Add(list, "sign", FLEET_DTYPE_FLOAT32, SignLaunch<float>);
  Add(list, "sign", FLEET_DTYPE_FLOAT64, SignLaunch<double>);
  AddActivation<Act::kRelu>(list, "relu", "relu_grad");
  AddActivation<Act::kTanh>(list, "tanh", "tanh_grad");
  AddActivation<Act::kSigmoid>(list, "sigmoid", "sigmoid_grad");
  AddActivation<Act::kSqrt>(list, "sqrt", "sqrt_grad");
  AddActivation<Act::kExp>(list, "exp", "exp_grad");
  AddActivation<Act::kGelu>(list, "gelu", "gelu_grad");
  AddActivation<Act::kLeakyRelu>(list, "leaky_relu", "leaky_relu_grad");
  AddActivation<Act::kSquare>(list, "square", "square_grad");
  AddActivation<Act::kLog>(list, "log", "log_grad");
  AddSoftmax<false>(list, "softmax", "softmax_grad");
  AddSoftmax<true>(list, "log_softmax", "log_softmax_grad");
}

}  // namespace fleet_cpu::math
