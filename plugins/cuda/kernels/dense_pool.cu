// pool2d and pool2d_grad (NCHW; max, avg exclusive/inclusive, global, adaptive, ceil_mode
// through the host's output size), float32 and float64, as own kernels with the CPU plugin's
// definitions: windows clipped to the input, an empty window gives 0, exclusive averages divide
// by the clipped count and inclusive ones by the full kernel size, and the max-pool gradient
// goes to the first maximum of each window in row-major order.
//
// The gradient is gathered per input element over the windows that contain it, in increasing
// window order, so nothing is accumulated with atomics and the sums are added in the CPU's
// order. Max pooling first records each window's argmax in scratch.
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dense_groups.h"

namespace fleet_cuda {
namespace {

using dense::ExpectRank;
using dense::OpName;

struct PoolGeom {
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  bool max = true, exclusive = true, adaptive = false;
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0};
};

// Prepare only: reads list attributes. `out` is Out (forward) or Out@GRAD (grad).
FleetStatus* Geometry(const FleetKernelContext* kc, const FleetTensor* x, const FleetTensor* out,
                      const char* out_slot, PoolGeom* g) {
  if (FleetStatus* st = ExpectRank(kc, x, "X", 4)) return st;
  if (FleetStatus* st = ExpectRank(kc, out, out_slot, 4)) return st;
  g->n = x->dims[0], g->c = x->dims[1], g->h = x->dims[2], g->w = x->dims[3];
  g->oh = out->dims[2], g->ow = out->dims[3];
  if (out->dims[0] != g->n || out->dims[1] != g->c) {
    return InvalidArgument(OpName(kc) + ": " + out_slot + " must keep X's batch and channels");
  }
  const std::string_view type = StringAttr(kc, "pooling_type");
  if (type != "max" && type != "avg") {
    return InvalidArgument(OpName(kc) + ": pooling_type must be 'max' or 'avg', got '" +
                           std::string(type) + "'");
  }
  g->max = type == "max";
  g->exclusive = BoolAttr(kc, "exclusive", true);
  if (BoolAttr(kc, "adaptive")) {
    // Windows from the output size (plugins/common/window_plan.h); averages divide by the
    // window's own size, as in Paddle.
    g->adaptive = true;
    g->exclusive = true;
    return nullptr;
  }
  if (BoolAttr(kc, "global_pooling")) {
    // One window over the whole plane; strides and paddings do not apply.
    g->kernel[0] = g->h;
    g->kernel[1] = g->w;
    return nullptr;
  }
  const std::vector<int64_t> ksize = IntsAttr(kc, "ksize");
  if (ksize.size() != 2) {
    return InvalidArgument(OpName(kc) + ": ksize needs 2 values, got " +
                           std::to_string(ksize.size()));
  }
  dense::Window2d win;
  const int64_t in[2] = {g->h, g->w}, k[2] = {ksize[0], ksize[1]};
  if (FleetStatus* st = dense::ResolveWindow(kc, in, k, false, &win)) return st;
  for (int i = 0; i < 2; ++i) {
    g->kernel[i] = win.kernel[i];
    g->stride[i] = win.stride[i];
    g->pad_begin[i] = win.pad_begin[i];
  }
  return nullptr;
}

bool HasDims(const FleetTensor* t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  return t != nullptr && t->ndim == 4 && t->dims[0] == d0 && t->dims[1] == d1 &&
         t->dims[2] == d2 && t->dims[3] == d3;
}

// Window [begin, end) of output position `o` along dim `d` (0: rows, 1: columns), clipped.
__device__ inline void Span(const PoolGeom& g, int d, int64_t o, int64_t* begin, int64_t* end) {
  const int64_t in = d == 0 ? g.h : g.w;
  if (g.adaptive) {
    const int64_t out = d == 0 ? g.oh : g.ow;
    *begin = fleet::kernel::AdaptiveBegin(o, in, out);
    *end = fleet::kernel::AdaptiveEnd(o, in, out);
    return;
  }
  const int64_t start = o * g.stride[d] - g.pad_begin[d];
  *begin = start > 0 ? start : 0;
  *end = start + g.kernel[d] < in ? start + g.kernel[d] : in;
}

template <typename T>
__global__ void PoolForward(PoolGeom g, const T* x, T* y) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  const T full = static_cast<T>(g.kernel[0] * g.kernel[1]);
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t j = idx % g.ow;
    const int64_t t = idx / g.ow;
    const int64_t i = t % g.oh;
    const int64_t p = t / g.oh;
    const T* xp = x + p * g.h * g.w;
    int64_t h0, h1, w0, w1;
    Span(g, 0, i, &h0, &h1);
    Span(g, 1, j, &w0, &w1);
    const int64_t count = (h1 > h0 ? h1 - h0 : 0) * (w1 > w0 ? w1 - w0 : 0);
    T acc = g.max ? -std::numeric_limits<T>::infinity() : T(0);
    for (int64_t a = h0; a < h1; ++a) {
      for (int64_t b = w0; b < w1; ++b) {
        const T v = xp[a * g.w + b];
        // std::max(acc, v) of the CPU: keeps acc unless it is smaller.
        acc = g.max ? (acc < v ? v : acc) : acc + v;
      }
    }
    if (count == 0) {
      acc = 0;
    } else if (!g.max) {
      acc /= g.exclusive ? static_cast<T>(count) : full;
    }
    y[idx] = acc;
  }
}

