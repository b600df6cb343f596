// mul and matmul_v2 with their grads, float32 and float64, on cuBLAS.
//
// Both ops are a batch of logical products Out[b] (M x N) = op(X)[b] (M x K) . op(Y)[b] (K x N)
// with the CPU plugin's geometry (1-D operands as a row / column vector, batch dims broadcast
// right-aligned). Each product is handed to cublasGemmStridedBatchedEx_64 in column-major
// terms: a row-major result D is computed as D^T = B^T . A^T, and transposed operands become
// CUBLAS_OP_T. Broadcast batch dims are strides of 0; the batch is walked on the host in as few
// strided calls as the strides allow (one when nothing broadcasts in the middle).
//
// A gradient whose operand was broadcast sums over the batches that shared it: the per-batch
// products go to scratch and a kernel adds them up in batch order, so the result does not depend
// on scheduling (no atomics).
//
// float32 runs with CUBLAS_COMPUTE_32F and the handle in CUBLAS_DEFAULT_MATH, so no TF32 or other
// reduced-precision path is taken and results agree with the CPU plugin.
#include <algorithm>
#include <memory>
#include <string>

#include "kernels/dense_groups.h"
#include "matmul_plan.h"

namespace fleet_cuda {
namespace {

using dense::OpName;
using dense::Require;

constexpr int kMaxRank = fleet::kernel::kMaxStrideRank;

template <typename T>
struct BlasTraits;
template <>
struct BlasTraits<float> {
  static constexpr cudaDataType kType = CUDA_R_32F;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
};
template <>
struct BlasTraits<double> {
  static constexpr cudaDataType kType = CUDA_R_64F;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_64F;
};

// The geometry and its checks are shared with the CPU plugin (plugins/common/matmul_plan.h).
using fleet::kernel::MatmulGeom;

FleetStatus* Geom(const FleetKernelContext* kc, bool is_mul, MatmulGeom* g) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Input(kc, "Y");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  if (FleetStatus* st = Require(kc, y, "Y")) return st;
  if (is_mul) {
    return fleet::kernel::ToFleetStatus(
        fleet::kernel::MulGeometry(x, y, IntAttr(kc, "x_num_col_dims", 1),
                                   IntAttr(kc, "y_num_col_dims", 1), g),
        Error);
  }
  if (x->ndim < 1 || y->ndim < 1 || x->ndim > kMaxRank || y->ndim > kMaxRank) {
    return InvalidArgument("matmul_v2: X " + DimsText(x) + " and Y " + DimsText(y) +
                           " need ranks from 1 to " + std::to_string(kMaxRank));
  }
  return fleet::kernel::ToFleetStatus(
      fleet::kernel::MatmulV2Geometry(x, y, BoolAttr(kc, "trans_x", false),
                                      BoolAttr(kc, "trans_y", false),
                                      /*mark_transposed=*/true, g),
      Error);
}

// ---- cuBLAS calls ------------------------------------------------------------------------

// A rows x cols matrix whose element (r, c) is at r * sr + c * sc (elements).
struct Mat {
  int64_t rows = 0, cols = 0, sr = 0, sc = 0;
  Mat T() const { return {cols, rows, sc, sr}; }
};

// How cuBLAS reads a Mat: column-major as stored (OP_N) or the transpose of a column-major
// matrix (OP_T), with its leading dimension. A dim of extent 1 never multiplies its stride, so
// it may take whichever layout fits; the leading dimension then only has to satisfy cuBLAS.
struct Operand {
  bool ok = false;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1;
};

Operand Describe(const Mat& a) {
  const int64_t rows1 = std::max<int64_t>(a.rows, 1), cols1 = std::max<int64_t>(a.cols, 1);
  if ((a.sr == 1 || a.rows <= 1) && (a.cols <= 1 || a.sc >= rows1)) {
    return {true, CUBLAS_OP_N, a.cols <= 1 ? rows1 : a.sc};
  }
  if ((a.sc == 1 || a.cols <= 1) && (a.rows <= 1 || a.sr >= cols1)) {
    return {true, CUBLAS_OP_T, a.rows <= 1 ? cols1 : a.sr};
  }
  return {};
}

// D[i] = A[i] . B[i] for i < count, matrix i of each operand `stride_*` elements after the last.
template <typename T>
FleetStatus* GemmBatch(const FleetKernelContext* kc, cublasHandle_t h, Mat a, const T* pa,
                       int64_t stride_a, Mat b, const T* pb, int64_t stride_b, Mat d, T* pd,
                       int64_t stride_d, int64_t count) {
  // cuBLAS writes column-major results; a row-major D is produced as D^T = B^T . A^T.
  Operand od = Describe(d);
  if (!od.ok || od.op != CUBLAS_OP_N) {
    const Mat at = a.T();
    a = b.T();
    b = at;
    d = d.T();
    std::swap(pa, pb);
    std::swap(stride_a, stride_b);
    od = Describe(d);
  }
  const Operand oa = Describe(a), ob = Describe(b);
  if (!od.ok || od.op != CUBLAS_OP_N || !oa.ok || !ob.ok || a.rows != d.rows ||
      b.cols != d.cols || a.cols != b.rows) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": a matrix layout cuBLAS cannot take");
  }
  const T alpha = 1, beta = 0;
  const cublasStatus_t st = cublasGemmStridedBatchedEx_64(
      h, oa.op, ob.op, d.rows, d.cols, a.cols, &alpha, pa, BlasTraits<T>::kType, oa.ld, stride_a,
      pb, BlasTraits<T>::kType, ob.ld, stride_b, &beta, pd, BlasTraits<T>::kType, od.ld, stride_d,
      count, BlasTraits<T>::kCompute, CUBLAS_GEMM_DEFAULT);
  if (st == CUBLAS_STATUS_SUCCESS) return nullptr;
  return BlasStatus(st, OpName(kc) + ": cublasGemmStridedBatchedEx");
}

