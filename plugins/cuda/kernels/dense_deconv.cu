// conv2d_transpose and conv2d_transpose_grad (NCHW, filter [C_in, C_out/groups, kh, kw]),
// float32 and float64, planned as the convolution whose data gradient the op is
// (plugins/common/deconv_plan.h): that convolution's input x is the op's Output, its output y
// the op's Input, its filter the op's Filter.
//
// cuDNN runs what it can express (symmetric padding by pad_begin giving the Input size back,
// so output_padding below the stride is fine): the forward pass is
// cudnnConvolutionBackwardData (deterministic BWD_DATA_ALGO_1), Input@GRAD is
// cudnnConvolutionForward of Output@GRAD (implicit GEMM), Filter@GRAD is
// cudnnConvolutionBackwardFilter with Output@GRAD as x and Input as dy (deterministic
// BWD_FILTER_ALGO_1). float32 runs with CUDNN_FMA_MATH, so no TF32.
//
// Anything else (asymmetric paddings, output_padding at or above the stride, an algorithm
// this cuDNN or GPU lacks) runs direct kernels with the CPU plugin's arithmetic: one thread
// per Output element gathering the Input pixels scattered onto it, one thread per Input element
// for Input@GRAD, and one block per filter element with a fixed reduction tree for
// Filter@GRAD. No atomics, so every path is deterministic.
#include <algorithm>
#include <climits>
#include <memory>
#include <string>

#include "deconv_plan.h"
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
using Geom = cudnn_conv::ConvGeom;  // cuDNN's x is the op's Output, y its Input

using dense::OpName;

// Prepare only: reads list attributes.
FleetStatus* Plan(const FleetKernelContext* kc, const FleetTensor* y, const char* y_slot,
                  Geom* g) {
  fleet::kernel::Deconv2dGeom p;
  if (FleetStatus* e = fleet::kernel::ToFleetStatus(
          fleet::kernel::PlanDeconv2d(kc, Input(kc, "Input"), Input(kc, "Filter"), y, y_slot,
                                      /*count_in_messages=*/true, &p),
          Error)) {
    return e;
  }
  g->n = p.n, g->c = p.c, g->h = p.h, g->w = p.w;
  g->o = p.o, g->kh = p.kh, g->kw = p.kw, g->oh = p.oh, g->ow = p.ow;
  g->groups = p.groups, g->cg = p.cg, g->og = p.og;
  for (int i = 0; i < 2; ++i) {
    g->stride[i] = p.win.stride[i];
    g->dilation[i] = p.win.dilation[i];
    g->pad_begin[i] = p.win.pad_begin[i];
  }
  return nullptr;
}

bool HasDims(const FleetTensor* t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  return t != nullptr && t->ndim == 4 && t->dims[0] == d0 && t->dims[1] == d1 &&
         t->dims[2] == d2 && t->dims[3] == d3;
}

// Launch: Input, Filter and the Output-shaped tensor must still be what prepare planned for.
FleetStatus* CheckShapes(const FleetKernelContext* kc, const Geom& g, const FleetTensor* y,
                         const char* y_slot) {
  if (HasDims(Input(kc, "Input"), g.n, g.o, g.oh, g.ow) &&
      HasDims(Input(kc, "Filter"), g.o, g.cg, g.kh, g.kw) && HasDims(y, g.n, g.c, g.h, g.w)) {
    return nullptr;
  }
  return InvalidArgument(OpName(kc) + ": Input, Filter or " + y_slot +
                         " is missing or differs from the shapes prepared for");
}

// ---- direct kernels ----------------------------------------------------------------------

// Each Output element gathers Input * Filter over the Input pixels whose taps land on it
// (r = i * stride - pad + a * dilation solved for i), Input channels then taps in order.
template <typename T>
__global__ void DeconvForwardDirect(Geom g, const T* in, const T* f, T* out) {
  const int64_t total = g.n * g.c * g.h * g.w;
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t s = idx % g.w;
    int64_t t = idx / g.w;
    const int64_t r = t % g.h;
    t /= g.h;
    const int64_t ci = t % g.c;
    const int64_t n = t / g.c;
    const int64_t grp = ci / g.cg, c = ci % g.cg;
    T acc = 0;
    for (int64_t o = grp * g.og; o < (grp + 1) * g.og; ++o) {
      const T* io = in + (n * g.o + o) * g.oh * g.ow;
      const T* fc = f + (o * g.cg + c) * g.kh * g.kw;
      for (int64_t a = g.kh - 1; a >= 0; --a) {
        const int64_t th = r + g.pad_begin[0] - a * g.dilation[0];
        if (th < 0 || th % g.stride[0] != 0) continue;
        const int64_t i = th / g.stride[0];
        if (i >= g.oh) continue;
        for (int64_t b = g.kw - 1; b >= 0; --b) {
          const int64_t tw = s + g.pad_begin[1] - b * g.dilation[1];
          if (tw < 0 || tw % g.stride[1] != 0) continue;
          const int64_t j = tw / g.stride[1];
          if (j >= g.ow) continue;
          acc += io[i * g.ow + j] * fc[a * g.kw + b];
        }
      }
    }
    out[idx] = acc;
  }
}

