// Sequence kernels: sequence_pool and its grad, over the offsets of a sequence tensor
// (FleetTensor.lod; the planning is shared with the CUDA plugin in plugins/common).
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/kernel_util.h"
#include "kernels/nn_kernels.h"
#include "sequence_plan.h"

namespace fleet_cpu {
namespace {

using fleet::kernel::SequencePoolPick;
using fleet::kernel::SequencePoolPlan;
using fleet::kernel::SequencePoolScale;
using fleet::kernel::SequencePoolType;

FleetStatus* Plan(const FleetKernelContext* kc, bool grad, SequencePoolPlan* plan) {
  if (FleetStatus* st = fleet::kernel::ToFleetStatus(
          fleet::kernel::PlanSequencePool(kc, grad, plan),
          [](int32_t code, const std::string& m) { return Error(code, m); })) {
    return st;
  }
  // The host checked the offsets it fed; this guards a kernel driven by another caller.
  if (plan->lod != nullptr && (plan->lod[0] != 0 || plan->lod[plan->sequences] > plan->capacity)) {
    return InvalidArgument(OpName(kc) + ": the offsets of X run from " +
                           std::to_string(plan->lod[0]) + " to " +
                           std::to_string(plan->lod[plan->sequences]) + ", outside its " +
                           std::to_string(plan->capacity) + " rows");
  }
  return nullptr;
}

template <typename T>
FleetStatus* SequencePool(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequencePoolPlan p;
    if (FleetStatus* st = Plan(kc, false, &p)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    T* out = Data<T>(Output(kc, "Out"));
    const FleetTensor* index_t = Output(kc, "MaxIndex");
    int32_t* index = index_t != nullptr ? Data<int32_t>(index_t) : nullptr;
    const int64_t w = p.width;
#pragma omp parallel for
    for (int64_t s = 0; s < p.sequences; ++s) {
      const int64_t begin = p.lod[s], end = p.lod[s + 1];
      T* o = out + s * w;
      int32_t* idx = index != nullptr ? index + s * w : nullptr;
      if (end <= begin) {  // an empty sequence
        std::fill(o, o + w, static_cast<T>(p.pad_value));
        if (idx != nullptr) std::fill(idx, idx + w, -1);
        continue;
      }
      switch (p.type) {
        case SequencePoolType::kMax:
          for (int64_t j = 0; j < w; ++j) {
            int64_t best = begin;
            for (int64_t r = begin + 1; r < end; ++r) {
              if (x[r * w + j] > x[best * w + j]) best = r;
            }
            o[j] = x[best * w + j];
            if (idx != nullptr) idx[j] = static_cast<int32_t>(best);
          }
          break;
        case SequencePoolType::kLast:
        case SequencePoolType::kFirst: {
          const int64_t r = SequencePoolPick(p.type, begin, end);
          std::copy(x + r * w, x + (r + 1) * w, o);
          break;
        }
        default: {  // SUM, AVERAGE, SQRT: a sum in row order, then the scale
          std::fill(o, o + w, T(0));
          for (int64_t r = begin; r < end; ++r) {
            for (int64_t j = 0; j < w; ++j) o[j] += x[r * w + j];
          }
          const T scale = static_cast<T>(SequencePoolScale(p.type, end - begin));
          if (p.type != SequencePoolType::kSum) {
            for (int64_t j = 0; j < w; ++j) o[j] *= scale;
          }
        }
      }
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequencePoolGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx_t = Output(kc, "X@GRAD");
    if (dx_t == nullptr) return nullptr;
    SequencePoolPlan p;
    if (FleetStatus* st = Plan(kc, true, &p)) return st;
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    const FleetTensor* index_t = Input(kc, "MaxIndex");
    const int32_t* index = index_t != nullptr ? Data<int32_t>(index_t) : nullptr;
    T* dx = Data<T>(dx_t);
    const int64_t w = p.width;
    std::fill(dx, dx + p.capacity * w, T(0));
#pragma omp parallel for
    for (int64_t s = 0; s < p.sequences; ++s) {
      const int64_t begin = p.lod[s], end = p.lod[s + 1];
      if (end <= begin) continue;  // pad_value is a constant: no gradient
      const T* g = dout + s * w;
      switch (p.type) {
        case SequencePoolType::kMax:
          for (int64_t j = 0; j < w; ++j) {
            const int64_t r = index[s * w + j];
            if (r >= begin && r < end) dx[r * w + j] = g[j];
          }
          break;
        case SequencePoolType::kLast:
        case SequencePoolType::kFirst: {
          const int64_t r = SequencePoolPick(p.type, begin, end);
          std::copy(g, g + w, dx + r * w);
          break;
        }
        default: {
          const T scale = static_cast<T>(SequencePoolScale(p.type, end - begin));
          for (int64_t r = begin; r < end; ++r) {
            for (int64_t j = 0; j < w; ++j) dx[r * w + j] = g[j] * scale;
          }
        }
      }
    }
    return nullptr;
  });
}

}  // namespace

void AddSequenceKernels(KernelList& list) {
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

}  // namespace fleet_cpu
