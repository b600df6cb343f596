// dropout, lookup_table_v2, accuracy and top_k_v2 kernels (+ grads).
#include <algorithm>
#include <memory>
#include <new>
#include <vector>

#include "kernels/nn_kernels.h"
#include "random_draws.h"

namespace fleet_cpu {
namespace {

// ---- dropout ------------------------------------------------------------------------------

// A counter-based generator: element i's draw depends only on (key, i), so masks are identical
// whatever the thread count, and no generator state is shared between threads. The key and the
// draw come from plugins/common/random_draws.h, shared with the CUDA plugin so the masks agree.

struct DropoutState {
  uint64_t launches = 0;  // advances the stream each step when the seed is not fixed
};

FleetStatus* DropoutPrepare(void*, const FleetKernelContext*, void** state, size_t*) {
  *state = new (std::nothrow) DropoutState();
  return *state != nullptr ? nullptr : Error(FLEET_CODE_INTERNAL, "dropout: out of memory");
}

bool Upscale(const FleetKernelContext* kc) {
  return StringAttr(kc, "dropout_implementation") == "upscale_in_train";
}

template <typename T>
FleetStatus* Dropout(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* xt = Input(kc, "X");
    const FleetTensor* outt = Output(kc, "Out");
    const FleetTensor* maskt = Output(kc, "Mask");
    const int64_t n = Numel(xt);
    const T* x = Data<T>(xt);
    T* out = Data<T>(outt);
    uint8_t* mask = maskt != nullptr ? Data<uint8_t>(maskt) : nullptr;
    const double p = FloatAttr(kc, "dropout_prob", 0.5);
    const bool upscale = Upscale(kc);
    if (BoolAttr(kc, "is_test")) {
      const T factor = upscale ? T(1) : static_cast<T>(1.0 - p);
      for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
      if (mask != nullptr) std::fill(mask, mask + n, uint8_t{1});
      return nullptr;
    }
    // Seed: the Seed input, else the fixed attribute (same mask every step, as Paddle), else
    // the op's seed from the host combined with this instance's launch count.
    uint64_t key;
    if (const FleetTensor* seed = Input(kc, "Seed")) {
      key = fleet::kernel::DropoutKeyOfSeed(static_cast<uint64_t>(IndexAt(seed, 0)));
    } else if (BoolAttr(kc, "fix_seed")) {
      key = fleet::kernel::DropoutKeyOfSeed(static_cast<uint64_t>(IntAttr(kc, "seed")));
    } else {
      // Hosts of ABI 1.1 count launches across a resume; older ones leave the count to us.
      uint64_t step = 0;
      if (FLEET_HAS_FIELD(kc, FleetKernelContext, launch_index)) {
        step = kc->launch_index;
      } else if (auto* s = static_cast<DropoutState*>(state)) {
        step = s->launches++;
      }
      key = fleet::kernel::DropoutKeyOfStep(kc->seed, step);
    }
    const T keep_prob = static_cast<T>(1.0 - p);
    ParallelForEach(kc, n, 1, [&](int64_t i) {
      const bool keep = fleet::kernel::DropoutUniform(key, i) >= p;
      if (mask != nullptr) mask[i] = keep ? 1 : 0;
      if (!keep || keep_prob == T(0)) out[i] = 0;
      else out[i] = upscale ? x[i] / keep_prob : x[i];
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* DropoutGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dyt = Input(kc, "Out@GRAD");
    const FleetTensor* maskt = Input(kc, "Mask");
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    if (dxt == nullptr) return nullptr;
    if (FleetStatus* st = Require(kc, maskt, "Mask")) return st;
    const int64_t n = Numel(dyt);
    const T* dy = Data<T>(dyt);
    const uint8_t* mask = Data<uint8_t>(maskt);
    T* dx = Data<T>(dxt);
    const double p = FloatAttr(kc, "dropout_prob", 0.5);
    const bool upscale = Upscale(kc);
    const T keep_prob = static_cast<T>(1.0 - p);
    if (BoolAttr(kc, "is_test")) {
      const T factor = upscale ? T(1) : keep_prob;
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * factor;
      return nullptr;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (mask[i] == 0 || keep_prob == T(0)) dx[i] = 0;
      else dx[i] = upscale ? dy[i] / keep_prob : dy[i];
    }
    return nullptr;
  });
}

// ---- lookup_table_v2 ----------------------------------------------------------------------

FleetStatus* BadId(const FleetKernelContext* kc, int64_t pos, int64_t id, int64_t vocab) {
  return InvalidArgument(OpName(kc) + ": Ids[" + std::to_string(pos) + "] = " +
                         std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(vocab) + ")");
}

template <typename T>
FleetStatus* Lookup(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* wt = Input(kc, "W");
    const FleetTensor* ids = Input(kc, "Ids");
    if (FleetStatus* st = ExpectRank(kc, wt, "W", 2)) return st;
    const int64_t vocab = wt->dims[0], dim = wt->dims[1], n = Numel(ids);
    const int64_t pad = IntAttr(kc, "padding_idx", -1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = IndexAt(ids, i);
      if (id != pad && (id < 0 || id >= vocab)) return BadId(kc, i, id, vocab);
    }
    const T* w = Data<T>(wt);
    T* out = Data<T>(Output(kc, "Out"));
    ParallelForEach(kc, n, dim, [&](int64_t i) {
      const int64_t id = IndexAt(ids, i);
      T* row = out + i * dim;
      if (id == pad) std::fill(row, row + dim, T(0));
      else std::copy(w + id * dim, w + (id + 1) * dim, row);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* LookupGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* wt = Input(kc, "W");
    const FleetTensor* ids = Input(kc, "Ids");
    const FleetTensor* dwt = Output(kc, "W@GRAD");
    if (dwt == nullptr) return nullptr;
    if (FleetStatus* st = ExpectRank(kc, wt, "W", 2)) return st;
    const int64_t vocab = wt->dims[0], dim = wt->dims[1], n = Numel(ids);
    const int64_t pad = IntAttr(kc, "padding_idx", -1);
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    T* dw = Data<T>(dwt);
    std::fill(dw, dw + vocab * dim, T(0));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = IndexAt(ids, i);
      if (id == pad) continue;
      if (id < 0 || id >= vocab) return BadId(kc, i, id, vocab);
      T* row = dw + id * dim;
      const T* src = dout + i * dim;
      for (int64_t j = 0; j < dim; ++j) row[j] += src[j];
    }
    return nullptr;
  });
}

// ---- accuracy -----------------------------------------------------------------------------

FleetStatus* Accuracy(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* idx = Input(kc, "Indices");
    const FleetTensor* label = Input(kc, "Label");
    if (FleetStatus* st = ExpectRank(kc, idx, "Indices", 2)) return st;
    if (FleetStatus* st = Require(kc, label, "Label")) return st;
    const int64_t rows = idx->dims[0], k = idx->dims[1];
    if (Numel(label) != rows) {
      return InvalidArgument(OpName(kc) + ": Label must have one entry per row of Indices");
    }
    int64_t correct = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t l = IndexAt(label, i);
      for (int64_t j = 0; j < k; ++j) {
        if (IndexAt(idx, i * k + j) == l) {
          ++correct;
          break;
        }
      }
    }
    Data<float>(Output(kc, "Accuracy"))[0] =
        rows > 0 ? static_cast<float>(correct) / static_cast<float>(rows) : 0.0f;
    if (const FleetTensor* c = Output(kc, "Correct")) {
      Data<int32_t>(c)[0] = static_cast<int32_t>(correct);
    }
    if (const FleetTensor* t = Output(kc, "Total")) Data<int32_t>(t)[0] = static_cast<int32_t>(rows);
    return nullptr;
  });
}