// Each Input@GRAD element: the Output@GRAD window its taps reached, times the filter.
template <typename T>
__global__ void DeconvDataGradDirect(Geom g, const T* dout, const T* f, T* din) {
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
      const T* dc = dout + (n * g.c + grp * g.cg + c) * g.h * g.w;
      const T* fc = f + (o * g.cg + c) * g.kh * g.kw;
      for (int64_t a = 0; a < g.kh; ++a) {
        const int64_t r = i * g.stride[0] - g.pad_begin[0] + a * g.dilation[0];
        if (r < 0 || r >= g.h) continue;
        for (int64_t b = 0; b < g.kw; ++b) {
          const int64_t s = j * g.stride[1] - g.pad_begin[1] + b * g.dilation[1];
          if (s < 0 || s >= g.w) continue;
          acc += dc[r * g.w + s] * fc[a * g.kw + b];
        }
      }
    }
    din[idx] = acc;
  }
}

// One block per filter element (strided over the grid): the block's threads split the
// (batch, Input position) pairs and BlockSum adds their partial sums in a fixed tree.
template <typename T>
__global__ void DeconvFilterGradDirect(Geom g, const T* in, const T* dout, T* df) {
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
      const int64_t n = q / plane, p = q % plane;
      const int64_t i = p / g.ow, j = p % g.ow;
      const int64_t r = i * g.stride[0] - g.pad_begin[0] + a * g.dilation[0];
      const int64_t s = j * g.stride[1] - g.pad_begin[1] + b * g.dilation[1];
      if (r < 0 || r >= g.h || s < 0 || s >= g.w) continue;
      acc += in[(n * g.o + o) * plane + p] *
             dout[((n * g.c + grp * g.cg + c) * g.h + r) * g.w + s];
    }
    acc = dense::BlockSum(acc, buf);
    if (threadIdx.x == 0) df[e] = acc;
  }
}

// ---- cuDNN -------------------------------------------------------------------------------

// cuDNN's x is the op's Output side [n, c, h, w]; its y the op's Input side [n, o, oh, ow].
struct DeconvState : cudnn_conv::Descriptors {
  Geom g;
  bool want_data = false, want_filter = false;  // grad: which outputs the op has
  // Which directions run on cuDNN; a launch that cuDNN refuses clears its flag for good.
  // fwd: the op's forward (conv data gradient); data: Input@GRAD (conv forward); filter.
  bool fwd_dnn = false, data_dnn = false, filter_dnn = false;
  cudnnConvolutionBwdDataAlgo_t fwd_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionFwdAlgo_t data_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  cudnnConvolutionBwdFilterAlgo_t filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  size_t fwd_ws = 0, data_ws = 0, filter_ws = 0;
};

