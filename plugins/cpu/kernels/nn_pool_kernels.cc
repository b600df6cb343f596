// pool2d and pool2d_grad kernels (NCHW; max, avg exclusive/inclusive, global, ceil_mode,
// adaptive). float32 runs oneDNN pooling built in prepare; the max-pool gradient reruns the
// training forward into scratch to get oneDNN's workspace (the forward op's instance is a
// different kernel, so its workspace is not reachable). float64, and adaptive windows (which
// oneDNN's fixed-stride pooling cannot express), run loops.
#include <algorithm>
#include <limits>
#include <memory>
#include <unordered_map>

#include "kernels/nn_kernels.h"

namespace fleet_cpu {
namespace {

struct PoolGeom {
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  bool max = true, exclusive = true, adaptive = false;
  Window2d win;
};

FleetStatus* Geometry(const FleetKernelContext* kc, const FleetTensor* x, const FleetTensor* out,
                      PoolGeom* g) {
  if (FleetStatus* st = ExpectRank(kc, x, "X", 4)) return st;
  if (FleetStatus* st = ExpectRank(kc, out, "Out", 4)) return st;
  g->n = x->dims[0], g->c = x->dims[1], g->h = x->dims[2], g->w = x->dims[3];
  g->oh = out->dims[2], g->ow = out->dims[3];
  std::string_view type = StringAttr(kc, "pooling_type");
  if (type != "max" && type != "avg") {
    return InvalidArgument(OpName(kc) + ": pooling_type must be 'max' or 'avg'");
  }
  g->max = type == "max";
  g->exclusive = BoolAttr(kc, "exclusive", true);
  if (BoolAttr(kc, "adaptive")) {
    // The windows follow from the output size the host allocated (ksize); averages always
    // divide by the window's own size, as in Paddle.
    g->adaptive = true;
    g->exclusive = true;
    return nullptr;
  }
  if (BoolAttr(kc, "global_pooling")) {
    g->win.kernel[0] = g->h;
    g->win.kernel[1] = g->w;
    return nullptr;
  }
  std::vector<int64_t> ksize = IntsAttr(kc, "ksize");
  if (ksize.size() != 2) return InvalidArgument(OpName(kc) + ": ksize needs 2 values");
  const int64_t in[2] = {g->h, g->w}, k[2] = {ksize[0], ksize[1]};
  return ResolveWindow(kc, in, k, false, &g->win);
}

// Window [begin, end) of output position `o` along dim `d`, clipped to the input.
inline void Span(const PoolGeom& g, int d, int64_t o, int64_t* begin, int64_t* end) {
  const int64_t in = d == 0 ? g.h : g.w;
  if (g.adaptive) {
    const int64_t out = d == 0 ? g.oh : g.ow;
    *begin = fleet::kernel::AdaptiveBegin(o, in, out);
    *end = fleet::kernel::AdaptiveEnd(o, in, out);
    return;
  }
  const int64_t start = o * g.win.stride[d] - g.win.pad_begin[d];
  *begin = std::max<int64_t>(start, 0);
  *end = std::min<int64_t>(start + g.win.kernel[d], in);
}

template <typename T>
FleetStatus* Pool2dLoops(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    PoolGeom g;
    const FleetTensor* xt = Input(kc, "X");
    const FleetTensor* yt = Output(kc, "Out");
    if (FleetStatus* st = Geometry(kc, xt, yt, &g)) return st;
    const T* x = Data<T>(xt);
    T* y = Data<T>(yt);
    const T full = static_cast<T>(g.win.kernel[0] * g.win.kernel[1]);
    ParallelForEach(kc, g.n * g.c, g.h * g.w, [&](int64_t p) {
      const T* xp = x + p * g.h * g.w;
      T* yp = y + p * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i) {
        int64_t h0, h1;
        Span(g, 0, i, &h0, &h1);
        for (int64_t j = 0; j < g.ow; ++j) {
          int64_t w0, w1;
          Span(g, 1, j, &w0, &w1);
          const int64_t count = std::max<int64_t>(h1 - h0, 0) * std::max<int64_t>(w1 - w0, 0);
          T acc = g.max ? -std::numeric_limits<T>::infinity() : T(0);
          for (int64_t a = h0; a < h1; ++a) {
            for (int64_t b = w0; b < w1; ++b) {
              acc = g.max ? std::max(acc, xp[a * g.w + b]) : acc + xp[a * g.w + b];
            }
          }
          if (count == 0) acc = 0;
          else if (!g.max) acc /= g.exclusive ? static_cast<T>(count) : full;
          yp[i * g.ow + j] = acc;
        }
      }
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* Pool2dGradLoops(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    PoolGeom g;
    const FleetTensor* xt = Input(kc, "X");
    const FleetTensor* dyt = Input(kc, "Out@GRAD");
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    if (dxt == nullptr) return nullptr;
    if (FleetStatus* st = Geometry(kc, xt, dyt, &g)) return st;
    const T* x = Data<T>(xt);
    const T* dy = Data<T>(dyt);
    T* dx = Data<T>(dxt);
    const T full = static_cast<T>(g.win.kernel[0] * g.win.kernel[1]);
    ParallelForEach(kc, g.n * g.c, g.h * g.w, [&](int64_t p) {
      const T* xp = x + p * g.h * g.w;
      const T* dyp = dy + p * g.oh * g.ow;
      T* dxp = dx + p * g.h * g.w;
      for (int64_t k = 0; k < g.h * g.w; ++k) dxp[k] = 0;
      for (int64_t i = 0; i < g.oh; ++i) {
        int64_t h0, h1;
        Span(g, 0, i, &h0, &h1);
        for (int64_t j = 0; j < g.ow; ++j) {
          int64_t w0, w1;
          Span(g, 1, j, &w0, &w1);
          if (h1 <= h0 || w1 <= w0) continue;
          const T d = dyp[i * g.ow + j];
          if (g.max) {
            // The first maximum of the window takes the gradient, like Paddle.
            int64_t best = h0 * g.w + w0;
            for (int64_t a = h0; a < h1; ++a) {
              for (int64_t b = w0; b < w1; ++b) {
                if (xp[a * g.w + b] > xp[best]) best = a * g.w + b;
              }
            }
            dxp[best] += d;
            continue;
          }
          const T share =
              d / (g.exclusive ? static_cast<T>((h1 - h0) * (w1 - w0)) : full);
          for (int64_t a = h0; a < h1; ++a) {
            for (int64_t b = w0; b < w1; ++b) dxp[a * g.w + b] += share;
          }
        }
      }
    });
    return nullptr;
  });
}

// ---- float32: oneDNN --------------------------------------------------------------------

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

struct PoolDescs {
  memory::desc src, dst;
  memory::dims strides, kernel, pad_l, pad_r;
  dnnl::algorithm alg;
};

PoolDescs MakeDescs(const PoolGeom& g) {
  const auto f32 = memory::data_type::f32;
  PoolDescs d;
  d.src = memory::desc({g.n, g.c, g.h, g.w}, f32, memory::format_tag::nchw);
  d.dst = memory::desc({g.n, g.c, g.oh, g.ow}, f32, memory::format_tag::nchw);
  const Window2d& w = g.win;
  d.strides = {w.stride[0], w.stride[1]};
  d.kernel = {w.kernel[0], w.kernel[1]};
  d.pad_l = {w.pad_begin[0], w.pad_begin[1]};
  // oneDNN wants (in + pad_l + pad_r - k) / stride + 1 == out exactly: ceil_mode's extra
  // windows become trailing padding (never counted by exclusive averages, ignored by max).
  const int64_t in[2] = {g.h, g.w}, out[2] = {g.oh, g.ow};
  d.pad_r = {0, 0};
  for (int i = 0; i < 2; ++i) {
    d.pad_r[i] = std::max<int64_t>(0, (out[i] - 1) * w.stride[i] + w.kernel[i] - in[i] -
                                          w.pad_begin[i]);
  }
  d.alg = g.max ? dnnl::algorithm::pooling_max
                : (g.exclusive ? dnnl::algorithm::pooling_avg_exclude_padding
                               : dnnl::algorithm::pooling_avg_include_padding);
  return d;
}

dnnl::pooling_forward::primitive_desc ForwardPd(const PoolDescs& d, dnnl::prop_kind prop) {
  dnnl::pooling_forward::desc desc(prop, d.alg, d.src, d.dst, d.strides, d.kernel, d.pad_l,
                                   d.pad_r);
  return dnnl::pooling_forward::primitive_desc(desc, DnnlEngine());
}

struct PoolFwdState {
  bool loops = false;  // adaptive windows: the float loops instead of oneDNN
  dnnl::pooling_forward prim;
  memory src, dst;
  Args args;
};

FleetStatus* Pool2dPrepareF32(void*, const FleetKernelContext* kc, void** state, size_t*) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    PoolGeom g;
    if (FleetStatus* st = Geometry(kc, Input(kc, "X"), Output(kc, "Out"), &g)) return st;
    auto s = std::make_unique<PoolFwdState>();
    if (g.adaptive) {
      s->loops = true;
      *state = s.release();
      return nullptr;
    }
    PoolDescs d = MakeDescs(g);
    s->prim = dnnl::pooling_forward(ForwardPd(d, dnnl::prop_kind::forward_inference));
    s->src = memory(d.src, DnnlEngine(), DNNL_MEMORY_NONE);
    s->dst = memory(d.dst, DnnlEngine(), DNNL_MEMORY_NONE);
    s->args = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}};
    *state = s.release();
    return nullptr;
  });
}

