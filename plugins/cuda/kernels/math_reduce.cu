// sum (of several tensors), mean, reduce_sum, reduce_mean and their grads, with the CPU plugin's
// semantics. Reductions are group sums (math_groups.h) planned at prepare: they add in double in
// a fixed order, so results do not vary from run to run; a long reduction into few outputs is
// split over blocks whose partial sums go to scratch memory and are then added in order.
#include <memory>
#include <string>

#include "kernels/math_groups.h"

namespace fleet_cuda {
namespace math {
namespace {

// A group-sum term that reads one array at offset 0.
template <typename T>
struct LoadTerm {
  const T* x;
  __device__ T operator()(const int64_t* off) const { return x[off[0]]; }
};

// ---- sum ------------------------------------------------------------------------------------

// Inputs a kernel adds in one pass; more are added in further passes onto Out.
constexpr int kSumChunk = 16;

template <typename T>
struct SumChunk {
  const T* in[kSumChunk];
  int count;
};

// Out = in[0] + in[1] + ... (or Out + in[0] + ... with `accumulate`), added in input order as on
// the CPU. A thread reads every input element before it writes Out's, so Out may be an input.
template <typename T>
__global__ void SumKernel(SumChunk<T> c, T* out, int64_t n, bool accumulate) {
  FLEET_CUDA_LOOP(i, n) {
    T acc = accumulate ? out[i] : c.in[0][i];
    for (int k = accumulate ? 0 : 1; k < c.count; ++k) acc += c.in[k][i];
    out[i] = acc;
  }
}

template <typename T>
FleetStatus* SumLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {}, {"Out"})) return e;
    const FleetTensor* out = Output(kc, "Out");
    const size_t count = InputCount(kc, "X");
    const int64_t n = Numel(out);
    size_t aliases = 0;  // inputs that are Out itself (in-place accumulation)
    for (size_t k = 0; k < count; ++k) {
      const FleetTensor* x = Input(kc, "X", k);
      if (x == nullptr || Numel(x) != n) {
        return InvalidArgument("sum: X[" + std::to_string(k) + "] is missing or has " +
                               std::to_string(x != nullptr ? Numel(x) : 0) +
                               " elements, Out has " + std::to_string(n));
      }
      if (n > 0 && x->data == out->data) ++aliases;
    }
    if (n == 0) return nullptr;
    T* os = Data<T>(out);
    if (count == 0) {
      return ZeroAsync(kc, os, static_cast<size_t>(n) * sizeof(T), s->native, "Out");
    }
    // With more inputs than one pass takes, Out is written before the later passes read their
    // inputs, so every input that is Out goes into the first pass.
    if (count > static_cast<size_t>(kSumChunk) && aliases > static_cast<size_t>(kSumChunk)) {
      return Unimplemented("sum: Out is " + std::to_string(aliases) + " of the inputs; at most " +
                           std::to_string(kSumChunk) + " are supported in place");
    }
    SumChunk<T> chunk{};
    bool accumulate = false;
    auto flush = [&]() {
      SumKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(chunk, os, n, accumulate);
      accumulate = true;
      chunk.count = 0;
    };
    auto push = [&](const FleetTensor* x) {
      chunk.in[chunk.count++] = Data<const T>(x);
      if (chunk.count == kSumChunk) flush();
    };
    if (count <= static_cast<size_t>(kSumChunk)) {
      for (size_t k = 0; k < count; ++k) push(Input(kc, "X", k));
    } else {
      for (size_t k = 0; k < count; ++k) {
        if (Input(kc, "X", k)->data == out->data) push(Input(kc, "X", k));
      }
      for (size_t k = 0; k < count; ++k) {
        if (Input(kc, "X", k)->data != out->data) push(Input(kc, "X", k));
      }
    }
    if (chunk.count > 0) flush();
    return nullptr;
  });
}

// ---- mean -----------------------------------------------------------------------------------

// mean is a group sum with no kept dims and every element of X reduced.
struct MeanState {
  int64_t numel = 0;
  GroupPlan g;
  GroupLaunch l;
};

void MakeMeanState(int64_t numel, bool allow_split, MeanState* st) {
  st->numel = numel;
  st->g = GroupPlan();
  AddGroupDim(st->g, /*reduced=*/true, numel, 1);
  st->l = PlanGroupLaunch(st->g, allow_split);
}

FleetStatus* MeanPrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {})) return e;
    auto st = std::make_unique<MeanState>();
    MakeMeanState(Numel(Input(kc, "X")), /*allow_split=*/true, st.get());
    *scratch = st->l.scratch_bytes;
    *state = st.release();
    return nullptr;
  });
}

void MeanRelease(void*, void* state) { delete static_cast<MeanState*>(state); }