// The batch of one product: per batch dim, its extent and the matrix strides of A, B and D.
struct Walk {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t s[3][kMaxRank] = {};
};

// Drops extent-1 dims and merges a dim into the next inner one where all three operands step
// through both as through one, so that the common cases become a single strided call.
void Coalesce(Walk& w) {
  int r = 0;
  for (int i = 0; i < w.rank; ++i) {
    if (w.dims[i] == 1) continue;
    if (r > 0) {
      bool merge = true;
      for (int j = 0; j < 3; ++j) merge = merge && w.s[j][r - 1] == w.s[j][i] * w.dims[i];
      if (merge) {
        w.dims[r - 1] *= w.dims[i];
        for (int j = 0; j < 3; ++j) w.s[j][r - 1] = w.s[j][i];
        continue;
      }
    }
    w.dims[r] = w.dims[i];
    for (int j = 0; j < 3; ++j) w.s[j][r] = w.s[j][i];
    ++r;
  }
  w.rank = r;
}

// Calls f(offset_a, offset_b, offset_d, count, stride_a, stride_b, stride_d) for each run of
// the innermost dim, in row-major order; stops at the first error.
template <typename F>
FleetStatus* ForEachRun(const Walk& w, F&& f) {
  if (w.rank == 0) return f(int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0},
                            int64_t{0}, int64_t{0});
  const int last = w.rank - 1;
  int64_t outer = 1;
  for (int d = 0; d < last; ++d) outer *= w.dims[d];
  int64_t idx[kMaxRank] = {};
  int64_t off[3] = {0, 0, 0};
  for (int64_t r = 0; r < outer; ++r) {
    if (FleetStatus* st = f(off[0], off[1], off[2], w.dims[last], w.s[0][last], w.s[1][last],
                            w.s[2][last])) {
      return st;
    }
    for (int d = last - 1; d >= 0; --d) {
      for (int j = 0; j < 3; ++j) off[j] += w.s[j][d];
      if (++idx[d] < w.dims[d]) break;
      for (int j = 0; j < 3; ++j) off[j] -= w.s[j][d] * w.dims[d];
      idx[d] = 0;
    }
  }
  return nullptr;
}