// ---- top_k_v2 -----------------------------------------------------------------------------

struct TopKView {
  int64_t pre = 1, len = 1, post = 1, k = 1;
};

FleetStatus* ViewTopK(const FleetKernelContext* kc, const FleetTensor* x, TopKView* v) {
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  int64_t axis = IntAttr(kc, "axis", -1);
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim) return InvalidArgument(OpName(kc) + ": axis out of range");
  for (int64_t i = 0; i < x->ndim; ++i) {
    if (i < axis) v->pre *= x->dims[i];
    if (i > axis) v->post *= x->dims[i];
  }
  v->len = x->dims[axis];
  v->k = IntAttr(kc, "k", 1);
  if (v->k < 1 || v->k > v->len) return InvalidArgument(OpName(kc) + ": k out of range");
  return nullptr;
}

struct TopKState {
  std::vector<int64_t> order;  // one row of candidate indices, sized in prepare
};

FleetStatus* TopKPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    TopKView v;
    if (FleetStatus* st = ViewTopK(kc, Input(kc, "X"), &v)) return st;
    auto s = std::make_unique<TopKState>();
    s->order.resize(static_cast<size_t>(v.len));
    *state = s.release();
    return nullptr;
  });
}

template <typename T>
FleetStatus* TopK(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    TopKView v;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = ViewTopK(kc, xt, &v)) return st;
    auto* s = static_cast<TopKState*>(state);
    if (s == nullptr || static_cast<int64_t>(s->order.size()) != v.len) {
      return InvalidArgument(OpName(kc) + ": launched without prepare");
    }
    const T* x = Data<T>(xt);
    T* out = Data<T>(Output(kc, "Out"));
    int64_t* indices = Data<int64_t>(Output(kc, "Indices"));
    const bool largest = BoolAttr(kc, "largest", true);
    std::vector<int64_t>& order = s->order;
    for (int64_t p = 0; p < v.pre; ++p) {
      for (int64_t q = 0; q < v.post; ++q) {
        const T* row = x + p * v.len * v.post + q;
        for (int64_t j = 0; j < v.len; ++j) order[j] = j;
        // Ties keep the smaller index first.
        auto before = [&](int64_t a, int64_t b) {
          const T va = row[a * v.post], vb = row[b * v.post];
          if (va != vb) return largest ? va > vb : va < vb;
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + v.k, order.end(), before);
        for (int64_t j = 0; j < v.k; ++j) {
          const int64_t o = p * v.k * v.post + j * v.post + q;
          out[o] = row[order[j] * v.post];
          indices[o] = order[j];
        }
      }
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* TopKGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    TopKView v;
    const FleetTensor* xt = Input(kc, "X");
    if (FleetStatus* st = ViewTopK(kc, xt, &v)) return st;
    const FleetTensor* dxt = Output(kc, "X@GRAD");
    if (dxt == nullptr) return nullptr;
    const int64_t* indices = Data<int64_t>(Input(kc, "Indices"));
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    T* dx = Data<T>(dxt);
    std::fill(dx, dx + Numel(xt), T(0));
    for (int64_t p = 0; p < v.pre; ++p) {
      for (int64_t j = 0; j < v.k; ++j) {
        for (int64_t q = 0; q < v.post; ++q) {
          const int64_t o = p * v.k * v.post + j * v.post + q;
          const int64_t id = indices[o];
          if (id < 0 || id >= v.len) {
            return InvalidArgument(OpName(kc) + ": Indices hold " + std::to_string(id) +
                                   ", outside [0, " + std::to_string(v.len) + ")");
          }
          dx[p * v.len * v.post + id * v.post + q] += dout[o];
        }
      }
    }
    return nullptr;
  });
}

}  // namespace

