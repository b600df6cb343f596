// CUDA kernels of sequence_pool and its grad, with the CPU plugin's semantics
// (plugins/cpu/kernels/sequence_kernels.cc; planning shared in plugins/common/sequence_plan.h).
//
// One thread per (sequence, column): it walks the sequence's rows in order, so sums are added in
// the CPU's order and MAX keeps the first of equal values, as the CPU does. The offsets are in
// device memory (FleetTensor.lod), so nothing waits for the host.
#include <string>

#include "kernels/nn_groups.h"
#include "sequence_plan.h"

namespace fleet_cuda {
namespace {

using namespace nn;
using fleet::kernel::SequencePoolPick;
using fleet::kernel::SequencePoolPlan;
using fleet::kernel::SequencePoolScale;
using fleet::kernel::SequencePoolType;

FleetStatus* Plan(const FleetKernelContext* kc, bool grad, SequencePoolPlan* plan) {
  return fleet::kernel::ToFleetStatus(
      fleet::kernel::PlanSequencePool(kc, grad, plan),
      [](int32_t code, const std::string& m) { return Error(code, m); });
}

template <typename T>
__global__ void SequencePoolKernel(const T* x, const int64_t* lod, T* out, int32_t* index,
                                   int64_t sequences, int64_t width, SequencePoolType type,
                                   T pad) {
  FLEET_CUDA_LOOP(e, sequences * width) {
    const int64_t s = e / width;
    const int64_t j = e - s * width;
    const int64_t begin = lod[s], end = lod[s + 1];
    if (end <= begin) {
      out[e] = pad;
      if (index != nullptr) index[e] = -1;
      continue;
    }
    if (type == SequencePoolType::kMax) {
      int64_t best = begin;
      for (int64_t r = begin + 1; r < end; ++r) {
        if (x[r * width + j] > x[best * width + j]) best = r;
      }
      out[e] = x[best * width + j];
      if (index != nullptr) index[e] = static_cast<int32_t>(best);
    } else if (type == SequencePoolType::kLast || type == SequencePoolType::kFirst) {
      out[e] = x[SequencePoolPick(type, begin, end) * width + j];
    } else {
      T sum = T(0);
      for (int64_t r = begin; r < end; ++r) sum += x[r * width + j];
      out[e] = type == SequencePoolType::kSum
                   ? sum
                   : sum * static_cast<T>(SequencePoolScale(type, end - begin));
    }
  }
}

template <typename T>
__global__ void SequencePoolGradKernel(const T* dout, const int64_t* lod, const int32_t* index,
                                       T* dx, int64_t sequences, int64_t width,
                                       SequencePoolType type) {
  FLEET_CUDA_LOOP(e, sequences * width) {
    const int64_t s = e / width;
    const int64_t j = e - s * width;
    const int64_t begin = lod[s], end = lod[s + 1];
    if (end <= begin) continue;
    const T g = dout[e];
    if (type == SequencePoolType::kMax) {
      const int64_t r = index[e];
      if (r >= begin && r < end) dx[r * width + j] = g;
    } else if (type == SequencePoolType::kLast || type == SequencePoolType::kFirst) {
      dx[SequencePoolPick(type, begin, end) * width + j] = g;
    } else {
      const T scaled = g * static_cast<T>(SequencePoolScale(type, end - begin));
      for (int64_t r = begin; r < end; ++r) dx[r * width + j] = scaled;
    }
  }
}

template <typename T>
FleetStatus* SequencePool(void*, const FleetKernelContext* kc, void*) {
  SequencePoolPlan p;
  if (FleetStatus* st = Plan(kc, false, &p)) return st;
  const FleetTensor* index = Output(kc, "MaxIndex");
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (p.sequences * p.width == 0) return nullptr;
    SequencePoolKernel<T><<<Blocks(p.sequences * p.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "X")), p.lod, Data<T>(Output(kc, "Out")),
        index != nullptr ? Data<int32_t>(index) : nullptr, p.sequences, p.width, p.type,
        static_cast<T>(p.pad_value));
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequencePoolGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  SequencePoolPlan p;
  if (FleetStatus* st = Plan(kc, true, &p)) return st;
  const FleetTensor* index = Input(kc, "MaxIndex");
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const size_t bytes = static_cast<size_t>(p.capacity * p.width) * sizeof(T);
    if (bytes > 0) {
      if (FleetStatus* st = CudaStatus(cudaMemsetAsync(dx->data, 0, bytes, s->native),
                                       OpName(kc) + ": clearing X@GRAD")) {
        return st;
      }
    }
    if (p.sequences * p.width == 0) return nullptr;
    SequencePoolGradKernel<T><<<Blocks(p.sequences * p.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "Out@GRAD")), p.lod,
        index != nullptr ? Data<const int32_t>(index) : nullptr, Data<T>(dx), p.sequences,
        p.width, p.type);
    return nullptr;
  });
}

}  // namespace

void AddNnSequenceKernels(KernelList& list) {
  constexpr uint32_t kSeq = FLEET_KERNEL_FLAG_SEQUENCES;
  Add(list, "sequence_pool", FLEET_DTYPE_FLOAT32, SequencePool<float>, nullptr, nullptr, nullptr,
      kSeq);
  Add(list, "sequence_pool", FLEET_DTYPE_FLOAT64, SequencePool<double>, nullptr, nullptr, nullptr,
      kSeq);
  Add(list, "sequence_pool_grad", FLEET_DTYPE_FLOAT32, SequencePoolGrad<float>, nullptr, nullptr,
      nullptr, kSeq);
  Add(list, "sequence_pool_grad", FLEET_DTYPE_FLOAT64, SequencePoolGrad<double>, nullptr,
      nullptr, nullptr, kSeq);
}

}  // namespace fleet_cuda