FleetStatus* Pool2dLaunchF32(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto* s = static_cast<PoolFwdState*>(state);
    if (s == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    if (s->loops) return Pool2dLoops<float>(nullptr, kc, nullptr);
    UseThreads(kc);
    s->src.set_data_handle(Input(kc, "X")->data);
    s->dst.set_data_handle(Output(kc, "Out")->data);
    s->prim.execute(DnnlStream(), s->args);
    DnnlStream().wait();
    return nullptr;
  });
}

struct PoolBwdState {
  bool loops = false;  // adaptive windows: the float loops instead of oneDNN
  bool max = false;
  size_t dst_bytes = 0;  // scratch: [forward dst | workspace] for max pooling
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  memory src, dst, ws, diff_dst, diff_src;
  Args fwd_args, bwd_args;
};

FleetStatus* Pool2dGradPrepareF32(void*, const FleetKernelContext* kc, void** state,
                                  size_t* scratch_bytes) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    PoolGeom g;
    if (FleetStatus* st = Geometry(kc, Input(kc, "X"), Input(kc, "Out@GRAD"), &g)) return st;
    auto s = std::make_unique<PoolBwdState>();
    s->loops = g.adaptive;
    if (Output(kc, "X@GRAD") == nullptr || s->loops) {
      *state = s.release();
      return nullptr;
    }
    PoolDescs d = MakeDescs(g);
    const auto& eng = DnnlEngine();
    auto fwd_pd = ForwardPd(d, dnnl::prop_kind::forward_training);
    dnnl::pooling_backward::desc desc(d.alg, d.src, d.dst, d.strides, d.kernel, d.pad_l,
                                      d.pad_r);
    dnnl::pooling_backward::primitive_desc bwd_pd(desc, eng, fwd_pd);
    s->bwd = dnnl::pooling_backward(bwd_pd);
    s->diff_dst = memory(d.dst, eng, DNNL_MEMORY_NONE);
    s->diff_src = memory(d.src, eng, DNNL_MEMORY_NONE);
    s->bwd_args = {{DNNL_ARG_DIFF_DST, s->diff_dst}, {DNNL_ARG_DIFF_SRC, s->diff_src}};
    if (g.max) {
      s->max = true;
      s->fwd = dnnl::pooling_forward(fwd_pd);
      s->src = memory(d.src, eng, DNNL_MEMORY_NONE);
      s->dst = memory(d.dst, eng, DNNL_MEMORY_NONE);
      s->ws = memory(fwd_pd.workspace_desc(), eng, DNNL_MEMORY_NONE);
      s->fwd_args = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst},
                     {DNNL_ARG_WORKSPACE, s->ws}};
      s->bwd_args[DNNL_ARG_WORKSPACE] = s->ws;
      s->dst_bytes = (d.dst.get_size() + 63) / 64 * 64;
      *scratch_bytes = s->dst_bytes + fwd_pd.workspace_desc().get_size();
    }
    *state = s.release();
    return nullptr;
  });
}

