// batch_norm and layer_norm (+ grads), float32 and float64, as own kernels with the CPU plugin's
// definitions (plugins/cpu/kernels/nn_norm_kernels.cc):
//   batch_norm views X as [N, C, S]; the batch variance is the biased one (divided by N * S),
//   MeanOut/VarianceOut are the running statistics updated with `momentum` (unchanged under
//   is_test / use_global_stats), SavedMean the batch mean and SavedVariance the inverse standard
//   deviation 1 / sqrt(var + epsilon), which the gradient reads.
//   layer_norm views X as [left, right] split at begin_norm_axis; Mean/Variance are per row.
//
// Statistics run one block per channel or row, accumulate in double like the CPU and add up the
// threads' partial sums with a fixed tree (BlockSum), so every run gives the same bits. The
// parameter gradients of layer_norm sum over rows per column: each column's rows are split over
// eight lanes whose sums are added in lane order.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/dense_groups.h"

namespace fleet_cuda {
namespace {

using dense::BlockSum;
using dense::OpName;
using dense::Require;

// Blocks for a loop of one block per unit (channel, row, column tile).
unsigned Grid(int64_t units) {
  return static_cast<unsigned>(std::clamp<int64_t>(units, 1, 65535));
}

FleetStatus* ExpectNumel(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                         int64_t numel, const char* what) {
  if (t == nullptr || Numel(t) == numel) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot + " must have " + std::to_string(numel) +
                         " elements (" + what + "), got " + std::to_string(Numel(t)));
}

// ---- batch_norm ----------------------------------------------------------------------------

struct NCS {
  int64_t n = 1, c = 1, s = 1;
};

FleetStatus* ViewNCS(const FleetKernelContext* kc, const FleetTensor* x, NCS* v) {
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  if (x->ndim < 2) return InvalidArgument(OpName(kc) + ": X must be at least 2-D");
  v->n = x->dims[0];
  v->c = x->dims[1];
  v->s = 1;
  for (int32_t i = 2; i < x->ndim; ++i) v->s *= x->dims[i];
  return nullptr;
}

bool GlobalStats(const FleetKernelContext* kc) {
  return BoolAttr(kc, "is_test") || BoolAttr(kc, "use_global_stats");
}

template <typename T>
struct BnForwardArgs {
  NCS v;
  const T* x;
  const T* scale;
  const T* bias;
  const T* mean_in;
  const T* var_in;
  T* y;
  T* mean_out;    // each of the four below may be NULL
  T* var_out;
  T* saved_mean;
  T* saved_var;
  double eps, momentum;
  bool global;
};

template <typename T>
__global__ void BatchNormForward(BnForwardArgs<T> p) {
  __shared__ double buf[kThreads];
  const NCS v = p.v;
  const int64_t per_channel = v.n * v.s;
  const double count = static_cast<double>(per_channel);
  for (int64_t c = blockIdx.x; c < v.c; c += gridDim.x) {
    // MeanOut/VarianceOut may be the buffers of Mean/Variance: every thread reads the old values
    // here, and thread 0 overwrites them only after the barrier below.
    const double old_mean = p.mean_in[c], old_var = p.var_in[c];
    double mean = old_mean, var = old_var;
    if (!p.global) {
      double sum = 0;
      for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
        const int64_t n = q / v.s, k = q % v.s;
        sum += p.x[(n * v.c + c) * v.s + k];
      }
      sum = BlockSum(sum, buf);
      mean = count > 0 ? sum / count : 0.0;
      double sq = 0;
      for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
        const int64_t n = q / v.s, k = q % v.s;
        const double d = p.x[(n * v.c + c) * v.s + k] - mean;
        sq += d * d;
      }
      sq = BlockSum(sq, buf);
      var = count > 0 ? sq / count : 0.0;
    }
    const double inv_std = 1.0 / sqrt(var + p.eps);
    const T a = static_cast<T>(p.scale[c] * inv_std);
    const T b = static_cast<T>(p.bias[c] - mean * p.scale[c] * inv_std);
    for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
      const int64_t n = q / v.s, k = q % v.s;
      const int64_t i = (n * v.c + c) * v.s + k;
      p.y[i] = p.x[i] * a + b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (p.mean_out != nullptr) {
        p.mean_out[c] = static_cast<T>(
            p.global ? old_mean : old_mean * p.momentum + mean * (1 - p.momentum));
      }
      if (p.var_out != nullptr) {
        p.var_out[c] =
            static_cast<T>(p.global ? old_var : old_var * p.momentum + var * (1 - p.momentum));
      }
      if (p.saved_mean != nullptr) p.saved_mean[c] = static_cast<T>(mean);
      if (p.saved_var != nullptr) p.saved_var[c] = static_cast<T>(inv_std);
    }
  }
}

