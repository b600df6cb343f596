// conv2d and conv2d_grad kernels (NCHW input, OIHW filter, groups, dilations).
// float32 runs oneDNN convolution primitives built once in prepare on plain nchw/oihw memory;
// float64 (what gradient checks use) runs direct loops.
#include <algorithm>
#include <memory>
#include <unordered_map>

#include "kernels/nn_kernels.h"

namespace fleet_cpu {
namespace {

struct ConvGeom {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t o = 0, kh = 0, kw = 0;       // filter
  int64_t oh = 0, ow = 0;              // output
  int64_t groups = 1;
  Window2d win;
};

// `out` is Output (forward) or Output@GRAD (grad): both carry the output shape.
FleetStatus* Geometry(const FleetKernelContext* kc, const FleetTensor* in,
                      const FleetTensor* filter, const FleetTensor* out, ConvGeom* g) {
  if (FleetStatus* st = ExpectRank(kc, in, "Input", 4)) return st;
  if (FleetStatus* st = ExpectRank(kc, filter, "Filter", 4)) return st;
  if (FleetStatus* st = ExpectRank(kc, out, "Output", 4)) return st;
  g->n = in->dims[0], g->c = in->dims[1], g->h = in->dims[2], g->w = in->dims[3];
  g->o = filter->dims[0], g->kh = filter->dims[2], g->kw = filter->dims[3];
  g->oh = out->dims[2], g->ow = out->dims[3];
  g->groups = IntAttr(kc, "groups", 1);
  if (g->groups < 1 || g->c % g->groups != 0 || g->o % g->groups != 0 ||
      g->c / g->groups != filter->dims[1] || out->dims[1] != g->o || out->dims[0] != g->n) {
    return InvalidArgument(OpName(kc) + ": Input, Filter and Output shapes do not agree with "
                                        "groups=" + std::to_string(g->groups));
  }
  const int64_t in_hw[2] = {g->h, g->w}, k[2] = {g->kh, g->kw};
  return ResolveWindow(kc, in_hw, k, true, &g->win);
}

// ---- float64 (and fallback) loops --------------------------------------------------------

template <typename T>
void ConvForwardLoops(const ConvGeom& g, const T* x, const T* f, T* y) {
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const Window2d& w = g.win;
#pragma omp parallel for collapse(2)
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t o = 0; o < g.o; ++o) {
      const int64_t grp = o / og;
      T* yo = y + (n * g.o + o) * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i) {
        for (int64_t j = 0; j < g.ow; ++j) {
          T acc = 0;
          for (int64_t c = 0; c < cg; ++c) {
            const T* xc = x + (n * g.c + grp * cg + c) * g.h * g.w;
            const T* fc = f + (o * cg + c) * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; ++a) {
              const int64_t ih = i * w.stride[0] - w.pad_begin[0] + a * w.dilation[0];
              if (ih < 0 || ih >= g.h) continue;
              for (int64_t b = 0; b < g.kw; ++b) {
                const int64_t iw = j * w.stride[1] - w.pad_begin[1] + b * w.dilation[1];
                if (iw < 0 || iw >= g.w) continue;
                acc += xc[ih * g.w + iw] * fc[a * g.kw + b];
              }
            }
          }
          yo[i * g.ow + j] = acc;
        }
      }
    }
  }
}

