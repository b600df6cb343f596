// Kernels of the sequence ops whose output has offsets of its own: sequence_concat,
// sequence_slice, sequence_unpad and their grads. The host made the output's offsets (from the
// inputs' offsets, Offset and Length) and checked them before the launch, so each kernel only
// moves rows; planning is shared with the CUDA plugin (plugins/common/sequence_plan.h). Padding
// rows of a sequence output are zeroed by the host.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/kernel_util.h"
#include "kernels/nn_kernels.h"
#include "sequence_plan.h"

namespace fleet_cpu {
namespace {

using fleet::kernel::SequenceConcatPlan;
using fleet::kernel::SequenceRows;
using fleet::kernel::SequenceSlicePlan;
using fleet::kernel::SequenceUnpadPlan;

// Rows per sequence of `r`: the work of one item of a loop over its sequences.
int64_t WorkPerSequence(const SequenceRows& r) {
  if (r.sequences <= 0) return r.width;
  return r.width * std::max<int64_t>(1, r.lod[r.sequences] / r.sequences);
}

// Copies rows between X[k] and Out, in sequence_concat's order: `to_out` for the forward op,
// the other way for its grad (dx[k] may be NULL: no gradient wanted for that input).
template <typename T>
void ConcatRows(const FleetKernelContext* kc, const SequenceConcatPlan& p, T* out,
                const std::vector<T*>& xs, bool to_out) {
  const int64_t w = p.out.width;
  std::vector<const int64_t*> lods;  // looked up once: a slot lookup compares names
  for (int64_t k = 0; k < p.inputs; ++k) {
    lods.push_back(Input(kc, "X", static_cast<size_t>(k))->lod);
  }
  ParallelForEach(kc, p.out.sequences, WorkPerSequence(p.out), [&](int64_t s) {
    int64_t row = p.out.lod[s];
    for (int64_t k = 0; k < p.inputs; ++k) {
      const int64_t* lod = lods[static_cast<size_t>(k)];
      const int64_t n = lod[s + 1] - lod[s];
      T* x = xs[static_cast<size_t>(k)];
      if (x != nullptr && n > 0) {
        T* o = out + row * w;
        T* xi = x + lod[s] * w;
        if (to_out) {
          std::copy(xi, xi + n * w, o);
        } else {
          std::copy(o, o + n * w, xi);
        }
      }
      row += n;
    }
  });
}

template <typename T>
FleetStatus* SequenceConcat(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequenceConcatPlan p;
    if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceConcat(kc, false, &p))) return st;
    std::vector<T*> xs;
    for (int64_t k = 0; k < p.inputs; ++k) {
      xs.push_back(Data<T>(Input(kc, "X", static_cast<size_t>(k))));
    }
    ConcatRows<T>(kc, p, Data<T>(Output(kc, "Out")), xs, true);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceConcatGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequenceConcatPlan p;
    if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceConcat(kc, true, &p))) return st;
    std::vector<T*> dxs;
    const size_t wanted = OutputCount(kc, "X@GRAD");
    for (int64_t k = 0; k < p.inputs; ++k) {
      const FleetTensor* dx =
          static_cast<size_t>(k) < wanted ? Output(kc, "X@GRAD", static_cast<size_t>(k)) : nullptr;
      dxs.push_back(dx != nullptr ? Data<T>(dx) : nullptr);
    }
    ConcatRows<T>(kc, p, Data<T>(Input(kc, "Out@GRAD")), dxs, false);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceSlice(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequenceSlicePlan p;
    if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceSlice(kc, false, &p))) return st;
    const T* x = Data<T>(Input(kc, "X"));
    const int64_t* offset = Data<int64_t>(Input(kc, "Offset"));
    T* out = Data<T>(Output(kc, "Out"));
    const int64_t w = p.x.width;
    ParallelForEach(kc, p.out.sequences, WorkPerSequence(p.out), [&](int64_t s) {
      const T* from = x + (p.x.lod[s] + offset[s]) * w;
      std::copy(from, from + (p.out.lod[s + 1] - p.out.lod[s]) * w, out + p.out.lod[s] * w);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceSliceGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx_t = Output(kc, "X@GRAD");
    if (dx_t == nullptr) return nullptr;
    SequenceSlicePlan p;
    if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceSlice(kc, true, &p))) return st;
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    const int64_t* offset = Data<int64_t>(Input(kc, "Offset"));
    T* dx = Data<T>(dx_t);
    const int64_t w = p.x.width;
    ParallelForEach(kc, p.x.sequences, WorkPerSequence(p.x), [&](int64_t s) {
      std::fill(dx + p.x.lod[s] * w, dx + p.x.lod[s + 1] * w, T(0));
      const T* from = dout + p.out.lod[s] * w;
      std::copy(from, from + (p.out.lod[s + 1] - p.out.lod[s]) * w,
                dx + (p.x.lod[s] + offset[s]) * w);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceUnpad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequenceUnpadPlan p;
    if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceUnpad(kc, false, &p))) return st;
    const T* x = Data<T>(Input(kc, "X"));
    T* out = Data<T>(Output(kc, "Out"));
    const int64_t w = p.out.width;
    ParallelForEach(kc, p.out.sequences, WorkPerSequence(p.out), [&](int64_t s) {
      const T* from = x + s * p.padded_length * w;
      std::copy(from, from + (p.out.lod[s + 1] - p.out.lod[s]) * w, out + p.out.lod[s] * w);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceUnpadGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx_t = Output(kc, "X@GRAD");
    if (dx_t == nullptr) return nullptr;
    SequenceUnpadPlan p;
    if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceUnpad(kc, true, &p))) return st;
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    T* dx = Data<T>(dx_t);
    const int64_t w = p.out.width, step = p.padded_length * w;
    ParallelForEach(kc, p.out.sequences, step, [&](int64_t s) {
      const int64_t n = (p.out.lod[s + 1] - p.out.lod[s]) * w;
      T* to = dx + s * step;
      std::copy(dout + p.out.lod[s] * w, dout + p.out.lod[s] * w + n, to);
      std::fill(to + n, to + step, T(0));
    });
    return nullptr;
  });
}

}  // namespace

