// Sequence kernels: sequence_pool, sequence_softmax, sequence_reverse, sequence_pad,
// sequence_expand_as and sequence_expand (with their grads) over the offsets of a sequence tensor (FleetTensor.lod),
// and sequence_mask; the planning is shared with the CUDA plugin in plugins/common. Padding
// rows of a sequence output are left as they are: the host zeroes them after the launch.
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

// The mean length of a batch's sequences, in rows: the work of one item of a loop over them.
int64_t RowsPerSequence(const int64_t* lod, int64_t sequences) {
  if (lod == nullptr || sequences <= 0) return 1;
  return std::max<int64_t>(1, (lod[sequences] - lod[0]) / sequences);
}

FleetStatus* Plan(const FleetKernelContext* kc, bool grad, SequencePoolPlan* plan) {
  if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequencePool(kc, grad, plan))) return st;
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
    ParallelForEach(kc, p.sequences, w * RowsPerSequence(p.lod, p.sequences), [&](int64_t s) {
      const int64_t begin = p.lod[s], end = p.lod[s + 1];
      T* o = out + s * w;
      int32_t* idx = index != nullptr ? index + s * w : nullptr;
      if (end <= begin) {  // an empty sequence
        std::fill(o, o + w, static_cast<T>(p.pad_value));
        if (idx != nullptr) std::fill(idx, idx + w, -1);
        return;
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
    });
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
    ParallelForEach(kc, p.sequences, w * RowsPerSequence(p.lod, p.sequences), [&](int64_t s) {
      const int64_t begin = p.lod[s], end = p.lod[s + 1];
      if (end <= begin) return;  // pad_value is a constant: no gradient
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
    });
    return nullptr;
  });
}


// ---- the other sequence ops --------------------------------------------------------------------

using fleet::kernel::SequencePadPlan;
using fleet::kernel::SequenceRows;

// The plan's status, then the offsets (host memory here), as Plan above does for sequence_pool.
FleetStatus* Checked(const FleetKernelContext* kc, const fleet::kernel::PlanStatus& planned,
                     const SequenceRows& r) {
  if (FleetStatus* st = FromPlan(planned)) return st;
  if (r.lod[0] != 0 || r.lod[r.sequences] > r.capacity) {
    return InvalidArgument(OpName(kc) + ": the offsets run from " + std::to_string(r.lod[0]) +
                           " to " + std::to_string(r.lod[r.sequences]) + ", outside the " +
                           std::to_string(r.capacity) + " rows");
  }
  return nullptr;
}

template <typename T>
FleetStatus* SequenceSoftmax(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequenceRows r;
    if (FleetStatus* st = Checked(kc, fleet::kernel::PlanSequenceSoftmax(kc, false, &r), r)) {
      return st;
    }
    const T* x = Data<T>(Input(kc, "X"));
    T* out = Data<T>(Output(kc, "Out"));
    ParallelForEach(kc, r.sequences, r.width * RowsPerSequence(r.lod, r.sequences), [&](int64_t s) {
      fleet::kernel::SequenceSoftmaxRows(x, out, r.lod[s], r.lod[s + 1]);
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceSoftmaxGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    SequenceRows r;
    if (FleetStatus* st = Checked(kc, fleet::kernel::PlanSequenceSoftmax(kc, true, &r), r)) {
      return st;
    }
    const T* out = Data<T>(Input(kc, "Out"));
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    ParallelForEach(kc, r.sequences, r.width * RowsPerSequence(r.lod, r.sequences), [&](int64_t s) {
      fleet::kernel::SequenceSoftmaxGradRows(out, dout, Data<T>(dx), r.lod[s], r.lod[s + 1]);
    });
    return nullptr;
  });
}

// Also its own gradient (on Y@GRAD), so any element type of rows.
template <typename T>
FleetStatus* SequenceReverse(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequenceRows r;
    if (FleetStatus* st = Checked(kc, fleet::kernel::PlanSequenceReverse(kc, &r), r)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    T* y = Data<T>(Output(kc, "Y"));
    const int64_t w = r.width;
    ParallelForEach(kc, r.sequences, w * RowsPerSequence(r.lod, r.sequences), [&](int64_t s) {
      const int64_t begin = r.lod[s], end = r.lod[s + 1];
      for (int64_t row = begin; row < end; ++row) {
        const int64_t from = begin + end - 1 - row;
        std::copy(x + from * w, x + (from + 1) * w, y + row * w);
      }
    });
    return nullptr;
  });
}

