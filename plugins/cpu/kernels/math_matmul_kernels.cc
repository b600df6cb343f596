// mul and matmul_v2 with their grads. float32 runs oneDNN matmul primitives created at prepare
// (transposes expressed as strides, broadcast batch dims as size-1 dims); float64 and the
// float32 shapes oneDNN cannot take (a gradient that must be summed over broadcast batch dims)
// run a plain strided GEMM per batch.
#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>

#include "kernels/math_util.h"
#include "matmul_plan.h"

namespace fleet_cpu::math {
namespace {

using dnnl::memory;

// Both ops as a batch of logical products Out[b] (M x N) = op(X)[b] (M x K) . op(Y)[b] (K x N);
// the geometry and its checks are shared with the CUDA plugin (plugins/common/matmul_plan.h).
using fleet::kernel::MatmulGeom;

FleetStatus* Geom(const FleetKernelContext* kc, bool is_mul, MatmulGeom* g) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Input(kc, "Y");
  const fleet::kernel::PlanStatus st =
      is_mul ? fleet::kernel::MulGeometry(x, y, IntAttr(kc, "x_num_col_dims", 1),
                                          IntAttr(kc, "y_num_col_dims", 1), g)
             : fleet::kernel::MatmulV2Geometry(x, y, BoolAttr(kc, "trans_x", false),
                                               BoolAttr(kc, "trans_y", false),
                                               /*mark_transposed=*/false, g);
  return fleet::kernel::ToFleetStatus(st, Error);
}

// ---- plain path ----------------------------------------------------------------------------

template <typename T>
void ForwardPlain(const MatmulGeom& g, const T* x, const T* y, T* out) {
  const int64_t mn = g.m * g.n;
  VisitRows(g.BatchPlan(), [&](int64_t cnt, int64_t o, int64_t a, int64_t b, int64_t sa,
                               int64_t sb) {
    for (int64_t j = 0; j < cnt; ++j) {
      Gemm(g.m, g.n, g.k, x + a + j * sa, g.xm, g.xk, y + b + j * sb, g.yk, g.yn,
           out + (o + j) * mn, g.n, int64_t{1}, false);
    }
  });
}

template <typename T>
void BackwardPlain(const MatmulGeom& g, const T* x, const T* y, const T* dout, T* dx, T* dy,
                   int64_t x_numel, int64_t y_numel) {
  if (dx) std::fill(dx, dx + x_numel, T(0));
  if (dy) std::fill(dy, dy + y_numel, T(0));
  const int64_t mn = g.m * g.n;
  VisitRows(g.BatchPlan(), [&](int64_t cnt, int64_t o, int64_t a, int64_t b, int64_t sa,
                               int64_t sb) {
    for (int64_t j = 0; j < cnt; ++j) {
      const T* go = dout + (o + j) * mn;
      const int64_t xo = a + j * sa, yo = b + j * sb;
      // dX (M x K) += dOut (M x N) . op(Y)^T; dY (K x N) += op(X)^T . dOut.
      if (dx) {
        Gemm(g.m, g.k, g.n, go, g.n, int64_t{1}, y + yo, g.yn, g.yk, dx + xo, g.xm, g.xk, true);
      }
      if (dy) {
        Gemm(g.k, g.n, g.m, x + xo, g.xk, g.xm, go, g.n, int64_t{1}, dy + yo, g.yk, g.yn, true);
      }
    }
  });
}

// ---- oneDNN path ---------------------------------------------------------------------------

// One operand of a batched product: dims [lead..., r, c] with strides [lead_str..., sr, sc].
struct Mat {
  int nb = 0;
  const int64_t* lead = nullptr;
  const int64_t* lead_str = nullptr;
  int64_t r = 0, c = 0, sr = 0, sc = 0;

