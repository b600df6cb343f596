// The builders of shape_plan.h. Each validates the op's shapes and attributes against the
// tensors it is given and turns the op into copy steps (or, for the repeat grads, a sum plan);
// messages are the ones both plugins report.
#include "shape_plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernel_context.h"
#include "pad_plan.h"

namespace fleet::kernel {
namespace {

bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

PlanStatus Missing(const FleetKernelContext* kc, const char* slot, size_t i = 0) {
  return PlanInvalid(OpName(kc) + ": " + slot + "[" + std::to_string(i) + "] is missing");
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// One step: the box `dims` read at src_offset + sum(i * src_strides) and written at
// dst_offset + sum(i * dst_strides).
PlanStatus AddStep(const FleetKernelContext* kc, LayoutPlan* plan, const char* src_slot,
                   size_t src_i, const char* dst_slot, size_t dst_i,
                   const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                   const std::vector<int64_t>& dst_strides, int64_t src_offset,
                   int64_t dst_offset) {
  if (dims.size() > static_cast<size_t>(kMaxCopyRank)) {
    return PlanUnimplemented(OpName(kc) + ": a copy of rank " + std::to_string(dims.size()) +
                             " exceeds the supported " + std::to_string(kMaxCopyRank));
  }
  if (Product(dims) == 0) return PlanOk();  // nothing to move
  CopyStep step;
  step.src_slot = src_slot;
  step.src_index = src_i;
  step.dst_slot = dst_slot;
  step.dst_index = dst_i;
  step.plan.rank = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    step.plan.dims[i] = dims[i];
    step.plan.src_strides[i] = src_strides[i];
    step.plan.dst_strides[i] = dst_strides[i];
  }
  step.plan.src_offset = src_offset;
  step.plan.dst_offset = dst_offset;
  Simplify(&step.plan);
  plan->steps.push_back(step);
  return PlanOk();
}

// ---- expand / tile --------------------------------------------------------------------------

// X's dims padded with leading 1s to Out's rank, and the repeat count of every dim, checked
// against `out` (and, for tile, against repeat_times).
PlanStatus RepeatGeometry(const FleetKernelContext* kc, const std::vector<int64_t>& x,
                          const std::vector<int64_t>& out, bool tile, const char* out_slot,
                          std::vector<int64_t>* xpad, std::vector<int64_t>* reps) {
  const size_t rank = out.size();
  if (x.size() > rank || rank > static_cast<size_t>(kMaxRepeatRank)) {
    return PlanInvalid(OpName(kc) + ": X " + DimsText(x) + " and " + out_slot + " " +
                       DimsText(out) + " need rank(X) <= rank(" + out_slot + ") <= " +
                       std::to_string(kMaxRepeatRank));
  }
  xpad->assign(rank - x.size(), 1);
  xpad->insert(xpad->end(), x.begin(), x.end());
  reps->assign(rank, 1);
  if (tile) {
    const std::vector<int64_t> attr = IntsAttr(kc, "repeat_times");
    if (attr.size() > rank) {
      return PlanInvalid(OpName(kc) + ": repeat_times " + DimsText(attr) + " is longer than " +
                         out_slot + " " + DimsText(out));
    }
    for (size_t i = 0; i < attr.size(); ++i) (*reps)[rank - attr.size() + i] = attr[i];
  }
  for (size_t d = 0; d < rank; ++d) {
    const int64_t xd = (*xpad)[d];
    if (tile) {
      if ((*reps)[d] <= 0 || xd * (*reps)[d] != out[d]) {
        return PlanInvalid(OpName(kc) + ": X " + DimsText(x) + " tiled by repeat_times " +
                           DimsText(IntsAttr(kc, "repeat_times")) + " does not give " +
                           out_slot + " " + DimsText(out));
      }
    } else if (xd != out[d]) {
      if (xd != 1) {
        return PlanInvalid(OpName(kc) + ": X " + DimsText(x) + " cannot expand to " + out_slot +
                           " " + DimsText(out) + " (dim " + std::to_string(d) + ")");
      }
      (*reps)[d] = out[d];
    }
  }
  return PlanOk();
}

PlanStatus BuildRepeat(const FleetKernelContext* kc, LayoutPlan* plan, bool tile) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  if (x == nullptr) return Missing(kc, "X");
  if (out == nullptr) return Missing(kc, "Out");
  const std::vector<int64_t> od = Dims(out);
  std::vector<int64_t> xpad, reps;
  PlanStatus st = RepeatGeometry(kc, Dims(x), od, tile, "Out", &xpad, &reps);
  if (!st.ok()) return st;
  const std::vector<int64_t> xs = DenseStrides(xpad), os = DenseStrides(od);
  std::vector<int64_t> box, ss, ds;
  for (size_t d = 0; d < od.size(); ++d) {
    box.insert(box.end(), {reps[d], xpad[d]});
    ss.insert(ss.end(), {0, xs[d]});
    ds.insert(ds.end(), {xpad[d] * os[d], os[d]});
  }
  return AddStep(kc, plan, "X", 0, "Out", 0, box, ss, ds, 0, 0);
}

// ---- stack / unstack ------------------------------------------------------------------------

// Moves between the one tensor `whole` and the list `parts`, part i being the slice at index
// i of `whole`'s dim `axis`. `whole_is_src`: the parts are written (unstack, stack_grad).
// Parts that are absent outputs (gradients nobody wants) are skipped.
PlanStatus BuildStacking(const FleetKernelContext* kc, LayoutPlan* plan, const char* whole_slot,
                         const char* parts_slot, bool whole_is_src) {
  const FleetTensor* whole = whole_is_src ? Input(kc, whole_slot) : Output(kc, whole_slot);
  if (whole == nullptr) return Missing(kc, whole_slot);
  const std::vector<int64_t> wd = Dims(whole);
  const int64_t rank = static_cast<int64_t>(wd.size());
  int64_t axis = 0;
  if (!NormalizeAxis(IntAttr(kc, "axis"), rank, &axis)) {
    return PlanInvalid(OpName(kc) + ": axis " + std::to_string(IntAttr(kc, "axis")) +
                       " is out of range for " + whole_slot + " " + DimsText(wd));
  }
  const size_t count = whole_is_src ? OutputCount(kc, parts_slot) : InputCount(kc, parts_slot);
  const int64_t n = wd[static_cast<size_t>(axis)];
  if (static_cast<int64_t>(count) != n) {
    return PlanInvalid(OpName(kc) + ": " + parts_slot + " has " + std::to_string(count) +
                       " tensors but " + whole_slot + " " + DimsText(wd) + " has " +
                       std::to_string(n) + " along axis " + std::to_string(axis));
  }
  std::vector<int64_t> part_dims = wd;
  part_dims.erase(part_dims.begin() + axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= wd[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= wd[static_cast<size_t>(d)];
  for (size_t i = 0; i < count; ++i) {
    const FleetTensor* part = whole_is_src ? Output(kc, parts_slot, i) : Input(kc, parts_slot, i);
    if (part == nullptr) {
      if (whole_is_src) continue;
      return Missing(kc, parts_slot, i);
    }
    if (Dims(part) != part_dims) {
      return PlanInvalid(OpName(kc) + ": " + parts_slot + "[" + std::to_string(i) + "] " +
                         DimsText(Dims(part)) + " should be " + DimsText(part_dims) + " (" +
                         whole_slot + " " + DimsText(wd) + " without dim " +
                         std::to_string(axis) + ")");
    }
    const int64_t offset = static_cast<int64_t>(i) * inner;
    PlanStatus st =
        whole_is_src
            ? AddStep(kc, plan, whole_slot, 0, parts_slot, i, {outer, inner}, {n * inner, 1},
                      {inner, 1}, offset, 0)
            : AddStep(kc, plan, parts_slot, i, whole_slot, 0, {outer, inner}, {inner, 1},
                      {n * inner, 1}, 0, offset);
    if (!st.ok()) return st;
  }
  return PlanOk();
}

// ---- roll -----------------------------------------------------------------------------------

// Shift per dim of `dims` (in [0, dim)), from shifts/axis; `sign` -1 rolls back (the grad).
// Empty axis rolls the flattened tensor: `dims` is then replaced by its element count.
PlanStatus RollShifts(const FleetKernelContext* kc, std::vector<int64_t>* dims, int64_t sign,
                      std::vector<int64_t>* shift) {
  const std::vector<int64_t> shifts = IntsAttr(kc, "shifts");
  const std::vector<int64_t> axis = IntsAttr(kc, "axis");
  if (axis.empty()) {
    if (shifts.size() != 1) {
      return PlanInvalid(OpName(kc) + ": shifts " + DimsText(shifts) +
                         " must have one entry when axis is empty");
    }
    *dims = {Product(*dims)};
  } else if (shifts.size() != axis.size()) {
    return PlanInvalid(OpName(kc) + ": shifts " + DimsText(shifts) + " and axis " +
                       DimsText(axis) + " differ in length");
  }
  const int64_t rank = static_cast<int64_t>(dims->size());
  shift->assign(dims->size(), 0);
  for (size_t i = 0; i < shifts.size(); ++i) {
    int64_t a = 0;
    if (!axis.empty() && !NormalizeAxis(axis[i], rank, &a)) {
      return PlanInvalid(OpName(kc) + ": axis " + DimsText(axis) + " is out of range for rank " +
                         std::to_string(rank));
    }
    const int64_t n = (*dims)[static_cast<size_t>(a)];
    if (n == 0) continue;
    // Shifts on one axis add up; the sum is reduced first so it cannot overflow.
    int64_t s = (sign * (shifts[i] % n)) % n;
    (*shift)[static_cast<size_t>(a)] = (((*shift)[static_cast<size_t>(a)] + s) % n + n) % n;
  }
  return PlanOk();
}

// Out[(i + shift) mod n] = X[i] along each dim: every rolled dim splits into two runs, so the
// roll is 2^(rolled dims) boxes.
PlanStatus AddRollBoxes(const FleetKernelContext* kc, LayoutPlan* plan, const char* src,
                        const char* dst, const std::vector<int64_t>& dims,
                        const std::vector<int64_t>& shift, size_t d, std::vector<int64_t>* box,
                        int64_t src_offset, int64_t dst_offset) {
  const std::vector<int64_t> strides = DenseStrides(dims);
  if (d == dims.size()) {
    return AddStep(kc, plan, src, 0, dst, 0, *box, strides, strides, src_offset, dst_offset);
  }
  const int64_t n = dims[d], s = shift[d];
  if (s == 0) {
    (*box)[d] = n;
    return AddRollBoxes(kc, plan, src, dst, dims, shift, d + 1, box, src_offset, dst_offset);
  }
  // X[0, n - s) -> Out[s, n), then X[n - s, n) -> Out[0, s).
  (*box)[d] = n - s;
  PlanStatus st = AddRollBoxes(kc, plan, src, dst, dims, shift, d + 1, box, src_offset,
                               dst_offset + s * strides[d]);
  if (!st.ok()) return st;
  (*box)[d] = s;
  return AddRollBoxes(kc, plan, src, dst, dims, shift, d + 1, box,
                      src_offset + (n - s) * strides[d], dst_offset);
}

PlanStatus BuildRollImpl(const FleetKernelContext* kc, LayoutPlan* plan, bool grad) {
  const char* src = grad ? "Out@GRAD" : "X";
  const char* dst = grad ? "X@GRAD" : "Out";
  const FleetTensor* x = Input(kc, src);
  const FleetTensor* out = Output(kc, dst);
  if (x == nullptr) return Missing(kc, src);
  if (out == nullptr) return grad ? PlanOk() : Missing(kc, dst);
  if (Dims(x) != Dims(out)) {
    return PlanInvalid(OpName(kc) + ": " + src + " " + DimsText(Dims(x)) + " and " + dst + " " +
                       DimsText(Dims(out)) + " differ");
  }
  std::vector<int64_t> dims = Dims(x), shift;
  PlanStatus st = RollShifts(kc, &dims, grad ? -1 : 1, &shift);
  if (!st.ok()) return st;
  if (dims.size() > static_cast<size_t>(kMaxCopyRank)) {
    return PlanUnimplemented(OpName(kc) + ": rank " + std::to_string(dims.size()) +
                             " exceeds the supported " + std::to_string(kMaxCopyRank));
  }
  std::vector<int64_t> box(dims.size());
  return AddRollBoxes(kc, plan, src, dst, dims, shift, 0, &box, 0, 0);
}

// ---- strided_slice --------------------------------------------------------------------------

// The box strided_slice reads from `dims`: per dim a count and a (signed) element stride, and
// the offset of its first element. The rules are Paddle's, as the host's shape function states.
PlanStatus StridedBox(const FleetKernelContext* kc, const std::vector<int64_t>& dims,
                      std::vector<int64_t>* box, std::vector<int64_t>* strides,
                      int64_t* offset) {
  const std::vector<int64_t> axes = IntsAttr(kc, "axes"), starts = IntsAttr(kc, "starts"),
                             ends = IntsAttr(kc, "ends"), steps = IntsAttr(kc, "strides"),
                             flags = IntsAttr(kc, "infer_flags"),
                             decrease = IntsAttr(kc, "decrease_axis");
  if (starts.size() != axes.size() || ends.size() != axes.size() ||
      steps.size() != axes.size()) {
    return PlanInvalid(OpName(kc) + ": axes, starts, ends and strides differ in length");
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  const std::vector<int64_t> dense = DenseStrides(dims);
  *box = dims;
  *strides = dense;
  *offset = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = 0;
    if (!NormalizeAxis(axes[i], rank, &axis)) {
      return PlanInvalid(OpName(kc) + ": axes " + DimsText(axes) + " out of range for rank " +
                         std::to_string(rank));
    }
    const size_t a = static_cast<size_t>(axis);
    const int64_t n = dims[a], st = steps[i];
    if (st == 0) return PlanInvalid(OpName(kc) + ": strides[" + std::to_string(i) + "] is 0");
    int64_t first = 0, count = 0;
    bool last = starts[i] == -1 && ends[i] == 0 && i < flags.size() && flags[i] == -1;
    if (last) {
      last = false;
      for (int64_t d : decrease) last = last || d == axes[i];
    }
    if (last) {
      first = n - 1;
      count = n > 0 ? 1 : 0;
    } else {
      int64_t b = starts[i], e = ends[i];
      if (b < 0) b = std::max<int64_t>(b + n, 0);
      if (e < 0 && !(e == -1 && st < 0)) e = std::max<int64_t>(e + n, 0);
      if (st < 0) {
        ++b;
        ++e;
      }
      if ((st > 0 && b > e) || (st < 0 && b < e)) {
        return PlanInvalid(OpName(kc) + ": along axis " + std::to_string(axis) +
                           " start and end are on the wrong sides of each other for stride " +
                           std::to_string(st));
      }
      const int64_t left = std::max<int64_t>(0, std::min(b, e));
      const int64_t right = std::min(n, std::max(b, e));
      const int64_t step = st < 0 ? -st : st;
      count = right > left ? (right - left + step - 1) / step : 0;
      first = st > 0 ? left : right - 1;
    }
    (*box)[a] = count;
    (*strides)[a] = dense[a] * (last ? 1 : st);
    if (count > 0) *offset += first * dense[a];
  }
  return PlanOk();
}

// strided_slice copies the box out of Input into Out; the grad clears Input@GRAD and writes
// Out@GRAD into the box.
PlanStatus BuildStridedSliceImpl(const FleetKernelContext* kc, LayoutPlan* plan, bool grad) {
  const FleetTensor* in = Input(kc, "Input");
  if (in == nullptr) return Missing(kc, "Input");
  const char* dense_slot = grad ? "Out@GRAD" : "Out";
  const FleetTensor* dense_t = grad ? Input(kc, dense_slot) : Output(kc, dense_slot);
  if (dense_t == nullptr) return Missing(kc, dense_slot);
  if (grad && Output(kc, "Input@GRAD") == nullptr) return PlanOk();
  const std::vector<int64_t> dims = Dims(in);
  std::vector<int64_t> box, strides;
  int64_t offset = 0;
  PlanStatus st = StridedBox(kc, dims, &box, &strides, &offset);
  if (!st.ok()) return st;
  if (Product(box) != Numel(dense_t)) {
    return PlanInvalid(OpName(kc) + ": the slice " + DimsText(box) + " does not match " +
                       dense_slot + " " + DimsText(Dims(dense_t)));
  }
  const std::vector<int64_t> dense = DenseStrides(box);
  if (!grad) return AddStep(kc, plan, "Input", 0, "Out", 0, box, strides, dense, offset, 0);
  plan->zero_outputs.emplace_back("Input@GRAD", 0);
  return AddStep(kc, plan, "Out@GRAD", 0, "Input@GRAD", 0, box, dense, strides, 0, offset);
}

}  // namespace

PlanStatus BuildStridedSlice(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildStridedSliceImpl(kc, plan, false);
}
PlanStatus BuildStridedSliceGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildStridedSliceImpl(kc, plan, true);
}

// pad_grad: X@GRAD is the box of Out@GRAD that X filled.
PlanStatus BuildPadGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  if (Output(kc, "X@GRAD") == nullptr) return PlanOk();
  PadPlan p;
  PlanStatus st = PlanPad(kc, true, &p);
  if (!st.ok()) return st;
  const std::vector<int64_t> od(p.out, p.out + p.rank);
  const std::vector<int64_t> box(p.in, p.in + p.rank);
  const std::vector<int64_t> strides = DenseStrides(od);
  int64_t offset = 0;
  for (int k = 0; k < p.rank; ++k) offset += p.before[k] * strides[static_cast<size_t>(k)];
  return AddStep(kc, plan, "Out@GRAD", 0, "X@GRAD", 0, box, strides, DenseStrides(box), offset,
                 0);
}

