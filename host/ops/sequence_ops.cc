// Sequence ops: ops over sequence tensors (lod_level 1) whose kernels read the offsets
// (OpSchema::sequence_kernel). sequence_pool turns each sequence into one row.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

// Paddle's pooltype values.
bool KnownPoolType(const std::string& type) {
  return type == "AVERAGE" || type == "SUM" || type == "SQRT" || type == "MAX" ||
         type == "LAST" || type == "FIRST";
}

std::vector<AttrSpec> SequencePoolAttrs() {
  return {{"pooltype", std::string("AVERAGE")}, {"is_test", false}, {"pad_value", 0.0f}};
}

// X must be a sequence tensor with a rows dim; the pool type one of Paddle's.
Status CheckSequencePool(const ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  if (x.lod_level != 1) {
    return c.Error("input X '" + std::string(c.op().InputOne("X")) +
                   "' is dense; sequence_pool pools sequences (a var declared with lod_level=1, "
                   "or one that follows such a var's sequences)");
  }
  if (x.dims.empty()) return c.Error("X must have a rows dimension, got a scalar");
  const std::string type = c.StringAttr("pooltype");
  if (!KnownPoolType(type)) {
    return c.Error("pooltype '" + type + "' is not one of AVERAGE, SUM, SQRT, MAX, LAST, FIRST");
  }
  return OkStatus();
}

void RegisterSequencePool(OpRegistry& registry) {
  OpSchema s;
  s.type = "sequence_pool";
  s.summary = "one row per sequence of X: its AVERAGE, SUM, SQRT (sum / sqrt(length)), MAX, "
              "LAST or FIRST row; pad_value for an empty sequence";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}, {"MaxIndex", true}};
  s.attrs = SequencePoolAttrs();
  s.sequence_kernel = true;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequencePool(c));
    const TensorInfo& x = c.Input("X");
    TensorInfo out{x.dtype, x.dims};
    out.dims[0] = x.sequences;  // -1 until the executor knows the batch
    c.Output("Out") = out;
    if (c.HasOutput("MaxIndex")) c.Output("MaxIndex") = TensorInfo{ir::DataType::kInt32, out.dims};
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        GradOp(fwd, "sequence_pool_grad", {"X", "MaxIndex"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "sequence_pool_grad";
  g.summary = "X@GRAD: each sequence's rows get Out@GRAD as its pool type spreads it";
  g.inputs = {{"X"}, {"MaxIndex", true, false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = SequencePoolAttrs();
  g.kernel_dtype_slot = "Out@GRAD";
  g.sequence_kernel = true;
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequencePool(c));
    if (c.StringAttr("pooltype") == "MAX" && !c.HasInput("MaxIndex")) {
      return c.Error("pooltype MAX needs MaxIndex from the forward op");
    }
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterSequenceOps(OpRegistry& registry) { RegisterSequencePool(registry); }

}  // namespace fleet::ops
