// hierarchical_sigmoid and nce kernels (+ grads). The per-row arithmetic, the tree codes and the
// negative sampler are plugins/common/sampled_loss_plan.h, shared with the CUDA plugin.
//
// Weight and bias gradients gather many rows into one: they are summed batch row by batch row
// (and path position / sample by sample within a row), the order the CUDA kernels use too.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/nn_kernels.h"
#include "sampled_loss_plan.h"

namespace fleet_cpu {
namespace {

namespace fk = fleet::kernel;

FleetStatus* OutOfRange(const FleetKernelContext* kc, const char* slot, int64_t pos, int64_t v,
                        int64_t limit) {
  return InvalidArgument(OpName(kc) + ": " + slot + "[" + std::to_string(pos) + "] = " +
                         std::to_string(v) + " is outside [0, " + std::to_string(limit) + ")");
}

// `t` must be present with `numel` elements; the error names the slot.
FleetStatus* Expect(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                    int64_t numel) {
  if (FleetStatus* st = Require(kc, t, slot)) return st;
  if (Numel(t) != numel) {
    return InvalidArgument(OpName(kc) + ": " + slot + " must hold " + std::to_string(numel) +
                           " elements, got " + std::to_string(Numel(t)));
  }
  return nullptr;
}

// ---- hierarchical_sigmoid -------------------------------------------------------------------

struct HsView {
  int64_t n = 0, dim = 0, num_classes = 0;
  int width = 0;
};

FleetStatus* ViewHsigmoid(const FleetKernelContext* kc, HsView* v) {
  if (Input(kc, "PathTable") != nullptr || Input(kc, "PathCode") != nullptr) {
    return InvalidArgument(OpName(kc) + ": a custom tree (PathTable/PathCode) is not supported");
  }
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* w = Input(kc, "W");
  if (FleetStatus* st = ExpectRank(kc, x, "X", 2)) return st;
  if (FleetStatus* st = ExpectRank(kc, w, "W", 2)) return st;
  v->n = x->dims[0];
  v->dim = x->dims[1];
  v->num_classes = IntAttr(kc, "num_classes", 2);
  if (v->num_classes < 2 || w->dims[0] != v->num_classes - 1 || w->dims[1] != v->dim) {
    return InvalidArgument(OpName(kc) + ": W must be [num_classes - 1, D]");
  }
  v->width = fk::HsigmoidCodeWidth(v->num_classes);
  const FleetTensor* label = Input(kc, "Label");
  if (FleetStatus* st = Expect(kc, label, "Label", v->n)) return st;
  if (const FleetTensor* b = Input(kc, "Bias")) {
    if (FleetStatus* st = Expect(kc, b, "Bias", v->num_classes - 1)) return st;
  }
  for (int64_t i = 0; i < v->n; ++i) {
    const int64_t l = IndexAt(label, i);
    if (l < 0 || l >= v->num_classes) return OutOfRange(kc, "Label", i, l, v->num_classes);
  }
  return nullptr;
}

template <typename T>
FleetStatus* Hsigmoid(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    HsView v;
    if (FleetStatus* st = ViewHsigmoid(kc, &v)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    const T* w = Data<T>(Input(kc, "W"));
    const FleetTensor* bt = Input(kc, "Bias");
    const T* bias = bt != nullptr ? Data<T>(bt) : nullptr;
    const FleetTensor* label = Input(kc, "Label");
    T* out = Data<T>(Output(kc, "Out"));
    T* pre = Data<T>(Output(kc, "PreOut"));
    UseThreads(kc);
    ParallelForEach(kc, v.n, v.dim, [&](int64_t i) {
      out[i] = fk::HsigmoidForwardRow(x + i * v.dim, w, bias, v.dim, IndexAt(label, i),
                                      v.num_classes, v.width, pre + i * v.width);
    });
    // Paddle names W itself as W_Out; a distinct W_Out gets a copy of W.
    if (const FleetTensor* wo = Output(kc, "W_Out"); wo != nullptr && wo->data != w) {
      std::copy(w, w + (v.num_classes - 1) * v.dim, Data<T>(wo));
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* HsigmoidGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    HsView v;
    if (FleetStatus* st = ViewHsigmoid(kc, &v)) return st;
    const FleetTensor* pret = Input(kc, "PreOut");
    const FleetTensor* doutt = Input(kc, "Out@GRAD");
    if (FleetStatus* st = Expect(kc, pret, "PreOut", v.n * v.width)) return st;
    if (FleetStatus* st = Expect(kc, doutt, "Out@GRAD", v.n)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    const T* w = Data<T>(Input(kc, "W"));
    const T* pre = Data<T>(pret);
    const T* dout = Data<T>(doutt);
    const FleetTensor* label = Input(kc, "Label");
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    const FleetTensor* dwt = Output(kc, "W@GRAD");
    const FleetTensor* dbt = Output(kc, "Bias@GRAD");
    const int64_t dim = v.dim;
    auto grad_at = [&](int64_t i, uint64_t leaf, int j) {
      return fk::HsigmoidPreGrad(pre[i * v.width + j], fk::HsigmoidBit(leaf, j), dout[i]);
    };
    UseThreads(kc);
    if (dxt != nullptr) {
      T* dx = Data<T>(dxt);
      ParallelForEach(kc, v.n, dim, [&](int64_t i) {
        T* row = dx + i * dim;
        std::fill(row, row + dim, T(0));
        const uint64_t leaf = fk::HsigmoidLeaf(IndexAt(label, i), v.num_classes);
        const int length = fk::HsigmoidPathLength(leaf);
        for (int j = 0; j < length; ++j) {
          const T g = grad_at(i, leaf, j);
          const T* wr = w + fk::HsigmoidNode(leaf, j) * dim;
          for (int64_t d = 0; d < dim; ++d) row[d] += g * wr[d];
        }
      });
    }
    T* dw = dwt != nullptr ? Data<T>(dwt) : nullptr;
    T* db = dbt != nullptr ? Data<T>(dbt) : nullptr;
    if (dw != nullptr) std::fill(dw, dw + (v.num_classes - 1) * dim, T(0));
    if (db != nullptr) std::fill(db, db + (v.num_classes - 1), T(0));
    if (dw == nullptr && db == nullptr) return nullptr;
    for (int64_t i = 0; i < v.n; ++i) {
      const uint64_t leaf = fk::HsigmoidLeaf(IndexAt(label, i), v.num_classes);
      const int length = fk::HsigmoidPathLength(leaf);
      const T* xr = x + i * dim;
      for (int j = 0; j < length; ++j) {
        const T g = grad_at(i, leaf, j);
        const int64_t node = fk::HsigmoidNode(leaf, j);
        if (db != nullptr) db[node] += g;
        if (dw != nullptr) {
          T* wr = dw + node * dim;
          for (int64_t d = 0; d < dim; ++d) wr[d] += g * xr[d];
        }
      }
    }
    return nullptr;
  });
}

// ---- nce ------------------------------------------------------------------------------------

struct NceView {
  int64_t n = 0, dim = 0, num_true = 0, num_neg = 0, cols = 0, total = 0;
  int sampler = 0;
};

FleetStatus* ViewNce(const FleetKernelContext* kc, NceView* v) {
  const FleetTensor* x = Input(kc, "Input");
  const FleetTensor* w = Input(kc, "Weight");
  const FleetTensor* label = Input(kc, "Label");
  if (FleetStatus* st = ExpectRank(kc, x, "Input", 2)) return st;
  if (FleetStatus* st = ExpectRank(kc, w, "Weight", 2)) return st;
  if (FleetStatus* st = ExpectRank(kc, label, "Label", 2)) return st;
  v->n = x->dims[0];
  v->dim = x->dims[1];
  v->num_true = label->dims[1];
  v->num_neg = IntAttr(kc, "num_neg_samples", 10);
  v->cols = v->num_true + v->num_neg;
  v->total = IntAttr(kc, "num_total_classes", 0);
  v->sampler = static_cast<int>(IntAttr(kc, "sampler", 0));
  if (v->sampler != fk::kNceUniform && v->sampler != fk::kNceLogUniform) {
    return InvalidArgument(OpName(kc) + ": only samplers 0 (uniform) and 1 (log_uniform) are "
                           "supported, got " + std::to_string(v->sampler));
  }
  if (v->total < 2 || w->dims[0] != v->total || w->dims[1] != v->dim || label->dims[0] != v->n) {
    return InvalidArgument(OpName(kc) + ": Weight must be [num_total_classes, D] and Label "
                           "[N, num_true]");
  }
  if (const FleetTensor* b = Input(kc, "Bias")) {
    if (FleetStatus* st = Expect(kc, b, "Bias", v->total)) return st;
  }
  if (const FleetTensor* sw = Input(kc, "SampleWeight")) {
    if (FleetStatus* st = Expect(kc, sw, "SampleWeight", v->n)) return st;
  }
  return nullptr;
}

template <typename T>
FleetStatus* Nce(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    NceView v;
    if (FleetStatus* st = ViewNce(kc, &v)) return st;
    const std::vector<int64_t> custom = IntsAttr(kc, "custom_neg_classes");
    if (!custom.empty() && static_cast<int64_t>(custom.size()) != v.num_neg) {
      return InvalidArgument(OpName(kc) + ": custom_neg_classes must hold num_neg_samples classes");
    }
    for (size_t k = 0; k < custom.size(); ++k) {
      if (custom[k] < 0 || custom[k] >= v.total) {
        return OutOfRange(kc, "custom_neg_classes", static_cast<int64_t>(k), custom[k], v.total);
      }
    }
    const FleetTensor* label = Input(kc, "Label");
    for (int64_t i = 0; i < v.n * v.num_true; ++i) {
      const int64_t l = IndexAt(label, i);
      if (l < 0 || l >= v.total) return OutOfRange(kc, "Label", i, l, v.total);
    }
    uint64_t step = 0;
    if (FLEET_HAS_FIELD(kc, FleetKernelContext, launch_index)) step = kc->launch_index;
    const uint64_t key = fk::NceKey(IntAttr(kc, "seed", 0), kc->seed, step);
    int64_t* labels = Data<int64_t>(Output(kc, "SampleLabels"));
    for (int64_t i = 0; i < v.n; ++i) {
      int64_t* row = labels + i * v.cols;
      for (int64_t t = 0; t < v.num_true; ++t) row[t] = IndexAt(label, i * v.num_true + t);
      for (int64_t k = 0; k < v.num_neg; ++k) {
        row[v.num_true + k] = custom.empty()
                                  ? fk::NceSample(v.sampler, key, i * v.num_neg + k, v.total)
                                  : custom[static_cast<size_t>(k)];
      }
    }
    const T* x = Data<T>(Input(kc, "Input"));
    const T* w = Data<T>(Input(kc, "Weight"));
    const FleetTensor* bt = Input(kc, "Bias");
    const T* bias = bt != nullptr ? Data<T>(bt) : nullptr;
    const FleetTensor* swt = Input(kc, "SampleWeight");
    const T* sw = swt != nullptr ? Data<T>(swt) : nullptr;
    T* logits = Data<T>(Output(kc, "SampleLogits"));
    T* cost = Data<T>(Output(kc, "Cost"));
    UseThreads(kc);
    ParallelForEach(kc, v.n, v.dim * v.cols, [&](int64_t i) {
      const T c = fk::NceForwardRow(x + i * v.dim, w, bias, v.dim, labels + i * v.cols, v.cols,
                                    v.num_true, v.sampler, v.total, v.num_neg,
                                    logits + i * v.cols);
      cost[i] = sw != nullptr ? c * sw[i] : c;
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* NceGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    NceView v;
    if (FleetStatus* st = ViewNce(kc, &v)) return st;
    const FleetTensor* logitst = Input(kc, "SampleLogits");
    const FleetTensor* labelst = Input(kc, "SampleLabels");
    const FleetTensor* dcostt = Input(kc, "Cost@GRAD");
    if (FleetStatus* st = Expect(kc, logitst, "SampleLogits", v.n * v.cols)) return st;
    if (FleetStatus* st = Expect(kc, labelst, "SampleLabels", v.n * v.cols)) return st;
    if (FleetStatus* st = Expect(kc, dcostt, "Cost@GRAD", v.n)) return st;
    const int64_t* labels = Data<int64_t>(labelst);
    for (int64_t e = 0; e < v.n * v.cols; ++e) {
      if (labels[e] < 0 || labels[e] >= v.total) {
        return OutOfRange(kc, "SampleLabels", e, labels[e], v.total);
      }
    }
    const T* x = Data<T>(Input(kc, "Input"));
    const T* w = Data<T>(Input(kc, "Weight"));
    const T* o = Data<T>(logitst);
    const T* dcost = Data<T>(dcostt);
    const FleetTensor* swt = Input(kc, "SampleWeight");
    const T* sw = swt != nullptr ? Data<T>(swt) : nullptr;
    const int64_t dim = v.dim;
    auto grad_at = [&](int64_t i, int64_t k) {
      const int64_t e = i * v.cols + k;
      const T scale = (sw != nullptr ? sw[i] : T(1)) * dcost[i];
      return fk::NceLogitGrad(o[e], fk::NceNoise<T>(v.sampler, labels[e], v.total, v.num_neg),
                              k < v.num_true, scale);
    };
    UseThreads(kc);
    if (const FleetTensor* dxt = Output(kc, "Input@GRAD")) {
      T* dx = Data<T>(dxt);
      ParallelForEach(kc, v.n, dim * v.cols, [&](int64_t i) {
        T* row = dx + i * dim;
        std::fill(row, row + dim, T(0));
        for (int64_t k = 0; k < v.cols; ++k) {
          const T g = grad_at(i, k);
          const T* wr = w + labels[i * v.cols + k] * dim;
          for (int64_t d = 0; d < dim; ++d) row[d] += g * wr[d];
        }
      });
    }
    const FleetTensor* dwt = Output(kc, "Weight@GRAD");
    const FleetTensor* dbt = Output(kc, "Bias@GRAD");
    T* dw = dwt != nullptr ? Data<T>(dwt) : nullptr;
    T* db = dbt != nullptr ? Data<T>(dbt) : nullptr;
    if (dw != nullptr) std::fill(dw, dw + v.total * dim, T(0));
    if (db != nullptr) std::fill(db, db + v.total, T(0));
    if (dw == nullptr && db == nullptr) return nullptr;
    for (int64_t i = 0; i < v.n; ++i) {
      const T* xr = x + i * dim;
      for (int64_t k = 0; k < v.cols; ++k) {
        const T g = grad_at(i, k);
        const int64_t l = labels[i * v.cols + k];
        if (db != nullptr) db[l] += g;
        if (dw != nullptr) {
          T* wr = dw + l * dim;
          for (int64_t d = 0; d < dim; ++d) wr[d] += g * xr[d];
        }
      }
    }
    return nullptr;
  });
}

}  // namespace

void AddNnSampledKernels(KernelList& list) {
  Add(list, "hierarchical_sigmoid", FLEET_DTYPE_FLOAT32, Hsigmoid<float>);
  Add(list, "hierarchical_sigmoid", FLEET_DTYPE_FLOAT64, Hsigmoid<double>);
  Add(list, "hierarchical_sigmoid_grad", FLEET_DTYPE_FLOAT32, HsigmoidGrad<float>);
  Add(list, "hierarchical_sigmoid_grad", FLEET_DTYPE_FLOAT64, HsigmoidGrad<double>);
  Add(list, "nce", FLEET_DTYPE_FLOAT32, Nce<float>);
  Add(list, "nce", FLEET_DTYPE_FLOAT64, Nce<double>);
  Add(list, "nce_grad", FLEET_DTYPE_FLOAT32, NceGrad<float>);
  Add(list, "nce_grad", FLEET_DTYPE_FLOAT64, NceGrad<double>);
}

}  // namespace fleet_cpu