template <typename T>
FleetStatus* MeanLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = Numel(x);
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", 1)) return e;
    MeanState local;
    const MeanState* st = static_cast<const MeanState*>(state);
    if (st == nullptr) {
      MakeMeanState(n, /*allow_split=*/false, &local);
      st = &local;
    }
    if (st->numel != n) {
      return InvalidArgument("mean: X has " + std::to_string(n) +
                             " elements, the kernel was prepared for " +
                             std::to_string(st->numel));
    }
    if (FleetStatus* e = CheckScratch(kc, st->l.scratch_bytes)) return e;
    // An empty X has mean 0, as on the CPU (the sum is 0 and is not divided).
    const double divisor = n > 0 ? static_cast<double>(n) : 1.0;
    LaunchGroupSum(st->g, st->l, LoadTerm<T>{Data<const T>(x)}, Data<T>(out), divisor,
                   kc->scratch, s->native);
    return nullptr;
  });
}

template <typename T>
__global__ void MeanGradKernel(const T* g, T* dx, int64_t n, T count) {
  FLEET_CUDA_LOOP(i, n) { dx[i] = g[0] / count; }
}

template <typename T>
FleetStatus* MeanGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (FleetStatus* e = ExpectNumel(kc, dout, "Out@GRAD", 1)) return e;
    const int64_t n = Numel(dx);
    if (n == 0) return nullptr;
    MeanGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(dout), Data<T>(dx), n, static_cast<T>(n));
    return nullptr;
  });
}

// ---- reduce_sum / reduce_mean ---------------------------------------------------------------

// The plan over X's dims: sa walks X (contiguous), sb walks Out (0 along reduced dims); the
// group plan is the same dims split into kept (Out's, in order) and reduced ones.
struct ReduceState {
  StridePlan plan;
  GroupPlan g;
  GroupLaunch l;
  int64_t x_count = 0;
  int64_t out_count = 1;      // elements of Out (the kept dims' product)
  int64_t reduced_count = 1;  // elements folded into each output element
};

FleetStatus* MakeReduceState(const FleetKernelContext* kc, bool allow_split, ReduceState* st) {
  const FleetTensor* x = Input(kc, "X");
  if (x == nullptr) return InvalidArgument(OpName(kc) + ": input X is missing");
  const int rank = x->ndim;
  if (rank > kMaxRank) {
    return InvalidArgument(OpName(kc) + ": X has rank " + std::to_string(rank) + ", more than " +
                           std::to_string(kMaxRank));
  }
  // The attribute is read in place rather than through IntsAttr, which copies it into a vector,
  // because a launch without prepare comes here too.
  const FleetAttr* dim_attr = FindAttr(kc, "dim");
  size_t dim_count = 0;
  const int64_t* dim_values = nullptr;
  if (dim_attr != nullptr && (dim_attr->type == FLEET_ATTR_INTS ||
                              dim_attr->type == FLEET_ATTR_INT64S ||
                              dim_attr->type == FLEET_ATTR_BOOLS)) {
    dim_count = dim_attr->count;
    dim_values = dim_attr->ints;
  }
  bool reduced[kMaxRank] = {};
  if (BoolAttr(kc, "reduce_all", false) || dim_count == 0) {
    for (int i = 0; i < rank; ++i) reduced[i] = true;
  } else {
    for (size_t j = 0; j < dim_count; ++j) {
      const int64_t d = dim_values[j];
      const int64_t k = d < 0 ? d + rank : d;
      if (k < 0 || k >= rank) {
        return InvalidArgument(OpName(kc) + ": dim " + std::to_string(d) +
                               " is out of range for X " + DimsText(x));
      }
      reduced[k] = true;
    }
  }
  StridePlan& p = st->plan;
  p.rank = rank;
  int64_t xs = 1, os = 1;
  st->reduced_count = 1;
  for (int i = rank - 1; i >= 0; --i) {
    p.dims[i] = x->dims[i];
    p.sa[i] = xs;
    xs *= x->dims[i];
    if (reduced[i]) {
      p.sb[i] = 0;
      st->reduced_count *= x->dims[i];
    } else {
      p.sb[i] = os;
      os *= x->dims[i];
    }
  }
  st->x_count = xs;
  st->out_count = os;
  // With an empty X the strides above collapse to 0 and the plans mean nothing; launches
  // handle that case without them.
  if (xs == 0) return nullptr;
  Coalesce(p);
  st->g = GroupPlan();
  for (int i = 0; i < p.rank; ++i) AddGroupDim(st->g, p.sb[i] == 0, p.dims[i], p.sa[i]);
  st->l = PlanGroupLaunch(st->g, allow_split);
  return nullptr;
}

FleetStatus* ReducePrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto st = std::make_unique<ReduceState>();
    if (FleetStatus* e = MakeReduceState(kc, /*allow_split=*/true, st.get())) return e;
    *scratch = st->l.scratch_bytes;
    *state = st.release();
    return nullptr;
  });
}

