// CUDA kernels of dropout, lookup_table_v2, accuracy and top_k_v2 (+ grads), with the CPU
// plugin's semantics (plugins/cpu/kernels/nn_misc_kernels.cc).
//
// Determinism: dropout draws from the CPU's counter-based generator, so a mask is the CPU's
// mask bit for bit; gradients that gather several contributions into one element
// (lookup_table_v2_grad, top_k_v2_grad) add them in the CPU's order from one thread, never
// with float atomics.

#include <cmath>
#include <new>
#include <type_traits>

#include "kernels/key_sort.h"
#include "kernels/nn_groups.h"
#include "random_draws.h"

namespace fleet_cuda {
namespace {

using namespace nn;

// ---- dropout ------------------------------------------------------------------------------

// Element i's draw depends only on (key, i); the key derivation and the draw are the CPU's own
// functions (plugins/common/random_draws.h), so a mask is the CPU's mask bit for bit.

struct DropoutState {
  uint64_t launches = 0;  // advances the stream each step when the host gives no launch_index
};

FleetStatus* DropoutPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  *state = new (std::nothrow) DropoutState();
  return *state != nullptr ? nullptr : Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
}

bool Upscale(const FleetKernelContext* kc) {
  return StringAttr(kc, "dropout_implementation") == "upscale_in_train";
}

// `seed` (a device tensor, or NULL) replaces `key` with the key of Seed[0], read here on the
// device.
template <typename T>
__global__ void DropoutKernel(const T* x, T* out, uint8_t* mask, int64_t n, uint64_t key,
                              const void* seed, bool seed32, double p, bool upscale,
                              T keep_prob) {
  if (seed != nullptr) {
    key = fleet::kernel::DropoutKeyOfSeed(static_cast<uint64_t>(LoadIndex(seed, seed32, 0)));
  }
  FLEET_CUDA_LOOP(i, n) {
    const bool keep = fleet::kernel::DropoutUniform(key, i) >= p;
    if (mask != nullptr) mask[i] = keep ? 1 : 0;
    if (!keep || keep_prob == T(0)) {
      out[i] = T(0);
    } else {
      out[i] = upscale ? x[i] / keep_prob : x[i];
    }
  }
}

template <typename T>
__global__ void DropoutInferKernel(const T* x, T* out, uint8_t* mask, int64_t n, T factor) {
  FLEET_CUDA_LOOP(i, n) {
    out[i] = x[i] * factor;
    if (mask != nullptr) mask[i] = 1;
  }
}

template <typename T>
FleetStatus* Dropout(void*, const FleetKernelContext* kc, void* state) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  const FleetTensor* mask = Output(kc, "Mask");
  if (FleetStatus* st = Require(kc, x, "X")) return st;
  const int64_t n = Numel(x);
  if (FleetStatus* st = RequireSized(kc, out, "Out", DtypeOf<T>(), n)) return st;
  if (mask != nullptr) {
    if (FleetStatus* st = RequireSized(kc, mask, "Mask", FLEET_DTYPE_UINT8, n)) return st;
  }
  uint8_t* mask_data = mask != nullptr ? Data<uint8_t>(mask) : nullptr;
  const double p = FloatAttr(kc, "dropout_prob", 0.5);
  const bool upscale = Upscale(kc);
  if (BoolAttr(kc, "is_test")) {
    const T factor = upscale ? T(1) : static_cast<T>(1.0 - p);
    return Run(kc, [&](FleetStream* s) -> FleetStatus* {
      DropoutInferKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x), Data<T>(out),
                                                                   mask_data, n, factor);
      return nullptr;
    });
  }
  // Seed: the Seed input, else the fixed attribute (same mask every step, as Paddle), else the
  // op's seed from the host combined with the launch index (the CPU's order of precedence).
  const FleetTensor* seed = Input(kc, "Seed");
  uint64_t key = 0;
  if (seed != nullptr) {
    if (FleetStatus* st = RequireIndex(kc, seed, "Seed")) return st;
    if (Numel(seed) < 1) return InvalidArgument(OpName(kc) + ": Seed must hold one value");
  } else if (BoolAttr(kc, "fix_seed")) {
    key = fleet::kernel::DropoutKeyOfSeed(static_cast<uint64_t>(IntAttr(kc, "seed")));
  } else {
    // Hosts of ABI 1.1 count launches across a resume; older ones leave the count to us.
    uint64_t step = 0;
    if (FLEET_HAS_FIELD(kc, FleetKernelContext, launch_index)) {
      step = kc->launch_index;
    } else if (auto* ds = static_cast<DropoutState*>(state)) {
      step = ds->launches++;
    }
    key = fleet::kernel::DropoutKeyOfStep(kc->seed, step);
  }
  const T keep_prob = static_cast<T>(1.0 - p);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    DropoutKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(x), Data<T>(out), mask_data, n, key,
        seed != nullptr ? seed->data : nullptr, seed != nullptr && seed->dtype == FLEET_DTYPE_INT32,
        p, upscale, keep_prob);
    return nullptr;
  });
}

