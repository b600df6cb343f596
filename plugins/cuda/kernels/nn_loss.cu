// CUDA kernels of cross_entropy and softmax_with_cross_entropy (+ grads), float32 and float64,
// with the CPU plugin's semantics (plugins/cpu/kernels/nn_loss_kernels.cc). Tensors are viewed
// as [pre, C, post] around the class axis; hard labels (int64, or int32) as [pre, post].
//
// Row reductions (max, sum over classes) run one warp per row with a fixed butterfly order,
// so results do not depend on scheduling. Labels are checked on the device (nn_groups.h).
#include <cmath>
#include <limits>

#include "kernels/nn_groups.h"

namespace fleet_cuda {
namespace {

using namespace nn;

// ---- device helpers -------------------------------------------------------------------------

__device__ inline float Exp(float v) { return expf(v); }
__device__ inline double Exp(double v) { return exp(v); }
__device__ inline float Log(float v) { return logf(v); }
__device__ inline double Log(double v) { return log(v); }

// Paddle's TolerableValue: -log(0) and friends become +-1e20 instead of inf/nan.
template <typename T>
__device__ inline T Tolerable(T v) {
  const T big = static_cast<T>(1e20);
  if (isnan(v)) return big;
  if (isinf(v)) return v > 0 ? big : -big;
  return v;
}

// xor butterflies: every lane ends with the same value, since a + b == b + a bit for bit.
template <typename T>
__device__ inline T WarpSum(T v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

template <typename T>
__device__ inline T WarpMax(T v) {
  for (int m = 16; m > 0; m >>= 1) {
    const T o = __shfl_xor_sync(0xffffffffu, v, m);
    v = v < o ? o : v;
  }
  return v;
}

// ---- geometry and errors --------------------------------------------------------------------

struct ClassView {
  int64_t pre = 1, classes = 1, post = 1;
};

FleetStatus* MakeView(const FleetKernelContext* kc, const FleetTensor* x, const char* slot,
                      bool use_axis_attr, ClassView* v) {
  if (FleetStatus* st = Require(kc, x, slot)) return st;
  if (x->ndim < 1) return InvalidArgument(OpName(kc) + ": " + slot + " needs a class dim");
  int64_t axis = use_axis_attr ? IntAttr(kc, "axis", -1) : -1;
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim) {
    return InvalidArgument(OpName(kc) + ": axis " + std::to_string(IntAttr(kc, "axis", -1)) +
                           " is out of range for rank " + std::to_string(x->ndim));
  }
  for (int64_t i = 0; i < x->ndim; ++i) {
    if (i < axis) v->pre *= x->dims[i];
    if (i > axis) v->post *= x->dims[i];
  }
  v->classes = x->dims[axis];
  return nullptr;
}

FleetStatus* BadLabel(const FleetKernelContext* kc, int64_t row, int64_t label, int64_t classes) {
  return InvalidArgument(OpName(kc) + ": Label[" + std::to_string(row) + "] = " +
                         std::to_string(label) + " is outside [0, " + std::to_string(classes) +
                         ") and is not ignore_index");
}

// Label must be hard ids with one per row, or (soft) a distribution of x's shape and dtype.
template <typename T>
FleetStatus* CheckLabel(const FleetKernelContext* kc, const FleetTensor* label, bool soft,
                        const ClassView& v) {
  const int64_t rows = v.pre * v.post;
  if (soft) return RequireSized(kc, label, "Label", DtypeOf<T>(), rows * v.classes);
  if (FleetStatus* st = RequireIndex(kc, label, "Label")) return st;
  if (Numel(label) != rows) {
    return InvalidArgument(OpName(kc) + ": Label has " + std::to_string(Numel(label)) +
                           " elements, expected one class id per row (" + std::to_string(rows) +
                           ")");
  }
  return nullptr;
}

// ---- cross_entropy ----------------------------------------------------------------------------

template <typename T>
__global__ void CrossEntropyHardKernel(const T* x, const void* label, bool label32, T* y,
                                       int64_t rows, int64_t c, int64_t ignore,
                                       unsigned long long* flag) {
  FLEET_CUDA_LOOP(i, rows) {
    const int64_t l = LoadIndex(label, label32, i);
    if (l == ignore) {
      y[i] = T(0);
    } else if (l < 0 || l >= c) {
      NoteBad(flag, i);
      y[i] = NaN<T>();
    } else {
      y[i] = Tolerable(-Log(x[i * c + l]));
    }
  }
}

template <typename T>
__global__ void CrossEntropySoftKernel(const T* x, const T* label, T* y, int64_t rows,
                                       int64_t c) {
  const int lane = Lane();
  for (int64_t r = WarpId(); r < rows; r += WarpCount()) {
    const T* xr = x + r * c;
    const T* lr = label + r * c;
    T sum = T(0);
    for (int64_t j = lane; j < c; j += 32) sum -= lr[j] * Tolerable(Log(xr[j]));
    sum = WarpSum(sum);
    if (lane == 0) y[r] = sum;
  }
}

template <typename T>
__global__ void CrossEntropyGradHardKernel(const T* x, const void* label, bool label32,
                                           const T* dy, T* dx, int64_t rows, int64_t c,
                                           int64_t ignore, unsigned long long* flag) {
  FLEET_CUDA_LOOP(k, rows * c) {
    const int64_t i = k / c;
    const int64_t j = k - i * c;
    const int64_t l = LoadIndex(label, label32, i);
    T g = T(0);
    if (l != ignore) {
      if (l < 0 || l >= c) {
        if (j == 0) NoteBad(flag, i);
        g = NaN<T>();
      } else if (j == l) {
        g = -dy[i] / x[k];
      }
    }
    dx[k] = g;
  }
}

template <typename T>
__global__ void CrossEntropyGradSoftKernel(const T* x, const T* label, const T* dy, T* dx,
                                           int64_t rows, int64_t c) {
  FLEET_CUDA_LOOP(k, rows * c) { dx[k] = -dy[k / c] * label[k] / x[k]; }
}

template <typename T>
FleetStatus* CrossEntropy(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* y = Output(kc, "Y");
  ClassView v;
  if (FleetStatus* st = MakeView(kc, x, "X", false, &v)) return st;
  const bool soft = BoolAttr(kc, "soft_label");
  if (FleetStatus* st = CheckLabel<T>(kc, label, soft, v)) return st;
  const int64_t rows = v.pre, c = v.classes;
  if (FleetStatus* st = RequireSized(kc, y, "Y", DtypeOf<T>(), rows)) return st;
  const int64_t ignore = IntAttr(kc, "ignore_index", -100);
  unsigned long long* flag = nullptr;
  if (!soft) {
    if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (soft) {
      CrossEntropySoftKernel<T><<<Blocks(rows * 32), kThreads, 0, s->native>>>(
          Data<const T>(x), Data<const T>(label), Data<T>(y), rows, c);
      return nullptr;
    }
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    CrossEntropyHardKernel<T><<<Blocks(rows), kThreads, 0, s->native>>>(
        Data<const T>(x), label->data, label->dtype == FLEET_DTYPE_INT32, Data<T>(y), rows, c,
        ignore, flag);
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, label, &pos, &value)) return st;
    return pos >= 0 ? BadLabel(kc, pos, value, c) : nullptr;
  });
}

