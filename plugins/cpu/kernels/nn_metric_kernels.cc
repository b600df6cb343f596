// The auc kernel, float32 and float64 predictions. Bucketing, the sliding window and the area
// are plugins/common/metric_formulas.h, shared with the CUDA plugin.
//
// Every row is checked before anything is written, so a batch with a label outside {0, 1} or a
// probability outside [0, 1] fails without touching the statistics.
#include <cstring>
#include <string>

#include "kernels/nn_kernels.h"
#include "metric_formulas.h"

namespace fleet_cpu {
namespace {

namespace fk = fleet::kernel;

// `t` must be present with `n` elements of `dtype` (named `dtype_name` in the message).
FleetStatus* Sized(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                   int32_t dtype, const char* dtype_name, int64_t n) {
  if (FleetStatus* st = Require(kc, t, slot)) return st;
  if (t->dtype == dtype && Numel(t) == n) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot + " must hold " + std::to_string(n) + " " +
                         dtype_name + " elements, got " + DimsText(t) +
                         (t->dtype == dtype ? "" : std::string(" of another dtype")));
}

// The statistics the op updates: the output, holding the input's counts (Paddle's kernel copies
// them over when the two are different tensors; in a program they are the same one).
FleetStatus* StatOut(const FleetKernelContext* kc, const char* in_slot, const char* out_slot,
                     int64_t n, int64_t** out) {
  const FleetTensor* in = Input(kc, in_slot);
  const FleetTensor* o = Output(kc, out_slot);
  if (FleetStatus* st = Sized(kc, in, in_slot, FLEET_DTYPE_INT64, "int64", n)) return st;
  if (FleetStatus* st = Sized(kc, o, out_slot, FLEET_DTYPE_INT64, "int64", n)) return st;
  *out = Data<int64_t>(o);
  if (o->data != in->data && n > 0) {
    std::memmove(o->data, in->data, static_cast<size_t>(n) * sizeof(int64_t));
  }
  return nullptr;
}

template <typename T>
FleetStatus* Auc(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* predict = Input(kc, "Predict");
    const FleetTensor* label = Input(kc, "Label");
    if (FleetStatus* st = ExpectRank(kc, predict, "Predict", 2)) return st;
    const int64_t rows = predict->dims[0], width = predict->dims[1];
    if (width != 1 && width != 2) {
      return InvalidArgument(OpName(kc) + ": Predict must be [N, 2] or [N, 1], got " +
                             DimsText(predict));
    }
    if (FleetStatus* st = Require(kc, label, "Label")) return st;
    if ((label->dtype != FLEET_DTYPE_INT64 && label->dtype != FLEET_DTYPE_INT32) ||
        Numel(label) != rows) {
      return InvalidArgument(OpName(kc) + ": Label must be int64 or int32 with one entry per " +
                             "row of Predict (" + std::to_string(rows) + ")");
    }
    const int64_t thresholds = IntAttr(kc, "num_thresholds", 4095);
    const int64_t steps = IntAttr(kc, "slide_steps", 1);
    if (thresholds < 1 || steps < 0) {
      return InvalidArgument(OpName(kc) + ": num_thresholds must be >= 1 and slide_steps >= 0");
    }
    const int64_t buckets = thresholds + 1;
    const int64_t n = fk::AucStatSize(thresholds, steps);
    const FleetTensor* auc = Output(kc, "AUC");
    if (FleetStatus* st = Sized(kc, auc, "AUC", FLEET_DTYPE_FLOAT64, "float64", 1)) return st;

    const T* p = Data<const T>(predict);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t l = IndexAt(label, i);
      if (!fk::AucLabelOk(l)) {
        return InvalidArgument(OpName(kc) + ": Label[" + std::to_string(i) + "] = " +
                               std::to_string(l) + " is not a class label of a binary " +
                               "classifier (0 or 1)");
      }
      const T v = p[i * width + width - 1];
      if (!fk::AucProbabilityOk(v)) {
        return InvalidArgument(OpName(kc) + ": Predict[" + std::to_string(i) + ", " +
                               std::to_string(width - 1) + "] = " + std::to_string(v) +
                               " is not a probability in [0, 1]");
      }
    }
    int64_t* pos = nullptr;
    int64_t* neg = nullptr;
    if (FleetStatus* st = StatOut(kc, "StatPos", "StatPosOut", n, &pos)) return st;
    if (FleetStatus* st = StatOut(kc, "StatNeg", "StatNegOut", n, &neg)) return st;

    if (steps > 0) {
      for (int64_t b = 0; b < buckets; ++b) {
        fk::AucSlideBucket(pos, buckets, steps, b);
        fk::AucSlideBucket(neg, buckets, steps, b);
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      int64_t* stat = IndexAt(label, i) == 1 ? pos : neg;
      int64_t first = 0, second = 0;
      fk::AucCountCells(buckets, steps, fk::AucBucket(p[i * width + width - 1], thresholds),
                        &first, &second);
      ++stat[first];
      if (second >= 0) ++stat[second];
    }
    const int64_t off = fk::AucSumOffset(thresholds, steps);
    int64_t total_pos = 0, total_neg = 0;
    for (int64_t b = 0; b < buckets; ++b) {
      total_pos += pos[off + b];
      total_neg += neg[off + b];
    }
    const fk::AucArea2 area = fk::AucDoubledArea(pos + off, neg + off, 0, buckets, 0);
    Data<double>(auc)[0] = fk::AucValue(area, total_pos, total_neg);
    return nullptr;
  });
}

}  // namespace

void AddNnMetricKernels(KernelList& list) {
  Add(list, "auc", FLEET_DTYPE_FLOAT32, Auc<float>);
  Add(list, "auc", FLEET_DTYPE_FLOAT64, Auc<double>);
}

}  // namespace fleet_cpu