// The in-plane index of each window's first maximum (row-major), -1 for an empty window.
template <typename T>
__global__ void PoolArgmax(PoolGeom g, const T* x, int64_t* arg) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t j = idx % g.ow;
    const int64_t t = idx / g.ow;
    const int64_t i = t % g.oh;
    const int64_t p = t / g.oh;
    const T* xp = x + p * g.h * g.w;
    int64_t h0, h1, w0, w1;
    Span(g, 0, i, &h0, &h1);
    Span(g, 1, j, &w0, &w1);
    int64_t best = -1;
    if (h1 > h0 && w1 > w0) {
      best = h0 * g.w + w0;
      for (int64_t a = h0; a < h1; ++a) {
        for (int64_t b = w0; b < w1; ++b) {
          if (xp[a * g.w + b] > xp[best]) best = a * g.w + b;
        }
      }
    }
    arg[idx] = best;
  }
}

// Output positions [lo, hi] along dim `d` whose windows contain input position `pos`.
__device__ inline void Windows(const PoolGeom& g, int d, int64_t pos, int64_t out,
                               int64_t* lo, int64_t* hi) {
  if (g.adaptive) {
    fleet::kernel::AdaptiveWindowsOf(pos, d == 0 ? g.h : g.w, out, lo, hi);
    return;
  }
  // start(i) = i * stride - pad_begin; the window holds pos iff start <= pos < start + kernel.
  const int64_t t = pos + g.pad_begin[d] - g.kernel[d];
  *lo = t < 0 ? 0 : t / g.stride[d] + 1;
  const int64_t last = (pos + g.pad_begin[d]) / g.stride[d];
  *hi = last < out - 1 ? last : out - 1;
}

template <typename T>
__global__ void PoolGrad(PoolGeom g, const T* dy, const int64_t* arg, T* dx) {
  const int64_t total = g.n * g.c * g.h * g.w;
  const T full = static_cast<T>(g.kernel[0] * g.kernel[1]);
  FLEET_CUDA_LOOP(idx, total) {
    const int64_t iw = idx % g.w;
    const int64_t t = idx / g.w;
    const int64_t ih = t % g.h;
    const int64_t p = t / g.h;
    const int64_t self = ih * g.w + iw;
    int64_t i0, i1, j0, j1;
    Windows(g, 0, ih, g.oh, &i0, &i1);
    Windows(g, 1, iw, g.ow, &j0, &j1);
    T acc = 0;
    for (int64_t i = i0; i <= i1; ++i) {
      int64_t h0 = 0, h1 = 0;
      if (!g.max) Span(g, 0, i, &h0, &h1);
      for (int64_t j = j0; j <= j1; ++j) {
        const int64_t o = (p * g.oh + i) * g.ow + j;
        if (g.max) {
          if (arg[o] == self) acc += dy[o];
          continue;
        }
        int64_t w0, w1;
        Span(g, 1, j, &w0, &w1);
        acc += dy[o] / (g.exclusive ? static_cast<T>((h1 - h0) * (w1 - w0)) : full);
      }
    }
    dx[idx] = acc;
  }
}