template <typename T>
FleetStatus* CrossEntropyGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* dy = Input(kc, "Y@GRAD");
  ClassView v;
  if (FleetStatus* st = MakeView(kc, x, "X", false, &v)) return st;
  const bool soft = BoolAttr(kc, "soft_label");
  if (FleetStatus* st = CheckLabel<T>(kc, label, soft, v)) return st;
  const int64_t rows = v.pre, c = v.classes;
  if (FleetStatus* st = RequireSized(kc, dy, "Y@GRAD", DtypeOf<T>(), rows)) return st;
  if (FleetStatus* st = RequireSized(kc, dx, "X@GRAD", DtypeOf<T>(), rows * c)) return st;
  const int64_t ignore = IntAttr(kc, "ignore_index", -100);
  unsigned long long* flag = nullptr;
  if (!soft) {
    if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (soft) {
      CrossEntropyGradSoftKernel<T><<<Blocks(rows * c), kThreads, 0, s->native>>>(
          Data<const T>(x), Data<const T>(label), Data<const T>(dy), Data<T>(dx), rows, c);
      return nullptr;
    }
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    CrossEntropyGradHardKernel<T><<<Blocks(rows * c), kThreads, 0, s->native>>>(
        Data<const T>(x), label->data, label->dtype == FLEET_DTYPE_INT32, Data<const T>(dy),
        Data<T>(dx), rows, c, ignore, flag);
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, label, &pos, &value)) return st;
    return pos >= 0 ? BadLabel(kc, pos, value, c) : nullptr;
  });
}

