// rnn and rnn_grad (LSTM, GRU, RNN_TANH, RNN_RELU; stacked, bidirectional, with optional
// sequence lengths). Shapes and the Reserve layout are plugins/common/rnn_plan.h.
//
// Why not oneDNN's RNN primitive: it has no per-sequence lengths (Paddle's SequenceLength, where
// the reverse direction starts at each sequence's own last step) and no float64. The recurrence
// here is the classic GEMM formulation instead, the one PyTorch's CPU path also uses: one GEMM
// per layer and direction for the input projection of every step (oneDNN's sgemm), one
// [B, H] x [H, G * H] product per step for the recurrence (a oneDNN matmul on W_hh packed once
// per launch), and the gates' sigmoid and tanh through oneDNN's eltwise primitives over dense
// buffers. The backward pass keeps the per-step gate gradients and does the weight and input
// gradients as three large GEMMs per layer and direction. float64 (for gradient checks) runs the
// same steps with plain loops.
//
// Masking: a step at or past a sequence's length leaves h and c as they were and outputs zeros;
// in backward such a step passes dh and dc through and has zero gate gradients. Every buffer a
// GEMM reads is fully written first (zeros for masked rows), so no stale value reaches a sum.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/math_util.h"
#include "kernels/nn_kernels.h"
#include "rnn_plan.h"

namespace fleet_cpu {
namespace {

namespace fk = fleet::kernel;
using fk::RnnMode;
using fk::RnnPlan;

// C[m, n] = op(A) op(B) + beta C, row-major with leading dimensions; op transposes when asked.
void RowGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
                                      ldb, beta, c, ldc);
  if (st != dnnl_success) throw std::runtime_error("dnnl_sgemm failed");
}
void RowGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
             const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (beta != 0.0 && beta != 1.0) throw std::runtime_error("RowGemm: beta must be 0 or 1");
  math::Gemm<double>(m, n, k, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb, tb ? ldb : 1, c,
                     ldc, 1, beta != 0.0);
}

// ---- prepared primitives -----------------------------------------------------------------------

// D[m, n] = A[m, k] B[k, n] (or D += with `accumulate`) as a oneDNN matmul whose B is packed
// into the primitive's own layout once per launch: the recurrent GEMM runs every step with the
// same weights and a small m, where repacking B on every call (as sgemm does) would dominate.
struct PackedGemm {
  math::DnnlCall matmul, pack;
  size_t packed_bytes = 0;

  // `b_strides`: B's element strides as stored (a transposed weight has {1, ld}).
  void Make(int64_t m, int64_t n, int64_t k, const dnnl::memory::dims& b_strides,
            bool accumulate) {
    using dnnl::memory;
    const memory::desc a_md({m, k}, memory::data_type::f32, memory::dims{k, 1});
    const memory::desc b_any({k, n}, memory::data_type::f32, memory::format_tag::any);
    const memory::desc d_md({m, n}, memory::data_type::f32, memory::dims{n, 1});
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, d_md), attr,
                                          DnnlEngine());
    matmul.prim = dnnl::matmul(pd);
    matmul.Bind(DNNL_ARG_SRC, a_md);
    matmul.Bind(DNNL_ARG_WEIGHTS, pd.weights_desc());
    matmul.Bind(DNNL_ARG_DST, d_md);
    const memory::desc b_user({k, n}, memory::data_type::f32, b_strides);
    pack.prim = dnnl::reorder(dnnl::reorder::primitive_desc(DnnlEngine(), b_user, DnnlEngine(),
                                                            pd.weights_desc()));
    pack.Bind(DNNL_ARG_FROM, b_user);
    pack.Bind(DNNL_ARG_TO, pd.weights_desc());
    packed_bytes = pd.weights_desc().get_size();
  }
  void Pack(const float* b, void* packed) {
    pack.Set(DNNL_ARG_FROM, b);
    pack.Set(DNNL_ARG_TO, packed);
    pack.Run();
    matmul.Set(DNNL_ARG_WEIGHTS, packed);
  }
  void Run(const float* a, float* d) {
    matmul.Set(DNNL_ARG_SRC, a);
    matmul.Set(DNNL_ARG_DST, d);
    matmul.Run();
  }
};