template <typename T>
void ConvBackwardDataLoops(const ConvGeom& g, const T* dy, const T* f, T* dx) {
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const Window2d& w = g.win;
#pragma omp parallel for
  for (int64_t n = 0; n < g.n; ++n) {
    T* dxn = dx + n * g.c * g.h * g.w;
    for (int64_t k = 0; k < g.c * g.h * g.w; ++k) dxn[k] = 0;
    for (int64_t o = 0; o < g.o; ++o) {
      const int64_t grp = o / og;
      const T* dyo = dy + (n * g.o + o) * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i) {
        for (int64_t j = 0; j < g.ow; ++j) {
          const T d = dyo[i * g.ow + j];
          for (int64_t c = 0; c < cg; ++c) {
            T* dxc = dxn + (grp * cg + c) * g.h * g.w;
            const T* fc = f + (o * cg + c) * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; ++a) {
              const int64_t ih = i * w.stride[0] - w.pad_begin[0] + a * w.dilation[0];
              if (ih < 0 || ih >= g.h) continue;
              for (int64_t b = 0; b < g.kw; ++b) {
                const int64_t iw = j * w.stride[1] - w.pad_begin[1] + b * w.dilation[1];
                if (iw < 0 || iw >= g.w) continue;
                dxc[ih * g.w + iw] += d * fc[a * g.kw + b];
              }
            }
          }
        }
      }
    }
  }
}

template <typename T>
void ConvBackwardWeightsLoops(const ConvGeom& g, const T* x, const T* dy, T* df) {
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const Window2d& w = g.win;
#pragma omp parallel for
  for (int64_t o = 0; o < g.o; ++o) {
    const int64_t grp = o / og;
    T* dfo = df + o * cg * g.kh * g.kw;
    for (int64_t k = 0; k < cg * g.kh * g.kw; ++k) dfo[k] = 0;
    for (int64_t n = 0; n < g.n; ++n) {
      const T* dyo = dy + (n * g.o + o) * g.oh * g.ow;
      for (int64_t c = 0; c < cg; ++c) {
        const T* xc = x + (n * g.c + grp * cg + c) * g.h * g.w;
        for (int64_t a = 0; a < g.kh; ++a) {
          for (int64_t b = 0; b < g.kw; ++b) {
            T acc = 0;
            for (int64_t i = 0; i < g.oh; ++i) {
              const int64_t ih = i * w.stride[0] - w.pad_begin[0] + a * w.dilation[0];
              if (ih < 0 || ih >= g.h) continue;
              for (int64_t j = 0; j < g.ow; ++j) {
                const int64_t iw = j * w.stride[1] - w.pad_begin[1] + b * w.dilation[1];
                if (iw < 0 || iw >= g.w) continue;
                acc += dyo[i * g.ow + j] * xc[ih * g.w + iw];
              }
            }
            dfo[(c * g.kh + a) * g.kw + b] += acc;
          }
        }
      }
    }
  }
}

template <typename T>
FleetStatus* Conv2dLoops(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    ConvGeom g;
    const FleetTensor* out = Output(kc, "Output");
    if (FleetStatus* st = Geometry(kc, Input(kc, "Input"), Input(kc, "Filter"), out, &g)) {
      return st;
    }
    UseThreads(kc);
    ConvForwardLoops<T>(g, Data<T>(Input(kc, "Input")), Data<T>(Input(kc, "Filter")),
                        Data<T>(out));
    return nullptr;
  });
}

template <typename T>
FleetStatus* Conv2dGradLoops(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    ConvGeom g;
    const FleetTensor* x = Input(kc, "Input");
    const FleetTensor* f = Input(kc, "Filter");
    const FleetTensor* dy = Input(kc, "Output@GRAD");
    if (FleetStatus* st = Geometry(kc, x, f, dy, &g)) return st;
    UseThreads(kc);
    if (const FleetTensor* dx = Output(kc, "Input@GRAD")) {
      ConvBackwardDataLoops<T>(g, Data<T>(dy), Data<T>(f), Data<T>(dx));
    }
    if (const FleetTensor* df = Output(kc, "Filter@GRAD")) {
      ConvBackwardWeightsLoops<T>(g, Data<T>(x), Data<T>(dy), Data<T>(df));
    }
    return nullptr;
  });
}

// ---- float32: oneDNN --------------------------------------------------------------------

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

