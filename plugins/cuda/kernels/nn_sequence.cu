// CUDA kernels of the sequence ops (sequence_pool, sequence_softmax, sequence_reverse,
// sequence_pad, sequence_expand_as / sequence_expand with their grads, and sequence_mask), with
// the CPU plugin's semantics (plugins/cpu/kernels/sequence_kernels.cc; planning shared in
// plugins/common/sequence_plan.h).
//
// Where a result is a sum or a scan of a sequence (pool, softmax, expand_as_grad), one thread
// per (sequence, column) walks the sequence's rows in order, so sums are added in the CPU's
// order and MAX keeps the first of equal values, as the CPU does. Where each element is a copy
// (reverse, pad, expand_as), one thread per element finds its sequence by a binary search of the
// offsets. The offsets are in device memory (FleetTensor.lod), so nothing waits for the host;
// sequence_pad reports a sequence longer than padded_length through the nn flag (nn_groups.h).
#include <limits>
#include <string>
#include <type_traits>

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
  return FromPlan(fleet::kernel::PlanSequencePool(kc, grad, plan));
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


// ---- the other sequence ops --------------------------------------------------------------------

using fleet::kernel::SequenceOfRow;
using fleet::kernel::SequencePadPlan;
using fleet::kernel::SequenceRows;

template <typename T>
__global__ void SequenceSoftmaxKernel(const T* x, const int64_t* lod, T* out, int64_t sequences) {
  FLEET_CUDA_LOOP(s, sequences) { fleet::kernel::SequenceSoftmaxRows(x, out, lod[s], lod[s + 1]); }
}

template <typename T>
__global__ void SequenceSoftmaxGradKernel(const T* out, const T* dout, const int64_t* lod, T* dx,
                                          int64_t sequences) {
  FLEET_CUDA_LOOP(s, sequences) {
    fleet::kernel::SequenceSoftmaxGradRows(out, dout, dx, lod[s], lod[s + 1]);
  }
}

template <typename T>
FleetStatus* SequenceSoftmax(void*, const FleetKernelContext* kc, void*) {
  SequenceRows r;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceSoftmax(kc, false, &r))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (r.sequences == 0) return nullptr;
    SequenceSoftmaxKernel<T><<<Blocks(r.sequences), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "X")), r.lod, Data<T>(Output(kc, "Out")), r.sequences);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceSoftmaxGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  SequenceRows r;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceSoftmax(kc, true, &r))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (r.sequences == 0) return nullptr;
    SequenceSoftmaxGradKernel<T><<<Blocks(r.sequences), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "Out")), Data<const T>(Input(kc, "Out@GRAD")), r.lod,
        Data<T>(dx), r.sequences);
    return nullptr;
  });
}

template <typename T>
__global__ void SequenceReverseKernel(const T* x, const int64_t* lod, T* y, int64_t sequences,
                                      int64_t capacity, int64_t width) {
  FLEET_CUDA_LOOP(e, capacity * width) {
    const int64_t row = e / width;
    const int64_t s = SequenceOfRow(lod, sequences, row);
    if (s < 0) continue;  // padding: the host zeroes it
    const int64_t from = lod[s] + lod[s + 1] - 1 - row;
    y[e] = x[from * width + (e - row * width)];
  }
}

template <typename T>
FleetStatus* SequenceReverse(void*, const FleetKernelContext* kc, void*) {
  SequenceRows r;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceReverse(kc, &r))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (r.capacity * r.width == 0 || r.sequences == 0) return nullptr;
    SequenceReverseKernel<T><<<Blocks(r.capacity * r.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "X")), r.lod, Data<T>(Output(kc, "Y")), r.sequences, r.capacity,
        r.width);
    return nullptr;
  });
}