// What prepare makes for a float32 kernel: the activation primitives (forward) and the packed
// recurrent GEMM (forward: hh = h W_hh^T; backward: dh += dg W_hh). Empty for float64.
struct RnnState {
  math::DnnlCall sigmoid, tanh;
  int64_t sigmoid_n = 0, tanh_n = 0;
  PackedGemm recurrent;
  size_t packed_at = 0;  // byte offset of the packed weights in the scratch
};

// The gate nonlinearities over dense buffers: in float32 oneDNN's eltwise primitives (vectorised
// exp and tanh; made at prepare for the buffer sizes the op uses), in float64 plain loops.
// Gates are gathered into dense per-function buffers first, since oneDNN's fast eltwise paths
// take dense memory only.
enum class Fn { kSigmoid, kTanh };

math::DnnlCall MakeEltwise(dnnl::algorithm alg, int64_t n) {
  const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, 0.0f, 0.0f);
  dnnl::eltwise_forward::primitive_desc pd(d, DnnlEngine());
  math::DnnlCall call;
  call.prim = dnnl::eltwise_forward(pd);
  call.Bind(DNNL_ARG_SRC, md);
  call.Bind(DNNL_ARG_DST, md);
  return call;
}

// dst[i] = fn(src[i]) for i < n (src may equal dst).
void Apply(RnnState& st, Fn fn, const float* src, float* dst, int64_t n) {
  math::DnnlCall& call = fn == Fn::kSigmoid ? st.sigmoid : st.tanh;
  if (n != (fn == Fn::kSigmoid ? st.sigmoid_n : st.tanh_n)) {
    throw std::runtime_error("rnn: an activation of a size prepare did not plan");
  }
  call.Set(DNNL_ARG_SRC, src);
  call.Set(DNNL_ARG_DST, dst);
  call.Run();
}
void Apply(RnnState&, Fn fn, const double* src, double* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = fn == Fn::kSigmoid ? 1.0 / (1.0 + std::exp(-src[i])) : std::tanh(src[i]);
  }
}

// Sequence b's length (T without SequenceLength).
struct Lengths {
  const FleetTensor* t = nullptr;
  int64_t seq = 0;
  int64_t operator[](int64_t b) const { return t == nullptr ? seq : IndexAt(t, b); }
};

FleetStatus* ReadLengths(const FleetKernelContext* kc, const RnnPlan& p, Lengths* len) {
  len->seq = p.seq;
  len->t = Input(kc, "SequenceLength");
  if (len->t == nullptr) return nullptr;
  for (int64_t b = 0; b < p.batch; ++b) {
    const std::string e = fk::CheckSequenceLength(kc, p, b, (*len)[b]);
    if (!e.empty()) return InvalidArgument(e);
  }
  return nullptr;
}

FleetStatus* Plan(const FleetKernelContext* kc, bool grad, RnnPlan* p) {
  return fk::ToFleetStatus(fk::PlanRnn(kc, grad, p), Error);
}

// Elements of the sigmoid buffer: the gates that go through a sigmoid (LSTM i, f, o; GRU r, z).
int64_t SigmoidWidth(const RnnPlan& p) {
  return p.mode == RnnMode::kLstm ? 3 * p.hidden : p.mode == RnnMode::kGru ? 2 * p.hidden : 0;
}

// Scratch elements: forward h, c, tanh(c) and the tanh-gate buffer [B, H] each, the recurrent
// projection [B, G * H] and the sigmoid buffer [B, 3H]; backward dh, dc [B, H], the gate
// gradients of every step (input side and recurrent side) [T * B, G * H], the previous hidden
// state of every step [T * B, H], and two layer-output gradients [T * B, D * H].
int64_t ForwardScratch(const RnnPlan& p) { return p.batch * (7 * p.hidden + p.GateWidth()); }
int64_t BackwardScratch(const RnnPlan& p) {
  const int64_t rows = p.seq * p.batch;
  return 2 * p.batch * p.hidden + 2 * rows * p.GateWidth() + rows * p.hidden +
         2 * rows * p.dirs * p.hidden;
}

void Release(void*, void* state) { delete static_cast<RnnState*>(state); }

