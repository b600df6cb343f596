// CUDA kernels of the sequence ops whose output has offsets of its own (sequence_concat,
// sequence_slice, sequence_unpad and their grads), with the CPU plugin's semantics
// (plugins/cpu/kernels/sequence_offset_kernels.cc; planning shared in
// plugins/common/sequence_plan.h). The host made and checked the output's offsets and copied
// them to device memory before the launch, so nothing here waits: one thread per element finds
// its sequence by a binary search of the offsets and copies one value.
#include <string>

#include "kernels/nn_groups.h"
#include "sequence_plan.h"

namespace fleet_cuda {
namespace {

using namespace nn;
using fleet::kernel::SequenceConcatPlan;
using fleet::kernel::SequenceOfRow;
using fleet::kernel::SequenceSlicePlan;
using fleet::kernel::SequenceUnpadPlan;

// The inputs of one sequence_concat launch, passed by value: kernel parameters hold at most
// 4 KiB, so a launch takes up to kConcatInputs inputs.
constexpr int kConcatInputs = 32;
template <typename T>
struct ConcatInputs {
  T* x[kConcatInputs];
  const int64_t* lod[kConcatInputs];
  int n;
};

// Element e of Out (Out@GRAD) belongs to row t of sequence s; the inputs' sequences s follow
// each other there, so the input is the first whose sequence s still covers t. `to_out`
// copies X into Out, else Out@GRAD into X@GRAD (an absent X@GRAD is NULL).
template <typename T>
__global__ void SequenceConcatKernel(ConcatInputs<T> in, T* out, const int64_t* out_lod,
                                     int64_t sequences, int64_t capacity, int64_t width,
                                     bool to_out) {
  FLEET_CUDA_LOOP(e, capacity * width) {
    const int64_t row = e / width;
    const int64_t s = SequenceOfRow(out_lod, sequences, row);
    if (s < 0) continue;  // padding: the host zeroes it
    int64_t t = row - out_lod[s];
    for (int k = 0; k < in.n; ++k) {
      const int64_t n = in.lod[k][s + 1] - in.lod[k][s];
      if (t < n) {
        T* x = in.x[k];
        if (x != nullptr) {
          const int64_t at = (in.lod[k][s] + t) * width + (e - row * width);
          if (to_out) {
            out[e] = x[at];
          } else {
            x[at] = out[e];
          }
        }
        break;
      }
      t -= n;
    }
  }
}

template <typename T>
FleetStatus* Concat(const FleetKernelContext* kc, bool grad) {
  SequenceConcatPlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceConcat(kc, grad, &p))) return st;
  if (p.inputs > kConcatInputs) {
    return Unimplemented(OpName(kc) + ": " + std::to_string(p.inputs) + " inputs; the CUDA "
                         "kernel takes at most " + std::to_string(kConcatInputs) +
                         " (concatenate in steps)");
  }
  ConcatInputs<T> in{};
  in.n = static_cast<int>(p.inputs);
  const size_t wanted = grad ? OutputCount(kc, "X@GRAD") : 0;
  for (int k = 0; k < in.n; ++k) {
    const FleetTensor* x = Input(kc, "X", static_cast<size_t>(k));
    in.lod[k] = x->lod;
    if (!grad) {
      in.x[k] = Data<T>(x);
    } else {
      const FleetTensor* dx =
          static_cast<size_t>(k) < wanted ? Output(kc, "X@GRAD", static_cast<size_t>(k)) : nullptr;
      in.x[k] = dx != nullptr ? Data<T>(dx) : nullptr;
    }
  }
  T* out = grad ? Data<T>(Input(kc, "Out@GRAD")) : Data<T>(Output(kc, "Out"));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (p.out.capacity * p.out.width == 0 || p.out.sequences == 0) return nullptr;
    SequenceConcatKernel<T><<<Blocks(p.out.capacity * p.out.width), kThreads, 0, s->native>>>(
        in, out, p.out.lod, p.out.sequences, p.out.capacity, p.out.width, !grad);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceConcat(void*, const FleetKernelContext* kc, void*) {
  return Concat<T>(kc, false);
}

template <typename T>
FleetStatus* SequenceConcatGrad(void*, const FleetKernelContext* kc, void*) {
  return Concat<T>(kc, true);
}

template <typename T>
__global__ void SequenceSliceKernel(const T* x, const int64_t* x_lod, const int64_t* offset,
                                    T* out, const int64_t* out_lod, int64_t sequences,
                                    int64_t capacity, int64_t width) {
  FLEET_CUDA_LOOP(e, capacity * width) {
    const int64_t row = e / width;
    const int64_t s = SequenceOfRow(out_lod, sequences, row);
    if (s < 0) continue;
    out[e] = x[(x_lod[s] + offset[s] + row - out_lod[s]) * width + (e - row * width)];
  }
}

// One thread per element of X@GRAD: its slice's gradient, or 0 outside the slice.
template <typename T>
__global__ void SequenceSliceGradKernel(const T* dout, const int64_t* out_lod,
                                        const int64_t* offset, T* dx, const int64_t* x_lod,
                                        int64_t sequences, int64_t capacity, int64_t width) {
  FLEET_CUDA_LOOP(e, capacity * width) {
    const int64_t row = e / width;
    const int64_t s = SequenceOfRow(x_lod, sequences, row);
    T g = T(0);
    if (s >= 0) {
      const int64_t t = row - x_lod[s] - offset[s];
      if (t >= 0 && t < out_lod[s + 1] - out_lod[s]) {
        g = dout[(out_lod[s] + t) * width + (e - row * width)];
      }
    }
    dx[e] = g;
  }
}

template <typename T>
FleetStatus* SequenceSlice(void*, const FleetKernelContext* kc, void*) {
  SequenceSlicePlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceSlice(kc, false, &p))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (p.out.capacity * p.out.width == 0 || p.out.sequences == 0) return nullptr;
    SequenceSliceKernel<T><<<Blocks(p.out.capacity * p.out.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "X")), p.x.lod, Data<const int64_t>(Input(kc, "Offset")),
        Data<T>(Output(kc, "Out")), p.out.lod, p.out.sequences, p.out.capacity, p.out.width);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceSliceGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  SequenceSlicePlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceSlice(kc, true, &p))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (p.x.capacity * p.x.width == 0 || p.x.sequences == 0) return nullptr;
    SequenceSliceGradKernel<T><<<Blocks(p.x.capacity * p.x.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "Out@GRAD")), p.out.lod,
        Data<const int64_t>(Input(kc, "Offset")), Data<T>(dx), p.x.lod, p.x.sequences,
        p.x.capacity, p.x.width);
    return nullptr;
  });
}