template <typename T>
FleetStatus* BatchNormLaunch(void*, const FleetKernelContext* kc, void*) {
  NCS v;
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = ViewNCS(kc, x, &v)) return st;
  for (const char* slot : {"Scale", "Bias", "Mean", "Variance"}) {
    const FleetTensor* t = Input(kc, slot);
    if (FleetStatus* st = dense::ExpectRank(kc, t, slot, 1)) return st;
    if (t->dims[0] != v.c) {
      return InvalidArgument(OpName(kc) + ": " + slot + " must be [" + std::to_string(v.c) +
                             "] (X's channels), got [" + std::to_string(t->dims[0]) + "]");
    }
  }
  const FleetTensor* y = Output(kc, "Y");
  if (FleetStatus* st = Require(kc, y, "Y")) return st;
  if (FleetStatus* st = ExpectNumel(kc, y, "Y", Numel(x), "X's shape")) return st;
  BnForwardArgs<T> p;
  p.v = v;
  p.x = Data<const T>(x);
  p.scale = Data<const T>(Input(kc, "Scale"));
  p.bias = Data<const T>(Input(kc, "Bias"));
  p.mean_in = Data<const T>(Input(kc, "Mean"));
  p.var_in = Data<const T>(Input(kc, "Variance"));
  p.y = Data<T>(y);
  T** stats[4] = {&p.mean_out, &p.var_out, &p.saved_mean, &p.saved_var};
  const char* stat_slots[4] = {"MeanOut", "VarianceOut", "SavedMean", "SavedVariance"};
  for (int i = 0; i < 4; ++i) {
    const FleetTensor* t = Output(kc, stat_slots[i]);
    if (FleetStatus* st = ExpectNumel(kc, t, stat_slots[i], v.c, "X's channels")) return st;
    *stats[i] = t != nullptr ? Data<T>(t) : nullptr;
  }
  p.eps = FloatAttr(kc, "epsilon", 1e-5);
  p.momentum = FloatAttr(kc, "momentum", 0.9);
  p.global = GlobalStats(kc);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (v.c > 0) BatchNormForward<T><<<Grid(v.c), kThreads, 0, s->native>>>(p);
    return nullptr;
  });
}

template <typename T>
struct BnGradArgs {
  NCS v;
  const T* x;
  const T* dy;
  const T* scale;
  const T* mean;  // SavedMean, or the running Mean (see from_running)
  const T* var;   // SavedVariance (inverse std), or the running Variance
  T* dx;          // each output may be NULL
  T* dscale;
  T* dbias;
  double eps;
  bool global, from_running;
};

template <typename T>
__global__ void BatchNormGrad(BnGradArgs<T> p) {
  __shared__ double buf[kThreads];
  const NCS v = p.v;
  const int64_t per_channel = v.n * v.s;
  const double count = static_cast<double>(per_channel);
  for (int64_t c = blockIdx.x; c < v.c; c += gridDim.x) {
    const double m = p.mean[c];
    const double inv_std = p.from_running ? 1.0 / sqrt(p.var[c] + p.eps) : double(p.var[c]);
    double dbias = 0, dscale = 0;
    for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
      const int64_t n = q / v.s, k = q % v.s;
      const int64_t i = (n * v.c + c) * v.s + k;
      dbias += p.dy[i];
      dscale += p.dy[i] * (p.x[i] - m) * inv_std;
    }
    dbias = BlockSum(dbias, buf);
    dscale = BlockSum(dscale, buf);
    if (threadIdx.x == 0) {
      if (p.dscale != nullptr) p.dscale[c] = static_cast<T>(dscale);
      if (p.dbias != nullptr) p.dbias[c] = static_cast<T>(dbias);
    }
    if (p.dx == nullptr) continue;
    const double k0 = p.scale[c] * inv_std;
    for (int64_t q = threadIdx.x; q < per_channel; q += blockDim.x) {
      const int64_t n = q / v.s, k = q % v.s;
      const int64_t i = (n * v.c + c) * v.s + k;
      if (p.global) {
        p.dx[i] = static_cast<T>(k0 * p.dy[i]);
      } else {
        const double xhat = (p.x[i] - m) * inv_std;
        p.dx[i] = static_cast<T>(k0 * (p.dy[i] - dbias / count - xhat * dscale / count));
      }
    }
  }
}