template <typename T>
__global__ void DropoutGradKernel(const T* dy, const uint8_t* mask, T* dx, int64_t n,
                                  bool upscale, T keep_prob) {
  FLEET_CUDA_LOOP(i, n) {
    if (mask[i] == 0 || keep_prob == T(0)) {
      dx[i] = T(0);
    } else {
      dx[i] = upscale ? dy[i] / keep_prob : dy[i];
    }
  }
}

template <typename T>
__global__ void ScaleKernel(const T* x, T* out, int64_t n, T factor) {
  FLEET_CUDA_LOOP(i, n) { out[i] = x[i] * factor; }
}

template <typename T>
FleetStatus* DropoutGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* dy = Input(kc, "Out@GRAD");
  const FleetTensor* mask = Input(kc, "Mask");
  if (FleetStatus* st = Require(kc, dy, "Out@GRAD")) return st;
  const int64_t n = Numel(dy);
  if (FleetStatus* st = RequireSized(kc, mask, "Mask", FLEET_DTYPE_UINT8, n)) return st;
  if (FleetStatus* st = RequireSized(kc, dx, "X@GRAD", DtypeOf<T>(), n)) return st;
  const double p = FloatAttr(kc, "dropout_prob", 0.5);
  const bool upscale = Upscale(kc);
  const T keep_prob = static_cast<T>(1.0 - p);
  const bool is_test = BoolAttr(kc, "is_test");
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (is_test) {
      const T factor = upscale ? T(1) : keep_prob;
      ScaleKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(dy), Data<T>(dx), n,
                                                             factor);
      return nullptr;
    }
    DropoutGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(dy), Data<const uint8_t>(mask), Data<T>(dx), n, upscale, keep_prob);
    return nullptr;
  });
}

// ---- lookup_table_v2 ----------------------------------------------------------------------

FleetStatus* BadId(const FleetKernelContext* kc, int64_t pos, int64_t id, int64_t vocab) {
  return InvalidArgument(OpName(kc) + ": Ids[" + std::to_string(pos) + "] = " +
                         std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(vocab) + ")");
}

// W must be [vocab, dim] of T, Ids integer.
template <typename T>
FleetStatus* CheckLookup(const FleetKernelContext* kc, const FleetTensor* w,
                         const FleetTensor* ids) {
  if (FleetStatus* st = Require(kc, w, "W")) return st;
  if (w->ndim != 2) {
    return InvalidArgument(OpName(kc) + ": W must have 2 dims [vocab, dim], got " +
                           std::to_string(w->ndim));
  }
  if (w->dtype != DtypeOf<T>()) {
    return InvalidArgument(OpName(kc) + ": W has dtype " + std::to_string(w->dtype) +
                           ", expected " + std::to_string(DtypeOf<T>()));
  }
  return RequireIndex(kc, ids, "Ids");
}

template <typename T>
__global__ void LookupKernel(const T* w, const void* ids, bool ids32, T* out, int64_t n,
                             int64_t vocab, int64_t dim, int64_t pad, unsigned long long* flag) {
  FLEET_CUDA_LOOP(e, n * dim) {
    const int64_t i = e / dim;
    const int64_t j = e - i * dim;
    const int64_t id = LoadIndex(ids, ids32, i);
    if (id == pad) {
      out[e] = T(0);
    } else if (id < 0 || id >= vocab) {
      if (j == 0) NoteBad(flag, i);
      out[e] = NaN<T>();
    } else {
      out[e] = w[id * dim + j];
    }
  }
}