template <typename T>
FleetStatus* Prepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch_bytes) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    RnnPlan p;
    const bool grad = std::string(kc->op_type) == "rnn_grad";
    if (FleetStatus* st = Plan(kc, grad, &p)) return st;
    auto st = std::make_unique<RnnState>();
    const int64_t H = p.hidden, GH = p.GateWidth();
    if (!grad && std::is_same_v<T, float>) {
      st->sigmoid_n = p.batch * SigmoidWidth(p);
      st->tanh_n = p.batch * H;
      if (st->sigmoid_n > 0) {
        st->sigmoid = MakeEltwise(dnnl::algorithm::eltwise_logistic, st->sigmoid_n);
      }
      st->tanh = MakeEltwise(dnnl::algorithm::eltwise_tanh, st->tanh_n);
    }
    if (std::is_same_v<T, float>) {
      if (grad) {
        st->recurrent.Make(p.batch, H, GH, {H, 1}, true);  // W_hh as stored, [G * H, H]
      } else {
        st->recurrent.Make(p.batch, GH, H, {1, H}, false);  // W_hh^T
      }
    }
    const size_t elems = static_cast<size_t>(grad ? BackwardScratch(p) : ForwardScratch(p));
    st->packed_at = (elems * sizeof(T) + 63) / 64 * 64;
    *scratch_bytes = st->packed_at + st->recurrent.packed_bytes;
    *state = st.release();
    return nullptr;
  });
}

template <typename T>
T* ScratchOf(const FleetKernelContext* kc) {
  if (kc->scratch == nullptr) throw std::runtime_error("launched without its scratch memory");
  return static_cast<T*>(kc->scratch);
}

// ---- forward ---------------------------------------------------------------------------------

