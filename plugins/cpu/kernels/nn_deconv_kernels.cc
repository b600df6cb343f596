// conv2d_transpose and conv2d_transpose_grad kernels (NCHW, filter [C_in, C_out/groups, kh,
// kw]), planned as the convolution whose data gradient the op is (plugins/common/
// deconv_plan.h). float32 runs oneDNN deconvolution primitives built once in prepare on plain
// nchw / iohw memory; float64 (what gradient checks use) runs direct loops, and so does a
// float32 geometry oneDNN refuses.
#include <algorithm>
#include <memory>
#include <unordered_map>

#include "deconv_plan.h"
#include "kernels/nn_kernels.h"

namespace fleet_cpu {
namespace {

using fleet::kernel::Deconv2dGeom;

FleetStatus* Plan(const FleetKernelContext* kc, const char* y_slot, Deconv2dGeom* g) {
  const FleetTensor* y = std::string_view(y_slot) == "Output" ? Output(kc, y_slot)
                                                              : Input(kc, y_slot);
  return fleet::kernel::ToFleetStatus(
      fleet::kernel::PlanDeconv2d(kc, Input(kc, "Input"), Input(kc, "Filter"), y, y_slot,
                                  /*count_in_messages=*/false, g),
      Error);
}

// ---- loops (float64, and float32 where oneDNN declines) --------------------------------
// Named after the convolution: `x` [n, c, h, w] is the op's Output side, `y` [n, o, oh, ow]
// its Input side.

// Output = scatter of every Input pixel times its filter taps; one batch item per thread so
// each output plane is written by one thread only.
template <typename T>
void ScatterLoops(const Deconv2dGeom& g, const T* in, const T* f, T* out) {
  const Window2d& w = g.win;
#pragma omp parallel for
  for (int64_t n = 0; n < g.n; ++n) {
    T* on = out + n * g.c * g.h * g.w;
    std::fill(on, on + g.c * g.h * g.w, T(0));
    for (int64_t o = 0; o < g.o; ++o) {
      const int64_t grp = o / g.og;
      const T* io = in + (n * g.o + o) * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i) {
        for (int64_t j = 0; j < g.ow; ++j) {
          const T v = io[i * g.ow + j];
          for (int64_t c = 0; c < g.cg; ++c) {
            T* oc = on + (grp * g.cg + c) * g.h * g.w;
            const T* fc = f + (o * g.cg + c) * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; ++a) {
              const int64_t r = i * w.stride[0] - w.pad_begin[0] + a * w.dilation[0];
              if (r < 0 || r >= g.h) continue;
              for (int64_t b = 0; b < g.kw; ++b) {
                const int64_t s = j * w.stride[1] - w.pad_begin[1] + b * w.dilation[1];
                if (s < 0 || s >= g.w) continue;
                oc[r * g.w + s] += v * fc[a * g.kw + b];
              }
            }
          }
        }
      }
    }
  }
}

// Input@GRAD: each Input pixel gathers Output@GRAD over the positions it was scattered to.
template <typename T>
void GatherLoops(const Deconv2dGeom& g, const T* dout, const T* f, T* din) {
  const Window2d& w = g.win;
#pragma omp parallel for collapse(2)
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t o = 0; o < g.o; ++o) {
      const int64_t grp = o / g.og;
      T* dio = din + (n * g.o + o) * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i) {
        for (int64_t j = 0; j < g.ow; ++j) {
          T acc = 0;
          for (int64_t c = 0; c < g.cg; ++c) {
            const T* dc = dout + (n * g.c + grp * g.cg + c) * g.h * g.w;
            const T* fc = f + (o * g.cg + c) * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; ++a) {
              const int64_t r = i * w.stride[0] - w.pad_begin[0] + a * w.dilation[0];
              if (r < 0 || r >= g.h) continue;
              for (int64_t b = 0; b < g.kw; ++b) {
                const int64_t s = j * w.stride[1] - w.pad_begin[1] + b * w.dilation[1];
                if (s < 0 || s >= g.w) continue;
                acc += dc[r * g.w + s] * fc[a * g.kw + b];
              }
            }
          }
          dio[i * g.ow + j] = acc;
        }
      }
    }
  }
}

