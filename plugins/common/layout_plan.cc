// The layout builders of layout_plan.h. Each one validates the op's shapes and attributes and
// turns the op into copy steps; messages are the ones both plugins report.
#include "layout_plan.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "kernel_context.h"

namespace fleet::kernel {

std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i > 1; --i) s[i - 2] = s[i - 1] * dims[i - 1];
  return s;
}

void Simplify(CopyPlan* p) {
  int r = 0;
  for (int i = 0; i < p->rank; ++i) {
    if (p->dims[i] == 1) continue;
    p->dims[r] = p->dims[i];
    p->src_strides[r] = p->src_strides[i];
    p->dst_strides[r] = p->dst_strides[i];
    ++r;
  }
  int m = 0;
  for (int i = 0; i < r; ++i) {
    if (m > 0 && p->src_strides[m - 1] == p->dims[i] * p->src_strides[i] &&
        p->dst_strides[m - 1] == p->dims[i] * p->dst_strides[i]) {
      p->dims[m - 1] *= p->dims[i];
      p->src_strides[m - 1] = p->src_strides[i];
      p->dst_strides[m - 1] = p->dst_strides[i];
      continue;
    }
    p->dims[m] = p->dims[i];
    p->src_strides[m] = p->src_strides[i];
    p->dst_strides[m] = p->dst_strides[i];
    ++m;
  }
  p->rank = m;
}

int64_t PlanNumel(const CopyPlan& p) {
  int64_t n = 1;
  for (int i = 0; i < p.rank; ++i) n *= p.dims[i];
  return n;
}

namespace {

bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

PlanStatus Missing(const FleetKernelContext* kc, const char* slot, size_t i = 0) {
  return PlanInvalid(OpName(kc) + ": " + slot + "[" + std::to_string(i) + "] is missing");
}

PlanStatus TooDeep(const FleetKernelContext* kc, size_t rank) {
  return PlanUnimplemented(OpName(kc) + ": rank " + std::to_string(rank) +
                           " exceeds the supported " + std::to_string(kMaxCopyRank));
}

// dst (dense, `box` dims) <- src box at `offset` with `strides`. Or, with `scatter`, dst box
// with those strides at `offset` <- dense src.
PlanStatus AddBoxStep(const FleetKernelContext* kc, LayoutPlan* plan, const char* src_slot,
                      size_t src_i, const char* dst_slot, size_t dst_i,
                      const std::vector<int64_t>& box, const std::vector<int64_t>& strides,
                      int64_t offset, bool scatter) {
  if (box.size() > static_cast<size_t>(kMaxCopyRank)) return TooDeep(kc, box.size());
  CopyStep step;
  step.src_slot = src_slot;
  step.src_index = src_i;
  step.dst_slot = dst_slot;
  step.dst_index = dst_i;
  const std::vector<int64_t> dense = DenseStrides(box);
  step.plan.rank = static_cast<int>(box.size());
  for (size_t i = 0; i < box.size(); ++i) {
    step.plan.dims[i] = box[i];
    step.plan.src_strides[i] = scatter ? dense[i] : strides[i];
    step.plan.dst_strides[i] = scatter ? strides[i] : dense[i];
  }
  (scatter ? step.plan.dst_offset : step.plan.src_offset) = offset;
  Simplify(&step.plan);
  plan->steps.push_back(step);
  return PlanOk();
}

// A whole-tensor copy of src_slot[0] into dst_slot[0] (same element count).
PlanStatus BuildCopy(const FleetKernelContext* kc, LayoutPlan* plan, const char* src_slot,
                     const char* dst_slot) {
  const FleetTensor* x = Input(kc, src_slot);
  const FleetTensor* y = Output(kc, dst_slot);
  if (x == nullptr) return Missing(kc, src_slot);
  if (y == nullptr) return Missing(kc, dst_slot);
  if (Numel(x) != Numel(y)) {
    return PlanInvalid(OpName(kc) + ": " + src_slot + " " + DimsText(Dims(x)) + " and " +
                       dst_slot + " " + DimsText(Dims(y)) +
                       " hold different numbers of elements");
  }
  CopyStep step;
  step.src_slot = src_slot;
  step.dst_slot = dst_slot;
  step.plain = true;
  step.plan.rank = 1;
  step.plan.dims[0] = Numel(x);
  step.plan.src_strides[0] = step.plan.dst_strides[0] = 1;
  plan->steps.push_back(step);
  return PlanOk();
}

// src_slot[0] permuted: output dim i is input dim perm[i]; with `inverse` (the gradient), the
// permutation undoes `axis`.
PlanStatus BuildPermute(const FleetKernelContext* kc, LayoutPlan* plan, const char* src_slot,
                        const char* dst_slot, bool inverse) {
  const FleetTensor* x = Input(kc, src_slot);
  if (x == nullptr) return Missing(kc, src_slot);
  if (Output(kc, dst_slot) == nullptr) return Missing(kc, dst_slot);
  const std::vector<int64_t> dims = Dims(x);
  const std::vector<int64_t> axis = IntsAttr(kc, "axis");
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (static_cast<int64_t>(axis.size()) != rank) {
    return PlanInvalid(OpName(kc) + ": axis " + DimsText(axis) + " does not match " + src_slot +
                       " of rank " + std::to_string(rank));
  }
  std::vector<int64_t> perm(axis.size(), -1);
  for (size_t i = 0; i < axis.size(); ++i) {
    int64_t a = 0;
    if (!NormalizeAxis(axis[i], rank, &a)) {
      return PlanInvalid(OpName(kc) + ": axis " + DimsText(axis) + " is out of range");
    }
    if (inverse) {
      perm[static_cast<size_t>(a)] = static_cast<int64_t>(i);
    } else {
      perm[i] = a;
    }
  }
  // A repeated entry leaves a -1 behind in the inverse; in the forward direction it is caught
  // by counting which input dims were used. (The host's shape inference rejects repeats
  // first; this keeps a hand-built context from reading a box twice.)
  std::vector<bool> used(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || used[static_cast<size_t>(p)]) {
      return PlanInvalid(OpName(kc) + ": axis " + DimsText(axis) + " is not a permutation");
    }
    used[static_cast<size_t>(p)] = true;
  }
  const std::vector<int64_t> strides = DenseStrides(dims);
  std::vector<int64_t> box(perm.size()), box_strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    box[i] = dims[static_cast<size_t>(perm[i])];
    box_strides[i] = strides[static_cast<size_t>(perm[i])];
  }
  return AddBoxStep(kc, plan, src_slot, 0, dst_slot, 0, box, box_strides, 0, false);
}