// One layer and direction over every step. `x` is the layer input [T * B, ldx]; `res` the
// Reserve rows [T * B, W].
template <typename T>
void ForwardCell(const FleetKernelContext* kc, RnnState& st, const RnnPlan& p, const Lengths& len,
                 int64_t layer, int64_t dir, const T* x, int64_t ldx, T* res, T* scratch) {
  const int64_t B = p.batch, H = p.hidden, GH = p.GateWidth(), W = p.ReserveWidth();
  const int64_t SW = SigmoidWidth(p);
  const int64_t cell = layer * p.dirs + dir;
  const T* w_ih = Data<T>(Input(kc, "WeightList", p.WeightIh(layer, dir)));
  const T* w_hh = Data<T>(Input(kc, "WeightList", p.WeightHh(layer, dir)));
  const T* b_ih = Data<T>(Input(kc, "WeightList", p.BiasIh(layer, dir)));
  const T* b_hh = Data<T>(Input(kc, "WeightList", p.BiasHh(layer, dir)));
  T* h = scratch;         // [B, H] the state
  T* c = h + B * H;       // [B, H] LSTM cell state
  T* tc = c + B * H;      // [B, H] tanh(c)
  T* th = tc + B * H;     // [B, H] the gate that goes through tanh (LSTM g, GRU n, RNN h)
  T* hh = th + B * H;     // [B, G * H] the recurrent projection W_hh h
  T* sg = hh + B * GH;    // [B, 3H] the gates that go through a sigmoid
  std::memcpy(h, Data<T>(Input(kc, "PreState", 0)) + cell * B * H, sizeof(T) * B * H);
  if (p.mode == RnnMode::kLstm) {
    std::memcpy(c, Data<T>(Input(kc, "PreState", 1)) + cell * B * H, sizeof(T) * B * H);
  }
  // The input projection of every step at once, into the gate slots of Reserve.
  T* gates = res + p.GatesOffset(layer, dir);
  RowGemm(false, true, p.seq * B, GH, p.LayerInput(layer), x, ldx, w_ih, p.LayerInput(layer),
          T(0), gates, W);
  // Both biases go in here, except GRU's b_hc: the candidate keeps it on the recurrent side,
  // inside the reset gate's product.
  const int64_t both_biases = p.mode == RnnMode::kGru ? 2 * H : GH;
  ParallelFor(kc, p.seq * B, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      T* g = gates + r * W;
      #pragma omp simd
      for (int64_t j = 0; j < both_biases; ++j) g[j] += b_ih[j] + b_hh[j];
      #pragma omp simd
      for (int64_t j = both_biases; j < GH; ++j) g[j] += b_ih[j];
    }
  });
  if constexpr (std::is_same_v<T, float>) {
    st.recurrent.Pack(w_hh, reinterpret_cast<char*>(scratch) + st.packed_at);
  }
  T* out_col = res + p.OutputOffset(layer) + dir * H;
  T* extra = res + p.ExtraOffset(layer, dir);
  T* extra2 = res + p.Extra2Offset(layer, dir);
  const bool lstm = p.mode == RnnMode::kLstm;
  for (int64_t s = 0; s < p.seq; ++s) {
    const int64_t t = dir == 0 ? s : p.seq - 1 - s;
    const int64_t row0 = t * B;
    if constexpr (std::is_same_v<T, float>) {
      st.recurrent.Run(h, hh);
    } else {
      RowGemm(false, true, B, GH, H, h, H, w_hh, H, T(0), hh, GH);
    }
    // Pre-activations, gathered by nonlinearity (every row; masked ones are not used).
    for (int64_t b = 0; b < B; ++b) {
      const T* g = gates + (row0 + b) * W;
      const T* r = hh + b * GH;
      T* sgb = sg + b * SW;
      T* thb = th + b * H;
      if (lstm) {
        #pragma omp simd
        for (int64_t k = 0; k < 2 * H; ++k) sgb[k] = g[k] + r[k];
        #pragma omp simd
        for (int64_t k = 0; k < H; ++k) sgb[2 * H + k] = g[3 * H + k] + r[3 * H + k];
        #pragma omp simd
        for (int64_t k = 0; k < H; ++k) thb[k] = g[2 * H + k] + r[2 * H + k];
      } else if (p.mode == RnnMode::kGru) {
        #pragma omp simd
        for (int64_t k = 0; k < 2 * H; ++k) sgb[k] = g[k] + r[k];
      } else {
        #pragma omp simd
        for (int64_t k = 0; k < H; ++k) thb[k] = g[k] + r[k];
      }
    }
    if (SW > 0) Apply(st, Fn::kSigmoid, sg, sg, B * SW);
    if (p.mode == RnnMode::kGru) {
      for (int64_t b = 0; b < B; ++b) {
        const T* g = gates + (row0 + b) * W;
        const T* r = hh + b * GH;
        #pragma omp simd
        for (int64_t k = 0; k < H; ++k) {
          th[b * H + k] = g[2 * H + k] + sg[b * SW + k] * (r[2 * H + k] + b_hh[2 * H + k]);
        }
      }
    }
    if (p.mode != RnnMode::kRnnRelu) Apply(st, Fn::kTanh, th, th, B * H);
    if (lstm) {
      for (int64_t b = 0; b < B; ++b) {
        if (t >= len[b]) continue;
        const T* sgb = sg + b * SW;
        #pragma omp simd
        for (int64_t k = 0; k < H; ++k) {
          c[b * H + k] = sgb[H + k] * c[b * H + k] + sgb[k] * th[b * H + k];
        }
      }
      Apply(st, Fn::kTanh, c, tc, B * H);
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t row = (row0 + b) * W;
      T* y = out_col + row;
      if (t >= len[b]) {  // masked: the state stays, the output is zero
        std::fill(y, y + H, T(0));
        continue;
      }
      T* g = gates + row;
      T* hb = h + b * H;
      const T* sgb = sg + b * SW;
      const T* thb = th + b * H;
      switch (p.mode) {
        case RnnMode::kLstm:
          #pragma omp simd
          for (int64_t k = 0; k < H; ++k) {
            hb[k] = sgb[2 * H + k] * tc[b * H + k];
            g[k] = sgb[k], g[H + k] = sgb[H + k], g[2 * H + k] = thb[k], g[3 * H + k] = sgb[2 * H + k];
            extra[row + k] = c[b * H + k];
            extra2[row + k] = tc[b * H + k];
          }
          break;
        case RnnMode::kGru:
          #pragma omp simd
          for (int64_t k = 0; k < H; ++k) {
            const T z = sgb[H + k], n = thb[k];
            hb[k] = (hb[k] - n) * z + n;
            g[k] = sgb[k], g[H + k] = z, g[2 * H + k] = n;
            extra[row + k] = hh[b * GH + 2 * H + k] + b_hh[2 * H + k];
          }
          break;
        case RnnMode::kRnnTanh:
          #pragma omp simd
          for (int64_t k = 0; k < H; ++k) hb[k] = g[k] = thb[k];
          break;
        case RnnMode::kRnnRelu:
          #pragma omp simd
          for (int64_t k = 0; k < H; ++k) hb[k] = g[k] = std::max(T(0), thb[k]);
          break;
      }
      std::memcpy(y, hb, sizeof(T) * H);
    }
  }
  std::memcpy(Data<T>(Output(kc, "State", 0)) + cell * B * H, h, sizeof(T) * B * H);
  if (lstm) std::memcpy(Data<T>(Output(kc, "State", 1)) + cell * B * H, c, sizeof(T) * B * H);
}