// Filter@GRAD: one thread per filter row (Input channel); batch, then positions, in order.
template <typename T>
void FilterGradLoops(const Deconv2dGeom& g, const T* in, const T* dout, T* df) {
  const Window2d& w = g.win;
#pragma omp parallel for
  for (int64_t o = 0; o < g.o; ++o) {
    const int64_t grp = o / g.og;
    T* dfo = df + o * g.cg * g.kh * g.kw;
    std::fill(dfo, dfo + g.cg * g.kh * g.kw, T(0));
    for (int64_t n = 0; n < g.n; ++n) {
      const T* io = in + (n * g.o + o) * g.oh * g.ow;
      for (int64_t c = 0; c < g.cg; ++c) {
        const T* dc = dout + (n * g.c + grp * g.cg + c) * g.h * g.w;
        for (int64_t a = 0; a < g.kh; ++a) {
          for (int64_t b = 0; b < g.kw; ++b) {
            T acc = 0;
            for (int64_t i = 0; i < g.oh; ++i) {
              const int64_t r = i * w.stride[0] - w.pad_begin[0] + a * w.dilation[0];
              if (r < 0 || r >= g.h) continue;
              for (int64_t j = 0; j < g.ow; ++j) {
                const int64_t s = j * w.stride[1] - w.pad_begin[1] + b * w.dilation[1];
                if (s < 0 || s >= g.w) continue;
                acc += io[i * g.ow + j] * dc[r * g.w + s];
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
void RunForwardLoops(const FleetKernelContext* kc, const Deconv2dGeom& g) {
  ScatterLoops<T>(g, Data<T>(Input(kc, "Input")), Data<T>(Input(kc, "Filter")),
                  Data<T>(Output(kc, "Output")));
}

template <typename T>
void RunGradLoops(const FleetKernelContext* kc, const Deconv2dGeom& g) {
  const T* dout = Data<T>(Input(kc, "Output@GRAD"));
  if (const FleetTensor* din = Output(kc, "Input@GRAD")) {
    GatherLoops<T>(g, dout, Data<T>(Input(kc, "Filter")), Data<T>(din));
  }
  if (const FleetTensor* df = Output(kc, "Filter@GRAD")) {
    FilterGradLoops<T>(g, Data<T>(Input(kc, "Input")), dout, Data<T>(df));
  }
}

template <typename T>
FleetStatus* DeconvLoops(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    Deconv2dGeom g;
    if (FleetStatus* st = Plan(kc, "Output", &g)) return st;
    UseThreads(kc);
    RunForwardLoops<T>(kc, g);
    return nullptr;
  });
}

template <typename T>
FleetStatus* DeconvGradLoops(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    Deconv2dGeom g;
    if (FleetStatus* st = Plan(kc, "Output@GRAD", &g)) return st;
    UseThreads(kc);
    RunGradLoops<T>(kc, g);
    return nullptr;
  });
}

// ---- float32: oneDNN --------------------------------------------------------------------

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

// oneDNN's deconvolution src is the op's Input, dst its Output.
struct DnnlDescs {
  memory::desc src, wei, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

DnnlDescs MakeDescs(const Deconv2dGeom& g) {
  const auto f32 = memory::data_type::f32;
  DnnlDescs d;
  d.src = memory::desc({g.n, g.o, g.oh, g.ow}, f32, memory::format_tag::nchw);
  d.dst = memory::desc({g.n, g.c, g.h, g.w}, f32, memory::format_tag::nchw);
  // oneDNN's deconvolution weights are logically [out, in, kh, kw]; Paddle stores them
  // input-channel-major, [in, out/G, kh, kw], which is iohw (giohw with groups).
  if (g.groups == 1) {
    d.wei = memory::desc({g.c, g.o, g.kh, g.kw}, f32, memory::format_tag::iohw);
  } else {
    d.wei = memory::desc({g.groups, g.cg, g.og, g.kh, g.kw}, f32, memory::format_tag::giohw);
  }
  const Window2d& w = g.win;
  d.strides = {w.stride[0], w.stride[1]};
  d.dilates = {w.dilation[0] - 1, w.dilation[1] - 1};
  d.pad_l = {w.pad_begin[0], w.pad_begin[1]};
  // oneDNN derives the Output size from the paddings, so the trailing one is whatever makes
  // it the host's size: negative when output_size / output_padding add rows no tap reaches.
  const int64_t out[2] = {g.h, g.w}, in[2] = {g.oh, g.ow}, k[2] = {g.kh, g.kw};
  d.pad_r = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = (k[i] - 1) * w.dilation[i] + 1;
    d.pad_r[i] = (in[i] - 1) * w.stride[i] + span - w.pad_begin[i] - out[i];
  }
  return d;
}

dnnl::deconvolution_forward::primitive_desc ForwardPd(const DnnlDescs& d,
                                                      dnnl::prop_kind prop) {
  dnnl::deconvolution_forward::desc desc(prop, dnnl::algorithm::deconvolution_direct, d.src,
                                         d.wei, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return dnnl::deconvolution_forward::primitive_desc(desc, DnnlEngine());
}

struct FwdState {
  Deconv2dGeom g;
  bool dnn = false;  // false: oneDNN declined the geometry, the loops run
  dnnl::deconvolution_forward prim;
  memory src, wei, dst;
  Args args;
};

FleetStatus* DeconvPrepareF32(void*, const FleetKernelContext* kc, void** state, size_t*) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    auto s = std::make_unique<FwdState>();
    if (FleetStatus* st = Plan(kc, "Output", &s->g)) return st;
    const DnnlDescs d = MakeDescs(s->g);
    try {
      s->prim = dnnl::deconvolution_forward(ForwardPd(d, dnnl::prop_kind::forward_inference));
      s->dnn = true;
    } catch (const dnnl::error&) {
      s->dnn = false;
    }
    if (s->dnn) {
      s->src = memory(d.src, DnnlEngine(), DNNL_MEMORY_NONE);
      s->wei = memory(d.wei, DnnlEngine(), DNNL_MEMORY_NONE);
      s->dst = memory(d.dst, DnnlEngine(), DNNL_MEMORY_NONE);
      s->args = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_WEIGHTS, s->wei}, {DNNL_ARG_DST, s->dst}};
    }
    *state = s.release();
    return nullptr;
  });
}