template <typename T>
FleetStatus* BatchNormGradLaunch(void*, const FleetKernelContext* kc, void*) {
  NCS v;
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = ViewNCS(kc, x, &v)) return st;
  const FleetTensor* dy = Input(kc, "Y@GRAD");
  const FleetTensor* scale = Input(kc, "Scale");
  if (FleetStatus* st = Require(kc, dy, "Y@GRAD")) return st;
  if (FleetStatus* st = Require(kc, scale, "Scale")) return st;
  const bool global = GlobalStats(kc);
  // With global statistics Y depends on X only through the running mean and variance.
  const FleetTensor* mean_t = Input(kc, "SavedMean");
  const FleetTensor* var_t = Input(kc, "SavedVariance");
  const char* mean_slot = "SavedMean";
  const char* var_slot = "SavedVariance";
  const bool from_running = global && Input(kc, "Mean") && Input(kc, "Variance");
  if (from_running) {
    mean_t = Input(kc, "Mean");
    var_t = Input(kc, "Variance");
    mean_slot = "Mean";
    var_slot = "Variance";
  }
  if (FleetStatus* st = Require(kc, mean_t, mean_slot)) return st;
  if (FleetStatus* st = Require(kc, var_t, var_slot)) return st;
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dscale = Output(kc, "Scale@GRAD");
  const FleetTensor* dbias = Output(kc, "Bias@GRAD");
  const int64_t xn = Numel(x);
  if (FleetStatus* st = ExpectNumel(kc, dy, "Y@GRAD", xn, "X's shape")) return st;
  if (FleetStatus* st = ExpectNumel(kc, dx, "X@GRAD", xn, "X's shape")) return st;
  if (FleetStatus* st = ExpectNumel(kc, scale, "Scale", v.c, "X's channels")) return st;
  if (FleetStatus* st = ExpectNumel(kc, mean_t, mean_slot, v.c, "X's channels")) return st;
  if (FleetStatus* st = ExpectNumel(kc, var_t, var_slot, v.c, "X's channels")) return st;
  if (FleetStatus* st = ExpectNumel(kc, dscale, "Scale@GRAD", v.c, "X's channels")) return st;
  if (FleetStatus* st = ExpectNumel(kc, dbias, "Bias@GRAD", v.c, "X's channels")) return st;
  BnGradArgs<T> p;
  p.v = v;
  p.x = Data<const T>(x);
  p.dy = Data<const T>(dy);
  p.scale = Data<const T>(scale);
  p.mean = Data<const T>(mean_t);
  p.var = Data<const T>(var_t);
  p.dx = dx != nullptr ? Data<T>(dx) : nullptr;
  p.dscale = dscale != nullptr ? Data<T>(dscale) : nullptr;
  p.dbias = dbias != nullptr ? Data<T>(dbias) : nullptr;
  p.eps = FloatAttr(kc, "epsilon", 1e-5);
  p.global = global;
  p.from_running = from_running;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (v.c > 0) BatchNormGrad<T><<<Grid(v.c), kThreads, 0, s->native>>>(p);
    return nullptr;
  });
}

// ---- layer_norm ----------------------------------------------------------------------------

struct Rows {
  int64_t left = 1, right = 1;
};

FleetStatus* ViewRows(const FleetKernelContext* kc, const FleetTensor* x, Rows* r) {
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  const int64_t axis = IntAttr(kc, "begin_norm_axis", 1);
  if (axis < 1 || axis >= x->ndim) {
    return InvalidArgument(OpName(kc) + ": begin_norm_axis " + std::to_string(axis) +
                           " must be in [1, " + std::to_string(x->ndim) + ")");
  }
  for (int64_t i = 0; i < x->ndim; ++i) (i < axis ? r->left : r->right) *= x->dims[i];
  return nullptr;
}

template <typename T>
struct LnForwardArgs {
  Rows r;
  const T* x;
  const T* scale;  // may be NULL, as may bias, mean and var
  const T* bias;
  T* y;
  T* mean;
  T* var;
  double eps;
};

template <typename T>
__global__ void LayerNormForward(LnForwardArgs<T> p) {
  __shared__ double buf[kThreads];
  const int64_t right = p.r.right;
  const double width = static_cast<double>(right);
  for (int64_t i = blockIdx.x; i < p.r.left; i += gridDim.x) {
    const T* xs = p.x + i * right;
    T* ys = p.y + i * right;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < right; j += blockDim.x) sum += xs[j];
    const double mean = BlockSum(sum, buf) / width;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < right; j += blockDim.x) {
      const double d = xs[j] - mean;
      sq += d * d;
    }
    const double var = BlockSum(sq, buf) / width;
    const double inv_std = 1.0 / sqrt(var + p.eps);
    for (int64_t j = threadIdx.x; j < right; j += blockDim.x) {
      double v = (xs[j] - mean) * inv_std;
      if (p.scale != nullptr) v *= p.scale[j];
      if (p.bias != nullptr) v += p.bias[j];
      ys[j] = static_cast<T>(v);
    }
    if (threadIdx.x == 0) {
      if (p.mean != nullptr) p.mean[i] = static_cast<T>(mean);
      if (p.var != nullptr) p.var[i] = static_cast<T>(var);
    }
  }
}

