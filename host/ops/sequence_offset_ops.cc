// Sequence ops whose output has offsets of its own (OpSchema::derive_lod): sequence_concat
// joins the i-th sequences of its inputs, sequence_slice keeps a window of each sequence,
// sequence_unpad turns a padded [S, L, ...] tensor back into sequences. Their outputs are
// sized for the most rows they can hold (the sum of the inputs' rows; X's rows; S * L), and
// the executor makes their offsets before each launch with the functions here, which the
// conformance harness calls too.
#include "ops/nn_util.h"
#include "ops/tensor_ops_util.h"

namespace fleet::ops {
namespace {

// The rows of sequence s of `lod`.
int64_t Length(const std::vector<int64_t>& lod, size_t s) { return lod[s + 1] - lod[s]; }

// Offsets of input `slot` var `i`, or an error naming them when the caller has none.
StatusOr<const std::vector<int64_t>*> OffsetsOf(const LodDeriveInputs& in, std::string_view slot,
                                                size_t i, int64_t sequences) {
  auto it = in.offsets.find(slot);
  const std::vector<int64_t>* lod =
      it != in.offsets.end() && i < it->second.size() ? it->second[i] : nullptr;
  if (lod == nullptr || static_cast<int64_t>(lod->size()) != sequences + 1) {
    return InvalidArgument(in.op->type + ": input " + std::string(slot) + " #" +
                           std::to_string(i) + " does not carry " + std::to_string(sequences) +
                           " sequences");
  }
  return lod;
}

// The values of read slot `slot`: one per sequence.
StatusOr<const std::vector<int64_t>*> ValuesOf(const LodDeriveInputs& in, std::string_view slot,
                                               int64_t sequences) {
  auto it = in.values.find(slot);
  if (it == in.values.end() || it->second.empty() ||
      static_cast<int64_t>(it->second[0].size()) != sequences) {
    return InvalidArgument(in.op->type + ": " + std::string(slot) + " must hold one value per " +
                           "sequence (" + std::to_string(sequences) + ")");
  }
  return &it->second[0];
}

// Offset and Length of sequence_slice, and Length of sequence_unpad: int64, one per sequence,
// [S] or [S, 1].
Status CheckPerSequence(const ShapeContext& c, std::string_view slot, int64_t sequences) {
  FLEET_RETURN_IF_ERROR(RequireDense(c, slot, "one value per sequence"));
  const TensorInfo& t = c.Input(slot);
  if (t.dtype != ir::DataType::kInt64) {
    return c.Error(std::string(slot) + " must be int64, got " +
                   std::string(ir::DataTypeName(t.dtype)));
  }
  if (t.dims.empty() || t.dims.size() > 2 || (t.dims.size() == 2 && t.dims[1] != 1) ||
      !DimsMatch(t.dims[0], sequences)) {
    return c.Error(std::string(slot) + " must be [" + std::to_string(sequences) + "] or [" +
                   std::to_string(sequences) + ", 1] (one value per sequence), got " +
                   ir::ShapeText(t.dims));
  }
  return OkStatus();
}

// The rows of X's other dims agree across inputs.
bool SameRows(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 1; d < a.size(); ++d) {
    if (!DimsMatch(a[d], b[d])) return false;
  }
  return true;
}

int64_t SumRows(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return -1;
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? -1 : sum;
}

// ---- sequence_concat --------------------------------------------------------------------------

Status CheckSequenceConcat(const ShapeContext& c) {
  const size_t n = c.InputCount("X");
  if (n == 0) return c.Error("X needs at least one input");
  const TensorInfo& first = c.Input("X", 0);
  for (size_t i = 0; i < n; ++i) {
    const TensorInfo& x = c.Input("X", i);
    const std::string name(c.op().Input("X")[i]);
    if (x.lod_level != 1 || x.dims.empty()) {
      return c.Error("input X '" + name + "' is dense; sequence_concat joins sequences (a var "
                     "declared with lod_level=1, or one that follows such a var's sequences)");
    }
    if (x.dtype != first.dtype) {
      return c.Error("input X '" + name + "' is " + std::string(ir::DataTypeName(x.dtype)) +
                     " but the first is " + std::string(ir::DataTypeName(first.dtype)));
    }
    if (!SameRows(x.dims, first.dims)) {
      return c.Error("input X '" + name + "' has rows of " + ir::ShapeText(x.dims) +
                     " but the first has " + ir::ShapeText(first.dims) +
                     " (the dims after the first must agree)");
    }
    if (!DimsMatch(x.sequences, first.sequences)) {
      return c.Error("input X '" + name + "' holds " + std::to_string(x.sequences) +
                     " sequences but the first holds " + std::to_string(first.sequences) +
                     " (sequence i of every input goes into sequence i of Out)");
    }
  }
  return OkStatus();
}

Status ConcatOffsets(const LodDeriveInputs& in, std::vector<int64_t>& out) {
  auto it = in.offsets.find("X");
  const size_t n = it == in.offsets.end() ? 0 : it->second.size();
  out.assign(static_cast<size_t>(in.sequences) + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    FLEET_ASSIGN_OR_RETURN(const std::vector<int64_t>* lod, OffsetsOf(in, "X", i, in.sequences));
    for (size_t s = 0; s < static_cast<size_t>(in.sequences); ++s) out[s + 1] += Length(*lod, s);
  }
  for (size_t s = 0; s < static_cast<size_t>(in.sequences); ++s) out[s + 1] += out[s];
  return OkStatus();
}

void RegisterSequenceConcat(OpRegistry& registry) {
  OpSchema s;
  s.type = "sequence_concat";
  s.summary = "Out sequence i = the rows of sequence i of X[0], then of X[1], ...";
  s.inputs = {{"X", false, true}};
  s.outputs = {{"Out"}};
  s.sequence_kernel = true;
  s.mixed_sequences = true;
  s.derive_lod = "Out";
  s.derive_offsets = ConcatOffsets;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceConcat(c));
    TensorInfo out = c.Input("X", 0);
    for (size_t i = 1; i < c.InputCount("X"); ++i) {
      out.dims[0] = SumRows(out.dims[0], c.Input("X", i).dims[0]);
    }
    c.Output("Out") = out;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "sequence_concat_grad", {"X"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "sequence_concat_grad";
  g.summary = "X@GRAD[k]: the rows of Out@GRAD that sequence_concat took from X[k]";
  g.inputs = {{"X", false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true, true}};
  g.kernel_dtype_slot = "Out@GRAD";
  g.sequence_kernel = true;
  g.mixed_sequences = true;
  g.lod_share = {{"X@GRAD", "X"}};
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceConcat(c));
    FLEET_RETURN_IF_ERROR(RequireSequences(c, "Out@GRAD", "splits the joined sequences"));
    for (size_t i = 0; i < c.OutputCount("X@GRAD") && i < c.InputCount("X"); ++i) {
      c.Output("X@GRAD", i) = c.Input("X", i);
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// ---- sequence_slice ---------------------------------------------------------------------------

Status CheckSequenceSlice(const ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireSequences(c, "X", "slices sequences"));
  const int64_t sequences = c.Input("X").sequences;
  FLEET_RETURN_IF_ERROR(CheckPerSequence(c, "Offset", sequences));
  return CheckPerSequence(c, "Length", sequences);
}

Status SliceOffsets(const LodDeriveInputs& in, std::vector<int64_t>& out) {
  FLEET_ASSIGN_OR_RETURN(const std::vector<int64_t>* lod, OffsetsOf(in, "X", 0, in.sequences));
  FLEET_ASSIGN_OR_RETURN(const std::vector<int64_t>* offset, ValuesOf(in, "Offset", in.sequences));
  FLEET_ASSIGN_OR_RETURN(const std::vector<int64_t>* length, ValuesOf(in, "Length", in.sequences));
  out.assign(static_cast<size_t>(in.sequences) + 1, 0);
  for (size_t s = 0; s < static_cast<size_t>(in.sequences); ++s) {
    const int64_t o = (*offset)[s], n = (*length)[s], have = Length(*lod, s);
    if (o < 0 || n < 0 || o > have || n > have - o) {
      return InvalidArgument(
          "sequence_slice: sequence " + std::to_string(s) + " of X '" +
          std::string(in.op->InputOne("X")) + "' has " + std::to_string(have) +
          " rows, so Offset " + std::to_string(o) + " and Length " + std::to_string(n) +
          " do not give a slice of it (0 <= Offset, 0 <= Length, Offset + Length <= rows)");
    }
    out[s + 1] = out[s] + n;
  }
  return OkStatus();
}

void RegisterSequenceSlice(OpRegistry& registry) {
  OpSchema s;
  s.type = "sequence_slice";
  s.summary = "Out sequence s = rows [Offset[s], Offset[s] + Length[s]) of sequence s of X";
  s.inputs = {{"X"}, {"Offset", false, false, true}, {"Length", false, false, true}};
  s.outputs = {{"Out"}};
  s.sequence_kernel = true;
  s.derive_lod = "Out";
  s.derive_reads = {"Offset", "Length"};
  s.derive_offsets = SliceOffsets;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceSlice(c));
    c.Output("Out") = c.Input("X");  // at most X's rows, as many sequences
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        GradOp(fwd, "sequence_slice_grad", {"X", "Offset", "Length"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "sequence_slice_grad";
  g.summary = "X@GRAD: Out@GRAD on each sequence's slice, 0 on its other rows";
  g.inputs = {{"X"}, {"Offset", false, false, true}, {"Length", false, false, true},
              {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.kernel_dtype_slot = "Out@GRAD";
  g.sequence_kernel = true;
  g.mixed_sequences = true;
  g.lod_share = {{"X@GRAD", "X"}};
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceSlice(c));
    FLEET_RETURN_IF_ERROR(RequireSequences(c, "Out@GRAD", "gives each slice its gradient"));
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// ---- sequence_unpad ---------------------------------------------------------------------------

Status CheckSequenceUnpad(const ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireDense(c, "X", "a padded [S, L, ...] tensor"));
  const TensorInfo& x = c.Input("X");
  if (x.dims.size() < 2) {
    return c.Error("X must be padded sequences [S, L, ...] (rank >= 2), got " +
                   ir::ShapeText(x.dims));
  }
  return CheckPerSequence(c, "Length", x.dims[0]);
}

Status UnpadOffsets(const LodDeriveInputs& in, std::vector<int64_t>& out) {
  FLEET_ASSIGN_OR_RETURN(const std::vector<int64_t>* length, ValuesOf(in, "Length", in.sequences));
  const int64_t padded = in.sequences > 0 ? in.capacity / in.sequences : 0;
  out.assign(static_cast<size_t>(in.sequences) + 1, 0);
  for (size_t s = 0; s < static_cast<size_t>(in.sequences); ++s) {
    const int64_t n = (*length)[s];
    if (n < 0 || n > padded) {
      return InvalidArgument("sequence_unpad: Length[" + std::to_string(s) + "] of '" +
                             std::string(in.op->InputOne("Length")) + "' is " +
                             std::to_string(n) + ", outside [0, " + std::to_string(padded) +
                             "] (X's padded length)");
    }
    out[s + 1] = out[s] + n;
  }
  return OkStatus();
}

void RegisterSequenceUnpad(OpRegistry& registry) {
  OpSchema s;
  s.type = "sequence_unpad";
  s.summary = "Out sequence s = rows X[s, :Length[s]]: sequences from a padded tensor";
  s.inputs = {{"X"}, {"Length", false, false, true}};
  s.outputs = {{"Out"}};
  s.sequence_kernel = true;
  s.derive_lod = "Out";
  s.derive_reads = {"Length"};
  s.derive_offsets = UnpadOffsets;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceUnpad(c));
    const TensorInfo& x = c.Input("X");
    int64_t rows = -1;
    if (x.dims[0] >= 0 && x.dims[1] >= 0 && __builtin_mul_overflow(x.dims[0], x.dims[1], &rows)) {
      return c.Error("X " + ir::ShapeText(x.dims) + " holds more rows than int64 counts");
    }
    // Paddle's shape: [rows, X.dims[2:]...], or [rows, 1] for a rank-2 X.
    TensorInfo out{x.dtype, {rows}};
    if (x.dims.size() == 2) out.dims.push_back(1);
    out.dims.insert(out.dims.end(), x.dims.begin() + 2, x.dims.end());
    out.lod_level = 1;
    out.sequences = x.dims[0];
    c.Output("Out") = out;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        GradOp(fwd, "sequence_unpad_grad", {"X", "Length"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "sequence_unpad_grad";
  g.summary = "X@GRAD[s, t] = row t of sequence s of Out@GRAD for t < Length[s], else 0";
  g.inputs = {{"X"}, {"Length", false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.kernel_dtype_slot = "Out@GRAD";
  g.sequence_kernel = true;
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckSequenceUnpad(c));
    FLEET_RETURN_IF_ERROR(RequireSequences(c, "Out@GRAD", "pads the gradient back"));
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterSequenceOffsetOps(OpRegistry& registry) {
  RegisterSequenceConcat(registry);
  RegisterSequenceSlice(registry);
  RegisterSequenceUnpad(registry);
}

}  // namespace fleet::ops