struct DnnlConvDescs {
  memory::desc src, wei, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

DnnlConvDescs MakeDescs(const ConvGeom& g) {
  const auto f32 = memory::data_type::f32;
  DnnlConvDescs d;
  d.src = memory::desc({g.n, g.c, g.h, g.w}, f32, memory::format_tag::nchw);
  d.dst = memory::desc({g.n, g.o, g.oh, g.ow}, f32, memory::format_tag::nchw);
  if (g.groups == 1) {
    d.wei = memory::desc({g.o, g.c, g.kh, g.kw}, f32, memory::format_tag::oihw);
  } else {
    // Paddle's [O, C/G, kh, kw] filter is already laid out as [G, O/G, C/G, kh, kw].
    d.wei = memory::desc({g.groups, g.o / g.groups, g.c / g.groups, g.kh, g.kw}, f32,
                         memory::format_tag::goihw);
  }
  const Window2d& w = g.win;
  d.strides = {w.stride[0], w.stride[1]};
  d.dilates = {w.dilation[0] - 1, w.dilation[1] - 1};
  d.pad_l = {w.pad_begin[0], w.pad_begin[1]};
  // oneDNN wants (in + pad_l + pad_r - span) / stride + 1 == out exactly; trailing padding
  // that no window reaches is trimmed.
  const int64_t in[2] = {g.h, g.w}, k[2] = {g.kh, g.kw}, out[2] = {g.oh, g.ow};
  d.pad_r = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = (k[i] - 1) * w.dilation[i] + 1;
    d.pad_r[i] = std::max<int64_t>(
        0, std::min<int64_t>(w.pad_end[i],
                             (out[i] - 1) * w.stride[i] + span - in[i] - w.pad_begin[i]));
  }
  return d;
}

dnnl::convolution_forward::primitive_desc ForwardPd(const DnnlConvDescs& d,
                                                    dnnl::prop_kind prop) {
  dnnl::convolution_forward::desc desc(prop, dnnl::algorithm::convolution_direct, d.src, d.wei,
                                       d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, DnnlEngine());
}

struct ConvFwdState {
  dnnl::convolution_forward prim;
  memory src, wei, dst;
  Args args;
};

FleetStatus* Conv2dPrepareF32(void*, const FleetKernelContext* kc, void** state, size_t*) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    ConvGeom g;
    if (FleetStatus* st =
            Geometry(kc, Input(kc, "Input"), Input(kc, "Filter"), Output(kc, "Output"), &g)) {
      return st;
    }
    DnnlConvDescs d = MakeDescs(g);
    auto s = std::make_unique<ConvFwdState>();
    s->prim = dnnl::convolution_forward(ForwardPd(d, dnnl::prop_kind::forward_inference));
    s->src = memory(d.src, DnnlEngine(), DNNL_MEMORY_NONE);
    s->wei = memory(d.wei, DnnlEngine(), DNNL_MEMORY_NONE);
    s->dst = memory(d.dst, DnnlEngine(), DNNL_MEMORY_NONE);
    s->args = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_WEIGHTS, s->wei}, {DNNL_ARG_DST, s->dst}};
    *state = s.release();
    return nullptr;
  });
}

FleetStatus* Conv2dLaunchF32(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto* s = static_cast<ConvFwdState*>(state);
    if (s == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    UseThreads(kc);
    s->src.set_data_handle(Input(kc, "Input")->data);
    s->wei.set_data_handle(Input(kc, "Filter")->data);
    s->dst.set_data_handle(Output(kc, "Output")->data);
    s->prim.execute(DnnlStream(), s->args);
    DnnlStream().wait();
    return nullptr;
  });
}

struct ConvBwdState {
  bool data = false, weights = false;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  memory src, wei, diff_dst, diff_src, diff_wei;
  Args data_args, weights_args;
};

