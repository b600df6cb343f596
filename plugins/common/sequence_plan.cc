#include "sequence_plan.h"

#include <string>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

bool ParsePoolType(std::string_view name, SequencePoolType* type) {
  struct Entry {
    const char* name;
    SequencePoolType type;
  };
  static constexpr Entry kTypes[] = {
      {"AVERAGE", SequencePoolType::kAverage}, {"SUM", SequencePoolType::kSum},
      {"SQRT", SequencePoolType::kSqrt},       {"MAX", SequencePoolType::kMax},
      {"LAST", SequencePoolType::kLast},       {"FIRST", SequencePoolType::kFirst}};
  for (const Entry& e : kTypes) {
    if (name == e.name) {
      *type = e.type;
      return true;
    }
  }
  return false;
}

}  // namespace

PlanStatus PlanSequencePool(const FleetKernelContext* kc, bool grad, SequencePoolPlan* plan) {
  const std::string op = kc->op_type != nullptr ? kc->op_type : "sequence_pool";
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = grad ? Input(kc, "Out@GRAD") : Output(kc, "Out");
  if (x == nullptr || out == nullptr) return PlanInvalid(op + ": X and Out are required");
  if (x->struct_size < FLEET_STRUCT_SIZE(FleetTensor, lod_count) || x->lod_count < 1) {
    return PlanInvalid(op + ": X carries no sequence offsets");
  }
  if (x->ndim < 1 || out->ndim != x->ndim) {
    return PlanInvalid(op + ": X " + DimsText(x) + " and Out " + DimsText(out) +
                       " must have the same rank, at least 1");
  }
  if (!ParsePoolType(StringAttr(kc, "pooltype"), &plan->type)) {
    return PlanInvalid(op + ": unknown pooltype '" + std::string(StringAttr(kc, "pooltype")) + "'");
  }
  plan->sequences = x->lod_count - 1;
  plan->capacity = x->dims[0];
  plan->width = 1;
  for (int32_t d = 1; d < x->ndim; ++d) {
    if (out->dims[d] != x->dims[d]) {
      return PlanInvalid(op + ": Out " + DimsText(out) + " does not have X's rows " + DimsText(x));
    }
    plan->width *= x->dims[d];
  }
  if (out->dims[0] != plan->sequences) {
    return PlanInvalid(op + ": Out has " + std::to_string(out->dims[0]) + " rows for " +
                       std::to_string(plan->sequences) + " sequences");
  }
  const FleetTensor* index = grad ? Input(kc, "MaxIndex") : Output(kc, "MaxIndex");
  if (plan->type == SequencePoolType::kMax && grad && index == nullptr) {
    return PlanInvalid(op + ": pooltype MAX needs MaxIndex");
  }
  if (index != nullptr && (index->dtype != FLEET_DTYPE_INT32 || Numel(index) != Numel(out))) {
    return PlanInvalid(op + ": MaxIndex must be int32 with Out's shape, got " + DimsText(index));
  }
  plan->pad_value = static_cast<float>(FloatAttr(kc, "pad_value", 0.0));
  plan->lod = x->lod;
  return PlanOk();
}

}  // namespace fleet::kernel

