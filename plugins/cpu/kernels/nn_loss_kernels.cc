// Kernels of cross_entropy and softmax_with_cross_entropy (+ grads), float32 and float64.
// Tensors are viewed as [pre, C, post] around the class axis; hard labels as [pre, post].
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/nn_kernels.h"

namespace fleet_cpu {
namespace {

// Paddle's TolerableValue: -log(0) and friends become +-1e20 instead of inf/nan.
template <typename T>
T Tolerable(T v) {
  const T big = static_cast<T>(1e20);
  if (std::isnan(v)) return big;
  if (std::isinf(v)) return v > 0 ? big : -big;
  return v;
}

// Class axis geometry of `x` for the op's "axis" attribute (cross_entropy: always last).
struct ClassView {
  int64_t pre = 1, classes = 1, post = 1;
};

FleetStatus* MakeView(const FleetKernelContext* kc, const FleetTensor* x, bool use_axis_attr,
                      ClassView* v) {
  if (x->ndim < 1) return InvalidArgument(OpName(kc) + ": input needs a class dim");
  int64_t axis = use_axis_attr ? IntAttr(kc, "axis", -1) : -1;
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim) return InvalidArgument(OpName(kc) + ": axis out of range");
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

template <typename T>
FleetStatus* CrossEntropy(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* y = Output(kc, "Y");
    ClassView v;
    if (FleetStatus* st = MakeView(kc, x, false, &v)) return st;
    const T* xs = Data<T>(x);
    T* ys = Data<T>(y);
    const int64_t rows = v.pre, c = v.classes;
    if (BoolAttr(kc, "soft_label")) {
      const T* ls = Data<T>(label);
      for (int64_t i = 0; i < rows; ++i) {
        T sum = 0;
        for (int64_t j = 0; j < c; ++j) sum -= ls[i * c + j] * Tolerable(std::log(xs[i * c + j]));
        ys[i] = sum;
      }
      return nullptr;
    }
    const int64_t ignore = IntAttr(kc, "ignore_index", -100);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t l = IndexAt(label, i);
      if (l == ignore) {
        ys[i] = 0;
        continue;
      }
      if (l < 0 || l >= c) return BadLabel(kc, i, l, c);
      ys[i] = Tolerable(-std::log(xs[i * c + l]));
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* CrossEntropyGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* dy = Input(kc, "Y@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    ClassView v;
    if (FleetStatus* st = MakeView(kc, x, false, &v)) return st;
    const T* xs = Data<T>(x);
    const T* dys = Data<T>(dy);
    T* dxs = Data<T>(dx);
    const int64_t rows = v.pre, c = v.classes;
    if (BoolAttr(kc, "soft_label")) {
      const T* ls = Data<T>(label);
      for (int64_t i = 0; i < rows * c; ++i) dxs[i] = -dys[i / c] * ls[i] / xs[i];
      return nullptr;
    }
    const int64_t ignore = IntAttr(kc, "ignore_index", -100);
    for (int64_t i = 0; i < rows * c; ++i) dxs[i] = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t l = IndexAt(label, i);
      if (l == ignore) continue;
      if (l < 0 || l >= c) return BadLabel(kc, i, l, c);
      dxs[i * c + l] = -dys[i] / xs[i * c + l];
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* SoftmaxWithCrossEntropy(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* logits = Input(kc, "Logits");
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* softmax = Output(kc, "Softmax");
    const FleetTensor* loss = Output(kc, "Loss");
    ClassView v;
    if (FleetStatus* st = MakeView(kc, logits, true, &v)) return st;
    const bool soft = BoolAttr(kc, "soft_label");
    const int64_t ignore = IntAttr(kc, "ignore_index", -100);
    const T* xs = Data<T>(logits);
    T* sm = Data<T>(softmax);
    T* ls = Data<T>(loss);
    const int64_t c = v.classes, post = v.post;
    // Validate hard labels first so no partial output is written for a bad one.
    if (!soft) {
      for (int64_t r = 0; r < v.pre * post; ++r) {
        const int64_t l = IndexAt(label, r);
        if (l != ignore && (l < 0 || l >= c)) return BadLabel(kc, r, l, c);
      }
    }
    ParallelForEach(kc, v.pre * post, c, [&](int64_t r) {
      const int64_t base = (r / post) * c * post + r % post;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, xs[base + j * post]);
      T sum = 0;
      for (int64_t j = 0; j < c; ++j) {
        T e = std::exp(xs[base + j * post] - mx);
        sm[base + j * post] = e;
        sum += e;
      }
      const T log_sum = std::log(sum);
      for (int64_t j = 0; j < c; ++j) sm[base + j * post] /= sum;
      if (soft) {
        const T* lab = Data<T>(label);
        T acc = 0;
        for (int64_t j = 0; j < c; ++j) {
          acc -= lab[base + j * post] * (xs[base + j * post] - mx - log_sum);
        }
        ls[r] = acc;
      } else {
        const int64_t l = IndexAt(label, r);
        ls[r] = l == ignore ? T(0) : -(xs[base + l * post] - mx - log_sum);
      }
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* SoftmaxWithCrossEntropyGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* softmax = Input(kc, "Softmax");
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* dloss = Input(kc, "Loss@GRAD");
    const FleetTensor* dx = Output(kc, "Logits@GRAD");
    if (dx == nullptr) return nullptr;
    ClassView v;
    if (FleetStatus* st = MakeView(kc, softmax, true, &v)) return st;
    const bool soft = BoolAttr(kc, "soft_label");
    const int64_t ignore = IntAttr(kc, "ignore_index", -100);
    const T* sm = Data<T>(softmax);
    const T* dl = Data<T>(dloss);
    T* dxs = Data<T>(dx);
    const int64_t c = v.classes, post = v.post;
    if (!soft) {
      for (int64_t r = 0; r < v.pre * post; ++r) {
        const int64_t l = IndexAt(label, r);
        if (l != ignore && (l < 0 || l >= c)) return BadLabel(kc, r, l, c);
      }
    }
    ParallelForEach(kc, v.pre * post, c, [&](int64_t r) {
      const int64_t base = (r / post) * c * post + r % post;
      if (soft) {
        const T* lab = Data<T>(label);
        for (int64_t j = 0; j < c; ++j) {
          const int64_t k = base + j * post;
          dxs[k] = (sm[k] - lab[k]) * dl[r];
        }
        return;
      }
      const int64_t l = IndexAt(label, r);
      if (l == ignore) {
        for (int64_t j = 0; j < c; ++j) dxs[base + j * post] = 0;
        return;
      }
      for (int64_t j = 0; j < c; ++j) {
        const int64_t k = base + j * post;
        dxs[k] = (sm[k] - (j == l ? T(1) : T(0))) * dl[r];
      }
    });
    return nullptr;
  });
}

}  // namespace

void AddNnLossKernels(KernelList& list) {
  Add(list, "cross_entropy", FLEET_DTYPE_FLOAT32, CrossEntropy<float>);
  Add(list, "cross_entropy", FLEET_DTYPE_FLOAT64, CrossEntropy<double>);
  Add(list, "cross_entropy_grad", FLEET_DTYPE_FLOAT32, CrossEntropyGrad<float>);
  Add(list, "cross_entropy_grad", FLEET_DTYPE_FLOAT64, CrossEntropyGrad<double>);
  Add(list, "softmax_with_cross_entropy", FLEET_DTYPE_FLOAT32, SoftmaxWithCrossEntropy<float>);
  Add(list, "softmax_with_cross_entropy", FLEET_DTYPE_FLOAT64, SoftmaxWithCrossEntropy<double>);
  Add(list, "softmax_with_cross_entropy_grad", FLEET_DTYPE_FLOAT32,
      SoftmaxWithCrossEntropyGrad<float>);
  Add(list, "softmax_with_cross_entropy_grad", FLEET_DTYPE_FLOAT64,
      SoftmaxWithCrossEntropyGrad<double>);
}

}  // namespace fleet_cpu
