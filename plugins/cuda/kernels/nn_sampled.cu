// CUDA kernels of hierarchical_sigmoid and nce (+ grads), with the CPU plugin's semantics
// (plugins/cpu/kernels/nn_sampled_kernels.cc); the per-row arithmetic, the tree codes and the
// negative sampler are the CPU's own functions (plugins/common/sampled_loss_plan.h), so nce
// draws the CPU's negatives for the same key.
//
// Determinism: one thread per batch row for the forward and the input gradient; the weight and
// bias gradients use one thread per (row of W, column), which walks the batch in order and adds
// the contributions that land on its row in the CPU's order; no float atomics.
//
// Labels outside their range are reported through the scratch flag (nn_groups.h) by the
// forward kernels; the grad kernels, which run after a checked forward, skip them.
#include <cmath>
#include <new>
#include <vector>

#include "kernels/nn_groups.h"
#include "sampled_loss_plan.h"

namespace fleet_cuda {
namespace {

using namespace nn;
namespace fk = fleet::kernel;

FleetStatus* OutOfRange(const FleetKernelContext* kc, const char* slot, int64_t pos, int64_t v,
                        int64_t limit) {
  return InvalidArgument(OpName(kc) + ": " + slot + "[" + std::to_string(pos) + "] = " +
                         std::to_string(v) + " is outside [0, " + std::to_string(limit) + ")");
}

FleetStatus* Expect(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                    int32_t dtype, int64_t numel) {
  return RequireSized(kc, t, slot, dtype, numel);
}

FleetStatus* ExpectRank(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                        int32_t ndim) {
  if (FleetStatus* st = Require(kc, t, slot)) return st;
  if (t->ndim != ndim) {
    return InvalidArgument(OpName(kc) + ": " + slot + " must have " + std::to_string(ndim) +
                           " dims, got " + std::to_string(t->ndim));
  }
  return nullptr;
}

// ---- hierarchical_sigmoid -------------------------------------------------------------------

struct HsView {
  int64_t n = 0, dim = 0, num_classes = 0;
  int width = 0;
};

template <typename T>
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
  if (v->num_classes < 2 || w->dims[0] != v->num_classes - 1 || w->dims[1] != v->dim ||
      x->dtype != DtypeOf<T>() || w->dtype != DtypeOf<T>()) {
    return InvalidArgument(OpName(kc) + ": X [N, D] and W [num_classes - 1, D] of one dtype");
  }
  v->width = fk::HsigmoidCodeWidth(v->num_classes);
  if (FleetStatus* st = Expect(kc, Input(kc, "Label"), "Label", FLEET_DTYPE_INT64, v->n)) {
    return st;
  }
  if (const FleetTensor* b = Input(kc, "Bias")) {
    if (FleetStatus* st = Expect(kc, b, "Bias", DtypeOf<T>(), v->num_classes - 1)) return st;
  }
  return nullptr;
}

template <typename T>
__global__ void HsForwardKernel(const T* x, const T* w, const T* bias, const int64_t* label,
                                int64_t n, int64_t dim, int64_t num_classes, int width, T* out,
                                T* pre, unsigned long long* flag) {
  FLEET_CUDA_LOOP(i, n) {
    const int64_t l = label[i];
    if (l < 0 || l >= num_classes) {
      NoteBad(flag, i);
      out[i] = NaN<T>();
      for (int j = 0; j < width; ++j) pre[i * width + j] = NaN<T>();
      continue;
    }
    out[i] = fk::HsigmoidForwardRow(x + i * dim, w, bias, dim, l, num_classes, width,
                                    pre + i * width);
  }
}

template <typename T>
FleetStatus* Hsigmoid(void*, const FleetKernelContext* kc, void*) {
  HsView v;
  if (FleetStatus* st = ViewHsigmoid<T>(kc, &v)) return st;
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* out = Output(kc, "Out");
  const FleetTensor* pre = Output(kc, "PreOut");
  if (FleetStatus* st = Expect(kc, out, "Out", DtypeOf<T>(), v.n)) return st;
  if (FleetStatus* st = Expect(kc, pre, "PreOut", DtypeOf<T>(), v.n * v.width)) return st;
  const FleetTensor* b = Input(kc, "Bias");
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    if (v.n > 0) {
      HsForwardKernel<T><<<Blocks(v.n), kThreads, 0, s->native>>>(
          Data<const T>(Input(kc, "X")), Data<const T>(Input(kc, "W")),
          b != nullptr ? Data<const T>(b) : nullptr, Data<const int64_t>(label), v.n, v.dim,
          v.num_classes, v.width, Data<T>(out), Data<T>(pre), flag);
    }
    // Paddle names W itself as W_Out; a distinct W_Out gets a copy of W.
    const FleetTensor* w = Input(kc, "W");
    const FleetTensor* wo = Output(kc, "W_Out");
    if (wo != nullptr && wo->data != w->data) {
      if (FleetStatus* st = Expect(kc, wo, "W_Out", DtypeOf<T>(), Numel(w))) return st;
      if (FleetStatus* st = CudaStatus(
              cudaMemcpyAsync(wo->data, w->data, static_cast<size_t>(Numel(w)) * sizeof(T),
                              cudaMemcpyDeviceToDevice, s->native),
              OpName(kc) + ": copying W to W_Out")) {
        return st;
      }
    }
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, label, &pos, &value)) return st;
    return pos >= 0 ? OutOfRange(kc, "Label", pos, value, v.num_classes) : nullptr;
  });
}