template <typename T>
FleetStatus* LayerNormLaunch(void*, const FleetKernelContext* kc, void*) {
  Rows r;
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = ViewRows(kc, x, &r)) return st;
  const FleetTensor* scale = Input(kc, "Scale");
  const FleetTensor* bias = Input(kc, "Bias");
  const FleetTensor* y = Output(kc, "Y");
  const FleetTensor* mean = Output(kc, "Mean");
  const FleetTensor* var = Output(kc, "Variance");
  if (FleetStatus* st = Require(kc, y, "Y")) return st;
  if (FleetStatus* st = ExpectNumel(kc, y, "Y", Numel(x), "X's shape")) return st;
  const char* per_row = "one per row before begin_norm_axis";
  const char* per_col = "X's dims from begin_norm_axis on";
  if (FleetStatus* st = ExpectNumel(kc, scale, "Scale", r.right, per_col)) return st;
  if (FleetStatus* st = ExpectNumel(kc, bias, "Bias", r.right, per_col)) return st;
  if (FleetStatus* st = ExpectNumel(kc, mean, "Mean", r.left, per_row)) return st;
  if (FleetStatus* st = ExpectNumel(kc, var, "Variance", r.left, per_row)) return st;
  LnForwardArgs<T> p;
  p.r = r;
  p.x = Data<const T>(x);
  p.scale = scale != nullptr ? Data<const T>(scale) : nullptr;
  p.bias = bias != nullptr ? Data<const T>(bias) : nullptr;
  p.y = Data<T>(y);
  p.mean = mean != nullptr ? Data<T>(mean) : nullptr;
  p.var = var != nullptr ? Data<T>(var) : nullptr;
  p.eps = FloatAttr(kc, "epsilon", 1e-5);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (r.left > 0) LayerNormForward<T><<<Grid(r.left), kThreads, 0, s->native>>>(p);
    return nullptr;
  });
}

template <typename T>
struct LnGradArgs {
  Rows r;
  const T* x;
  const T* dy;
  const T* scale;  // may be NULL
  const T* mean;
  const T* var;
  T* dx;           // each output may be NULL
  T* dscale;
  T* dbias;
  double eps;
};

// X@GRAD, a block per row: with g = dY * Scale,
// dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)).
template <typename T>
__global__ void LayerNormDataGrad(LnGradArgs<T> p) {
  __shared__ double buf[kThreads];
  const int64_t right = p.r.right;
  const double width = static_cast<double>(right);
  for (int64_t i = blockIdx.x; i < p.r.left; i += gridDim.x) {
    const T* xs = p.x + i * right;
    const T* ds = p.dy + i * right;
    T* dxs = p.dx + i * right;
    const double inv_std = 1.0 / sqrt(p.var[i] + p.eps);
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = threadIdx.x; j < right; j += blockDim.x) {
      const double g = p.scale != nullptr ? ds[j] * p.scale[j] : ds[j];
      sum_g += g;
      sum_gx += g * (xs[j] - p.mean[i]) * inv_std;
    }
    sum_g = BlockSum(sum_g, buf);
    sum_gx = BlockSum(sum_gx, buf);
    for (int64_t j = threadIdx.x; j < right; j += blockDim.x) {
      const double g = p.scale != nullptr ? ds[j] * p.scale[j] : ds[j];
      const double xhat = (xs[j] - p.mean[i]) * inv_std;
      dxs[j] = static_cast<T>(inv_std * (g - sum_g / width - xhat * sum_gx / width));
    }
  }
}

constexpr int kColTile = 32;  // columns per block (threadIdx.x)
constexpr int kRowLanes = 8;  // lanes splitting the rows of each column (threadIdx.y)