template <typename T>
FleetStatus* Lookup(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* w = Input(kc, "W");
  const FleetTensor* ids = Input(kc, "Ids");
  const FleetTensor* out = Output(kc, "Out");
  if (FleetStatus* st = CheckLookup<T>(kc, w, ids)) return st;
  const int64_t vocab = w->dims[0], dim = w->dims[1], n = Numel(ids);
  if (FleetStatus* st = RequireSized(kc, out, "Out", DtypeOf<T>(), n * dim)) return st;
  const int64_t pad = IntAttr(kc, "padding_idx", -1);
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    LookupKernel<T><<<Blocks(n * dim), kThreads, 0, s->native>>>(
        Data<const T>(w), ids->data, ids->dtype == FLEET_DTYPE_INT32, Data<T>(out), n, vocab,
        dim, pad, flag);
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, ids, &pos, &value)) return st;
    return pos >= 0 ? BadId(kc, pos, value, vocab) : nullptr;
  });
}

// lookup_table_v2_grad: the positions of Ids are sorted by id with a stable radix sort, so each
// id's positions form a run in increasing order; one thread per (run, column) adds the run's
// Out@GRAD rows in that order, which is the CPU's order, and writes the sum once. Padding and
// bad ids get the key `vocab`, which sorts last and is skipped.
//
// Scratch: the key sort's (key_sort.h).
template <typename T>
FleetStatus* LookupGradPrepare(void*, const FleetKernelContext* kc, void** state,
                               size_t* scratch_bytes) {
  if (Output(kc, "W@GRAD") == nullptr) return nullptr;
  const FleetTensor* w = Input(kc, "W");
  const FleetTensor* ids = Input(kc, "Ids");
  if (FleetStatus* st = CheckLookup<T>(kc, w, ids)) return st;
  auto* s = new (std::nothrow) SortPlan();
  if (s == nullptr) return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
  if (FleetStatus* st = PlanSort(kc, Numel(ids), w->dims[0], s)) {
    delete s;
    return st;
  }
  *scratch_bytes = SortScratch(*s);
  *state = s;
  return nullptr;
}

__global__ void LookupSortKeysKernel(const void* ids, bool ids32, int64_t n, int64_t vocab,
                                     int64_t pad, uint32_t* keys, uint32_t* positions,
                                     unsigned long long* flag) {
  FLEET_CUDA_LOOP(i, n) {
    const int64_t id = LoadIndex(ids, ids32, i);
    bool skip = id == pad;
    if (!skip && (id < 0 || id >= vocab)) {
      NoteBad(flag, i);
      skip = true;
    }
    keys[i] = static_cast<uint32_t>(skip ? vocab : id);
    positions[i] = static_cast<uint32_t>(i);
  }
}

template <typename T>
__global__ void LookupGradKernel(const T* dout, const uint32_t* keys, const uint32_t* positions,
                                 T* dw, int64_t n, int64_t dim, int64_t vocab) {
  FLEET_CUDA_LOOP(e, n * dim) {
    const int64_t s = e / dim;
    const int64_t j = e - s * dim;
    const uint32_t key = keys[s];
    if (key >= vocab) continue;
    if (s > 0 && keys[s - 1] == key) continue;  // not the first of its run
    T acc = T(0);
    for (int64_t t = s; t < n && keys[t] == key; ++t) {
      acc += dout[static_cast<int64_t>(positions[t]) * dim + j];
    }
    dw[static_cast<int64_t>(key) * dim + j] = acc;
  }
}

