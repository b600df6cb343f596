// The CUDA auc kernel, float32 and float64 predictions, with the CPU plugin's semantics
// (plugins/cpu/kernels/nn_metric_kernels.cc) and the bucketing, window and area both share
// (plugins/common/metric_formulas.h).
//
// A launch runs four kernels on its stream: the check of every row (a label outside {0, 1} or a
// probability outside [0, 1] sets the nn flag, see nn_groups.h), the slide of the window, the
// count and the area. The last three read the flag first and leave the statistics untouched
// when it is set, writing NaN as the AUC, so even an asynchronous launch, which cannot fail
// with the message, never folds a bad batch into the statistics. Counts are integer atomics
// and the area is an exact integer sum, so results do not depend on the order threads run in
// and equal the CPU's bit for bit.
#include <string>

#include "kernels/nn_groups.h"
#include "metric_formulas.h"

namespace fleet_cuda {
namespace {

using namespace nn;
namespace fk = fleet::kernel;

__device__ inline bool FlagSet(const unsigned long long* flag) {
  return *flag != kNoBadPosition;
}

template <typename T>
__global__ void AucCheckKernel(const T* predict, int64_t width, const void* label, bool label32,
                               int64_t rows, unsigned long long* flag) {
  FLEET_CUDA_LOOP(i, rows) {
    if (!fk::AucLabelOk(LoadIndex(label, label32, i)) ||
        !fk::AucProbabilityOk(predict[i * width + width - 1])) {
      NoteBad(flag, i);
    }
  }
}

__global__ void AucSlideKernel(int64_t* pos, int64_t* neg, int64_t buckets, int64_t steps,
                               const unsigned long long* flag) {
  if (FlagSet(flag)) return;
  FLEET_CUDA_LOOP(b, buckets) {
    fk::AucSlideBucket(pos, buckets, steps, b);
    fk::AucSlideBucket(neg, buckets, steps, b);
  }
}

__device__ inline void Increment(int64_t* cell) {
  atomicAdd(reinterpret_cast<unsigned long long*>(cell), 1ULL);
}

template <typename T>
__global__ void AucCountKernel(const T* predict, int64_t width, const void* label, bool label32,
                               int64_t rows, int64_t thresholds, int64_t steps, int64_t* pos,
                               int64_t* neg, const unsigned long long* flag) {
  if (FlagSet(flag)) return;
  FLEET_CUDA_LOOP(i, rows) {
    int64_t* stat = LoadIndex(label, label32, i) == 1 ? pos : neg;
    int64_t first = 0, second = 0;
    fk::AucCountCells(thresholds + 1, steps,
                      fk::AucBucket(predict[i * width + width - 1], thresholds), &first, &second);
    Increment(stat + first);
    if (second >= 0) Increment(stat + second);
  }
}

// One block of kThreads threads, each taking a contiguous chunk of buckets: the chunk totals
// give every thread the positives above its chunk, each chunk's doubled area is exact, and the
// block adds the areas and totals in a tree.
__global__ void AucAreaKernel(const int64_t* pos, const int64_t* neg, int64_t buckets,
                              double* auc, const unsigned long long* flag) {
  __shared__ long long chunk_pos[kThreads];
  __shared__ long long chunk_neg[kThreads];
  __shared__ fk::AucArea2 area[kThreads];
  if (FlagSet(flag)) {
    if (threadIdx.x == 0) auc[0] = NaN<double>();
    return;
  }
  const int t = static_cast<int>(threadIdx.x);
  const int64_t lo = buckets * t / kThreads;
  const int64_t hi = buckets * (t + 1) / kThreads;
  long long p = 0, n = 0;
  for (int64_t b = lo; b < hi; ++b) {
    p += pos[b];
    n += neg[b];
  }
  chunk_pos[t] = p;
  chunk_neg[t] = n;
  __syncthreads();
  long long above = 0;
  for (int c = t + 1; c < kThreads; ++c) above += chunk_pos[c];
  area[t] = fk::AucDoubledArea(pos, neg, lo, hi, above);
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      area[t] += area[t + half];
      chunk_pos[t] += chunk_pos[t + half];
      chunk_neg[t] += chunk_neg[t + half];
    }
    __syncthreads();
  }
  if (t == 0) auc[0] = fk::AucValue(area[0], chunk_pos[0], chunk_neg[0]);
}

// The statistics output, holding the input's counts (a copy when they are different tensors).
FleetStatus* StatOut(const FleetKernelContext* kc, const char* in_slot, const char* out_slot,
                     int64_t n, const FleetTensor** in, int64_t** out) {
  *in = Input(kc, in_slot);
  const FleetTensor* o = Output(kc, out_slot);
  if (FleetStatus* st = RequireSized(kc, *in, in_slot, FLEET_DTYPE_INT64, n)) return st;
  if (FleetStatus* st = RequireSized(kc, o, out_slot, FLEET_DTYPE_INT64, n)) return st;
  *out = Data<int64_t>(o);
  return nullptr;
}