template <typename T>
FleetStatus* Rnn(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (state == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    RnnPlan p;
    if (FleetStatus* st = Plan(kc, false, &p)) return st;
    Lengths len;
    if (FleetStatus* st = ReadLengths(kc, p, &len)) return st;
    T* res = Data<T>(Output(kc, "Reserve"));
    T* scratch = ScratchOf<T>(kc);
    const int64_t W = p.ReserveWidth();
    auto& st = *static_cast<RnnState*>(state);
    for (int64_t l = 0; l < p.layers; ++l) {
      const T* x = l == 0 ? Data<T>(Input(kc, "Input")) : res + p.OutputOffset(l - 1);
      const int64_t ldx = l == 0 ? p.input : W;
      for (int64_t d = 0; d < p.dirs; ++d) {
        ForwardCell<T>(kc, st, p, len, l, d, x, ldx, res, scratch);
      }
    }
    const int64_t DH = p.dirs * p.hidden;
    T* out = Data<T>(Output(kc, "Out"));
    const T* last = res + p.OutputOffset(p.layers - 1);
    for (int64_t r = 0; r < p.seq * p.batch; ++r) {
      std::memcpy(out + r * DH, last + r * W, sizeof(T) * DH);
    }
    return nullptr;
  });
}

// ---- backward --------------------------------------------------------------------------------