void AddNnMiscKernels(KernelList& list) {
  Add(list, "dropout", FLEET_DTYPE_FLOAT32, Dropout<float>, DropoutPrepare,
      DeleteState<DropoutState>);
  Add(list, "dropout", FLEET_DTYPE_FLOAT64, Dropout<double>, DropoutPrepare,
      DeleteState<DropoutState>);
  Add(list, "dropout_grad", FLEET_DTYPE_FLOAT32, DropoutGrad<float>);
  Add(list, "dropout_grad", FLEET_DTYPE_FLOAT64, DropoutGrad<double>);
  Add(list, "lookup_table_v2", FLEET_DTYPE_FLOAT32, Lookup<float>);
  Add(list, "lookup_table_v2", FLEET_DTYPE_FLOAT64, Lookup<double>);
  Add(list, "lookup_table_v2_grad", FLEET_DTYPE_FLOAT32, LookupGrad<float>);
  Add(list, "lookup_table_v2_grad", FLEET_DTYPE_FLOAT64, LookupGrad<double>);
  // lookup_table (v1) differs from v2 only in the shape function.
  Add(list, "lookup_table", FLEET_DTYPE_FLOAT32, Lookup<float>);
  Add(list, "lookup_table", FLEET_DTYPE_FLOAT64, Lookup<double>);
  Add(list, "lookup_table_grad", FLEET_DTYPE_FLOAT32, LookupGrad<float>);
  Add(list, "lookup_table_grad", FLEET_DTYPE_FLOAT64, LookupGrad<double>);
  Add(list, "accuracy", FLEET_DTYPE_FLOAT32, Accuracy);
  Add(list, "accuracy", FLEET_DTYPE_FLOAT64, Accuracy);
  Add(list, "top_k_v2", FLEET_DTYPE_FLOAT32, TopK<float>, TopKPrepare, DeleteState<TopKState>);
  Add(list, "top_k_v2", FLEET_DTYPE_FLOAT64, TopK<double>, TopKPrepare, DeleteState<TopKState>);
  Add(list, "top_k_v2", FLEET_DTYPE_INT64, TopK<int64_t>, TopKPrepare, DeleteState<TopKState>);
  Add(list, "top_k_v2_grad", FLEET_DTYPE_FLOAT32, TopKGrad<float>);
  Add(list, "top_k_v2_grad", FLEET_DTYPE_FLOAT64, TopKGrad<double>);
}

}  // namespace fleet_cpu