// Joins (or, with `cut`, splits) along an axis: `whole` is the one tensor, `parts` the list.
// Each part is an [outer, part_dim * inner] box inside [outer, whole_dim * inner]. The axis is
// the op's "axis" attribute, or dim 0 with `rows` (split_byref has no axis).
PlanStatus BuildJoin(const FleetKernelContext* kc, LayoutPlan* plan, bool cut,
                     const char* whole_slot, const char* parts_slot, bool rows = false) {
  const FleetTensor* whole = cut ? Input(kc, whole_slot) : Output(kc, whole_slot);
  if (whole == nullptr) return Missing(kc, whole_slot);
  const std::vector<int64_t> wd = Dims(whole);
  const int64_t rank = static_cast<int64_t>(wd.size());
  int64_t axis = 0;
  if (rows && rank == 0) {
    return PlanInvalid(OpName(kc) + ": X must have at least one dimension");
  }
  if (!rows && !NormalizeAxis(IntAttr(kc, "axis"), rank, &axis)) {
    return PlanInvalid(OpName(kc) + ": axis " + std::to_string(IntAttr(kc, "axis")) +
                       " is out of range for rank " + std::to_string(rank));
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= wd[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= wd[static_cast<size_t>(i)];
  const int64_t row = wd[static_cast<size_t>(axis)] * inner;
  const size_t n = cut ? OutputCount(kc, parts_slot) : InputCount(kc, parts_slot);
  if (n == 0 && cut) return PlanOk();  // no gradient wanted at all
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const FleetTensor* part = cut ? Output(kc, parts_slot, i) : Input(kc, parts_slot, i);
    if (part == nullptr) {
      if (!cut || std::string_view(parts_slot) != "X@GRAD") return Missing(kc, parts_slot, i);
      // An input gradient nobody needs: nothing to write, but its place still counts. Its
      // size along the axis comes from the matching forward input.
      const FleetTensor* fwd = Input(kc, "X", i);
      if (fwd == nullptr || fwd->ndim != rank) return Missing(kc, parts_slot, i);
      offset += fwd->dims[axis] * inner;
      continue;
    }
    const std::vector<int64_t> pd = Dims(part);
    bool ok = static_cast<int64_t>(pd.size()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d) {
      if (d != axis && pd[static_cast<size_t>(d)] != wd[static_cast<size_t>(d)]) ok = false;
    }
    if (!ok) {
      return PlanInvalid(OpName(kc) + ": " + parts_slot + "[" + std::to_string(i) + "] " +
                         DimsText(pd) + " does not fit " + whole_slot + " " + DimsText(wd) +
                         " along axis " + std::to_string(axis));
    }
    const int64_t chunk = pd[static_cast<size_t>(axis)] * inner;
    PlanStatus err =
        cut ? AddBoxStep(kc, plan, whole_slot, 0, parts_slot, i, {outer, chunk}, {row, 1},
                         offset, false)
            : AddBoxStep(kc, plan, parts_slot, i, whole_slot, 0, {outer, chunk}, {row, 1},
                         offset, true);
    if (!err.ok()) return err;
    offset += chunk;
  }
  if (offset != row) {
    return PlanInvalid(OpName(kc) + ": the parts cover " +
                       std::to_string(offset / std::max<int64_t>(inner, 1)) + " of " +
                       std::to_string(wd[static_cast<size_t>(axis)]) + " entries along axis " +
                       std::to_string(axis));
  }
  return PlanOk();
}

// The box slice takes out of `input_dims` (same clamping as the schema's shape function).
// decrease_axis only drops unit dims from Out's shape, so it does not change the box.
PlanStatus SliceBox(const FleetKernelContext* kc, const std::vector<int64_t>& input_dims,
                    std::vector<int64_t>* box, int64_t* offset) {
  const std::vector<int64_t> axes = IntsAttr(kc, "axes");
  const std::vector<int64_t> starts = IntsAttr(kc, "starts");
  const std::vector<int64_t> ends = IntsAttr(kc, "ends");
  if (starts.size() != axes.size() || ends.size() != axes.size()) {
    return PlanInvalid(OpName(kc) + ": axes, starts and ends differ in length");
  }
  const int64_t rank = static_cast<int64_t>(input_dims.size());
  const std::vector<int64_t> strides = DenseStrides(input_dims);
  *box = input_dims;
  *offset = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = 0;
    if (!NormalizeAxis(axes[i], rank, &axis)) {
      return PlanInvalid(OpName(kc) + ": axes " + DimsText(axes) + " out of range for rank " +
                         std::to_string(rank));
    }
    const int64_t dim = input_dims[static_cast<size_t>(axis)];
    int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    b = std::min(std::max<int64_t>(b, 0), dim);
    e = std::min(std::max<int64_t>(e, 0), dim);
    if (e < b) {
      return PlanInvalid(OpName(kc) + ": empty slice along axis " + std::to_string(axis));
    }
    (*box)[static_cast<size_t>(axis)] = e - b;
    *offset += b * strides[static_cast<size_t>(axis)];
  }
  return PlanOk();
}

