// Metric ops: Paddle's `auc`, the area under the ROC curve from bucketed statistics that persist
// across steps. Slots, attributes and defaults are Paddle 1.8's; the bucketing, the sliding
// window and the integration are plugins/common/metric_formulas.h, which also documents the
// layout of the statistics.
//
// The op reads and writes its statistics: StatPosOut and StatNegOut are StatPos and StatNeg
// themselves in a program (persistable int64 vars that the startup program zeroes), so each
// run adds the batch to what earlier runs counted. Nothing here is differentiable.
#include <limits>

#include "ops/nn_util.h"
#include "support/text.h"

namespace fleet::ops {
namespace {

bool IsFloat(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64;
}

bool IsIndex(ir::DataType t) { return t == ir::DataType::kInt32 || t == ir::DataType::kInt64; }

// A statistics input: int64, [n] or [1, n] (Paddle's global statistics are [1, buckets]).
Status CheckStat(const ShapeContext& c, std::string_view slot, int64_t n) {
  const TensorInfo& t = c.Input(slot);
  const std::string expected = "int64 [" + std::to_string(n) + "] (or [1, " + std::to_string(n) +
                               "])";
  const bool rank_ok = t.dims.size() == 1 || (t.dims.size() == 2 && DimsMatch(t.dims[0], 1));
  if (t.dtype != ir::DataType::kInt64 || !rank_ok || !DimsMatch(t.dims.back(), n)) {
    return c.Error(std::string(slot) + " must be " + expected + " for num_thresholds " +
                   std::to_string(c.IntAttr("num_thresholds")) + " and slide_steps " +
                   std::to_string(c.IntAttr("slide_steps")) + ", got " +
                   std::string(ir::DataTypeName(t.dtype)) + " " + ir::ShapeText(t.dims));
  }
  return OkStatus();
}

Status InferAuc(ShapeContext& c) {
  const TensorInfo& predict = c.Input("Predict");
  if (!IsFloat(predict.dtype)) {
    return c.Error("Predict must be float32 or float64, got " +
                   std::string(ir::DataTypeName(predict.dtype)));
  }
  if (predict.dims.size() != 2 || (predict.dims[1] >= 0 && predict.dims[1] != 1 &&
                                   predict.dims[1] != 2)) {
    return c.Error("Predict must be [N, 2] (column 1 is the positive class's probability) or "
                   "[N, 1], got " + ir::ShapeText(predict.dims));
  }
  const TensorInfo& label = c.Input("Label");
  const bool label_shape = (label.dims.size() == 2 && DimsMatch(label.dims[1], 1)) ||
                           label.dims.size() == 1;
  if (!IsIndex(label.dtype) || !label_shape || !DimsMatch(label.dims[0], predict.dims[0])) {
    return c.Error("Label must be int64 or int32 [N, 1] with N of Predict " +
                   ir::ShapeText(predict.dims) + ", got " +
                   std::string(ir::DataTypeName(label.dtype)) + " " + ir::ShapeText(label.dims));
  }
  if (c.StringAttr("curve") != "ROC") {
    // Paddle accepts "PR" but its kernel computes the ROC area anyway; refusing says so.
    return c.Error("curve must be 'ROC' (the only curve the auc op computes), got " +
                   QuoteForMessage(c.StringAttr("curve")));
  }
  const int64_t thresholds = c.IntAttr("num_thresholds");
  const int64_t steps = c.IntAttr("slide_steps");
  // Both bounds keep (slide_steps + 1) * (num_thresholds + 1) far inside int64.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max() - 1;
  if (thresholds < 1 || thresholds > kMax) {
    return c.Error("num_thresholds must be in [1, " + std::to_string(kMax) + "], got " +
                   std::to_string(thresholds));
  }
  if (steps < 0 || steps > kMax) {
    return c.Error("slide_steps must be in [0, " + std::to_string(kMax) + "], got " +
                   std::to_string(steps));
  }
  const int64_t buckets = thresholds + 1;
  const int64_t n = steps > 0 ? (steps + 1) * buckets : buckets;
  FLEET_RETURN_IF_ERROR(CheckStat(c, "StatPos", n));
  FLEET_RETURN_IF_ERROR(CheckStat(c, "StatNeg", n));
  c.Output("AUC") = TensorInfo{ir::DataType::kFloat64, {1}};
  if (c.HasOutput("StatPosOut")) c.Output("StatPosOut") = c.Input("StatPos");
  if (c.HasOutput("StatNegOut")) c.Output("StatNegOut") = c.Input("StatNeg");
  return OkStatus();
}

void RegisterAuc(OpRegistry& registry) {
  OpSchema s;
  s.type = "auc";
  s.summary =
      "area under the ROC curve of Predict's positive-class column against Label (0 or 1), "
      "from int64 bucket histograms StatPos/StatNeg updated in place: accumulated "
      "(slide_steps 0) or over a window of the last slide_steps batches";
  s.inputs = {{"Predict", false, false, true},
              {"Label", false, false, true},
              {"StatPos", false, false, true},
              {"StatNeg", false, false, true}};
  s.outputs = {{"AUC"}, {"StatPosOut"}, {"StatNegOut"}};
  // Paddle's op defaults to (2 << 12) - 1 = 8191 thresholds; its layer passes 4095.
  s.attrs = {{"curve", std::string("ROC")},
             {"num_thresholds", int32_t{(2 << 12) - 1}},
             {"slide_steps", int32_t{1}}};
  s.kernel_dtype_slot = "Predict";
  s.infer_shape = InferAuc;
  RegisterBuiltin(registry, std::move(s));
}

}  // namespace

void RegisterNnMetricOps(OpRegistry& registry) { RegisterAuc(registry); }

}  // namespace fleet::ops
