// Sequence ops: ops over sequence tensors (lod_level 1) whose kernels read the offsets
// (OpSchema::sequence_kernel). sequence_pool turns each sequence into one row; sequence_softmax
// and sequence_reverse work within each sequence; sequence_pad writes the sequences into a
// dense [sequences, padded_length, ...] tensor; sequence_expand_as and sequence_expand repeat
// one row per sequence over that sequence's rows. sequence_mask is a dense op (lengths in, masks
// out) kept here with its family.
//
// A sequence output here shares the offsets of the op's first sequence input (the executor's
// rule); the ops that make offsets of their own are in sequence_offset_ops.cc.
// Shapes that would depend on the lengths of a batch (sequence_pad's and sequence_mask's -1 =
// the longest) are refused: buffers are sized when the program is prepared.
#include "ops/nn_util.h"
#include "ops/tensor_ops_util.h"

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


// ---- sequence_softmax -------------------------------------------------------------------------

// Paddle's sequence_softmax: one value per row, [N, 1] or [N].
Status CheckSoftmaxRows(const ShapeContext& c, std::string_view slot) {
  FLEET_RETURN_IF_ERROR(RequireSequences(c, slot, "normalises within sequences"));
  const std::vector<int64_t>& d = c.Input(slot).dims;
  if (d.size() > 2 || (d.size() == 2 && d[1] != 1)) {
    return c.Error(std::string(slot) + " must be [N, 1] or [N] (one value per row), got " +
                   ir::ShapeText(d));
  }
  return OkStatus();
}

void RegisterSequenceSoftmax(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"use_cudnn", false}};
  OpSchema s;
  s.type = "sequence_softmax";
  s.summary = "Out = softmax of X's values within each sequence (X [N, 1] or [N])";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = attrs;
  s.sequence_kernel = true;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSoftmaxRows(c, "X"));
    c.Output("Out") = c.Input("X");
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "sequence_softmax_grad", {"Out"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "sequence_softmax_grad";
  g.summary = "X@GRAD = Out * (Out@GRAD - sum over the sequence of Out * Out@GRAD)";
  g.inputs = {{"Out"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = attrs;
  g.kernel_dtype_slot = "Out@GRAD";
  g.sequence_kernel = true;
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSoftmaxRows(c, "Out"));
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("Out");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// ---- sequence_reverse -------------------------------------------------------------------------

void RegisterSequenceReverse(OpRegistry& registry) {
  OpSchema s;
  s.type = "sequence_reverse";
  s.summary = "Y = X with the rows of each sequence in reverse order";
  s.inputs = {{"X"}};
  s.outputs = {{"Y"}};
  s.sequence_kernel = true;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(RequireSequences(c, "X", "reverses the rows of each sequence"));
    if (c.Input("X").dims.size() < 2) {
      return c.Error("X must have rank >= 2 ([N, ...] rows), got " +
                     ir::ShapeText(c.Input("X").dims));
    }
    c.Output("Y") = c.Input("X");
    return OkStatus();
  };
  // As in Paddle, the gradient is the same reversal applied to Y@GRAD (it shares X's sequences).
  s.grad = [](const ir::Op& fwd) {
    ir::Op g;
    g.type = "sequence_reverse";
    g.inputs["X"] = {ir::GradVarName(fwd.OutputOne("Y"))};
    g.outputs["Y"] = {ir::GradVarName(fwd.InputOne("X"))};
    return std::vector<ir::Op>{std::move(g)};
  };
  RegisterBuiltin(registry, std::move(s));
}

// ---- sequence_pad -----------------------------------------------------------------------------

// X a sequence tensor of rank >= 2, padded_length > 0, PadValue (forward only) one value or one
// row of X.
Status CheckSequencePad(const ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireSequences(c, "X", "pads sequences"));
  const TensorInfo& x = c.Input("X");
  if (x.dims.size() < 2) {
    return c.Error("X must have rank >= 2 ([N, ...] rows), got " + ir::ShapeText(x.dims));
  }
  const int64_t length = c.IntAttr("padded_length");
  if (length <= 0) {
    return c.Error("padded_length must be > 0, got " + std::to_string(length) +
                   " (-1, the longest sequence of each batch, would make Out's shape depend on "
                   "the batch, and Out is sized when the program is prepared)");
  }
  return OkStatus();
}