template <typename T>
FleetStatus* LookupGrad(void*, const FleetKernelContext* kc, void* state) {
  const FleetTensor* dw = Output(kc, "W@GRAD");
  if (dw == nullptr) return nullptr;
  const FleetTensor* w = Input(kc, "W");
  const FleetTensor* ids = Input(kc, "Ids");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (FleetStatus* st = CheckLookup<T>(kc, w, ids)) return st;
  const int64_t vocab = w->dims[0], dim = w->dims[1], n = Numel(ids);
  if (FleetStatus* st = RequireSized(kc, dout, "Out@GRAD", DtypeOf<T>(), n * dim)) return st;
  if (FleetStatus* st = RequireSized(kc, dw, "W@GRAD", DtypeOf<T>(), vocab * dim)) return st;
  const auto* plan = static_cast<const SortPlan*>(state);
  if (plan == nullptr || plan->n != n || plan->rows != vocab) {
    return InvalidArgument(OpName(kc) + ": launched with other shapes than it was prepared for");
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  const SortBuffers b = BuffersOf(kc, *plan);
  const int64_t pad = IntAttr(kc, "padding_idx", -1);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    const size_t dw_bytes = static_cast<size_t>(vocab * dim) * sizeof(T);
    if (dw_bytes > 0) {
      if (FleetStatus* st = CudaStatus(cudaMemsetAsync(dw->data, 0, dw_bytes, s->native),
                                       OpName(kc) + ": clearing W@GRAD")) {
        return st;
      }
    }
    if (n > 0) {
      LookupSortKeysKernel<<<Blocks(n), kThreads, 0, s->native>>>(
          ids->data, ids->dtype == FLEET_DTYPE_INT32, n, vocab, pad, b.keys_in, b.pos_in, flag);
      if (FleetStatus* st = SortKeys(kc, *plan, b, s)) return st;
      LookupGradKernel<T><<<Blocks(n * dim), kThreads, 0, s->native>>>(
          Data<const T>(dout), b.keys_out, b.pos_out, Data<T>(dw), n, dim, vocab);
    }
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, ids, &pos, &value)) return st;
    return pos >= 0 ? BadId(kc, pos, value, vocab) : nullptr;
  });
}

// ---- accuracy -----------------------------------------------------------------------------

// One block: correct counts are integers, so the tree sum is exact in any order.
__global__ void AccuracyKernel(const void* indices, bool indices32, const void* label,
                               bool label32, int64_t rows, int64_t k, float* accuracy,
                               int32_t* correct, int32_t* total) {
  __shared__ long long part[kThreads];
  long long mine = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    const int64_t l = LoadIndex(label, label32, i);
    for (int64_t j = 0; j < k; ++j) {
      if (LoadIndex(indices, indices32, i * k + j) == l) {
        ++mine;
        break;
      }
    }
  }
  part[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const long long c = part[0];
    accuracy[0] = rows > 0 ? static_cast<float>(c) / static_cast<float>(rows) : 0.0f;
    if (correct != nullptr) correct[0] = static_cast<int32_t>(c);
    if (total != nullptr) total[0] = static_cast<int32_t>(rows);
  }
}

FleetStatus* Accuracy(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* indices = Input(kc, "Indices");
  const FleetTensor* label = Input(kc, "Label");
  const FleetTensor* accuracy = Output(kc, "Accuracy");
  const FleetTensor* correct = Output(kc, "Correct");
  const FleetTensor* total = Output(kc, "Total");
  if (FleetStatus* st = RequireIndex(kc, indices, "Indices")) return st;
  if (indices->ndim != 2) {
    return InvalidArgument(OpName(kc) + ": Indices must have 2 dims [N, k], got " +
                           std::to_string(indices->ndim));
  }
  const int64_t rows = indices->dims[0], k = indices->dims[1];
  if (FleetStatus* st = RequireIndex(kc, label, "Label")) return st;
  if (Numel(label) != rows) {
    return InvalidArgument(OpName(kc) + ": Label must have one entry per row of Indices (" +
                           std::to_string(rows) + "), got " + std::to_string(Numel(label)));
  }
  if (FleetStatus* st = RequireSized(kc, accuracy, "Accuracy", FLEET_DTYPE_FLOAT32, 1)) return st;
  if (correct != nullptr) {
    if (FleetStatus* st = RequireSized(kc, correct, "Correct", FLEET_DTYPE_INT32, 1)) return st;
  }
  if (total != nullptr) {
    if (FleetStatus* st = RequireSized(kc, total, "Total", FLEET_DTYPE_INT32, 1)) return st;
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    AccuracyKernel<<<1, kThreads, 0, s->native>>>(
        indices->data, indices->dtype == FLEET_DTYPE_INT32, label->data,
        label->dtype == FLEET_DTYPE_INT32, rows, k, Data<float>(accuracy),
        correct != nullptr ? Data<int32_t>(correct) : nullptr,
        total != nullptr ? Data<int32_t>(total) : nullptr);
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
  if (axis < 0 || axis >= x->ndim) {
    return InvalidArgument(OpName(kc) + ": axis " + std::to_string(IntAttr(kc, "axis", -1)) +
                           " is out of range for rank " + std::to_string(x->ndim));
  }
  for (int64_t i = 0; i < x->ndim; ++i) {
    if (i < axis) v->pre *= x->dims[i];
    if (i > axis) v->post *= x->dims[i];
  }
  v->len = x->dims[axis];
  v->k = IntAttr(kc, "k", 1);
  if (v->k < 1 || v->k > v->len) {
    return InvalidArgument(OpName(kc) + ": k = " + std::to_string(v->k) + " must be in [1, " +
                           std::to_string(v->len) + "]");
  }
  return nullptr;
}

// The CPU's order (larger, or smaller, value first; ties by smaller index), made total for NaN
// by putting NaN after every number, as NumPy's sort does.
template <typename T>
__device__ inline bool Before(T va, int64_t ia, T vb, int64_t ib, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = isnan(va), nb = isnan(vb);
    if (na || nb) return na && nb ? ia < ib : nb;
  }
  if (va != vb) return largest ? va > vb : va < vb;
  return ia < ib;
}