// ---- softmax_with_cross_entropy -------------------------------------------------------------

// One warp per row r of [pre, post]; the row's classes sit `post` apart. `soft_label` is NULL
// for hard labels. The softmax is always the max-subtracted one (numeric_stable_mode only
// names what every kernel does).
template <typename T>
__global__ void SoftmaxCeKernel(const T* x, const void* label, bool label32, const T* soft_label,
                                T* sm, T* loss, int64_t rows, int64_t c, int64_t post,
                                int64_t ignore, unsigned long long* flag) {
  const int lane = Lane();
  for (int64_t r = WarpId(); r < rows; r += WarpCount()) {
    const int64_t base = (r / post) * c * post + r % post;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = lane; j < c; j += 32) {
      const T v = x[base + j * post];
      mx = mx < v ? v : mx;
    }
    mx = WarpMax(mx);
    T sum = T(0);
    for (int64_t j = lane; j < c; j += 32) sum += Exp(x[base + j * post] - mx);
    sum = WarpSum(sum);
    const T log_sum = Log(sum);
    // exp is recomputed rather than read back: the same argument gives the same bits.
    for (int64_t j = lane; j < c; j += 32) {
      const int64_t k = base + j * post;
      sm[k] = Exp(x[k] - mx) / sum;
    }
    if (soft_label != nullptr) {
      T acc = T(0);
      for (int64_t j = lane; j < c; j += 32) {
        const int64_t k = base + j * post;
        acc -= soft_label[k] * (x[k] - mx - log_sum);
      }
      acc = WarpSum(acc);
      if (lane == 0) loss[r] = acc;
    } else if (lane == 0) {
      const int64_t l = LoadIndex(label, label32, r);
      if (l == ignore) {
        loss[r] = T(0);
      } else if (l < 0 || l >= c) {
        NoteBad(flag, r);
        loss[r] = NaN<T>();
      } else {
        loss[r] = -(x[base + l * post] - mx - log_sum);
      }
    }
  }
}

template <typename T>
__global__ void SoftmaxCeGradKernel(const T* sm, const void* label, bool label32,
                                    const T* soft_label, const T* dloss, T* dx, int64_t pre,
                                    int64_t c, int64_t post, int64_t ignore,
                                    unsigned long long* flag) {
  const int64_t block = c * post;
  FLEET_CUDA_LOOP(k, pre * block) {
    const int64_t p = k / block;
    const int64_t rem = k - p * block;
    const int64_t j = rem / post;
    const int64_t r = p * post + (rem - j * post);
    if (soft_label != nullptr) {
      dx[k] = (sm[k] - soft_label[k]) * dloss[r];
      continue;
    }
    const int64_t l = LoadIndex(label, label32, r);
    if (l == ignore) {
      dx[k] = T(0);
    } else if (l < 0 || l >= c) {
      if (j == 0) NoteBad(flag, r);
      dx[k] = NaN<T>();
    } else {
      dx[k] = (sm[k] - (j == l ? T(1) : T(0))) * dloss[r];
    }
  }
}