void RegisterSequencePad(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"padded_length", int32_t{-1}}};
  OpSchema s;
  s.type = "sequence_pad";
  s.summary = "Out[s, t] = row t of sequence s for t < its length, else PadValue; "
              "Length[s] = its length";
  s.inputs = {{"X"}, {"PadValue", false, false, true}};
  s.outputs = {{"Out"}, {"Length"}};
  s.attrs = attrs;
  s.sequence_kernel = true;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequencePad(c));
    FLEET_RETURN_IF_ERROR(RequireDense(c, "PadValue", "one value, or one row of X"));
    const TensorInfo& x = c.Input("X");
    const TensorInfo& pad = c.Input("PadValue");
    if (pad.dtype != x.dtype) {
      return c.Error("PadValue is " + std::string(ir::DataTypeName(pad.dtype)) + " but X is " +
                     std::string(ir::DataTypeName(x.dtype)));
    }
    const std::vector<int64_t> row(x.dims.begin() + 1, x.dims.end());
    int64_t pad_numel = 1;
    for (int64_t d : pad.dims) pad_numel = d < 0 || pad_numel < 0 ? -1 : pad_numel * d;
    if (pad_numel != 1 && !ir::ShapesCompatible(pad.dims, row)) {
      return c.Error("PadValue must hold one value or one row of X " + ir::ShapeText(row) +
                     ", got " + ir::ShapeText(pad.dims));
    }
    TensorInfo out{x.dtype, {x.sequences, c.IntAttr("padded_length")}};
    out.dims.insert(out.dims.end(), row.begin(), row.end());
    c.Output("Out") = out;
    c.Output("Length") = TensorInfo{ir::DataType::kInt64, {x.sequences}};
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "sequence_pad_grad", {"X"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "sequence_pad_grad";
  g.summary = "X@GRAD: row t of sequence s gets Out@GRAD[s, t]; the padding gets nothing";
  g.inputs = {{"X"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = attrs;
  g.kernel_dtype_slot = "Out@GRAD";
  g.sequence_kernel = true;
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequencePad(c));
    FLEET_RETURN_IF_ERROR(RequireDense(c, "Out@GRAD", "the gradient of the padded Out"));
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// ---- sequence_mask ----------------------------------------------------------------------------

void RegisterSequenceMask(OpRegistry& registry) {
  OpSchema s;
  s.type = "sequence_mask";
  s.summary = "Y[..., j] = (j < X[...]) for j < maxlen, in out_dtype (FLEET_DTYPE_* value)";
  s.inputs = {{"X", false, false, true}};
  s.outputs = {{"Y"}};
  s.attrs = {{"maxlen", int32_t{-1}}, {"out_dtype", int32_t{FLEET_DTYPE_INT64}}};
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    if (x.dtype != ir::DataType::kInt64 && x.dtype != ir::DataType::kInt32) {
      return c.Error("X must hold int64 or int32 lengths, got " +
                     std::string(ir::DataTypeName(x.dtype)));
    }
    const int64_t maxlen = c.IntAttr("maxlen");
    if (maxlen <= 0) {
      return c.Error("maxlen must be > 0, got " + std::to_string(maxlen) +
                     " (-1, the largest length of each batch, would make Y's shape depend on "
                     "the values of X, and Y is sized when the program is prepared)");
    }
    const int64_t dtype = c.IntAttr("out_dtype");
    const auto t = static_cast<ir::DataType>(dtype);
    if (!tensor_ops::IsValidDtype(dtype) ||
        (t != ir::DataType::kFloat32 && t != ir::DataType::kFloat64 &&
         t != ir::DataType::kInt64 && t != ir::DataType::kInt32 && t != ir::DataType::kBool)) {
      return c.Error("out_dtype " + std::to_string(dtype) +
                     " is not float32 (9), float64 (10), int64 (6), int32 (5) or bool (1)");
    }
    TensorInfo y{t, x.dims};
    y.dims.push_back(maxlen);
    c.Output("Y") = y;
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

// ---- sequence_expand_as, sequence_expand ------------------------------------------------------

// X dense with one row per sequence of Y; Y a sequence tensor. Paddle's sequence_expand over a
// level-1 Y is the same op when X is dense; with X of sequences its Out would hold one sequence
// per row of Y, a count that changes with every batch while outputs are sized when the program
// is prepared: refused.
Status CheckSequenceExpand(const ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireSequences(c, "Y", "repeats X's rows over Y's sequences"));
  const bool expand_as = c.op().type.rfind("sequence_expand_as", 0) == 0;
  FLEET_RETURN_IF_ERROR(RequireDense(
      c, "X",
      expand_as ? "one row per sequence of Y"
                : "Out would hold one sequence per row of Y, a number that changes with the "
                  "batch; pool X to one row per sequence first (sequence_pool)"));
  if (!expand_as) {
    const int64_t level = c.IntAttr("ref_level");
    if (level != -1 && level != 0) {
      return c.Error("ref_level " + std::to_string(level) + " names no level of Y: sequence "
                     "tensors have one level here (use -1 or 0)");
    }
  }
  const TensorInfo& x = c.Input("X");
  const TensorInfo& y = c.Input("Y");
  if (x.dims.empty()) return c.Error("X must have a rows dimension, got a scalar");
  if (!DimsMatch(x.dims[0], y.sequences)) {
    return c.Error("X has " + std::to_string(x.dims[0]) + " rows but Y holds " +
                   std::to_string(y.sequences) + " sequences (one row of X per sequence)");
  }
  return OkStatus();
}

// sequence_expand_as (no attributes) or sequence_expand (ref_level) and its grad.
void RegisterSequenceExpand(OpRegistry& registry, const std::string& type,
                            const std::vector<AttrSpec>& attrs) {
  OpSchema s;
  s.type = type;
  s.summary = "Out has Y's rows and sequences; every row of sequence s is X[s]";
  s.inputs = {{"X"}, {"Y", false, false, true}};
  s.outputs = {{"Out"}};
  s.attrs = attrs;
  s.sequence_kernel = true;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceExpand(c));
    const TensorInfo& x = c.Input("X");
    const TensorInfo& y = c.Input("Y");
    TensorInfo out{x.dtype, x.dims};
    out.dims[0] = y.dims[0];  // Y's rows (a capacity in the executor)
    out.lod_level = 1;
    out.sequences = y.sequences;
    c.Output("Out") = out;
    return OkStatus();
  };
  s.grad = [type](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, type + "_grad", {"X", "Y"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = type + "_grad";
  g.summary = "X@GRAD[s] = the sum of Out@GRAD over the rows of sequence s (0 when empty)";
  g.inputs = {{"X"}, {"Y", false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = attrs;
  g.kernel_dtype_slot = "Out@GRAD";
  g.sequence_kernel = true;
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceExpand(c));
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

Status RequireSequences(const ShapeContext& c, std::string_view slot, std::string_view what) {
  const TensorInfo& t = c.Input(slot);
  if (t.lod_level != 1) {
    return c.Error("input " + std::string(slot) + " '" + std::string(c.op().InputOne(slot)) +
                   "' is dense; " + c.op().type + " " + std::string(what) +
                   " (a var declared with lod_level=1, or one that follows such a var's "
                   "sequences)");
  }
  if (t.dims.empty()) return c.Error("input " + std::string(slot) + " must have a rows dimension");
  return OkStatus();
}

Status RequireDense(const ShapeContext& c, std::string_view slot, std::string_view why) {
  if (c.Input(slot).lod_level == 0) return OkStatus();
  return c.Error("input " + std::string(slot) + " '" + std::string(c.op().InputOne(slot)) +
                 "' holds sequences, but " + c.op().type + " takes it dense: " + std::string(why));
}

void RegisterSequenceOps(OpRegistry& registry) {
  RegisterSequencePool(registry);
  RegisterSequenceSoftmax(registry);
  RegisterSequenceReverse(registry);
  RegisterSequencePad(registry);
  RegisterSequenceMask(registry);
  RegisterSequenceExpand(registry, "sequence_expand_as", {});
  RegisterSequenceExpand(registry, "sequence_expand", {{"ref_level", int32_t{-1}}});
}

}  // namespace fleet::ops