template <typename T>
__global__ void HsGradXKernel(const T* w, const int64_t* label, const T* pre, const T* dout,
                              int64_t n, int64_t dim, int64_t num_classes, int width, T* dx) {
  FLEET_CUDA_LOOP(i, n) {
    T* row = dx + i * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] = T(0);
    const int64_t l = label[i];
    if (l < 0 || l >= num_classes) continue;
    const uint64_t leaf = fk::HsigmoidLeaf(l, num_classes);
    const int length = fk::HsigmoidPathLength(leaf);
    for (int j = 0; j < length; ++j) {
      const T g = fk::HsigmoidPreGrad(pre[i * width + j], fk::HsigmoidBit(leaf, j), dout[i]);
      const T* wr = w + fk::HsigmoidNode(leaf, j) * dim;
      for (int64_t d = 0; d < dim; ++d) row[d] += g * wr[d];
    }
  }
}

// One thread per (node, column); column `dim` of a node is its bias (x = 1).
template <typename T>
__global__ void HsGradWKernel(const T* x, const int64_t* label, const T* pre, const T* dout,
                              int64_t n, int64_t dim, int64_t num_classes, int width, T* dw,
                              T* db) {
  const int64_t cols = dim + 1;
  FLEET_CUDA_LOOP(e, (num_classes - 1) * cols) {
    const int64_t node = e / cols;
    const int64_t d = e - node * cols;
    T* target = d < dim ? (dw != nullptr ? dw + node * dim + d : nullptr)
                        : (db != nullptr ? db + node : nullptr);
    if (target == nullptr) continue;
    T acc = T(0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t l = label[i];
      if (l < 0 || l >= num_classes) continue;
      const uint64_t leaf = fk::HsigmoidLeaf(l, num_classes);
      const int j = fk::HsigmoidPositionOf(leaf, node);
      if (j < 0) continue;
      const T g = fk::HsigmoidPreGrad(pre[i * width + j], fk::HsigmoidBit(leaf, j), dout[i]);
      acc += d < dim ? g * x[i * dim + d] : g;
    }
    *target = acc;
  }
}

template <typename T>
FleetStatus* HsigmoidGrad(void*, const FleetKernelContext* kc, void*) {
  HsView v;
  if (FleetStatus* st = ViewHsigmoid<T>(kc, &v)) return st;
  const FleetTensor* pre = Input(kc, "PreOut");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (FleetStatus* st = Expect(kc, pre, "PreOut", DtypeOf<T>(), v.n * v.width)) return st;
  if (FleetStatus* st = Expect(kc, dout, "Out@GRAD", DtypeOf<T>(), v.n)) return st;
  const FleetTensor* dx = Output(kc, "X@GRAD");
  const FleetTensor* dw = Output(kc, "W@GRAD");
  const FleetTensor* db = Output(kc, "Bias@GRAD");
  if (dx != nullptr) {
    if (FleetStatus* st = Expect(kc, dx, "X@GRAD", DtypeOf<T>(), v.n * v.dim)) return st;
  }
  if (dw != nullptr) {
    if (FleetStatus* st = Expect(kc, dw, "W@GRAD", DtypeOf<T>(), (v.num_classes - 1) * v.dim)) {
      return st;
    }
  }
  if (db != nullptr) {
    if (FleetStatus* st = Expect(kc, db, "Bias@GRAD", DtypeOf<T>(), v.num_classes - 1)) return st;
  }
  const int64_t* label = Data<const int64_t>(Input(kc, "Label"));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (dx != nullptr && v.n > 0) {
      HsGradXKernel<T><<<Blocks(v.n), kThreads, 0, s->native>>>(
          Data<const T>(Input(kc, "W")), label, Data<const T>(pre), Data<const T>(dout), v.n,
          v.dim, v.num_classes, v.width, Data<T>(dx));
    }
    if (dw != nullptr || db != nullptr) {
      HsGradWKernel<T><<<Blocks((v.num_classes - 1) * (v.dim + 1)), kThreads, 0, s->native>>>(
          Data<const T>(Input(kc, "X")), label, Data<const T>(pre), Data<const T>(dout), v.n,
          v.dim, v.num_classes, v.width, dw != nullptr ? Data<T>(dw) : nullptr,
          db != nullptr ? Data<T>(db) : nullptr);
    }
    return nullptr;
  });
}