template <typename T>
FleetStatus* SoftmaxWithCrossEntropy(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* logits = Input(kc, "Logits");
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* softmax = Output(kc, "Softmax");
  const FleetTensor* loss = Output(kc, "Loss");
  ClassView v;
  if (FleetStatus* st = MakeView(kc, logits, "Logits", true, &v)) return st;
  const bool soft = BoolAttr(kc, "soft_label");
  if (FleetStatus* st = CheckLabel<T>(kc, label, soft, v)) return st;
  const int64_t rows = v.pre * v.post, c = v.classes, post = v.post;
  if (FleetStatus* st = RequireSized(kc, softmax, "Softmax", DtypeOf<T>(), rows * c)) return st;
  if (FleetStatus* st = RequireSized(kc, loss, "Loss", DtypeOf<T>(), rows)) return st;
  const int64_t ignore = IntAttr(kc, "ignore_index", -100);
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    SoftmaxCeKernel<T><<<Blocks(rows * 32), kThreads, 0, s->native>>>(
        Data<const T>(logits), soft ? nullptr : label->data, label->dtype == FLEET_DTYPE_INT32,
        soft ? Data<const T>(label) : nullptr, Data<T>(softmax), Data<T>(loss), rows, c, post,
        ignore, flag);
    if (soft) return nullptr;
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, label, &pos, &value)) return st;
    return pos >= 0 ? BadLabel(kc, pos, value, c) : nullptr;
  });
}

template <typename T>
FleetStatus* SoftmaxWithCrossEntropyGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "Logits@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* softmax = Input(kc, "Softmax");
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* dloss = Input(kc, "Loss@GRAD");
  ClassView v;
  if (FleetStatus* st = MakeView(kc, softmax, "Softmax", true, &v)) return st;
  const bool soft = BoolAttr(kc, "soft_label");
  if (FleetStatus* st = CheckLabel<T>(kc, label, soft, v)) return st;
  const int64_t rows = v.pre * v.post, c = v.classes;
  if (FleetStatus* st = RequireSized(kc, dloss, "Loss@GRAD", DtypeOf<T>(), rows)) return st;
  if (FleetStatus* st = RequireSized(kc, dx, "Logits@GRAD", DtypeOf<T>(), rows * c)) return st;
  const int64_t ignore = IntAttr(kc, "ignore_index", -100);
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    SoftmaxCeGradKernel<T><<<Blocks(rows * c), kThreads, 0, s->native>>>(
        Data<const T>(softmax), soft ? nullptr : label->data, label->dtype == FLEET_DTYPE_INT32,
        soft ? Data<const T>(label) : nullptr, Data<const T>(dloss), Data<T>(dx), v.pre, c,
        v.post, ignore, flag);
    if (soft) return nullptr;
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, label, &pos, &value)) return st;
    return pos >= 0 ? BadLabel(kc, pos, value, c) : nullptr;
  });
}

}  // namespace

void AddNnLossKernels(KernelList& list) {
  Add(list, "cross_entropy", FLEET_DTYPE_FLOAT32, CrossEntropy<float>, PrepareFlag);
  Add(list, "cross_entropy", FLEET_DTYPE_FLOAT64, CrossEntropy<double>, PrepareFlag);
  Add(list, "cross_entropy_grad", FLEET_DTYPE_FLOAT32, CrossEntropyGrad<float>, PrepareFlag);
  Add(list, "cross_entropy_grad", FLEET_DTYPE_FLOAT64, CrossEntropyGrad<double>, PrepareFlag);
  Add(list, "softmax_with_cross_entropy", FLEET_DTYPE_FLOAT32, SoftmaxWithCrossEntropy<float>,
      PrepareFlag);
  Add(list, "softmax_with_cross_entropy", FLEET_DTYPE_FLOAT64, SoftmaxWithCrossEntropy<double>,
      PrepareFlag);
  Add(list, "softmax_with_cross_entropy_grad", FLEET_DTYPE_FLOAT32,
      SoftmaxWithCrossEntropyGrad<float>, PrepareFlag);
  Add(list, "softmax_with_cross_entropy_grad", FLEET_DTYPE_FLOAT64,
      SoftmaxWithCrossEntropyGrad<double>, PrepareFlag);
}

}  // namespace fleet_cuda