void AddSequenceOffsetKernels(KernelList& list) {
  constexpr uint32_t kSeq = FLEET_KERNEL_FLAG_SEQUENCES;
  const auto add = [&](const char* op, int32_t dtype, LaunchFn f) {
    Add(list, op, dtype, f, nullptr, nullptr, nullptr, kSeq);
  };
  // Paddle registers the forward ops for float, double, int and int64, the grads for floats.
  add("sequence_concat", FLEET_DTYPE_FLOAT32, SequenceConcat<float>);
  add("sequence_concat", FLEET_DTYPE_FLOAT64, SequenceConcat<double>);
  add("sequence_concat", FLEET_DTYPE_INT64, SequenceConcat<int64_t>);
  add("sequence_concat", FLEET_DTYPE_INT32, SequenceConcat<int32_t>);
  add("sequence_concat_grad", FLEET_DTYPE_FLOAT32, SequenceConcatGrad<float>);
  add("sequence_concat_grad", FLEET_DTYPE_FLOAT64, SequenceConcatGrad<double>);
  add("sequence_slice", FLEET_DTYPE_FLOAT32, SequenceSlice<float>);
  add("sequence_slice", FLEET_DTYPE_FLOAT64, SequenceSlice<double>);
  add("sequence_slice", FLEET_DTYPE_INT64, SequenceSlice<int64_t>);
  add("sequence_slice", FLEET_DTYPE_INT32, SequenceSlice<int32_t>);
  add("sequence_slice_grad", FLEET_DTYPE_FLOAT32, SequenceSliceGrad<float>);
  add("sequence_slice_grad", FLEET_DTYPE_FLOAT64, SequenceSliceGrad<double>);
  add("sequence_unpad", FLEET_DTYPE_FLOAT32, SequenceUnpad<float>);
  add("sequence_unpad", FLEET_DTYPE_FLOAT64, SequenceUnpad<double>);
  add("sequence_unpad", FLEET_DTYPE_INT64, SequenceUnpad<int64_t>);
  add("sequence_unpad", FLEET_DTYPE_INT32, SequenceUnpad<int32_t>);
  add("sequence_unpad_grad", FLEET_DTYPE_FLOAT32, SequenceUnpadGrad<float>);
  add("sequence_unpad_grad", FLEET_DTYPE_FLOAT64, SequenceUnpadGrad<double>);
}

}  // namespace fleet_cpu