// One warp per row (p, q). Pass j picks the first element in the order among those after the
// pick of pass j - 1: a selection whose result is exact, so it matches the CPU's sort.
template <typename T>
__global__ void TopKKernel(const T* x, T* out, int64_t* indices, int64_t pre, int64_t len,
                           int64_t post, int64_t k, bool largest) {
  const int lane = Lane();
  for (int64_t r = WarpId(); r < pre * post; r += WarpCount()) {
    const int64_t p = r / post;
    const int64_t q = r - p * post;
    const T* row = x + p * len * post + q;
    T prev_v = T(0);
    int64_t prev_i = -1;
    for (int64_t j = 0; j < k; ++j) {
      T best_v = T(0);
      int64_t best_i = -1;
      for (int64_t t = lane; t < len; t += 32) {
        const T v = row[t * post];
        if (prev_i >= 0 && !Before(prev_v, prev_i, v, t, largest)) continue;
        if (best_i < 0 || Before(v, t, best_v, best_i, largest)) {
          best_v = v;
          best_i = t;
        }
      }
      // The order is strict and total, so both lanes of a pair keep the same candidate.
      for (int m = 16; m > 0; m >>= 1) {
        const T other_v = __shfl_xor_sync(0xffffffffu, best_v, m);
        const int64_t other_i = __shfl_xor_sync(0xffffffffu, best_i, m);
        if (other_i >= 0 && (best_i < 0 || Before(other_v, other_i, best_v, best_i, largest))) {
          best_v = other_v;
          best_i = other_i;
        }
      }
      if (lane == 0) {
        const int64_t o = p * k * post + j * post + q;
        out[o] = best_v;
        indices[o] = best_i;
      }
      prev_v = best_v;
      prev_i = best_i;
    }
  }
}

template <typename T>
FleetStatus* TopK(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  const FleetTensor* indices = Output(kc, "Indices");
  TopKView v;
  if (FleetStatus* st = ViewTopK(kc, x, &v)) return st;
  const int64_t n_out = v.pre * v.k * v.post;
  if (FleetStatus* st = RequireSized(kc, out, "Out", DtypeOf<T>(), n_out)) return st;
  if (FleetStatus* st = RequireSized(kc, indices, "Indices", FLEET_DTYPE_INT64, n_out)) return st;
  const bool largest = BoolAttr(kc, "largest", true);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    TopKKernel<T><<<Blocks(v.pre * v.post * 32), kThreads, 0, s->native>>>(
        Data<const T>(x), Data<T>(out), Data<int64_t>(indices), v.pre, v.len, v.post, v.k,
        largest);
    return nullptr;
  });
}

