// conv2d and conv2d_grad (NCHW input, OIHW filter, groups, dilations), float32 and float64.
//
// cuDNN runs every convolution it can express: it pads both sides of a spatial dim by the same
// amount, so a geometry is handed to it when the leading padding alone gives the host's output
// size (trailing padding that no window reaches does not matter). Descriptors and algorithms
// are chosen at prepare: implicit-GEMM forward, and the deterministic backward algorithms
// (BWD_DATA_ALGO_1, BWD_FILTER_ALGO_1); float32 runs with CUDNN_FMA_MATH, so no TF32.
//
// What cuDNN cannot express (asymmetric paddings such as SAME with an odd total, [t, b, l, r]
// paddings), or an algorithm this cuDNN or GPU does not offer for the shapes, runs direct
// kernels with the CPU plugin's arithmetic: one thread per output element forward, one thread
// per input element for the data gradient (gathering, so no atomics), and one block per filter
// element with a fixed reduction tree for the filter gradient.
#include <algorithm>
#include <climits>
#include <memory>
#include <string>

#include "kernels/dense_cudnn_conv.h"
#include "kernels/dense_groups.h"

namespace fleet_cuda {
namespace {

using cudnn_conv::ChooseBackwardData;
using cudnn_conv::ChooseBackwardFilter;
using cudnn_conv::ChooseForward;
using cudnn_conv::ConvGeom;
using cudnn_conv::DnnExpressible;
using cudnn_conv::MakeDescriptors;
using cudnn_conv::Unsupported;

using dense::ExpectRank;
using dense::OpName;
using dense::Require;

// Prepare only: reads list attributes. `out` is Output (forward) or Output@GRAD (grad).
FleetStatus* Geometry(const FleetKernelContext* kc, const FleetTensor* in,
                      const FleetTensor* filter, const FleetTensor* out, const char* out_slot,
                      ConvGeom* g) {
  if (FleetStatus* st = ExpectRank(kc, in, "Input", 4)) return st;
  if (FleetStatus* st = ExpectRank(kc, filter, "Filter", 4)) return st;
  if (FleetStatus* st = ExpectRank(kc, out, out_slot, 4)) return st;
  g->n = in->dims[0], g->c = in->dims[1], g->h = in->dims[2], g->w = in->dims[3];
  g->o = filter->dims[0], g->kh = filter->dims[2], g->kw = filter->dims[3];
  g->oh = out->dims[2], g->ow = out->dims[3];
  g->groups = IntAttr(kc, "groups", 1);
  if (g->groups < 1 || g->c % g->groups != 0 || g->o % g->groups != 0 ||
      g->c / g->groups != filter->dims[1] || out->dims[1] != g->o || out->dims[0] != g->n) {
    return InvalidArgument(OpName(kc) + ": Input, Filter and " + out_slot +
                           " shapes do not agree with groups=" + std::to_string(g->groups));
  }
  g->cg = g->c / g->groups;
  g->og = g->o / g->groups;
  dense::Window2d win;
  const int64_t in_hw[2] = {g->h, g->w}, k[2] = {g->kh, g->kw};
  if (FleetStatus* st = dense::ResolveWindow(kc, in_hw, k, true, &win)) return st;
  for (int i = 0; i < 2; ++i) {
    g->stride[i] = win.stride[i];
    g->dilation[i] = win.dilation[i];
    g->pad_begin[i] = win.pad_begin[i];
    g->pad_end[i] = win.pad_end[i];
  }
  return nullptr;
}

bool HasDims(const FleetTensor* t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  return t != nullptr && t->ndim == 4 && t->dims[0] == d0 && t->dims[1] == d1 &&
         t->dims[2] == d2 && t->dims[3] == d3;
}

// Launch: the tensors must still have the shapes prepare planned for.
FleetStatus* CheckShapes(const FleetKernelContext* kc, const ConvGeom& g, const FleetTensor* in,
                         const FleetTensor* filter, const FleetTensor* out,
                         const char* out_slot) {
  if (HasDims(in, g.n, g.c, g.h, g.w) && HasDims(filter, g.o, g.cg, g.kh, g.kw) &&
      HasDims(out, g.n, g.o, g.oh, g.ow)) {
    return nullptr;
  }
  return InvalidArgument(OpName(kc) + ": Input, Filter or " + out_slot +
                         " is missing or differs from the shapes prepared for");
}

// ---- direct kernels ----------------------------------------------------------------------

template <typename T>
__global__ void ConvForwardDirect(ConvGeom g, const T* x, const T* f, T* y) {
  const int64_t total = g.n * g.o * g.oh * g.ow;
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t j = idx % g.ow;
    int64_t t = idx / g.ow;
    const int64_t i = t % g.oh;
    t /= g.oh;
    const int64_t o = t % g.o;
    const int64_t n = t / g.o;
    const int64_t grp = o / g.og;
    T acc = 0;
    for (int64_t c = 0; c < g.cg; ++c) {
      const T* xc = x + (n * g.c + grp * g.cg + c) * g.h * g.w;
      const T* fc = f + (o * g.cg + c) * g.kh * g.kw;
      for (int64_t a = 0; a < g.kh; ++a) {
        const int64_t ih = i * g.stride[0] - g.pad_begin[0] + a * g.dilation[0];
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t b = 0; b < g.kw; ++b) {
          const int64_t iw = j * g.stride[1] - g.pad_begin[1] + b * g.dilation[1];
          if (iw < 0 || iw >= g.w) continue;
          acc += xc[ih * g.w + iw] * fc[a * g.kw + b];
        }
      }
    }
    y[idx] = acc;
  }
}