  Mat T() const { return {nb, lead, lead_str, c, r, sc, sr}; }
  memory::desc Desc() const {
    memory::dims dims(lead, lead + nb), strides(lead_str, lead_str + nb);
    dims.push_back(r);
    dims.push_back(c);
    strides.push_back(sr);
    strides.push_back(sc);
    return memory::desc(dims, memory::data_type::f32, strides);
  }
};

// Out's batch strides (dense).
struct DenseBatch {
  int64_t strides[kMaxRank] = {};
  DenseBatch(const MatmulGeom& g, int64_t r, int64_t c) {
    int64_t s = r * c;
    for (int i = g.nb - 1; i >= 0; --i) {
      strides[i] = s;
      s *= g.batch[i];
    }
  }
};

// D = A . B. A column-major D (a transposed gradient) is computed as D^T = B^T . A^T instead,
// which oneDNN's fast kernels take (they want dst rows contiguous); `swapped` records it.
struct MatmulCall : DnnlCall {
  bool swapped = false;
};

struct MatmulState {
  MatmulGeom geom;
  MatmulCall fwd, dx, dy;
  size_t scratch = 0;
};

void MakeMatmul(MatmulCall& call, Mat a, Mat b, Mat d, size_t* scratch) {
  if (d.sc != 1 && d.sr == 1) {
    const Mat at = a.T();
    a = b.T();
    b = at;
    d = d.T();
    call.swapped = true;
  }
  const memory::desc src = a.Desc(), wei = b.Desc(), dst = d.Desc();
  dnnl::matmul::desc desc(src, wei, dst);
  dnnl::matmul::primitive_desc pd(desc, UserScratchpad(), DnnlEngine());
  call.prim = dnnl::matmul(pd);
  call.Bind(DNNL_ARG_SRC, src);
  call.Bind(DNNL_ARG_WEIGHTS, wei);
  call.Bind(DNNL_ARG_DST, dst);
  const memory::desc sp = pd.scratchpad_desc();
  if (sp.get_size() > 0) call.Bind(DNNL_ARG_SCRATCHPAD, sp);
  *scratch = std::max(*scratch, sp.get_size());
  call.valid = true;
}

// Builds the primitives; when oneDNN refuses a shape, the state stays on the plain path.
template <bool kMul, bool kGrad>
FleetStatus* MatmulPrepare(void*, const FleetKernelContext* kc, void** state,
                           size_t* scratch_bytes) {
  UseThreads(kc);  // oneDNN sizes a primitive's thread team when it is created
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y"}, {})) return e;
    auto st = std::make_unique<MatmulState>();
    if (FleetStatus* s = Geom(kc, kMul, &st->geom)) return s;
    const MatmulGeom& g = st->geom;
    const bool empty = g.m == 0 || g.n == 0 || g.k == 0 || g.BatchCount() == 0;
    try {
      const DenseBatch ob(g, g.m, g.n);
      const Mat x{g.nb, g.xpad, g.xstr, g.m, g.k, g.xm, g.xk};
      const Mat y{g.nb, g.ypad, g.ystr, g.k, g.n, g.yk, g.yn};
      const Mat out{g.nb, g.batch, ob.strides, g.m, g.n, g.n, 1};
      if (!empty && !kGrad) MakeMatmul(st->fwd, x, y, out, &st->scratch);
      if (!empty && kGrad && !g.x_broadcast && !g.y_broadcast) {
        // dX = dOut . op(Y)^T and dY = op(X)^T . dOut, written in X's and Y's layouts.
        if (Output(kc, "X@GRAD") != nullptr) MakeMatmul(st->dx, out, y.T(), x, &st->scratch);
        if (Output(kc, "Y@GRAD") != nullptr) MakeMatmul(st->dy, x.T(), out, y, &st->scratch);
      }
    } catch (const dnnl::error&) {
      st->fwd.valid = st->dx.valid = st->dy.valid = false;
      st->scratch = 0;
    }
    *scratch_bytes = st->scratch;
    *state = st.release();
    return nullptr;
  });
}

void MatmulRelease(void*, void* state) { delete static_cast<MatmulState*>(state); }

FleetStatus* RunDnnl(const FleetKernelContext* kc, const MatmulState& st, MatmulCall& call,
                     const void* a, const void* b, void* dst) {
  call.Set(DNNL_ARG_SRC, call.swapped ? b : a);
  call.Set(DNNL_ARG_WEIGHTS, call.swapped ? a : b);
  call.Set(DNNL_ARG_DST, dst);
  if (call.Has(DNNL_ARG_SCRATCHPAD)) {
    if (kc->scratch == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": launched without the " +
                             std::to_string(st.scratch) + " scratch bytes prepare asked for");
    }
    call.Set(DNNL_ARG_SCRATCHPAD, kc->scratch);
  }
  call.Run();
  return nullptr;
}

template <typename T, bool kMul>
FleetStatus* MatmulLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* out = Output(kc, "Out");
    auto* st = static_cast<MatmulState*>(state);
    if constexpr (std::is_same_v<T, float>) {
      if (st != nullptr && st->fwd.valid) {
        UseThreads(kc);
        return RunDnnl(kc, *st, st->fwd, x->data, y->data, out->data);
      }
    }
    MatmulGeom local;
    const MatmulGeom* g = st != nullptr ? &st->geom : &local;
    if (st == nullptr) {
      if (FleetStatus* s = Geom(kc, kMul, &local)) return s;
    }
    ForwardPlain(*g, Data<const T>(x), Data<const T>(y), Data<T>(out));
    return nullptr;
  });
}

template <typename T, bool kMul>
FleetStatus* MatmulGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y", "Out@GRAD"}, {})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    auto* st = static_cast<MatmulState*>(state);
    if constexpr (std::is_same_v<T, float>) {
      if (st != nullptr && (dx == nullptr || st->dx.valid) && (dy == nullptr || st->dy.valid)) {
        UseThreads(kc);
        if (dx != nullptr) {
          if (FleetStatus* s = RunDnnl(kc, *st, st->dx, dout->data, y->data, dx->data)) return s;
        }
        if (dy != nullptr) {
          if (FleetStatus* s = RunDnnl(kc, *st, st->dy, x->data, dout->data, dy->data)) return s;
        }
        return nullptr;
      }
    }
    MatmulGeom local;
    const MatmulGeom* g = st != nullptr ? &st->geom : &local;
    if (st == nullptr) {
      if (FleetStatus* s = Geom(kc, kMul, &local)) return s;
    }
    BackwardPlain(*g, Data<const T>(x), Data<const T>(y), Data<const T>(dout),
                  dx ? Data<T>(dx) : nullptr, dy ? Data<T>(dy) : nullptr, Numel(x), Numel(y));
    return nullptr;
  });
}

template <bool kMul>
void AddFamily(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, MatmulLaunch<float, kMul>, MatmulPrepare<kMul, false>,
      MatmulRelease);
  Add(list, name, FLEET_DTYPE_FLOAT64, MatmulLaunch<double, kMul>);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, MatmulGradLaunch<float, kMul>,
      MatmulPrepare<kMul, true>, MatmulRelease);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, MatmulGradLaunch<double, kMul>);
}

}  // namespace

void AddMatmulKernels(KernelList& list) {
  AddFamily<true>(list, "mul", "mul_grad");
  AddFamily<false>(list, "matmul_v2", "matmul_v2_grad");
}

}  // namespace fleet_cpu::math