// Out [S, L, width]: row t of sequence s, or PadValue past its length. A sequence longer than L
// sets the flag to its index and, for float types, fills its padded rows with NaN (the only sign
// an asynchronous launch leaves, nn_groups.h).
template <typename T>
__global__ void SequencePadKernel(const T* x, const int64_t* lod, const T* pad, int64_t pad_width,
                                  T* out, int64_t* length, int64_t sequences, int64_t padded,
                                  int64_t width, unsigned long long* flag) {
  FLEET_CUDA_LOOP(e, sequences * padded * width) {
    const int64_t s = e / (padded * width);
    const int64_t t = (e / width) % padded;
    const int64_t j = e % width;
    const int64_t n = lod[s + 1] - lod[s];
    if (t == 0 && j == 0) {
      length[s] = n;
      if (n > padded) atomicMin(flag, static_cast<unsigned long long>(s));
    }
    if (n > padded && std::is_floating_point<T>::value) {
      out[e] = std::numeric_limits<T>::quiet_NaN();
    } else {
      out[e] = t < n ? x[(lod[s] + t) * width + j] : pad[pad_width == 1 ? 0 : j];
    }
  }
}

// X@GRAD row by row: Out@GRAD[s, t] for row t of sequence s (rows past padded_length, which
// the forward op refused, get 0, as do padding rows).
template <typename T>
__global__ void SequencePadGradKernel(const T* dout, const int64_t* lod, T* dx, int64_t sequences,
                                      int64_t capacity, int64_t padded, int64_t width) {
  FLEET_CUDA_LOOP(e, capacity * width) {
    const int64_t row = e / width;
    const int64_t s = SequenceOfRow(lod, sequences, row);
    const int64_t t = s < 0 ? padded : row - lod[s];
    dx[e] = t < padded ? dout[(s * padded + t) * width + (e - row * width)] : T(0);
  }
}

template <typename T>
FleetStatus* SequencePad(void*, const FleetKernelContext* kc, void*) {
  SequencePadPlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequencePad(kc, false, &p))) return st;
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  const FleetTensor* length = Output(kc, "Length");
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t n = p.rows.sequences * p.padded_length * p.rows.width;
    if (n == 0) return nullptr;
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    SequencePadKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "X")), p.rows.lod, Data<const T>(Input(kc, "PadValue")),
        p.pad_width, Data<T>(Output(kc, "Out")), Data<int64_t>(length), p.rows.sequences,
        p.padded_length, p.rows.width, flag);
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, length, &pos, &value)) return st;
    if (pos < 0) return nullptr;
    return InvalidArgument(fleet::kernel::SequencePadTooLong(kc, pos, value, p.padded_length));
  });
}

template <typename T>
FleetStatus* SequencePadGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  SequencePadPlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequencePad(kc, true, &p))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t n = p.rows.capacity * p.rows.width;
    if (n == 0) return nullptr;
    SequencePadGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "Out@GRAD")), p.rows.lod, Data<T>(dx), p.rows.sequences,
        p.rows.capacity, p.padded_length, p.rows.width);
    return nullptr;
  });
}

template <typename L, typename O>
__global__ void SequenceMaskKernel(const L* lengths, O* y, int64_t n, int64_t maxlen) {
  FLEET_CUDA_LOOP(e, n * maxlen) {
    const int64_t i = e / maxlen;
    y[e] = static_cast<O>(e - i * maxlen < static_cast<int64_t>(lengths[i]) ? 1 : 0);
  }
}

template <typename L>
FleetStatus* SequenceMask(void*, const FleetKernelContext* kc, void*) {
  fleet::kernel::SequenceMaskPlan p;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceMask(kc, &p))) return st;
  const L* x = Data<const L>(Input(kc, "X"));
  const FleetTensor* y = Output(kc, "Y");
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const int64_t n = p.lengths * p.maxlen;
    if (n == 0) return nullptr;
    const auto launch = [&](auto* out) {
      SequenceMaskKernel<<<Blocks(n), kThreads, 0, s->native>>>(x, out, p.lengths, p.maxlen);
    };
    switch (p.out_dtype) {
      case FLEET_DTYPE_FLOAT32: launch(Data<float>(y)); break;
      case FLEET_DTYPE_FLOAT64: launch(Data<double>(y)); break;
      case FLEET_DTYPE_INT64: launch(Data<int64_t>(y)); break;
      case FLEET_DTYPE_INT32: launch(Data<int32_t>(y)); break;
      default: launch(Data<bool>(y)); break;  // bool, the one other dtype planned
    }
    return nullptr;
  });
}