FleetStatus* Conv2dGradPrepareF32(void*, const FleetKernelContext* kc, void** state, size_t*) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    ConvGeom g;
    if (FleetStatus* st = Geometry(kc, Input(kc, "Input"), Input(kc, "Filter"),
                                   Input(kc, "Output@GRAD"), &g)) {
      return st;
    }
    DnnlConvDescs d = MakeDescs(g);
    auto hint = ForwardPd(d, dnnl::prop_kind::forward_training);
    auto s = std::make_unique<ConvBwdState>();
    const auto& eng = DnnlEngine();
    s->diff_dst = memory(d.dst, eng, DNNL_MEMORY_NONE);
    if (Output(kc, "Input@GRAD") != nullptr) {
      s->data = true;
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.src,
                                                 d.wei, d.dst, d.strides, d.dilates, d.pad_l,
                                                 d.pad_r);
      s->bwd_data = dnnl::convolution_backward_data(
          dnnl::convolution_backward_data::primitive_desc(desc, eng, hint));
      s->wei = memory(d.wei, eng, DNNL_MEMORY_NONE);
      s->diff_src = memory(d.src, eng, DNNL_MEMORY_NONE);
      s->data_args = {{DNNL_ARG_DIFF_DST, s->diff_dst},
                      {DNNL_ARG_WEIGHTS, s->wei},
                      {DNNL_ARG_DIFF_SRC, s->diff_src}};
    }
    if (Output(kc, "Filter@GRAD") != nullptr) {
      s->weights = true;
      dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, d.src,
                                                    d.wei, d.dst, d.strides, d.dilates, d.pad_l,
                                                    d.pad_r);
      s->bwd_weights = dnnl::convolution_backward_weights(
          dnnl::convolution_backward_weights::primitive_desc(desc, eng, hint));
      s->src = memory(d.src, eng, DNNL_MEMORY_NONE);
      s->diff_wei = memory(d.wei, eng, DNNL_MEMORY_NONE);
      s->weights_args = {{DNNL_ARG_SRC, s->src},
                         {DNNL_ARG_DIFF_DST, s->diff_dst},
                         {DNNL_ARG_DIFF_WEIGHTS, s->diff_wei}};
    }
    *state = s.release();
    return nullptr;
  });
}

FleetStatus* Conv2dGradLaunchF32(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto* s = static_cast<ConvBwdState*>(state);
    if (s == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    UseThreads(kc);
    s->diff_dst.set_data_handle(Input(kc, "Output@GRAD")->data);
    if (s->data) {
      s->wei.set_data_handle(Input(kc, "Filter")->data);
      s->diff_src.set_data_handle(Output(kc, "Input@GRAD")->data);
      s->bwd_data.execute(DnnlStream(), s->data_args);
    }
    if (s->weights) {
      s->src.set_data_handle(Input(kc, "Input")->data);
      s->diff_wei.set_data_handle(Output(kc, "Filter@GRAD")->data);
      s->bwd_weights.execute(DnnlStream(), s->weights_args);
    }
    DnnlStream().wait();
    return nullptr;
  });
}

}  // namespace

void AddNnConvKernels(KernelList& list) {
  // depthwise_conv2d is Paddle's name for conv2d with groups == channels: the same kernels.
  // Kernel defs keep the op type pointer, so the names are literals.
  const char* const types[][2] = {{"conv2d", "conv2d_grad"},
                                  {"depthwise_conv2d", "depthwise_conv2d_grad"}};
  for (const auto& [type, grad] : types) {
    Add(list, type, FLEET_DTYPE_FLOAT32, Conv2dLaunchF32, Conv2dPrepareF32,
        DeleteState<ConvFwdState>);
    Add(list, type, FLEET_DTYPE_FLOAT64, Conv2dLoops<double>);
    Add(list, grad, FLEET_DTYPE_FLOAT32, Conv2dGradLaunchF32, Conv2dGradPrepareF32,
        DeleteState<ConvBwdState>);
    Add(list, grad, FLEET_DTYPE_FLOAT64, Conv2dGradLoops<double>);
  }
}

}  // namespace fleet_cpu