// Scale@GRAD and Bias@GRAD: sums over rows per column.
template <typename T>
__global__ void LayerNormParamGrad(LnGradArgs<T> p) {
  __shared__ double part_s[kRowLanes][kColTile];
  __shared__ double part_b[kRowLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t left = p.r.left, right = p.r.right;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kColTile; base < right;
       base += static_cast<int64_t>(gridDim.x) * kColTile) {
    const int64_t j = base + tx;
    double ds_acc = 0, db_acc = 0;
    if (j < right) {
      for (int64_t i = ty; i < left; i += kRowLanes) {
        const double d = p.dy[i * right + j];
        db_acc += d;
        ds_acc += d * (p.x[i * right + j] - p.mean[i]) / sqrt(p.var[i] + p.eps);
      }
    }
    part_s[ty][tx] = ds_acc;
    part_b[ty][tx] = db_acc;
    __syncthreads();
    if (ty == 0 && j < right) {
      double s = 0, b = 0;
      for (int lane = 0; lane < kRowLanes; ++lane) {
        s += part_s[lane][tx];
        b += part_b[lane][tx];
      }
      if (p.dscale != nullptr) p.dscale[j] = static_cast<T>(s);
      if (p.dbias != nullptr) p.dbias[j] = static_cast<T>(b);
    }
    __syncthreads();  // the partials are reused by the next tile
  }
}

template <typename T>
FleetStatus* LayerNormGradLaunch(void*, const FleetKernelContext* kc, void*) {
  Rows r;
  const FleetTensor* x = Input(kc, "X");
  if (FleetStatus* st = ViewRows(kc, x, &r)) return st;
  const FleetTensor* dy = Input(kc, "Y@GRAD");
  const FleetTensor* scale = Input(kc, "Scale");
  const FleetTensor* mean = Input(kc, "Mean");
  const FleetTensor* var = Input(kc, "Variance");
  if (FleetStatus* st = Require(kc, dy, "Y@GRAD")) return st;
  if (FleetStatus* st = Require(kc, mean, "Mean")) return st;
  if (FleetStatus* st = Require(kc, var, "Variance")) return st;
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dscale = Output(kc, "Scale@GRAD");
  const FleetTensor* dbias = Output(kc, "Bias@GRAD");
  const char* per_row = "one per row before begin_norm_axis";
  const char* per_col = "X's dims from begin_norm_axis on";
  if (FleetStatus* st = ExpectNumel(kc, dy, "Y@GRAD", Numel(x), "X's shape")) return st;
  if (FleetStatus* st = ExpectNumel(kc, dx, "X@GRAD", Numel(x), "X's shape")) return st;
  if (FleetStatus* st = ExpectNumel(kc, mean, "Mean", r.left, per_row)) return st;
  if (FleetStatus* st = ExpectNumel(kc, var, "Variance", r.left, per_row)) return st;
  if (FleetStatus* st = ExpectNumel(kc, scale, "Scale", r.right, per_col)) return st;
  if (FleetStatus* st = ExpectNumel(kc, dscale, "Scale@GRAD", r.right, per_col)) return st;
  if (FleetStatus* st = ExpectNumel(kc, dbias, "Bias@GRAD", r.right, per_col)) return st;
  LnGradArgs<T> p;
  p.r = r;
  p.x = Data<const T>(x);
  p.dy = Data<const T>(dy);
  p.scale = scale != nullptr ? Data<const T>(scale) : nullptr;
  p.mean = Data<const T>(mean);
  p.var = Data<const T>(var);
  p.dx = dx != nullptr ? Data<T>(dx) : nullptr;
  p.dscale = dscale != nullptr ? Data<T>(dscale) : nullptr;
  p.dbias = dbias != nullptr ? Data<T>(dbias) : nullptr;
  p.eps = FloatAttr(kc, "epsilon", 1e-5);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    // The parameter gradients go first: they read dY for every row, so an X@GRAD that shares
    // dY's buffer is written only after that.
    if ((p.dscale != nullptr || p.dbias != nullptr) && r.right > 0) {
      const dim3 block(kColTile, kRowLanes);
      LayerNormParamGrad<T><<<Grid((r.right + kColTile - 1) / kColTile), block, 0, s->native>>>(
          p);
    }
    if (p.dx != nullptr && r.left > 0) {
      LayerNormDataGrad<T><<<Grid(r.left), kThreads, 0, s->native>>>(p);
    }
    return nullptr;
  });
}

template <typename T>
void AddNorms(KernelList& list, int32_t dtype) {
  Add(list, "batch_norm", dtype, BatchNormLaunch<T>);
  Add(list, "batch_norm_grad", dtype, BatchNormGradLaunch<T>);
  Add(list, "layer_norm", dtype, LayerNormLaunch<T>);
  Add(list, "layer_norm_grad", dtype, LayerNormGradLaunch<T>);
}

}  // namespace

void AddDenseNormKernels(KernelList& list) {
  AddNorms<float>(list, FLEET_DTYPE_FLOAT32);
  AddNorms<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