// D[b] = A[b] . B[b] over Out's batch with per-dim matrix strides sa, sb, sd.
template <typename T>
FleetStatus* BatchedProduct(const FleetKernelContext* kc, cublasHandle_t h, const MatmulGeom& g,
                            const Mat& a, const T* pa, const int64_t* sa, const Mat& b,
                            const T* pb, const int64_t* sb, const Mat& d, T* pd,
                            const int64_t* sd) {
  Walk w;
  w.rank = g.nb;
  for (int i = 0; i < g.nb; ++i) {
    w.dims[i] = g.batch[i];
    w.s[0][i] = sa[i];
    w.s[1][i] = sb[i];
    w.s[2][i] = sd[i];
  }
  Coalesce(w);
  return ForEachRun(w, [&](int64_t oa, int64_t ob, int64_t od, int64_t count, int64_t ta,
                           int64_t tb, int64_t td) -> FleetStatus* {
    return GemmBatch<T>(kc, h, a, pa + oa, ta, b, pb + ob, tb, d, pd + od, td, count);
  });
}

// The handle is shared by every kernel on the stream; its modes are set on each launch so no
// other kernel's choice (TF32, device-side scalars, atomics) leaks into these products.
FleetStatus* ConfigureBlas(const FleetKernelContext* kc, cublasHandle_t h) {
  cublasStatus_t st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED);
  if (st == CUBLAS_STATUS_SUCCESS) return nullptr;
  return BlasStatus(st, OpName(kc) + ": configuring the cuBLAS handle");
}

FleetStatus* Zero(const FleetKernelContext* kc, FleetStream* s, const FleetTensor* t,
                  size_t elem, const char* slot) {
  const cudaError_t e =
      cudaMemsetAsync(t->data, 0, static_cast<size_t>(Numel(t)) * elem, s->native);
  if (e == cudaSuccess) return nullptr;
  return CudaStatus(e, OpName(kc) + ": zeroing " + slot);
}

// ---- summing over broadcast batch dims -----------------------------------------------------

// Sums a dense batch (over Out's batch dims) of `mat`-element matrices into an operand whose
// padded batch dims are `target`: every dim where target is 1 and Out's is larger is summed.
struct ReducePlan {
  int rank = 0;
  int64_t target[kMaxRank] = {};
  int64_t batch[kMaxRank] = {};
  int64_t bstride[kMaxRank] = {};  // batch-index strides of Out's batch dims
  int64_t reduced = 1;             // how many batches add into each target matrix
};

ReducePlan MakeReducePlan(const MatmulGeom& g, const int64_t* target) {
  ReducePlan p;
  p.rank = g.nb;
  g.DenseStrides(1, p.bstride);
  for (int i = 0; i < g.nb; ++i) {
    p.target[i] = target[i];
    p.batch[i] = g.batch[i];
    if (target[i] == 1) p.reduced *= g.batch[i];
  }
  return p;
}

// One thread per target element; the batches that share it are added in row-major batch order,
// the CPU's order.
template <typename T>
__global__ void SumBroadcastBatches(ReducePlan p, int64_t mat, int64_t total, const T* src,
                                    T* dst) {
  FLEET_CUDA_LOOP(o, total) {
    int64_t tb = o / mat;
    const int64_t e = o - tb * mat;
    int64_t base = 0;
    for (int i = p.rank - 1; i >= 0; --i) {
      const int64_t c = tb % p.target[i];
      tb /= p.target[i];
      base += c * p.bstride[i];
    }
    T acc = 0;
    for (int64_t r = 0; r < p.reduced; ++r) {
      int64_t rest = r, off = base;
      for (int i = p.rank - 1; i >= 0; --i) {
        if (p.target[i] != 1) continue;
        off += (rest % p.batch[i]) * p.bstride[i];
        rest /= p.batch[i];
      }
      acc += src[off * mat + e];
    }
    dst[o] = acc;
  }
}

// Where the gradient kernels put the per-batch products of a broadcast operand.
struct GradScratch {
  bool dx_sum = false, dy_sum = false;
  size_t dx_offset = 0, dy_offset = 0, bytes = 0;
};

size_t Align256(size_t b) { return (b + 255) / 256 * 256; }

template <typename T>
GradScratch PlanGradScratch(const MatmulGeom& g, bool want_dx, bool want_dy) {
  GradScratch p;
  const int64_t count = g.BatchCount();
  if (want_dx && g.x_broadcast && count > 0 && g.n > 0 && g.m * g.k > 0) {
    p.dx_sum = true;
    p.dx_offset = p.bytes;
    p.bytes += Align256(static_cast<size_t>(count * g.m * g.k) * sizeof(T));
  }
  if (want_dy && g.y_broadcast && count > 0 && g.m > 0 && g.k * g.n > 0) {
    p.dy_sum = true;
    p.dy_offset = p.bytes;
    p.bytes += Align256(static_cast<size_t>(count * g.k * g.n) * sizeof(T));
  }
  return p;
}