template <typename T>
__global__ void SequenceExpandAsKernel(const T* x, const int64_t* lod, T* out, int64_t sequences,
                                       int64_t capacity, int64_t width) {
  FLEET_CUDA_LOOP(e, capacity * width) {
    const int64_t row = e / width;
    const int64_t s = SequenceOfRow(lod, sequences, row);
    if (s < 0) continue;  // padding: the host zeroes it
    out[e] = x[s * width + (e - row * width)];
  }
}

template <typename T>
__global__ void SequenceExpandAsGradKernel(const T* dout, const int64_t* lod, T* dx,
                                           int64_t sequences, int64_t width) {
  FLEET_CUDA_LOOP(e, sequences * width) {
    const int64_t s = e / width;
    const int64_t j = e - s * width;
    T sum = T(0);
    for (int64_t r = lod[s]; r < lod[s + 1]; ++r) sum += dout[r * width + j];
    dx[e] = sum;
  }
}

template <typename T>
FleetStatus* SequenceExpandAs(void*, const FleetKernelContext* kc, void*) {
  SequenceRows r;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceExpandAs(kc, false, &r))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (r.capacity * r.width == 0 || r.sequences == 0) return nullptr;
    SequenceExpandAsKernel<T><<<Blocks(r.capacity * r.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "X")), r.lod, Data<T>(Output(kc, "Out")), r.sequences,
        r.capacity, r.width);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceExpandAsGrad(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  SequenceRows r;
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceExpandAs(kc, true, &r))) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (r.sequences * r.width == 0) return nullptr;
    SequenceExpandAsGradKernel<T><<<Blocks(r.sequences * r.width), kThreads, 0, s->native>>>(
        Data<const T>(Input(kc, "Out@GRAD")), r.lod, Data<T>(dx), r.sequences, r.width);
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
  // The CPU plugin's dtypes (sequence_kernels.cc).
  const auto floats = [&](const char* op, LaunchFn f32, LaunchFn f64, PrepareFn prepare) {
    Add(list, op, FLEET_DTYPE_FLOAT32, f32, prepare, nullptr, nullptr, kSeq);
    Add(list, op, FLEET_DTYPE_FLOAT64, f64, prepare, nullptr, nullptr, kSeq);
  };
  const auto ints = [&](const char* op, LaunchFn i64, LaunchFn i32, PrepareFn prepare) {
    Add(list, op, FLEET_DTYPE_INT64, i64, prepare, nullptr, nullptr, kSeq);
    Add(list, op, FLEET_DTYPE_INT32, i32, prepare, nullptr, nullptr, kSeq);
  };
  floats("sequence_softmax", SequenceSoftmax<float>, SequenceSoftmax<double>, nullptr);
  floats("sequence_softmax_grad", SequenceSoftmaxGrad<float>, SequenceSoftmaxGrad<double>,
         nullptr);
  floats("sequence_reverse", SequenceReverse<float>, SequenceReverse<double>, nullptr);
  ints("sequence_reverse", SequenceReverse<int64_t>, SequenceReverse<int32_t>, nullptr);
  floats("sequence_pad", SequencePad<float>, SequencePad<double>, PrepareFlag);
  ints("sequence_pad", SequencePad<int64_t>, SequencePad<int32_t>, PrepareFlag);
  floats("sequence_pad_grad", SequencePadGrad<float>, SequencePadGrad<double>, nullptr);
  floats("sequence_expand_as", SequenceExpandAs<float>, SequenceExpandAs<double>, nullptr);
  ints("sequence_expand_as", SequenceExpandAs<int64_t>, SequenceExpandAs<int32_t>, nullptr);
  floats("sequence_expand_as_grad", SequenceExpandAsGrad<float>, SequenceExpandAsGrad<double>,
         nullptr);
  // sequence_expand over a dense X is sequence_expand_as (host/ops/sequence_offset_ops.cc).
  floats("sequence_expand", SequenceExpandAs<float>, SequenceExpandAs<double>, nullptr);
  ints("sequence_expand", SequenceExpandAs<int64_t>, SequenceExpandAs<int32_t>, nullptr);
  floats("sequence_expand_grad", SequenceExpandAsGrad<float>, SequenceExpandAsGrad<double>,
         nullptr);
  Add(list, "sequence_mask", FLEET_DTYPE_INT64, SequenceMask<int64_t>);
  Add(list, "sequence_mask", FLEET_DTYPE_INT32, SequenceMask<int32_t>);
}

}  // namespace fleet_cuda