// One thread per row (p, q) adds its k gradients in the CPU's order.
template <typename T>
__global__ void TopKGradKernel(const int64_t* indices, const T* dout, T* dx, int64_t pre,
                               int64_t len, int64_t post, int64_t k, unsigned long long* flag) {
  FLEET_CUDA_LOOP(r, pre * post) {
    const int64_t p = r / post;
    const int64_t q = r - p * post;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t o = p * k * post + j * post + q;
      const int64_t id = indices[o];
      if (id < 0 || id >= len) {
        NoteBad(flag, o);
        continue;
      }
      dx[p * len * post + id * post + q] += dout[o];
    }
  }
}

template <typename T>
FleetStatus* TopKGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* indices = Input(kc, "Indices");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  TopKView v;
  if (FleetStatus* st = ViewTopK(kc, x, &v)) return st;
  const int64_t n_out = v.pre * v.k * v.post;
  if (FleetStatus* st = RequireSized(kc, indices, "Indices", FLEET_DTYPE_INT64, n_out)) return st;
  if (FleetStatus* st = RequireSized(kc, dout, "Out@GRAD", DtypeOf<T>(), n_out)) return st;
  if (FleetStatus* st = RequireSized(kc, dx, "X@GRAD", DtypeOf<T>(), Numel(x))) return st;
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    const size_t dx_bytes = static_cast<size_t>(Numel(x)) * sizeof(T);
    if (dx_bytes > 0) {
      if (FleetStatus* st = CudaStatus(cudaMemsetAsync(dx->data, 0, dx_bytes, s->native),
                                       OpName(kc) + ": clearing X@GRAD")) {
        return st;
      }
    }
    TopKGradKernel<T><<<Blocks(v.pre * v.post), kThreads, 0, s->native>>>(
        Data<const int64_t>(indices), Data<const T>(dout), Data<T>(dx), v.pre, v.len, v.post,
        v.k, flag);
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, indices, &pos, &value)) return st;
    if (pos < 0) return nullptr;
    return InvalidArgument(OpName(kc) + ": Indices hold " + std::to_string(value) +
                           ", outside [0, " + std::to_string(v.len) + ")");
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
  Add(list, "lookup_table_v2", FLEET_DTYPE_FLOAT32, Lookup<float>, PrepareFlag);
  Add(list, "lookup_table_v2", FLEET_DTYPE_FLOAT64, Lookup<double>, PrepareFlag);
  Add(list, "lookup_table_v2_grad", FLEET_DTYPE_FLOAT32, LookupGrad<float>,
      LookupGradPrepare<float>, DeleteState<SortPlan>);
  Add(list, "lookup_table_v2_grad", FLEET_DTYPE_FLOAT64, LookupGrad<double>,
      LookupGradPrepare<double>, DeleteState<SortPlan>);
  // lookup_table (v1) differs from v2 only in the shape function.
  Add(list, "lookup_table", FLEET_DTYPE_FLOAT32, Lookup<float>, PrepareFlag);
  Add(list, "lookup_table", FLEET_DTYPE_FLOAT64, Lookup<double>, PrepareFlag);
  Add(list, "lookup_table_grad", FLEET_DTYPE_FLOAT32, LookupGrad<float>,
      LookupGradPrepare<float>, DeleteState<SortPlan>);
  Add(list, "lookup_table_grad", FLEET_DTYPE_FLOAT64, LookupGrad<double>,
      LookupGradPrepare<double>, DeleteState<SortPlan>);
  Add(list, "accuracy", FLEET_DTYPE_FLOAT32, Accuracy);
  Add(list, "accuracy", FLEET_DTYPE_FLOAT64, Accuracy);
  Add(list, "top_k_v2", FLEET_DTYPE_FLOAT32, TopK<float>);
  Add(list, "top_k_v2", FLEET_DTYPE_FLOAT64, TopK<double>);
  Add(list, "top_k_v2", FLEET_DTYPE_INT64, TopK<int64_t>);
  Add(list, "top_k_v2_grad", FLEET_DTYPE_FLOAT32, TopKGrad<float>, PrepareFlag);
  Add(list, "top_k_v2_grad", FLEET_DTYPE_FLOAT64, TopKGrad<double>, PrepareFlag);
}

}  // namespace fleet_cuda