// slice copies the box out of Input into Out; slice_grad clears Input@GRAD and scatters
// Out@GRAD into the box.
PlanStatus BuildSliceImpl(const FleetKernelContext* kc, LayoutPlan* plan, bool grad) {
  const FleetTensor* in = Input(kc, "Input");
  const char* src = grad ? "Out@GRAD" : "Input";
  const char* dst = grad ? "Input@GRAD" : "Out";
  const FleetTensor* out = grad ? Input(kc, src) : Output(kc, dst);
  if (in == nullptr) return Missing(kc, "Input");
  if (out == nullptr) return Missing(kc, grad ? src : dst);
  if (grad && Output(kc, dst) == nullptr) return Missing(kc, dst);
  const std::vector<int64_t> dims = Dims(in);
  std::vector<int64_t> box;
  int64_t offset = 0;
  if (PlanStatus err = SliceBox(kc, dims, &box, &offset); !err.ok()) return err;
  int64_t n = 1;
  for (int64_t d : box) n *= d;
  if (n != Numel(out)) {
    return PlanInvalid(OpName(kc) + ": the slice " + DimsText(box) + " does not match " +
                       (grad ? src : dst) + " " + DimsText(Dims(out)));
  }
  if (grad) plan->zero_outputs.emplace_back(dst, 0);
  return AddBoxStep(kc, plan, src, 0, dst, 0, box, DenseStrides(dims), offset, grad);
}

}  // namespace

PlanStatus BuildXToOut(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildCopy(kc, plan, "X", "Out");
}
PlanStatus BuildGradToXGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildCopy(kc, plan, "Out@GRAD", "X@GRAD");
}
PlanStatus BuildTranspose(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildPermute(kc, plan, "X", "Out", false);
}
PlanStatus BuildTransposeGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildPermute(kc, plan, "Out@GRAD", "X@GRAD", true);
}
PlanStatus BuildConcat(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildJoin(kc, plan, false, "Out", "X");
}
PlanStatus BuildConcatGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildJoin(kc, plan, true, "Out@GRAD", "X@GRAD");
}
PlanStatus BuildSplit(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildJoin(kc, plan, true, "X", "Out");
}
// split_byref: a row split; the parts' shapes (from `sections`) give the rows of each.
PlanStatus BuildSplitByref(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildJoin(kc, plan, true, "X", "Out", /*rows=*/true);
}
PlanStatus BuildSlice(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildSliceImpl(kc, plan, false);
}
PlanStatus BuildSliceGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildSliceImpl(kc, plan, true);
}

}  // namespace fleet::kernel