namespace fleet::kernel {
namespace {

bool HasOffsets(const FleetTensor* t) {
  return t->struct_size >= FLEET_STRUCT_SIZE(FleetTensor, lod_count) && t->lod_count >= 1 &&
         t->lod != nullptr;
}

// Elements of a row: the product of dims[1:].
int64_t RowWidth(const FleetTensor* t) {
  int64_t w = 1;
  for (int32_t d = 1; d < t->ndim; ++d) w *= t->dims[d];
  return w;
}

bool SameDims(const FleetTensor* a, const FleetTensor* b) {
  if (a->ndim != b->ndim) return false;
  for (int32_t d = 0; d < a->ndim; ++d) {
    if (a->dims[d] != b->dims[d]) return false;
  }
  return true;
}

}  // namespace

PlanStatus PlanSequenceRows(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                            SequenceRows* rows) {
  const std::string op = OpName(kc);
  if (t == nullptr) return PlanInvalid(op + ": " + slot + " is required");
  if (!HasOffsets(t)) return PlanInvalid(op + ": " + slot + " carries no sequence offsets");
  if (t->ndim < 1) return PlanInvalid(op + ": " + slot + " must have a rows dimension");
  rows->lod = t->lod;
  rows->sequences = t->lod_count - 1;
  rows->capacity = t->dims[0];
  rows->width = RowWidth(t);
  return PlanOk();
}

PlanStatus PlanSequenceSoftmax(const FleetKernelContext* kc, bool grad, SequenceRows* rows) {
  const std::string op = OpName(kc);
  const FleetTensor* in = Input(kc, grad ? "Out" : "X");
  PlanStatus st = PlanSequenceRows(kc, in, grad ? "Out" : "X", rows);
  if (!st.ok()) return st;
  if (rows->width != 1) {
    return PlanInvalid(op + ": " + (grad ? "Out " : "X ") + DimsText(in) +
                       " must hold one value per row ([N, 1] or [N])");
  }
  const FleetTensor* same[] = {grad ? Input(kc, "Out@GRAD") : nullptr,
                               Output(kc, grad ? "X@GRAD" : "Out")};
  for (const FleetTensor* t : same) {
    if (t != nullptr && Numel(t) != rows->capacity) {
      return PlanInvalid(op + ": " + DimsText(t) + " does not have the rows of " +
                         (grad ? "Out " : "X ") + DimsText(in));
    }
  }
  return PlanOk();
}

PlanStatus PlanSequenceReverse(const FleetKernelContext* kc, SequenceRows* rows) {
  const FleetTensor* x = Input(kc, "X");
  PlanStatus st = PlanSequenceRows(kc, x, "X", rows);
  if (!st.ok()) return st;
  const FleetTensor* y = Output(kc, "Y");
  if (y == nullptr || !SameDims(x, y)) {
    return PlanInvalid(OpName(kc) + ": Y must have X's shape " + DimsText(x));
  }
  return PlanOk();
}

PlanStatus PlanSequencePad(const FleetKernelContext* kc, bool grad, SequencePadPlan* plan) {
  const std::string op = OpName(kc);
  const FleetTensor* x = Input(kc, "X");
  PlanStatus st = PlanSequenceRows(kc, x, "X", &plan->rows);
  if (!st.ok()) return st;
  plan->padded_length = IntAttr(kc, "padded_length", -1);
  if (plan->padded_length <= 0) {
    return PlanInvalid(op + ": padded_length must be > 0, got " +
                       std::to_string(plan->padded_length));
  }
  const FleetTensor* out = grad ? Input(kc, "Out@GRAD") : Output(kc, "Out");
  const int64_t s = plan->rows.sequences;
  bool shaped = out != nullptr && out->ndim == x->ndim + 1 && out->dims[0] == s &&
                out->dims[1] == plan->padded_length;
  for (int32_t d = 1; shaped && d < x->ndim; ++d) shaped = out->dims[d + 1] == x->dims[d];
  if (!shaped) {
    return PlanInvalid(op + ": Out must be [" + std::to_string(s) + ", " +
                       std::to_string(plan->padded_length) + "] followed by X's row dims, X " +
                       DimsText(x) + ", Out " + (out != nullptr ? DimsText(out) : "absent"));
  }
  if (grad) return PlanOk();
  const FleetTensor* pad = Input(kc, "PadValue");
  const FleetTensor* length = Output(kc, "Length");
  if (pad == nullptr || (Numel(pad) != 1 && Numel(pad) != plan->rows.width)) {
    return PlanInvalid(op + ": PadValue must hold one value or one row of X (" +
                       std::to_string(plan->rows.width) + " values)");
  }
  if (pad->dtype != x->dtype) return PlanInvalid(op + ": PadValue must have X's dtype");
  plan->pad_width = Numel(pad);
  if (length == nullptr || length->dtype != FLEET_DTYPE_INT64 || Numel(length) != s) {
    return PlanInvalid(op + ": Length must be int64 [" + std::to_string(s) + "]");
  }
  return PlanOk();
}

std::string SequencePadTooLong(const FleetKernelContext* kc, int64_t sequence, int64_t length,
                               int64_t padded_length) {
  return OpName(kc) + ": sequence " + std::to_string(sequence) + " has " +
         std::to_string(length) + " rows, more than padded_length " +
         std::to_string(padded_length) + " (raise padded_length to the longest sequence)";
}

PlanStatus PlanSequenceMask(const FleetKernelContext* kc, SequenceMaskPlan* plan) {
  const std::string op = OpName(kc);
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Output(kc, "Y");
  if (x == nullptr || y == nullptr) return PlanInvalid(op + ": X and Y are required");
  if (x->dtype != FLEET_DTYPE_INT64 && x->dtype != FLEET_DTYPE_INT32) {
    return PlanInvalid(op + ": X must hold int64 or int32 lengths");
  }
  plan->maxlen = IntAttr(kc, "maxlen", -1);
  plan->lengths = Numel(x);
  plan->out_dtype = y->dtype;
  if (plan->maxlen <= 0) {
    return PlanInvalid(op + ": maxlen must be > 0, got " + std::to_string(plan->maxlen));
  }
  bool shaped = y->ndim == x->ndim + 1 && y->dims[x->ndim] == plan->maxlen;
  for (int32_t d = 0; shaped && d < x->ndim; ++d) shaped = y->dims[d] == x->dims[d];
  if (!shaped) {
    return PlanInvalid(op + ": Y " + DimsText(y) + " must be X's dims " + DimsText(x) +
                       " followed by maxlen " + std::to_string(plan->maxlen));
  }
  switch (y->dtype) {
    case FLEET_DTYPE_FLOAT32:
    case FLEET_DTYPE_FLOAT64:
    case FLEET_DTYPE_INT64:
    case FLEET_DTYPE_INT32:
    case FLEET_DTYPE_BOOL:
      return PlanOk();
    default:
      return PlanUnimplemented(op + ": Y of dtype " + std::to_string(y->dtype) +
                               " (float32, float64, int64, int32 and bool are written)");
  }
}

PlanStatus PlanSequenceExpandAs(const FleetKernelContext* kc, bool grad, SequenceRows* rows) {
  const std::string op = OpName(kc);
  const FleetTensor* y = Input(kc, "Y");
  PlanStatus st = PlanSequenceRows(kc, y, "Y", rows);
  if (!st.ok()) return st;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = grad ? Input(kc, "Out@GRAD") : Output(kc, "Out");
  if (x == nullptr || out == nullptr || x->ndim < 1) {
    return PlanInvalid(op + ": X (with a rows dimension) and Out are required");
  }
  if (x->dims[0] != rows->sequences) {
    return PlanInvalid(op + ": X has " + std::to_string(x->dims[0]) + " rows but Y holds " +
                       std::to_string(rows->sequences) + " sequences");
  }
  bool shaped = out->ndim == x->ndim && out->dims[0] == rows->capacity;
  for (int32_t d = 1; shaped && d < x->ndim; ++d) shaped = out->dims[d] == x->dims[d];
  if (!shaped) {
    return PlanInvalid(op + ": Out " + DimsText(out) + " must have Y's " +
                       std::to_string(rows->capacity) + " rows of X's rows " + DimsText(x));
  }
  rows->width = RowWidth(x);
  return PlanOk();
}

PlanStatus PlanSequenceConcat(const FleetKernelContext* kc, bool grad, SequenceConcatPlan* plan) {
  const std::string op = OpName(kc);
  const char* out_slot = grad ? "Out@GRAD" : "Out";
  PlanStatus st = PlanSequenceRows(kc, grad ? Input(kc, out_slot) : Output(kc, out_slot),
                                   out_slot, &plan->out);
  if (!st.ok()) return st;
  plan->inputs = static_cast<int64_t>(InputCount(kc, "X"));
  if (plan->inputs == 0) return PlanInvalid(op + ": X needs at least one input");
  int64_t rows = 0;
  for (int64_t k = 0; k < plan->inputs; ++k) {
    const FleetTensor* x = Input(kc, "X", static_cast<size_t>(k));
    SequenceRows r;
    st = PlanSequenceRows(kc, x, "X", &r);
    if (!st.ok()) return st;
    if (r.sequences != plan->out.sequences || r.width != plan->out.width ||
        x->dtype != (grad ? Input(kc, out_slot) : Output(kc, out_slot))->dtype) {
      return PlanInvalid(op + ": X #" + std::to_string(k) + " " + DimsText(x) + " with " +
                         std::to_string(r.sequences) + " sequences does not match " + out_slot +
                         "'s " + std::to_string(plan->out.sequences) +
                         " sequences of rows of " + std::to_string(plan->out.width) +
                         " values and its dtype");
    }
    rows += r.capacity;
    if (grad && k < static_cast<int64_t>(OutputCount(kc, "X@GRAD"))) {
      const FleetTensor* dx = Output(kc, "X@GRAD", static_cast<size_t>(k));
      if (dx != nullptr && !SameDims(dx, x)) {
        return PlanInvalid(op + ": X@GRAD #" + std::to_string(k) + " must have X's shape " +
                           DimsText(x));
      }
    }
  }
  if (plan->out.capacity < rows) {
    return PlanInvalid(op + ": " + out_slot + " holds " + std::to_string(plan->out.capacity) +
                       " rows, fewer than the inputs' " + std::to_string(rows));
  }
  return PlanOk();
}

PlanStatus PlanSequenceSlice(const FleetKernelContext* kc, bool grad, SequenceSlicePlan* plan) {
  const std::string op = OpName(kc);
  const FleetTensor* x = Input(kc, "X");
  PlanStatus st = PlanSequenceRows(kc, x, "X", &plan->x);
  if (!st.ok()) return st;
  const char* out_slot = grad ? "Out@GRAD" : "Out";
  const FleetTensor* out = grad ? Input(kc, out_slot) : Output(kc, out_slot);
  st = PlanSequenceRows(kc, out, out_slot, &plan->out);
  if (!st.ok()) return st;
  if (plan->out.sequences != plan->x.sequences || plan->out.width != plan->x.width ||
      plan->out.capacity > plan->x.capacity) {
    return PlanInvalid(op + ": " + out_slot + " " + DimsText(out) + " must hold X's " +
                       std::to_string(plan->x.sequences) + " sequences in at most X's rows " +
                       DimsText(x));
  }
  for (const char* slot : {"Offset", "Length"}) {
    const FleetTensor* t = Input(kc, slot);
    if (t == nullptr || t->dtype != FLEET_DTYPE_INT64 || Numel(t) != plan->x.sequences) {
      return PlanInvalid(op + ": " + slot + " must be int64 with one value per sequence (" +
                         std::to_string(plan->x.sequences) + ")");
    }
  }
  const FleetTensor* dx = grad ? Output(kc, "X@GRAD") : nullptr;
  if (dx != nullptr && !SameDims(dx, x)) {
    return PlanInvalid(op + ": X@GRAD must have X's shape " + DimsText(x));
  }
  return PlanOk();
}

PlanStatus PlanSequenceUnpad(const FleetKernelContext* kc, bool grad, SequenceUnpadPlan* plan) {
  const std::string op = OpName(kc);
  const char* out_slot = grad ? "Out@GRAD" : "Out";
  const FleetTensor* out = grad ? Input(kc, out_slot) : Output(kc, out_slot);
  PlanStatus st = PlanSequenceRows(kc, out, out_slot, &plan->out);
  if (!st.ok()) return st;
  const FleetTensor* x = Input(kc, "X");
  if (x == nullptr || x->ndim < 2) return PlanInvalid(op + ": X must be [S, L, ...]");
  int64_t step = 1;
  for (int32_t d = 2; d < x->ndim; ++d) step *= x->dims[d];
  plan->padded_length = x->dims[1];
  if (plan->out.sequences != x->dims[0] || plan->out.width != step ||
      plan->out.capacity < x->dims[0] * x->dims[1]) {
    return PlanInvalid(op + ": " + out_slot + " " + DimsText(out) + " must hold " +
                       std::to_string(x->dims[0]) + " sequences of the steps of X " +
                       DimsText(x));
  }
  const FleetTensor* length = Input(kc, "Length");
  if (length == nullptr || length->dtype != FLEET_DTYPE_INT64 || Numel(length) != x->dims[0]) {
    return PlanInvalid(op + ": Length must be int64 with one value per sequence (" +
                       std::to_string(x->dims[0]) + ")");
  }
  const FleetTensor* dx = grad ? Output(kc, "X@GRAD") : nullptr;
  if (dx != nullptr && !SameDims(dx, x)) {
    return PlanInvalid(op + ": X@GRAD must have X's shape " + DimsText(x));
  }
  return PlanOk();
}

}  // namespace fleet::kernel