// The grads broadcast instead of summing and need no scratch.
FleetStatus* ReduceGradPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto st = std::make_unique<ReduceState>();
    if (FleetStatus* e = MakeReduceState(kc, /*allow_split=*/false, st.get())) return e;
    *state = st.release();
    return nullptr;
  });
}

void ReduceRelease(void*, void* state) { delete static_cast<ReduceState*>(state); }

// The prepared state, or one made now (without split sums) for a launch that had no prepare;
// either way it must describe the X this launch sees.
FleetStatus* ReduceStateFor(const FleetKernelContext* kc, void* state, ReduceState* local,
                            const ReduceState** st) {
  if (state != nullptr) {
    *st = static_cast<const ReduceState*>(state);
  } else {
    if (FleetStatus* e = MakeReduceState(kc, /*allow_split=*/false, local)) return e;
    *st = local;
  }
  const FleetTensor* x = Input(kc, "X");
  if (Numel(x) != (*st)->x_count) {
    return InvalidArgument(OpName(kc) + ": X " + DimsText(x) + " has " +
                           std::to_string(Numel(x)) + " elements, the kernel was prepared for " +
                           std::to_string((*st)->x_count));
  }
  return nullptr;
}

template <typename T, bool kMean>
FleetStatus* ReduceLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    ReduceState local;
    const ReduceState* st = nullptr;
    if (FleetStatus* e = ReduceStateFor(kc, state, &local, &st)) return e;
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", st->out_count)) return e;
    if (st->out_count == 0) return nullptr;
    T* os = Data<T>(out);
    if (st->x_count == 0) {
      // Nothing folds into any output element: sums (and, as on the CPU, means) are 0.
      return ZeroAsync(kc, os, static_cast<size_t>(st->out_count) * sizeof(T), s->native, "Out");
    }
    if (FleetStatus* e = CheckScratch(kc, st->l.scratch_bytes)) return e;
    const double divisor = kMean ? static_cast<double>(st->reduced_count) : 1.0;
    LaunchGroupSum(st->g, st->l, LoadTerm<T>{Data<const T>(Input(kc, "X"))}, os, divisor,
                   kc->scratch, s->native);
    return nullptr;
  });
}

// dX[i] = dOut[Out's element that X's element i folded into] * scale.
template <typename T>
__global__ void ReduceGradKernel(StridePlan p, const T* g, T* dx, int64_t n, T scale) {
  FLEET_CUDA_LOOP(i, n) {
    int64_t a, b;
    PlanOffsets(p, i, &a, &b);
    dx[a] = g[b] * scale;
  }
}

template <typename T, bool kMean>
FleetStatus* ReduceGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Out@GRAD"}, {"X@GRAD"})) return e;
    ReduceState local;
    const ReduceState* st = nullptr;
    if (FleetStatus* e = ReduceStateFor(kc, state, &local, &st)) return e;
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (FleetStatus* e = ExpectNumel(kc, dout, "Out@GRAD", st->out_count)) return e;
    if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", st->x_count)) return e;
    if (st->x_count == 0) return nullptr;
    const T scale = kMean ? T(1) / static_cast<T>(st->reduced_count) : T(1);
    ReduceGradKernel<T><<<Blocks(st->x_count), kThreads, 0, s->native>>>(
        st->plan, Data<const T>(dout), Data<T>(dx), st->x_count, scale);
    return nullptr;
  });
}

template <bool kMean>
void AddReduce(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, ReduceLaunch<float, kMean>, ReducePrepare, ReduceRelease);
  Add(list, name, FLEET_DTYPE_FLOAT64, ReduceLaunch<double, kMean>, ReducePrepare, ReduceRelease);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, ReduceGradLaunch<float, kMean>, ReduceGradPrepare,
      ReduceRelease);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, ReduceGradLaunch<double, kMean>, ReduceGradPrepare,
      ReduceRelease);
}

void AddSumAndMean(KernelList& list) {
  Add(list, "sum", FLEET_DTYPE_FLOAT32, SumLaunch<float>);
  Add(list, "sum", FLEET_DTYPE_FLOAT64, SumLaunch<double>);
  Add(list, "mean", FLEET_DTYPE_FLOAT32, MeanLaunch<float>, MeanPrepare, MeanRelease);
  Add(list, "mean", FLEET_DTYPE_FLOAT64, MeanLaunch<double>, MeanPrepare, MeanRelease);
  Add(list, "mean_grad", FLEET_DTYPE_FLOAT32, MeanGradLaunch<float>);
  Add(list, "mean_grad", FLEET_DTYPE_FLOAT64, MeanGradLaunch<double>);
}

}  // namespace
}  // namespace math

void AddMathReduceKernels(KernelList& list) {
  math::AddSumAndMean(list);
  math::AddReduce<false>(list, "reduce_sum", "reduce_sum_grad");
  math::AddReduce<true>(list, "reduce_mean", "reduce_mean_grad");
}

}  // namespace fleet_cuda