// Each input element gathers dOut * Filter over the windows that read it. Walking the filter
// taps backwards visits output rows and columns in increasing order, the CPU's order of
// accumulation.
template <typename T>
__global__ void ConvDataGradDirect(ConvGeom g, const T* dy, const T* f, T* dx) {
  const int64_t total = g.n * g.c * g.h * g.w;
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t iw = idx % g.w;
    int64_t t = idx / g.w;
    const int64_t ih = t % g.h;
    t /= g.h;
    const int64_t ci = t % g.c;
    const int64_t n = t / g.c;
    const int64_t grp = ci / g.cg, c = ci % g.cg;
    T acc = 0;
    for (int64_t o = grp * g.og; o < (grp + 1) * g.og; ++o) {
      const T* dyo = dy + (n * g.o + o) * g.oh * g.ow;
      const T* fc = f + (o * g.cg + c) * g.kh * g.kw;
      for (int64_t a = g.kh - 1; a >= 0; --a) {
        // ih = i * stride - pad + a * dilation, solved for the output row i.
        const int64_t th = ih + g.pad_begin[0] - a * g.dilation[0];
        if (th < 0 || th % g.stride[0] != 0) continue;
        const int64_t i = th / g.stride[0];
        if (i >= g.oh) continue;
        for (int64_t b = g.kw - 1; b >= 0; --b) {
          const int64_t tw = iw + g.pad_begin[1] - b * g.dilation[1];
          if (tw < 0 || tw % g.stride[1] != 0) continue;
          const int64_t j = tw / g.stride[1];
          if (j >= g.ow) continue;
          acc += dyo[i * g.ow + j] * fc[a * g.kw + b];
        }
      }
    }
    dx[idx] = acc;
  }
}

// One block per filter element (strided over the grid): the block's threads split the
// (batch, output position) pairs and BlockSum adds their partial sums in a fixed tree.
template <typename T>
__global__ void ConvFilterGradDirect(ConvGeom g, const T* x, const T* dy, T* df) {
  __shared__ T buf[kThreads];
  const int64_t total = g.o * g.cg * g.kh * g.kw;
  const int64_t plane = g.oh * g.ow;
  const int64_t pairs = g.n * plane;
  for (int64_t e = blockIdx.x; e < total; e += gridDim.x) {
    const int64_t b = e % g.kw;
    int64_t t = e / g.kw;
    const int64_t a = t % g.kh;
    t /= g.kh;
    const int64_t c = t % g.cg;
    const int64_t o = t / g.cg;
    const int64_t grp = o / g.og;
    T acc = 0;
    for (int64_t q = threadIdx.x; q < pairs; q += blockDim.x) {
      const int64_t n = q / plane, r = q % plane;
      const int64_t i = r / g.ow, j = r % g.ow;
      const int64_t ih = i * g.stride[0] - g.pad_begin[0] + a * g.dilation[0];
      const int64_t iw = j * g.stride[1] - g.pad_begin[1] + b * g.dilation[1];
      if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
      acc += dy[(n * g.o + o) * plane + r] *
             x[((n * g.c + grp * g.cg + c) * g.h + ih) * g.w + iw];
    }
    acc = dense::BlockSum(acc, buf);
    if (threadIdx.x == 0) df[e] = acc;
  }
}