FleetStatus* CopyStat(const FleetKernelContext* kc, FleetStream* s, const FleetTensor* in,
                      int64_t* out, int64_t n) {
  if (in->data == out || n == 0) return nullptr;
  return CudaStatus(cudaMemcpyAsync(out, in->data, static_cast<size_t>(n) * sizeof(int64_t),
                                    cudaMemcpyDeviceToDevice, s->native),
                    OpName(kc) + ": copying the statistics");
}

// The error for bad row `pos` whose label is `label`: the label when it is not 0 or 1, else
// the probability, read back from the device (only a synchronous launch gets here).
template <typename T>
FleetStatus* BadRow(const FleetKernelContext* kc, FleetStream* s, const FleetTensor* predict,
                    int64_t width, int64_t pos, int64_t label) {
  if (!fk::AucLabelOk(label)) {
    return InvalidArgument(OpName(kc) + ": Label[" + std::to_string(pos) + "] = " +
                           std::to_string(label) +
                           " is not a class label of a binary classifier (0 or 1)");
  }
  T v = T(0);
  const T* src = Data<const T>(predict) + pos * width + width - 1;
  if (FleetStatus* st = CudaStatus(
          cudaMemcpyAsync(&v, src, sizeof(T), cudaMemcpyDeviceToHost, s->native),
          OpName(kc) + ": reading the bad probability")) {
    return st;
  }
  if (FleetStatus* st = CudaStatus(cudaStreamSynchronize(s->native), OpName(kc) + ": running")) {
    return st;
  }
  return InvalidArgument(OpName(kc) + ": Predict[" + std::to_string(pos) + ", " +
                         std::to_string(width - 1) + "] = " + std::to_string(v) +
                         " is not a probability in [0, 1]");
}

template <typename T>
FleetStatus* Auc(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* predict = Input(kc, "Predict");
  const FleetTensor* label = Input(kc, "Label");
  if (FleetStatus* st = Require(kc, predict, "Predict")) return st;
  if (predict->ndim != 2 || (predict->dims[1] != 1 && predict->dims[1] != 2)) {
    return InvalidArgument(OpName(kc) + ": Predict must be [N, 2] or [N, 1], got " +
                           DimsText(predict));
  }
  const int64_t rows = predict->dims[0], width = predict->dims[1];
  if (FleetStatus* st = RequireSized(kc, predict, "Predict", DtypeOf<T>(), rows * width)) {
    return st;
  }
  if (FleetStatus* st = RequireIndex(kc, label, "Label")) return st;
  if (Numel(label) != rows) {
    return InvalidArgument(OpName(kc) + ": Label must have one entry per row of Predict (" +
                           std::to_string(rows) + "), got " + std::to_string(Numel(label)));
  }
  const int64_t thresholds = IntAttr(kc, "num_thresholds", 4095);
  const int64_t steps = IntAttr(kc, "slide_steps", 1);
  if (thresholds < 1 || steps < 0) {
    return InvalidArgument(OpName(kc) + ": num_thresholds must be >= 1 and slide_steps >= 0");
  }
  const int64_t buckets = thresholds + 1;
  const int64_t n = fk::AucStatSize(thresholds, steps);
  const FleetTensor* auc = Output(kc, "AUC");
  if (FleetStatus* st = RequireSized(kc, auc, "AUC", FLEET_DTYPE_FLOAT64, 1)) return st;
  const FleetTensor *pos_in = nullptr, *neg_in = nullptr;
  int64_t *pos = nullptr, *neg = nullptr;
  if (FleetStatus* st = StatOut(kc, "StatPos", "StatPosOut", n, &pos_in, &pos)) return st;
  if (FleetStatus* st = StatOut(kc, "StatNeg", "StatNegOut", n, &neg_in, &neg)) return st;
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  const bool label32 = label->dtype == FLEET_DTYPE_INT32;
  const T* p = Data<const T>(predict);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = CopyStat(kc, s, pos_in, pos, n)) return st;
    if (FleetStatus* st = CopyStat(kc, s, neg_in, neg, n)) return st;
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    AucCheckKernel<T><<<Blocks(rows), kThreads, 0, s->native>>>(p, width, label->data, label32,
                                                                rows, flag);
    if (steps > 0) {
      AucSlideKernel<<<Blocks(buckets), kThreads, 0, s->native>>>(pos, neg, buckets, steps,
                                                                  flag);
    }
    AucCountKernel<T><<<Blocks(rows), kThreads, 0, s->native>>>(
        p, width, label->data, label32, rows, thresholds, steps, pos, neg, flag);
    const int64_t off = fk::AucSumOffset(thresholds, steps);
    AucAreaKernel<<<1, kThreads, 0, s->native>>>(pos + off, neg + off, buckets,
                                                 Data<double>(auc), flag);
    int64_t bad = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, label, &bad, &value)) return st;
    return bad >= 0 ? BadRow<T>(kc, s, predict, width, bad, value) : nullptr;
  });
}

}  // namespace

void AddNnMetricKernels(KernelList& list) {
  Add(list, "auc", FLEET_DTYPE_FLOAT32, Auc<float>, PrepareFlag);
  Add(list, "auc", FLEET_DTYPE_FLOAT64, Auc<double>, PrepareFlag);
}

}  // namespace fleet_cuda