// ---- kernels -----------------------------------------------------------------------------

struct MatmulState {
  size_t scratch_bytes = 0;
};

template <typename T, bool kMul, bool kGrad>
FleetStatus* MatmulPrepare(void*, const FleetKernelContext* kc, void** state,
                           size_t* scratch_bytes) {
  MatmulGeom g;
  if (FleetStatus* st = Geom(kc, kMul, &g)) return st;
  auto s = std::make_unique<MatmulState>();
  if (kGrad) {
    s->scratch_bytes = PlanGradScratch<T>(g, Output(kc, "X@GRAD") != nullptr,
                                          Output(kc, "Y@GRAD") != nullptr)
                           .bytes;
  }
  *scratch_bytes = s->scratch_bytes;
  *state = s.release();
  return nullptr;
}

template <typename T, bool kMul>
FleetStatus* MatmulLaunch(void*, const FleetKernelContext* kc, void*) {
  MatmulGeom g;
  if (FleetStatus* st = Geom(kc, kMul, &g)) return st;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Input(kc, "Y");
  const FleetTensor* out = Output(kc, "Out");
  if (FleetStatus* st = Require(kc, out, "Out")) return st;
  if (Numel(out) != g.BatchCount() * g.m * g.n) {
    return InvalidArgument(OpName(kc) + ": Out " + DimsText(out) + " does not hold the " +
                           std::to_string(g.BatchCount() * g.m * g.n) + " elements of X " +
                           DimsText(x) + " times Y " + DimsText(y));
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (Numel(out) == 0) return nullptr;
    if (g.k == 0) return Zero(kc, s, out, sizeof(T), "Out");
    cublasHandle_t h = Blas(s);
    if (FleetStatus* st = ConfigureBlas(kc, h)) return st;
    int64_t sx[kMaxRank], sy[kMaxRank], so[kMaxRank];
    for (int i = 0; i < g.nb; ++i) {
      sx[i] = g.XStride(i);
      sy[i] = g.YStride(i);
    }
    g.DenseStrides(g.m * g.n, so);
    return BatchedProduct<T>(kc, h, g, Mat{g.m, g.k, g.xm, g.xk}, Data<const T>(x), sx,
                             Mat{g.k, g.n, g.yk, g.yn}, Data<const T>(y), sy,
                             Mat{g.m, g.n, g.n, 1}, Data<T>(out), so);
  });
}