// The first sequence longer than padded_length, or nullptr.
FleetStatus* CheckPadLengths(const FleetKernelContext* kc, const SequencePadPlan& p) {
  for (int64_t s = 0; s < p.rows.sequences; ++s) {
    const int64_t length = p.rows.lod[s + 1] - p.rows.lod[s];
    if (length > p.padded_length) {
      return InvalidArgument(
          fleet::kernel::SequencePadTooLong(kc, s, length, p.padded_length));
    }
  }
  return nullptr;
}

template <typename T>
FleetStatus* SequencePad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequencePadPlan p;
    if (FleetStatus* st = Checked(kc, fleet::kernel::PlanSequencePad(kc, false, &p), p.rows)) {
      return st;
    }
    if (FleetStatus* st = CheckPadLengths(kc, p)) return st;
    const T* x = Data<T>(Input(kc, "X"));
    const T* pad = Data<T>(Input(kc, "PadValue"));
    T* out = Data<T>(Output(kc, "Out"));
    int64_t* length = Data<int64_t>(Output(kc, "Length"));
    const int64_t w = p.rows.width, len = p.padded_length;
    ParallelForEach(kc, p.rows.sequences, w * len, [&](int64_t s) {
      const int64_t begin = p.rows.lod[s], end = p.rows.lod[s + 1];
      length[s] = end - begin;
      T* o = out + s * len * w;
      std::copy(x + begin * w, x + end * w, o);
      for (int64_t t = end - begin; t < len; ++t) {
        for (int64_t j = 0; j < w; ++j) o[t * w + j] = pad[p.pad_width == 1 ? 0 : j];
      }
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequencePadGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx_t = Output(kc, "X@GRAD");
    if (dx_t == nullptr) return nullptr;
    SequencePadPlan p;
    if (FleetStatus* st = Checked(kc, fleet::kernel::PlanSequencePad(kc, true, &p), p.rows)) {
      return st;
    }
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    T* dx = Data<T>(dx_t);
    const int64_t w = p.rows.width;
    // Rows past padded_length (which the forward op refused) get 0, as on CUDA.
    ParallelForEach(kc, p.rows.sequences, w * p.padded_length, [&](int64_t s) {
      const int64_t begin = p.rows.lod[s], end = p.rows.lod[s + 1];
      const int64_t kept = std::min(end - begin, p.padded_length);
      const T* g = dout + s * p.padded_length * w;
      std::copy(g, g + kept * w, dx + begin * w);
      std::fill(dx + (begin + kept) * w, dx + end * w, T(0));
    });
    return nullptr;
  });
}

template <typename L, typename O>
void FillMask(const FleetKernelContext* kc, const L* lengths, O* y,
              const fleet::kernel::SequenceMaskPlan& p) {
  ParallelForEach(kc, p.lengths, p.maxlen, [&](int64_t i) {
    for (int64_t j = 0; j < p.maxlen; ++j) {
      y[i * p.maxlen + j] = static_cast<O>(j < static_cast<int64_t>(lengths[i]) ? 1 : 0);
    }
  });
}