// ---- nce ------------------------------------------------------------------------------------

struct NceView {
  int64_t n = 0, dim = 0, num_true = 0, num_neg = 0, cols = 0, total = 0;
  int sampler = 0;
};

template <typename T>
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
  if (v->total < 2 || w->dims[0] != v->total || w->dims[1] != v->dim || label->dims[0] != v->n ||
      x->dtype != DtypeOf<T>() || w->dtype != DtypeOf<T>() || label->dtype != FLEET_DTYPE_INT64) {
    return InvalidArgument(OpName(kc) + ": Weight must be [num_total_classes, D] of Input's "
                           "dtype and Label int64 [N, num_true]");
  }
  if (const FleetTensor* b = Input(kc, "Bias")) {
    if (FleetStatus* st = Expect(kc, b, "Bias", DtypeOf<T>(), v->total)) return st;
  }
  if (const FleetTensor* sw = Input(kc, "SampleWeight")) {
    if (FleetStatus* st = Expect(kc, sw, "SampleWeight", DtypeOf<T>(), v->n)) return st;
  }
  return nullptr;
}

// The custom negatives, copied to the device from here at each launch.
struct NceState {
  std::vector<int64_t> custom;
};

size_t CustomBytes(size_t count) { return AlignScratch(count * sizeof(int64_t)); }

FleetStatus* NcePrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  auto* s = new (std::nothrow) NceState();
  if (s == nullptr) return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
  s->custom = IntsAttr(kc, "custom_neg_classes");
  *scratch = kFlagBytes + CustomBytes(s->custom.size());
  *state = s;
  return nullptr;
}

__global__ void NceLabelsKernel(const int64_t* label, const int64_t* custom, int64_t n,
                                int64_t num_true, int64_t num_neg, int64_t total, int sampler,
                                uint64_t key, int64_t* labels, unsigned long long* flag) {
  const int64_t cols = num_true + num_neg;
  FLEET_CUDA_LOOP(e, n * cols) {
    const int64_t i = e / cols;
    const int64_t k = e - i * cols;
    if (k < num_true) {
      const int64_t l = label[i * num_true + k];
      if (l < 0 || l >= total) NoteBad(flag, i * num_true + k);
      labels[e] = l;
    } else {
      const int64_t m = k - num_true;
      labels[e] = custom != nullptr ? custom[m] : fk::NceSample(sampler, key, i * num_neg + m, total);
    }
  }
}

template <typename T>
__global__ void NceForwardKernel(const T* x, const T* w, const T* bias, const T* sw,
                                 const int64_t* labels, int64_t n, int64_t dim, int64_t cols,
                                 int64_t num_true, int sampler, int64_t total, int64_t num_neg,
                                 T* logits, T* cost) {
  FLEET_CUDA_LOOP(i, n) {
    const int64_t* row = labels + i * cols;
    bool ok = true;
    for (int64_t k = 0; k < cols; ++k) ok = ok && row[k] >= 0 && row[k] < total;
    if (!ok) {
      for (int64_t k = 0; k < cols; ++k) logits[i * cols + k] = NaN<T>();
      cost[i] = NaN<T>();
      continue;
    }
    const T c = fk::NceForwardRow(x + i * dim, w, bias, dim, row, cols, num_true, sampler, total,
                                  num_neg, logits + i * cols);
    cost[i] = sw != nullptr ? c * sw[i] : c;
  }
}