template <typename T, bool kMul>
FleetStatus* MatmulGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  MatmulGeom g;
  if (FleetStatus* st = Geom(kc, kMul, &g)) return st;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Input(kc, "Y");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dy = Output(kc, "Y@GRAD");
  if (FleetStatus* st = Require(kc, dout, "Out@GRAD")) return st;
  if (Numel(dout) != g.BatchCount() * g.m * g.n) {
    return InvalidArgument(OpName(kc) + ": Out@GRAD " + DimsText(dout) + " does not hold the " +
                           std::to_string(g.BatchCount() * g.m * g.n) + " elements of X " +
                           DimsText(x) + " times Y " + DimsText(y));
  }
  if (dx != nullptr && Numel(dx) != Numel(x)) {
    return InvalidArgument(OpName(kc) + ": X@GRAD " + DimsText(dx) + " differs from X " +
                           DimsText(x));
  }
  if (dy != nullptr && Numel(dy) != Numel(y)) {
    return InvalidArgument(OpName(kc) + ": Y@GRAD " + DimsText(dy) + " differs from Y " +
                           DimsText(y));
  }
  const GradScratch plan = PlanGradScratch<T>(g, dx != nullptr, dy != nullptr);
  if (plan.bytes > 0) {
    const auto* st = static_cast<const MatmulState*>(state);
    if (st == nullptr || st->scratch_bytes < plan.bytes || kc->scratch == nullptr) {
      return InvalidArgument(OpName(kc) + ": needs " + std::to_string(plan.bytes) +
                             " scratch bytes for its broadcast batch dims, which prepare did "
                             "not get for these shapes");
    }
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    int64_t sx[kMaxRank], sy[kMaxRank], so[kMaxRank];
    for (int i = 0; i < g.nb; ++i) {
      sx[i] = g.XStride(i);
      sy[i] = g.YStride(i);
    }
    g.DenseStrides(g.m * g.n, so);
    const int64_t count = g.BatchCount();
    const Mat xmat{g.m, g.k, g.xm, g.xk}, ymat{g.k, g.n, g.yk, g.yn}, omat{g.m, g.n, g.n, 1};
    char* scratch = static_cast<char*>(kc->scratch);
    cublasHandle_t h = nullptr;
    auto handle = [&]() -> FleetStatus* {
      if (h != nullptr) return nullptr;
      h = Blas(s);
      return ConfigureBlas(kc, h);
    };
    if (dx != nullptr && Numel(dx) > 0) {
      if (count == 0 || g.n == 0) {
        if (FleetStatus* st = Zero(kc, s, dx, sizeof(T), "X@GRAD")) return st;
      } else {
        // dX = dOut . op(Y)^T, written in X's layout.
        if (FleetStatus* st = handle()) return st;
        T* dst = plan.dx_sum ? reinterpret_cast<T*>(scratch + plan.dx_offset) : Data<T>(dx);
        int64_t sd[kMaxRank];
        if (plan.dx_sum) {
          g.DenseStrides(g.m * g.k, sd);
        } else {
          std::copy(sx, sx + g.nb, sd);
        }
        if (FleetStatus* st = BatchedProduct<T>(kc, h, g, omat, Data<const T>(dout), so,
                                                ymat.T(), Data<const T>(y), sy, xmat, dst, sd)) {
          return st;
        }
        if (plan.dx_sum) {
          const int64_t total = Numel(dx);
          SumBroadcastBatches<T><<<Blocks(total), kThreads, 0, s->native>>>(
              MakeReducePlan(g, g.xpad), g.m * g.k, total, dst, Data<T>(dx));
        }
      }
    }
    if (dy != nullptr && Numel(dy) > 0) {
      if (count == 0 || g.m == 0) {
        if (FleetStatus* st = Zero(kc, s, dy, sizeof(T), "Y@GRAD")) return st;
      } else {
        // dY = op(X)^T . dOut, written in Y's layout.
        if (FleetStatus* st = handle()) return st;
        T* dst = plan.dy_sum ? reinterpret_cast<T*>(scratch + plan.dy_offset) : Data<T>(dy);
        int64_t sd[kMaxRank];
        if (plan.dy_sum) {
          g.DenseStrides(g.k * g.n, sd);
        } else {
          std::copy(sy, sy + g.nb, sd);
        }
        if (FleetStatus* st = BatchedProduct<T>(kc, h, g, xmat.T(), Data<const T>(x), sx, omat,
                                                Data<const T>(dout), so, ymat, dst, sd)) {
          return st;
        }
        if (plan.dy_sum) {
          const int64_t total = Numel(dy);
          SumBroadcastBatches<T><<<Blocks(total), kThreads, 0, s->native>>>(
              MakeReducePlan(g, g.ypad), g.k * g.n, total, dst, Data<T>(dy));
        }
      }
    }
    return nullptr;
  });
}

template <typename T, bool kMul>
void AddPair(KernelList& list, const char* name, const char* grad_name, int32_t dtype) {
  Add(list, name, dtype, MatmulLaunch<T, kMul>, MatmulPrepare<T, kMul, false>,
      dense::DeleteState<MatmulState>);
  Add(list, grad_name, dtype, MatmulGradLaunch<T, kMul>, MatmulPrepare<T, kMul, true>,
      dense::DeleteState<MatmulState>);
}

}  // namespace

void AddDenseMatmulKernels(KernelList& list) {
  AddPair<float, true>(list, "mul", "mul_grad", FLEET_DTYPE_FLOAT32);
  AddPair<double, true>(list, "mul", "mul_grad", FLEET_DTYPE_FLOAT64);
  AddPair<float, false>(list, "matmul_v2", "matmul_v2_grad", FLEET_DTYPE_FLOAT32);
  AddPair<double, false>(list, "matmul_v2", "matmul_v2_grad", FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