FleetStatus* Pool2dGradLaunchF32(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto* s = static_cast<PoolBwdState*>(state);
    if (s == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
    if (s->loops) return Pool2dGradLoops<float>(nullptr, kc, nullptr);
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    UseThreads(kc);
    if (s->max) {
      if (kc->scratch == nullptr) return InvalidArgument(OpName(kc) + ": scratch missing");
      char* scratch = static_cast<char*>(kc->scratch);
      s->src.set_data_handle(Input(kc, "X")->data);
      s->dst.set_data_handle(scratch);
      s->ws.set_data_handle(scratch + s->dst_bytes);
      s->fwd.execute(DnnlStream(), s->fwd_args);
    }
    s->diff_dst.set_data_handle(Input(kc, "Out@GRAD")->data);
    s->diff_src.set_data_handle(dx->data);
    s->bwd.execute(DnnlStream(), s->bwd_args);
    DnnlStream().wait();
    return nullptr;
  });
}

}  // namespace

void AddNnPoolKernels(KernelList& list) {
  Add(list, "pool2d", FLEET_DTYPE_FLOAT32, Pool2dLaunchF32, Pool2dPrepareF32,
      DeleteState<PoolFwdState>);
  Add(list, "pool2d", FLEET_DTYPE_FLOAT64, Pool2dLoops<double>);
  Add(list, "pool2d_grad", FLEET_DTYPE_FLOAT32, Pool2dGradLaunchF32, Pool2dGradPrepareF32,
      DeleteState<PoolBwdState>);
  Add(list, "pool2d_grad", FLEET_DTYPE_FLOAT64, Pool2dGradLoops<double>);
}

}  // namespace fleet_cpu