struct PoolState {
  PoolGeom g;
  size_t arg_bytes = 0;  // scratch for the argmaxes of max pooling's gradient
};

template <bool kGrad>
FleetStatus* PoolPrepare(void*, const FleetKernelContext* kc, void** state,
                         size_t* scratch_bytes) {
  const char* out_slot = kGrad ? "Out@GRAD" : "Out";
  const FleetTensor* out = kGrad ? Input(kc, out_slot) : Output(kc, out_slot);
  auto st = std::make_unique<PoolState>();
  if (FleetStatus* e = Geometry(kc, Input(kc, "X"), out, out_slot, &st->g)) return e;
  if (kGrad && st->g.max && Output(kc, "X@GRAD") != nullptr) {
    st->arg_bytes = static_cast<size_t>(st->g.n * st->g.c * st->g.oh * st->g.ow) *
                    sizeof(int64_t);
  }
  *scratch_bytes = st->arg_bytes;
  *state = st.release();
  return nullptr;
}

FleetStatus* ShapeChanged(const FleetKernelContext* kc, const char* out_slot) {
  return InvalidArgument(OpName(kc) + ": X or " + out_slot +
                         " is missing or differs from the shapes prepared for");
}

template <typename T>
FleetStatus* PoolLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* st = static_cast<const PoolState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const PoolGeom& g = st->g;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Output(kc, "Out");
  if (!HasDims(x, g.n, g.c, g.h, g.w) || !HasDims(y, g.n, g.c, g.oh, g.ow)) {
    return ShapeChanged(kc, "Out");
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t total = Numel(y);
    if (total > 0) {
      PoolForward<T><<<Blocks(total), kThreads, 0, s->native>>>(g, Data<const T>(x), Data<T>(y));
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* PoolGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* st = static_cast<const PoolState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const PoolGeom& g = st->g;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* dy = Input(kc, "Out@GRAD");
  if (!HasDims(x, g.n, g.c, g.h, g.w) || !HasDims(dy, g.n, g.c, g.oh, g.ow) ||
      !HasDims(dx, g.n, g.c, g.h, g.w)) {
    return ShapeChanged(kc, "Out@GRAD");
  }
  if (g.max && st->arg_bytes > 0 && kc->scratch == nullptr) {
    return InvalidArgument(OpName(kc) + ": launched without the " +
                           std::to_string(st->arg_bytes) + " scratch bytes prepare asked for");
  }
  if (g.max && st->arg_bytes == 0 && Numel(dy) > 0) {
    return InvalidArgument(OpName(kc) + ": prepared without X@GRAD, launched with it");
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t outs = Numel(dy), total = Numel(dx);
    auto* arg = static_cast<int64_t*>(kc->scratch);
    if (g.max && outs > 0) {
      PoolArgmax<T><<<Blocks(outs), kThreads, 0, s->native>>>(g, Data<const T>(x), arg);
    }
    if (total > 0) {
      PoolGrad<T><<<Blocks(total), kThreads, 0, s->native>>>(g, Data<const T>(dy), arg,
                                                             Data<T>(dx));
    }
    return nullptr;
  });
}

template <typename T>
void AddPool(KernelList& list, int32_t dtype) {
  Add(list, "pool2d", dtype, PoolLaunch<T>, PoolPrepare<false>, dense::DeleteState<PoolState>);
  Add(list, "pool2d_grad", dtype, PoolGradLaunch<T>, PoolPrepare<true>,
      dense::DeleteState<PoolState>);
}

}  // namespace

void AddDensePoolKernels(KernelList& list) {
  AddPool<float>(list, FLEET_DTYPE_FLOAT32);
  AddPool<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