PlanStatus BuildExpand(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildRepeat(kc, plan, false);
}
PlanStatus BuildTile(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildRepeat(kc, plan, true);
}
PlanStatus BuildStack(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildStacking(kc, plan, "Y", "X", false);
}
PlanStatus BuildStackGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildStacking(kc, plan, "Y@GRAD", "X@GRAD", true);
}
PlanStatus BuildUnstack(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildStacking(kc, plan, "X", "Y", true);
}
PlanStatus BuildUnstackGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  if (Output(kc, "X@GRAD") == nullptr) return PlanOk();
  return BuildStacking(kc, plan, "X@GRAD", "Y@GRAD", false);
}

// A flipped dim is read backwards: stride negated, start at its last index.
PlanStatus BuildFlip(const FleetKernelContext* kc, LayoutPlan* plan) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  if (x == nullptr) return Missing(kc, "X");
  if (out == nullptr) return Missing(kc, "Out");
  const std::vector<int64_t> dims = Dims(x);
  if (Dims(out) != dims) {
    return PlanInvalid(OpName(kc) + ": Out " + DimsText(Dims(out)) + " differs from X " +
                       DimsText(dims));
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  const std::vector<int64_t> dense = DenseStrides(dims);
  std::vector<int64_t> src = dense;
  std::vector<bool> flipped(dims.size(), false);
  const std::vector<int64_t> axes = IntsAttr(kc, "axis");
  int64_t offset = 0;
  for (int64_t a : axes) {
    int64_t d = 0;
    if (!NormalizeAxis(a, rank, &d)) {
      return PlanInvalid(OpName(kc) + ": axis " + DimsText(axes) + " is out of range for X " +
                         DimsText(dims));
    }
    if (flipped[static_cast<size_t>(d)]) {
      return PlanInvalid(OpName(kc) + ": axis " + DimsText(axes) + " names dim " +
                         std::to_string(d) + " twice");
    }
    flipped[static_cast<size_t>(d)] = true;
    if (dims[static_cast<size_t>(d)] == 0) return PlanOk();  // nothing to move
    offset += (dims[static_cast<size_t>(d)] - 1) * dense[static_cast<size_t>(d)];
    src[static_cast<size_t>(d)] = -dense[static_cast<size_t>(d)];
  }
  return AddStep(kc, plan, "X", 0, "Out", 0, dims, src, dense, offset, 0);
}