// ---- cuDNN -------------------------------------------------------------------------------

struct ConvState : cudnn_conv::Descriptors {
  ConvGeom g;
  bool want_data = false, want_filter = false;  // grad: which outputs the op has
  // Which directions run on cuDNN; a launch that cuDNN refuses clears its flag for good.
  bool fwd_dnn = false, data_dnn = false, filter_dnn = false;
  cudnnConvolutionFwdAlgo_t fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  cudnnConvolutionBwdDataAlgo_t data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  size_t fwd_ws = 0, data_ws = 0, filter_ws = 0;  // workspace bytes, from the scratch
};

template <typename T, bool kGrad>
FleetStatus* ConvPrepare(void*, const FleetKernelContext* kc, void** state,
                         size_t* scratch_bytes) {
  const char* out_slot = kGrad ? "Output@GRAD" : "Output";
  const FleetTensor* out = kGrad ? Input(kc, out_slot) : Output(kc, out_slot);
  auto st = std::make_unique<ConvState>();
  if (FleetStatus* e =
          Geometry(kc, Input(kc, "Input"), Input(kc, "Filter"), out, out_slot, &st->g)) {
    return e;
  }
  st->want_data = kGrad && Output(kc, "Input@GRAD") != nullptr;
  st->want_filter = kGrad && Output(kc, "Filter@GRAD") != nullptr;
  if (DnnExpressible(st->g) && (!kGrad || st->want_data || st->want_filter)) {
    bool ok = false;
    if (FleetStatus* e = MakeDescriptors<T>(kc, st->g, *st, &ok)) return e;
    if (ok) {
      // The handle is only consulted here (heuristics, workspace sizes); each launch takes
      // the handle of its own stream.
      FleetStatus* e = Run(kc, [&](FleetStream* s) -> FleetStatus* {
        cudnnHandle_t h = Dnn(s);
        if (!kGrad) st->fwd_dnn = ChooseForward(*st, h, &st->fwd_algo, &st->fwd_ws);
        if (st->want_data) {
          st->data_dnn = ChooseBackwardData(*st, h, &st->data_algo, &st->data_ws);
        }
        if (st->want_filter) {
          st->filter_dnn = ChooseBackwardFilter(*st, h, &st->filter_algo, &st->filter_ws);
        }
        return nullptr;
      });
      if (e != nullptr) return e;
    }
  }
  size_t ws = 0;
  if (st->fwd_dnn) ws = std::max(ws, st->fwd_ws);
  if (st->data_dnn) ws = std::max(ws, st->data_ws);  // the two grads run one after the other
  if (st->filter_dnn) ws = std::max(ws, st->filter_ws);
  *scratch_bytes = ws;
  *state = st.release();
  return nullptr;
}