template <typename T>
__global__ void SequenceUnpadKernel(const T* x, T* out, const int64_t* out_lod,
                                    int64_t sequences, int64_t capacity, int64_t width,
                                    int64_t padded_length) {
  FLEET_CUDA_LOOP(e, capacity * width) {
    const int64_t row = e / width;
    const int64_t s = SequenceOfRow(out_lod, sequences, row);
    if (s < 0) continue;
    out[e] = x[(s * padded_length + row - out_lod[s]) * width + (e - row * width)];
  }
}

// One thread per element of X@GRAD [S, L, width]: step t of sequence s, 0 past its length.
template <typename T>
__global__ void SequenceUnpadGradKernel(const T* dout, const int64_t* out_lod, T* dx,
                                        int64_t sequences, int64_t width,
                                        int64_t padded_length) {
  FLEET_CUDA_LOOP(e, sequences * padded_length * width) {
    const int64_t s = e / (padded_length * width);
    const int64_t t = (e / width) % padded_length;
    dx[e] = t < out_lod[s + 1] - out_lod[s]
                ? dout[(out_lod[s] + t) * width + e % width]
                : T(0);
  }
}

template <typename T>
FleetStatus* SequenceUnpad(void*, const FleetKernelContext* kc, void*) {
  SequenceUnpadPlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceUnpad(kc, false, &p))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (p.out.capacity * p.out.width == 0 || p.out.sequences == 0) return nullptr;
    SequenceUnpadKernel<T><<<Blocks(p.out.capacity * p.out.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "X")), Data<T>(Output(kc, "Out")), p.out.lod, p.out.sequences,
        p.out.capacity, p.out.width, p.padded_length);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceUnpadGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  SequenceUnpadPlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceUnpad(kc, true, &p))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t n = p.out.sequences * p.padded_length * p.out.width;
    if (n == 0) return nullptr;
    SequenceUnpadGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "Out@GRAD")), p.out.lod, Data<T>(dx), p.out.sequences,
        p.out.width, p.padded_length);
    return nullptr;
  });
}

}  // namespace

void AddNnSequenceOffsetKernels(KernelList& list) {
  constexpr uint32_t kSeq = FLEET_KERNEL_FLAG_SEQUENCES;
  const auto add = [&](const char* op, int32_t dtype, LaunchFn f) {
    Add(list, op, dtype, f, nullptr, nullptr, nullptr, kSeq);
  };
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

}  // namespace fleet_cuda