// One layer and direction, last step first. `x` is the layer input [T * B, ldx]; `dy` the
// gradient of the layer's output [T * B, D * H] (nullptr: zero); `dx` [T * B, ld_dx] receives
// (+=) the input gradient when not nullptr.
template <typename T>
void BackwardCell(const FleetKernelContext* kc, RnnState& st, const RnnPlan& p, const Lengths& len,
                  int64_t layer, int64_t dir, const T* x, int64_t ldx, const T* res, const T* dy,
                  T* dx, int64_t ld_dx, T* scratch) {
  const int64_t B = p.batch, H = p.hidden, GH = p.GateWidth(), W = p.ReserveWidth();
  const int64_t DH = p.dirs * H, rows = p.seq * B, in = p.LayerInput(layer);
  const int64_t cell = layer * p.dirs + dir;
  const bool lstm = p.mode == RnnMode::kLstm;
  T* dh = scratch;
  T* dc = dh + B * H;
  T* dgx = dc + B * H;    // [rows, GH] gradient of the input-side gate pre-activations
  T* dgh = dgx + rows * GH;  // [rows, GH] ... of the recurrent side (differs for GRU's c gate)
  T* hprev = dgh + rows * GH;  // [rows, H]
  auto state_grad = [&](size_t i, T* to) {
    if (const FleetTensor* g = Input(kc, "State@GRAD", i)) {
      std::memcpy(to, Data<T>(g) + cell * B * H, sizeof(T) * B * H);
    } else {
      std::fill(to, to + B * H, T(0));
    }
  };
  state_grad(0, dh);
  if (lstm) state_grad(1, dc);
  const T* init_h = Data<T>(Input(kc, "PreState", 0)) + cell * B * H;
  const T* init_c = lstm ? Data<T>(Input(kc, "PreState", 1)) + cell * B * H : nullptr;
  const T* gates = res + p.GatesOffset(layer, dir);
  const T* outs = res + p.OutputOffset(layer) + dir * H;
  const T* extras = res + p.ExtraOffset(layer, dir);
  const T* extras2 = res + p.Extra2Offset(layer, dir);
  const T* w_hh = Data<T>(Input(kc, "WeightList", p.WeightHh(layer, dir)));
  if constexpr (std::is_same_v<T, float>) {
    st.recurrent.Pack(w_hh, static_cast<char*>(kc->scratch) + st.packed_at);
  }

  for (int64_t s = p.seq - 1; s >= 0; --s) {
    const int64_t t = dir == 0 ? s : p.seq - 1 - s;
    ParallelFor(kc, B, 8, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t r = t * B + b;
        T* gx = dgx + r * GH;
        T* gh = dgh + r * GH;
        T* hp = hprev + r * H;
        if (t >= len[b]) {  // masked: dh and dc pass through
          std::fill(gx, gx + GH, T(0));
          std::fill(gh, gh + GH, T(0));
          std::fill(hp, hp + H, T(0));
          continue;
        }
        // The state this step started from: the neighbouring step in processing order, or the
        // initial state at the sequence's first processed step.
        const int64_t prev = dir == 0 ? t - 1 : t + 1;
        const bool first = dir == 0 ? t == 0 : prev >= len[b];
        const T* h0 = first ? init_h + b * H : outs + (prev * B + b) * W;
        const T* c0 = !lstm ? nullptr : first ? init_c + b * H : extras + (prev * B + b) * W;
        std::memcpy(hp, h0, sizeof(T) * H);
        const T* g = gates + r * W;
        const T* e = extras + r * W;
        const T* e2 = extras2 + r * W;
        const T* y = outs + r * W;
        T* dhb = dh + b * H;
        #pragma omp simd
        for (int64_t k = 0; k < H; ++k) {
          const T dht = dhb[k] + (dy != nullptr ? dy[r * DH + dir * H + k] : T(0));
          switch (p.mode) {
            case RnnMode::kLstm: {
              const T i = g[k], f = g[H + k], cc = g[2 * H + k], o = g[3 * H + k];
              const T tc = e2[k];
              const T dct = dc[b * H + k] + dht * o * (T(1) - tc * tc);
              gx[k] = dct * cc * i * (T(1) - i);
              gx[H + k] = dct * c0[k] * f * (T(1) - f);
              gx[2 * H + k] = dct * i * (T(1) - cc * cc);
              gx[3 * H + k] = dht * tc * o * (T(1) - o);
              for (int j = 0; j < 4; ++j) gh[j * H + k] = gx[j * H + k];
              dc[b * H + k] = dct * f;
              dhb[k] = T(0);
              break;
            }
            case RnnMode::kGru: {
              const T rg = g[k], z = g[H + k], n = g[2 * H + k];
              const T dan = dht * (T(1) - z) * (T(1) - n * n);
              const T dar = dan * e[k] * rg * (T(1) - rg);
              const T daz = dht * (h0[k] - n) * z * (T(1) - z);
              gx[k] = gh[k] = dar;
              gx[H + k] = gh[H + k] = daz;
              gx[2 * H + k] = dan;
              gh[2 * H + k] = dan * rg;
              dhb[k] = dht * z;
              break;
            }
            case RnnMode::kRnnTanh:
              gx[k] = gh[k] = dht * (T(1) - y[k] * y[k]);
              dhb[k] = T(0);
              break;
            case RnnMode::kRnnRelu:
              gx[k] = gh[k] = y[k] > T(0) ? dht : T(0);
              dhb[k] = T(0);
              break;
          }
        }
      }
    });
    // dh += dgh_t W_hh (masked rows have zero gate gradients, so their dh passes through).
    if constexpr (std::is_same_v<T, float>) {
      st.recurrent.Run(dgh + t * B * GH, dh);
    } else {
      RowGemm(false, false, B, H, GH, dgh + t * B * GH, GH, w_hh, H, T(1), dh, H);
    }
  }

  if (OutputCount(kc, "PreState@GRAD") > 0) {
    if (const FleetTensor* g = Output(kc, "PreState@GRAD", 0)) {
      std::memcpy(Data<T>(g) + cell * B * H, dh, sizeof(T) * B * H);
    }
    if (const FleetTensor* g = lstm ? Output(kc, "PreState@GRAD", 1) : nullptr) {
      std::memcpy(Data<T>(g) + cell * B * H, dc, sizeof(T) * B * H);
    }
  }
  auto weight_grad = [&](size_t i) -> T* {
    if (OutputCount(kc, "WeightList@GRAD") <= i) return nullptr;
    const FleetTensor* g = Output(kc, "WeightList@GRAD", i);
    return g != nullptr ? Data<T>(g) : nullptr;
  };
  if (T* dw = weight_grad(p.WeightIh(layer, dir))) {
    RowGemm(true, false, GH, in, rows, dgx, GH, x, ldx, T(0), dw, in);
  }
  if (T* dw = weight_grad(p.WeightHh(layer, dir))) {
    RowGemm(true, false, GH, H, rows, dgh, GH, hprev, H, T(0), dw, H);
  }
  auto column_sums = [&](const T* m, T* to) {
    std::fill(to, to + GH, T(0));
    for (int64_t r = 0; r < rows; ++r) {
      #pragma omp simd
      for (int64_t j = 0; j < GH; ++j) to[j] += m[r * GH + j];
    }
  };
  if (T* db = weight_grad(p.BiasIh(layer, dir))) column_sums(dgx, db);
  if (T* db = weight_grad(p.BiasHh(layer, dir))) column_sums(dgh, db);
  if (dx != nullptr) {
    const T* w_ih = Data<T>(Input(kc, "WeightList", p.WeightIh(layer, dir)));
    RowGemm(false, false, rows, in, GH, dgx, GH, w_ih, in, T(1), dx, ld_dx);
  }
}