PlanStatus BuildRoll(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildRollImpl(kc, plan, false);
}
PlanStatus BuildRollGrad(const FleetKernelContext* kc, LayoutPlan* plan) {
  return BuildRollImpl(kc, plan, true);
}

PlanStatus BuildRepeatSum(const FleetKernelContext* kc, bool tile, RepeatSumPlan* plan) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (x == nullptr) return Missing(kc, "X");
  if (dout == nullptr) return Missing(kc, "Out@GRAD");
  const std::vector<int64_t> od = Dims(dout);
  std::vector<int64_t> xpad, reps;
  PlanStatus st = RepeatGeometry(kc, Dims(x), od, tile, "Out@GRAD", &xpad, &reps);
  if (!st.ok()) return st;
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx != nullptr && Dims(dx) != Dims(x)) {
    return PlanInvalid(OpName(kc) + ": X@GRAD " + DimsText(Dims(dx)) + " differs from X " +
                       DimsText(Dims(x)));
  }
  const std::vector<int64_t> os = DenseStrides(od);
  *plan = RepeatSumPlan{};
  auto add = [&](int64_t dim, int64_t stride, bool reduced) {
    (reduced ? plan->red_count : plan->kept_count) *= dim;
    if (dim == 1) return;
    plan->dims[plan->rank] = dim;
    plan->strides[plan->rank] = stride;
    plan->reduced[plan->rank] = reduced;
    ++plan->rank;
  };
  for (size_t d = 0; d < od.size(); ++d) {
    add(reps[d], xpad[d] * os[d], true);
    add(xpad[d], os[d], false);
  }
  return PlanOk();
}

}  // namespace fleet::kernel