template <typename T>
FleetStatus* Nce(void*, const FleetKernelContext* kc, void* state) {
  NceView v;
  if (FleetStatus* st = ViewNce<T>(kc, &v)) return st;
  const auto* ns = static_cast<const NceState*>(state);
  if (ns == nullptr) return InvalidArgument(OpName(kc) + ": launched without prepare");
  const std::vector<int64_t>& custom = ns->custom;
  if (!custom.empty() && static_cast<int64_t>(custom.size()) != v.num_neg) {
    return InvalidArgument(OpName(kc) + ": custom_neg_classes must hold num_neg_samples classes");
  }
  for (size_t k = 0; k < custom.size(); ++k) {
    if (custom[k] < 0 || custom[k] >= v.total) {
      return OutOfRange(kc, "custom_neg_classes", static_cast<int64_t>(k), custom[k], v.total);
    }
  }
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* labels = Output(kc, "SampleLabels");
  const FleetTensor* logits = Output(kc, "SampleLogits");
  const FleetTensor* cost = Output(kc, "Cost");
  if (FleetStatus* st = Expect(kc, labels, "SampleLabels", FLEET_DTYPE_INT64, v.n * v.cols)) {
    return st;
  }
  if (FleetStatus* st = Expect(kc, logits, "SampleLogits", DtypeOf<T>(), v.n * v.cols)) return st;
  if (FleetStatus* st = Expect(kc, cost, "Cost", DtypeOf<T>(), v.n)) return st;
  uint64_t step = 0;
  if (FLEET_HAS_FIELD(kc, FleetKernelContext, launch_index)) step = kc->launch_index;
  const uint64_t key = fk::NceKey(IntAttr(kc, "seed", 0), kc->seed, step);
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  int64_t* custom_dev =
      custom.empty() ? nullptr
                     : reinterpret_cast<int64_t*>(static_cast<char*>(kc->scratch) + kFlagBytes);
  const FleetTensor* b = Input(kc, "Bias");
  const FleetTensor* sw = Input(kc, "SampleWeight");
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    if (custom_dev != nullptr) {
      if (FleetStatus* st = CudaStatus(
              cudaMemcpyAsync(custom_dev, custom.data(), custom.size() * sizeof(int64_t),
                              cudaMemcpyHostToDevice, s->native),
              OpName(kc) + ": copying custom_neg_classes")) {
        return st;
      }
    }
    if (v.n > 0) {
      NceLabelsKernel<<<Blocks(v.n * v.cols), kThreads, 0, s->native>>>(
          Data<const int64_t>(label), custom_dev, v.n, v.num_true, v.num_neg, v.total, v.sampler,
          key, Data<int64_t>(labels), flag);
      NceForwardKernel<T><<<Blocks(v.n), kThreads, 0, s->native>>>(
          Data<const T>(Input(kc, "Input")), Data<const T>(Input(kc, "Weight")),
          b != nullptr ? Data<const T>(b) : nullptr, sw != nullptr ? Data<const T>(sw) : nullptr,
          Data<const int64_t>(labels), v.n, v.dim, v.cols, v.num_true, v.sampler, v.total,
          v.num_neg, Data<T>(logits), Data<T>(cost));
    }
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, label, &pos, &value)) return st;
    return pos >= 0 ? OutOfRange(kc, "Label", pos, value, v.total) : nullptr;
  });
}

// Everything a gradient element needs to recompute dCost/dlogit of sample (i, k).
template <typename T>
struct NceGradArgs {
  const T* o;
  const int64_t* labels;
  const T* dcost;
  const T* sw;
  int64_t n, cols, num_true, num_neg, total;
  int sampler;
};

template <typename T>
__device__ T NceGradAt(const NceGradArgs<T>& a, int64_t i, int64_t k) {
  const int64_t e = i * a.cols + k;
  const T scale = (a.sw != nullptr ? a.sw[i] : T(1)) * a.dcost[i];
  return fk::NceLogitGrad(a.o[e], fk::NceNoise<T>(a.sampler, a.labels[e], a.total, a.num_neg),
                          k < a.num_true, scale);
}

template <typename T>
__global__ void NceGradXKernel(NceGradArgs<T> a, const T* w, int64_t dim, T* dx) {
  FLEET_CUDA_LOOP(i, a.n) {
    T* row = dx + i * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] = T(0);
    for (int64_t k = 0; k < a.cols; ++k) {
      const int64_t l = a.labels[i * a.cols + k];
      if (l < 0 || l >= a.total) continue;
      const T g = NceGradAt(a, i, k);
      const T* wr = w + l * dim;
      for (int64_t d = 0; d < dim; ++d) row[d] += g * wr[d];
    }
  }
}