template <typename T>
FleetStatus* RnnGrad(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (state == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    auto& st = *static_cast<RnnState*>(state);
    RnnPlan p;
    if (FleetStatus* st = Plan(kc, true, &p)) return st;
    Lengths len;
    if (FleetStatus* st = ReadLengths(kc, p, &len)) return st;
    const T* res = Data<T>(Input(kc, "Reserve"));
    const int64_t rows = p.seq * p.batch, DH = p.dirs * p.hidden, W = p.ReserveWidth();
    T* scratch = ScratchOf<T>(kc);
    T* cell_scratch = scratch;
    T* layer_grads[2] = {scratch + 2 * p.batch * p.hidden + 2 * rows * p.GateWidth() +
                             rows * p.hidden,
                         nullptr};
    layer_grads[1] = layer_grads[0] + rows * DH;
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dinput = Output(kc, "Input@GRAD");
    for (int64_t l = p.layers - 1; l >= 0; --l) {
      const T* dy = l == p.layers - 1 ? (dout != nullptr ? Data<T>(dout) : nullptr)
                                      : layer_grads[l % 2];
      T* dx = nullptr;
      int64_t ldx = DH;
      if (l > 0) {
        dx = layer_grads[(l - 1) % 2];
      } else if (dinput != nullptr) {
        dx = Data<T>(dinput);
        ldx = p.input;
      }
      if (dx != nullptr) std::fill(dx, dx + rows * ldx, T(0));
      const T* x = l == 0 ? Data<T>(Input(kc, "Input")) : res + p.OutputOffset(l - 1);
      const int64_t ldin = l == 0 ? p.input : W;
      for (int64_t d = 0; d < p.dirs; ++d) {
        BackwardCell<T>(kc, st, p, len, l, d, x, ldin, res, dy, dx, ldx, cell_scratch);
      }
    }
    return nullptr;
  });
}

}  // namespace

void AddNnRnnKernels(KernelList& list) {
  Add(list, "rnn", FLEET_DTYPE_FLOAT32, Rnn<float>, Prepare<float>, Release);
  Add(list, "rnn", FLEET_DTYPE_FLOAT64, Rnn<double>, Prepare<double>, Release);
  Add(list, "rnn_grad", FLEET_DTYPE_FLOAT32, RnnGrad<float>, Prepare<float>, Release);
  Add(list, "rnn_grad", FLEET_DTYPE_FLOAT64, RnnGrad<double>, Prepare<double>, Release);
}

}  // namespace fleet_cpu