FleetStatus* DeconvLaunchF32(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto* s = static_cast<FwdState*>(state);
    if (s == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    UseThreads(kc);
    if (!s->dnn) {
      RunForwardLoops<float>(kc, s->g);
      return nullptr;
    }
    s->src.set_data_handle(Input(kc, "Input")->data);
    s->wei.set_data_handle(Input(kc, "Filter")->data);
    s->dst.set_data_handle(Output(kc, "Output")->data);
    s->prim.execute(DnnlStream(), s->args);
    DnnlStream().wait();
    return nullptr;
  });
}

struct BwdState {
  Deconv2dGeom g;
  bool dnn = false;
  bool data = false, weights = false;
  dnnl::deconvolution_backward_data bwd_data;
  dnnl::deconvolution_backward_weights bwd_weights;
  memory src, wei, diff_dst, diff_src, diff_wei;
  Args data_args, weights_args;
};

void MakeBackward(const FleetKernelContext* kc, const DnnlDescs& d, BwdState* s) {
  const auto& eng = DnnlEngine();
  auto hint = ForwardPd(d, dnnl::prop_kind::forward_training);
  s->diff_dst = memory(d.dst, eng, DNNL_MEMORY_NONE);
  if (Output(kc, "Input@GRAD") != nullptr) {
    s->data = true;
    dnnl::deconvolution_backward_data::desc desc(dnnl::algorithm::deconvolution_direct, d.src,
                                                 d.wei, d.dst, d.strides, d.dilates, d.pad_l,
                                                 d.pad_r);
    s->bwd_data = dnnl::deconvolution_backward_data(
        dnnl::deconvolution_backward_data::primitive_desc(desc, eng, hint));
    s->wei = memory(d.wei, eng, DNNL_MEMORY_NONE);
    s->diff_src = memory(d.src, eng, DNNL_MEMORY_NONE);
    s->data_args = {{DNNL_ARG_DIFF_DST, s->diff_dst},
                    {DNNL_ARG_WEIGHTS, s->wei},
                    {DNNL_ARG_DIFF_SRC, s->diff_src}};
  }
  if (Output(kc, "Filter@GRAD") != nullptr) {
    s->weights = true;
    dnnl::deconvolution_backward_weights::desc desc(dnnl::algorithm::deconvolution_direct,
                                                    d.src, d.wei, d.dst, d.strides, d.dilates,
                                                    d.pad_l, d.pad_r);
    s->bwd_weights = dnnl::deconvolution_backward_weights(
        dnnl::deconvolution_backward_weights::primitive_desc(desc, eng, hint));
    s->src = memory(d.src, eng, DNNL_MEMORY_NONE);
    s->diff_wei = memory(d.wei, eng, DNNL_MEMORY_NONE);
    s->weights_args = {{DNNL_ARG_SRC, s->src},
                       {DNNL_ARG_DIFF_DST, s->diff_dst},
                       {DNNL_ARG_DIFF_WEIGHTS, s->diff_wei}};
  }
}

FleetStatus* DeconvGradPrepareF32(void*, const FleetKernelContext* kc, void** state, size_t*) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    auto s = std::make_unique<BwdState>();
    if (FleetStatus* st = Plan(kc, "Output@GRAD", &s->g)) return st;
    try {
      MakeBackward(kc, MakeDescs(s->g), s.get());
      s->dnn = true;
    } catch (const dnnl::error&) {
      s->dnn = false;
    }
    *state = s.release();
    return nullptr;
  });
}

FleetStatus* DeconvGradLaunchF32(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto* s = static_cast<BwdState*>(state);
    if (s == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    UseThreads(kc);
    if (!s->dnn) {
      RunGradLoops<float>(kc, s->g);
      return nullptr;
    }
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

void AddNnDeconvKernels(KernelList& list) {
  Add(list, "conv2d_transpose", FLEET_DTYPE_FLOAT32, DeconvLaunchF32, DeconvPrepareF32,
      DeleteState<FwdState>);
  Add(list, "conv2d_transpose", FLEET_DTYPE_FLOAT64, DeconvLoops<double>);
  Add(list, "conv2d_transpose_grad", FLEET_DTYPE_FLOAT32, DeconvGradLaunchF32,
      DeconvGradPrepareF32, DeleteState<BwdState>);
  Add(list, "conv2d_transpose_grad", FLEET_DTYPE_FLOAT64, DeconvGradLoops<double>);
}

}  // namespace fleet_cpu