template <typename T, bool kGrad>
FleetStatus* DeconvPrepare(void*, const FleetKernelContext* kc, void** state,
                           size_t* scratch_bytes) {
  const char* y_slot = kGrad ? "Output@GRAD" : "Output";
  const FleetTensor* y = kGrad ? Input(kc, y_slot) : Output(kc, y_slot);
  auto st = std::make_unique<DeconvState>();
  if (FleetStatus* e = Plan(kc, y, y_slot, &st->g)) return e;
  st->want_data = kGrad && Output(kc, "Input@GRAD") != nullptr;
  st->want_filter = kGrad && Output(kc, "Filter@GRAD") != nullptr;
  if (DnnExpressible(st->g) && (!kGrad || st->want_data || st->want_filter)) {
    bool ok = false;
    if (FleetStatus* e = MakeDescriptors<T>(kc, st->g, *st, &ok)) return e;
    if (ok) {
      // The handle is only consulted here; each launch takes the handle of its own stream.
      FleetStatus* e = Run(kc, [&](FleetStream* s) -> FleetStatus* {
        cudnnHandle_t h = Dnn(s);
        // The op's forward is cuDNN's data gradient, its Input@GRAD cuDNN's forward.
        if (!kGrad) st->fwd_dnn = ChooseBackwardData(*st, h, &st->fwd_algo, &st->fwd_ws);
        if (st->want_data) st->data_dnn = ChooseForward(*st, h, &st->data_algo, &st->data_ws);
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
FleetStatus* DeconvLaunch(void*, const FleetKernelContext* kc, void* state) {
  auto* st = static_cast<DeconvState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const FleetTensor* in = Input(kc, "Input");
  const FleetTensor* filter = Input(kc, "Filter");
  const FleetTensor* out = Output(kc, "Output");
  if (FleetStatus* e = CheckShapes(kc, st->g, out, "Output")) return e;
  if (st->fwd_dnn && st->fwd_ws > 0 && kc->scratch == nullptr) {
    return MissingScratch(kc, st->fwd_ws);
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (st->fwd_dnn) {
      const T alpha = 1, beta = 0;
      const cudnnStatus_t r = cudnnConvolutionBackwardData(
          Dnn(s), &alpha, st->w_desc, filter->data, st->y_desc, in->data, st->conv_desc,
          st->fwd_algo, kc->scratch, st->fwd_ws, &beta, st->x_desc, out->data);
      if (r == CUDNN_STATUS_SUCCESS) return nullptr;
      if (!Unsupported(r)) return DnnStatus(r, OpName(kc) + ": cudnnConvolutionBackwardData");
      st->fwd_dnn = false;
    }
    const int64_t total = Numel(out);
    if (total > 0) {
      DeconvForwardDirect<T><<<Blocks(total), kThreads, 0, s->native>>>(
          st->g, Data<const T>(in), Data<const T>(filter), Data<T>(out));
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* DeconvGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  auto* st = static_cast<DeconvState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const Geom& g = st->g;
  const FleetTensor* in = Input(kc, "Input");
  const FleetTensor* filter = Input(kc, "Filter");
  const FleetTensor* dout = Input(kc, "Output@GRAD");
  const FleetTensor* din = Output(kc, "Input@GRAD");
  const FleetTensor* df = Output(kc, "Filter@GRAD");
  if (FleetStatus* e = CheckShapes(kc, g, dout, "Output@GRAD")) return e;
  if ((din != nullptr) != st->want_data || (df != nullptr) != st->want_filter ||
      (din != nullptr && !HasDims(din, g.n, g.o, g.oh, g.ow)) ||
      (df != nullptr && !HasDims(df, g.o, g.cg, g.kh, g.kw))) {
    return InvalidArgument(OpName(kc) + ": Input@GRAD / Filter@GRAD differ from what prepare "
                                        "saw or from the shapes of Input / Filter");
  }
  const size_t ws = std::max(din != nullptr && st->data_dnn ? st->data_ws : 0,
                             df != nullptr && st->filter_dnn ? st->filter_ws : 0);
  if (ws > 0 && kc->scratch == nullptr) return MissingScratch(kc, ws);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const T alpha = 1, beta = 0;
    if (din != nullptr) {
      if (st->data_dnn) {
        const cudnnStatus_t r = cudnnConvolutionForward(
            Dnn(s), &alpha, st->x_desc, dout->data, st->w_desc, filter->data, st->conv_desc,
            st->data_algo, kc->scratch, st->data_ws, &beta, st->y_desc, din->data);
        if (r != CUDNN_STATUS_SUCCESS && !Unsupported(r)) {
          return DnnStatus(r, OpName(kc) + ": cudnnConvolutionForward");
        }
        st->data_dnn = r == CUDNN_STATUS_SUCCESS;
      }
      const int64_t total = Numel(din);
      if (!st->data_dnn && total > 0) {
        DeconvDataGradDirect<T><<<Blocks(total), kThreads, 0, s->native>>>(
            g, Data<const T>(dout), Data<const T>(filter), Data<T>(din));
      }
    }
    if (df != nullptr) {
      if (st->filter_dnn) {
        const cudnnStatus_t r = cudnnConvolutionBackwardFilter(
            Dnn(s), &alpha, st->x_desc, dout->data, st->y_desc, in->data, st->conv_desc,
            st->filter_algo, kc->scratch, st->filter_ws, &beta, st->w_desc, df->data);
        if (r != CUDNN_STATUS_SUCCESS && !Unsupported(r)) {
          return DnnStatus(r, OpName(kc) + ": cudnnConvolutionBackwardFilter");
        }
        st->filter_dnn = r == CUDNN_STATUS_SUCCESS;
      }
      const int64_t total = Numel(df);
      if (!st->filter_dnn && total > 0) {
        const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(total, 1 << 20));
        DeconvFilterGradDirect<T><<<blocks, kThreads, 0, s->native>>>(
            g, Data<const T>(in), Data<const T>(dout), Data<T>(df));
      }
    }
    return nullptr;
  });
}

template <typename T>
void AddDeconv(KernelList& list, int32_t dtype) {
  Add(list, "conv2d_transpose", dtype, DeconvLaunch<T>, DeconvPrepare<T, false>,
      dense::DeleteState<DeconvState>);
  Add(list, "conv2d_transpose_grad", dtype, DeconvGradLaunch<T>, DeconvPrepare<T, true>,
      dense::DeleteState<DeconvState>);
}

}  // namespace

void AddDenseDeconvKernels(KernelList& list) {
  AddDeconv<float>(list, FLEET_DTYPE_FLOAT32);
  AddDeconv<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