// L: the lengths' type (the kernel's dtype); the output type is the op's out_dtype.
template <typename L>
FleetStatus* SequenceMask(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    fleet::kernel::SequenceMaskPlan p;
    if (FleetStatus* st = FromPlan(fleet::kernel::PlanSequenceMask(kc, &p))) return st;
    const L* x = Data<L>(Input(kc, "X"));
    const FleetTensor* y = Output(kc, "Y");
    switch (p.out_dtype) {
      case FLEET_DTYPE_FLOAT32: FillMask(kc, x, Data<float>(y), p); break;
      case FLEET_DTYPE_FLOAT64: FillMask(kc, x, Data<double>(y), p); break;
      case FLEET_DTYPE_INT64: FillMask(kc, x, Data<int64_t>(y), p); break;
      case FLEET_DTYPE_INT32: FillMask(kc, x, Data<int32_t>(y), p); break;
      default: FillMask(kc, x, Data<bool>(y), p); break;  // bool, the one other dtype planned
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceExpandAs(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    SequenceRows r;
    if (FleetStatus* st = Checked(kc, fleet::kernel::PlanSequenceExpandAs(kc, false, &r), r)) {
      return st;
    }
    const T* x = Data<T>(Input(kc, "X"));
    T* out = Data<T>(Output(kc, "Out"));
    const int64_t w = r.width;
    ParallelForEach(kc, r.sequences, w * RowsPerSequence(r.lod, r.sequences), [&](int64_t s) {
      for (int64_t row = r.lod[s]; row < r.lod[s + 1]; ++row) {
        std::copy(x + s * w, x + (s + 1) * w, out + row * w);
      }
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* SequenceExpandAsGrad(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* dx_t = Output(kc, "X@GRAD");
    if (dx_t == nullptr) return nullptr;
    SequenceRows r;
    if (FleetStatus* st = Checked(kc, fleet::kernel::PlanSequenceExpandAs(kc, true, &r), r)) {
      return st;
    }
    const T* dout = Data<T>(Input(kc, "Out@GRAD"));
    T* dx = Data<T>(dx_t);
    const int64_t w = r.width;
    ParallelForEach(kc, r.sequences, w * RowsPerSequence(r.lod, r.sequences), [&](int64_t s) {
      T* g = dx + s * w;
      std::fill(g, g + w, T(0));
      for (int64_t row = r.lod[s]; row < r.lod[s + 1]; ++row) {
        for (int64_t j = 0; j < w; ++j) g[j] += dout[row * w + j];
      }
    });
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
  // Float kernels for the float-only ops, and for the ops that move rows (reverse, pad,
  // expand_as) int64 and int32 too, as Paddle registers them.
  const auto floats = [&](const char* op, LaunchFn f32, LaunchFn f64) {
    Add(list, op, FLEET_DTYPE_FLOAT32, f32, nullptr, nullptr, nullptr, kSeq);
    Add(list, op, FLEET_DTYPE_FLOAT64, f64, nullptr, nullptr, nullptr, kSeq);
  };
  const auto ints = [&](const char* op, LaunchFn i64, LaunchFn i32) {
    Add(list, op, FLEET_DTYPE_INT64, i64, nullptr, nullptr, nullptr, kSeq);
    Add(list, op, FLEET_DTYPE_INT32, i32, nullptr, nullptr, nullptr, kSeq);
  };
  floats("sequence_softmax", SequenceSoftmax<float>, SequenceSoftmax<double>);
  floats("sequence_softmax_grad", SequenceSoftmaxGrad<float>, SequenceSoftmaxGrad<double>);
  floats("sequence_reverse", SequenceReverse<float>, SequenceReverse<double>);
  ints("sequence_reverse", SequenceReverse<int64_t>, SequenceReverse<int32_t>);
  floats("sequence_pad", SequencePad<float>, SequencePad<double>);
  ints("sequence_pad", SequencePad<int64_t>, SequencePad<int32_t>);
  floats("sequence_pad_grad", SequencePadGrad<float>, SequencePadGrad<double>);
  floats("sequence_expand_as", SequenceExpandAs<float>, SequenceExpandAs<double>);
  ints("sequence_expand_as", SequenceExpandAs<int64_t>, SequenceExpandAs<int32_t>);
  floats("sequence_expand_as_grad", SequenceExpandAsGrad<float>, SequenceExpandAsGrad<double>);
  // sequence_expand over a dense X is sequence_expand_as (host/ops/sequence_offset_ops.cc).
  floats("sequence_expand", SequenceExpandAs<float>, SequenceExpandAs<double>);
  ints("sequence_expand", SequenceExpandAs<int64_t>, SequenceExpandAs<int32_t>);
  floats("sequence_expand_grad", SequenceExpandAsGrad<float>, SequenceExpandAsGrad<double>);
  // Dense lengths in, dense masks out: no offsets, so no sequence flag.
  Add(list, "sequence_mask", FLEET_DTYPE_INT64, SequenceMask<int64_t>);
  Add(list, "sequence_mask", FLEET_DTYPE_INT32, SequenceMask<int32_t>);
}

}  // namespace fleet_cpu