// One thread per (class, column); column `dim` of a class is its bias (x = 1).
template <typename T>
__global__ void NceGradWKernel(NceGradArgs<T> a, const T* x, int64_t dim, T* dw, T* db) {
  const int64_t width = dim + 1;
  FLEET_CUDA_LOOP(e, a.total * width) {
    const int64_t c = e / width;
    const int64_t d = e - c * width;
    T* target = d < dim ? (dw != nullptr ? dw + c * dim + d : nullptr)
                        : (db != nullptr ? db + c : nullptr);
    if (target == nullptr) continue;
    T acc = T(0);
    for (int64_t i = 0; i < a.n; ++i) {
      for (int64_t k = 0; k < a.cols; ++k) {
        if (a.labels[i * a.cols + k] != c) continue;
        const T g = NceGradAt(a, i, k);
        acc += d < dim ? g * x[i * dim + d] : g;
      }
    }
    *target = acc;
  }
}

template <typename T>
FleetStatus* NceGrad(void*, const FleetKernelContext* kc, void*) {
  NceView v;
  if (FleetStatus* st = ViewNce<T>(kc, &v)) return st;
  const FleetTensor* logits = Input(kc, "SampleLogits");
  const FleetTensor* labels = Input(kc, "SampleLabels");
  const FleetTensor* dcost = Input(kc, "Cost@GRAD");
  if (FleetStatus* st = Expect(kc, logits, "SampleLogits", DtypeOf<T>(), v.n * v.cols)) return st;
  if (FleetStatus* st = Expect(kc, labels, "SampleLabels", FLEET_DTYPE_INT64, v.n * v.cols)) {
    return st;
  }
  if (FleetStatus* st = Expect(kc, dcost, "Cost@GRAD", DtypeOf<T>(), v.n)) return st;
  const FleetTensor* dx = Output(kc, "Input@GRAD");
  const FleetTensor* dw = Output(kc, "Weight@GRAD");
  const FleetTensor* db = Output(kc, "Bias@GRAD");
  if (dx != nullptr) {
    if (FleetStatus* st = Expect(kc, dx, "Input@GRAD", DtypeOf<T>(), v.n * v.dim)) return st;
  }
  if (dw != nullptr) {
    if (FleetStatus* st = Expect(kc, dw, "Weight@GRAD", DtypeOf<T>(), v.total * v.dim)) return st;
  }
  if (db != nullptr) {
    if (FleetStatus* st = Expect(kc, db, "Bias@GRAD", DtypeOf<T>(), v.total)) return st;
  }
  const FleetTensor* sw = Input(kc, "SampleWeight");
  NceGradArgs<T> a{Data<const T>(logits), Data<const int64_t>(labels), Data<const T>(dcost),
                   sw != nullptr ? Data<const T>(sw) : nullptr,
                   v.n, v.cols, v.num_true, v.num_neg, v.total, v.sampler};
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (dx != nullptr && v.n > 0) {
      NceGradXKernel<T><<<Blocks(v.n), kThreads, 0, s->native>>>(
          a, Data<const T>(Input(kc, "Weight")), v.dim, Data<T>(dx));
    }
    if (dw != nullptr || db != nullptr) {
      NceGradWKernel<T><<<Blocks(v.total * (v.dim + 1)), kThreads, 0, s->native>>>(
          a, Data<const T>(Input(kc, "Input")), v.dim, dw != nullptr ? Data<T>(dw) : nullptr,
          db != nullptr ? Data<T>(db) : nullptr);
    }
    return nullptr;
  });
}

}  // namespace

void AddNnSampledKernels(KernelList& list) {
  Add(list, "hierarchical_sigmoid", FLEET_DTYPE_FLOAT32, Hsigmoid<float>, PrepareFlag);
  Add(list, "hierarchical_sigmoid", FLEET_DTYPE_FLOAT64, Hsigmoid<double>, PrepareFlag);
  Add(list, "hierarchical_sigmoid_grad", FLEET_DTYPE_FLOAT32, HsigmoidGrad<float>);
  Add(list, "hierarchical_sigmoid_grad", FLEET_DTYPE_FLOAT64, HsigmoidGrad<double>);
  Add(list, "nce", FLEET_DTYPE_FLOAT32, Nce<float>, NcePrepare, DeleteState<NceState>);
  Add(list, "nce", FLEET_DTYPE_FLOAT64, Nce<double>, NcePrepare, DeleteState<NceState>);
  Add(list, "nce_grad", FLEET_DTYPE_FLOAT32, NceGrad<float>);
  Add(list, "nce_grad", FLEET_DTYPE_FLOAT64, NceGrad<double>);
}

}  // namespace fleet_cuda