template <typename T>
FleetStatus* ConvLaunch(void*, const FleetKernelContext* kc, void* state) {
  auto* st = static_cast<ConvState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const FleetTensor* in = Input(kc, "Input");
  const FleetTensor* filter = Input(kc, "Filter");
  const FleetTensor* out = Output(kc, "Output");
  if (FleetStatus* e = CheckShapes(kc, st->g, in, filter, out, "Output")) return e;
  if (st->fwd_dnn && st->fwd_ws > 0 && kc->scratch == nullptr) {
    return MissingScratch(kc, st->fwd_ws);
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (st->fwd_dnn) {
      const T alpha = 1, beta = 0;
      const cudnnStatus_t r = cudnnConvolutionForward(
          Dnn(s), &alpha, st->x_desc, in->data, st->w_desc, filter->data, st->conv_desc,
          st->fwd_algo, kc->scratch, st->fwd_ws, &beta, st->y_desc, out->data);
      if (r == CUDNN_STATUS_SUCCESS) return nullptr;
      if (!Unsupported(r)) return DnnStatus(r, OpName(kc) + ": cudnnConvolutionForward");
      st->fwd_dnn = false;
    }
    const int64_t total = Numel(out);
    if (total > 0) {
      ConvForwardDirect<T><<<Blocks(total), kThreads, 0, s->native>>>(
          st->g, Data<const T>(in), Data<const T>(filter), Data<T>(out));
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* ConvGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  auto* st = static_cast<ConvState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const ConvGeom& g = st->g;
  const FleetTensor* in = Input(kc, "Input");
  const FleetTensor* filter = Input(kc, "Filter");
  const FleetTensor* dy = Input(kc, "Output@GRAD");
  const FleetTensor* dx = Output(kc, "Input@GRAD");
  const FleetTensor* df = Output(kc, "Filter@GRAD");
  if (FleetStatus* e = CheckShapes(kc, g, in, filter, dy, "Output@GRAD")) return e;
  if ((dx != nullptr) != st->want_data || (df != nullptr) != st->want_filter ||
      (dx != nullptr && !HasDims(dx, g.n, g.c, g.h, g.w)) ||
      (df != nullptr && !HasDims(df, g.o, g.cg, g.kh, g.kw))) {
    return InvalidArgument(OpName(kc) + ": Input@GRAD / Filter@GRAD differ from what prepare "
                                        "saw or from the shapes of Input / Filter");
  }
  const size_t ws = std::max(dx != nullptr && st->data_dnn ? st->data_ws : 0,
                             df != nullptr && st->filter_dnn ? st->filter_ws : 0);
  if (ws > 0 && kc->scratch == nullptr) return MissingScratch(kc, ws);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const T alpha = 1, beta = 0;
    if (dx != nullptr) {
      if (st->data_dnn) {
        const cudnnStatus_t r = cudnnConvolutionBackwardData(
            Dnn(s), &alpha, st->w_desc, filter->data, st->y_desc, dy->data, st->conv_desc,
            st->data_algo, kc->scratch, st->data_ws, &beta, st->x_desc, dx->data);
        if (r != CUDNN_STATUS_SUCCESS && !Unsupported(r)) {
          return DnnStatus(r, OpName(kc) + ": cudnnConvolutionBackwardData");
        }
        st->data_dnn = r == CUDNN_STATUS_SUCCESS;
      }
      const int64_t total = Numel(dx);
      if (!st->data_dnn && total > 0) {
        ConvDataGradDirect<T><<<Blocks(total), kThreads, 0, s->native>>>(
            g, Data<const T>(dy), Data<const T>(filter), Data<T>(dx));
      }
    }
    if (df != nullptr) {
      if (st->filter_dnn) {
        const cudnnStatus_t r = cudnnConvolutionBackwardFilter(
            Dnn(s), &alpha, st->x_desc, in->data, st->y_desc, dy->data, st->conv_desc,
            st->filter_algo, kc->scratch, st->filter_ws, &beta, st->w_desc, df->data);
        if (r != CUDNN_STATUS_SUCCESS && !Unsupported(r)) {
          return DnnStatus(r, OpName(kc) + ": cudnnConvolutionBackwardFilter");
        }
        st->filter_dnn = r == CUDNN_STATUS_SUCCESS;
      }
      const int64_t total = Numel(df);
      if (!st->filter_dnn && total > 0) {
        const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(total, 1 << 20));
        ConvFilterGradDirect<T><<<blocks, kThreads, 0, s->native>>>(
            g, Data<const T>(in), Data<const T>(dy), Data<T>(df));
      }
    }
    return nullptr;
  });
}

template <typename T>
void AddConv(KernelList& list, int32_t dtype) {
  // depthwise_conv2d is Paddle's name for conv2d with groups == channels: the same kernels.
  // Kernel defs keep the op type pointer, so the names are literals.
  const char* const types[][2] = {{"conv2d", "conv2d_grad"},
                                  {"depthwise_conv2d", "depthwise_conv2d_grad"}};
  for (const auto& [type, grad] : types) {
    Add(list, type, dtype, ConvLaunch<T>, ConvPrepare<T, false>, dense::DeleteState<ConvState>);
    Add(list, grad, dtype, ConvGradLaunch<T>, ConvPrepare<T, true>,
        dense::DeleteState<ConvState>);
  }
}

}  // namespace

void AddDenseConvKernels(KernelList& list) {
  AddConv<float>(list, FLEET_DTYPE_FLOAT32);
  AddConv<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
