// Layout kernels: reshape2, flatten_contiguous_range, assign, transpose2, concat, split,
// split_byref, slice
// and their gradients. They only move elements, so one kernel per element size serves every
// dtype. Each prepare turns the op into a list of copy steps (CopyPlan); launch runs them.
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/tensor_kernel_util.h"

namespace fleet_cpu {
namespace tensor {

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

}  // namespace tensor

namespace {

using tensor::CopyPlan;
using tensor::DenseStrides;
using tensor::kMaxRank;

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// One copy from tensor `src_index` of input slot `src_slot` to tensor `dst_index` of output
// slot `dst_slot`. Slot names are string literals (static storage).
struct Step {
  const char* src_slot = nullptr;
  size_t src_index = 0;
  const char* dst_slot = nullptr;
  size_t dst_index = 0;
  CopyPlan plan;
  bool plain = false;  // a whole-tensor copy: skipped when the output aliases the input
};

struct LayoutState {
  std::vector<Step> steps;
  std::vector<std::pair<const char*, size_t>> zero_outputs;  // cleared before the steps
};

bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

FleetStatus* Missing(const FleetKernelContext* kc, const char* slot, size_t i = 0) {
  return InvalidArgument(std::string(kc->op_type) + ": " + slot + "[" + std::to_string(i) +
                         "] is missing");
}

FleetStatus* TooDeep(const FleetKernelContext* kc, size_t rank) {
  return Unimplemented(std::string(kc->op_type) + ": rank " + std::to_string(rank) +
                       " exceeds the supported " + std::to_string(kMaxRank));
}

// dst (dense, `box` dims) <- src box at `src_offset` with `src_strides`. Or, with `scatter`,
// dst box with those strides <- dense src.
FleetStatus* AddBoxStep(const FleetKernelContext* kc, LayoutState* st, const char* src_slot,
                        size_t src_i, const char* dst_slot, size_t dst_i,
                        const std::vector<int64_t>& box, const std::vector<int64_t>& strides,
                        int64_t offset, bool scatter) {
  if (box.size() > static_cast<size_t>(kMaxRank)) return TooDeep(kc, box.size());
  Step step{src_slot, src_i, dst_slot, dst_i, {}, false};
  const std::vector<int64_t> dense = DenseStrides(box);
  step.plan.rank = static_cast<int>(box.size());
  for (size_t i = 0; i < box.size(); ++i) {
    step.plan.dims[i] = box[i];
    step.plan.src_strides[i] = scatter ? dense[i] : strides[i];
    step.plan.dst_strides[i] = scatter ? strides[i] : dense[i];
  }
  (scatter ? step.plan.dst_offset : step.plan.src_offset) = offset;
  tensor::Simplify(&step.plan);
  st->steps.push_back(step);
  return nullptr;
}

// A whole-tensor copy of src_slot[0] into dst_slot[0] (same element count).
FleetStatus* BuildCopy(const FleetKernelContext* kc, LayoutState* st, const char* src_slot,
                       const char* dst_slot) {
  const FleetTensor* x = Input(kc, src_slot);
  const FleetTensor* y = Output(kc, dst_slot);
  if (x == nullptr) return Missing(kc, src_slot);
  if (y == nullptr) return Missing(kc, dst_slot);
  if (Numel(x) != Numel(y)) {
    return InvalidArgument(std::string(kc->op_type) + ": " + src_slot + " " +
                           DimsText(Dims(x)) + " and " + dst_slot + " " + DimsText(Dims(y)) +
                           " hold different numbers of elements");
  }
  Step step{src_slot, 0, dst_slot, 0, {}, true};
  step.plan.rank = 1;
  step.plan.dims[0] = Numel(x);
  step.plan.src_strides[0] = step.plan.dst_strides[0] = 1;
  st->steps.push_back(step);
  return nullptr;
}

FleetStatus* BuildXToOut(const FleetKernelContext* kc, LayoutState* st) {
  return BuildCopy(kc, st, "X", "Out");
}
FleetStatus* BuildGradToXGrad(const FleetKernelContext* kc, LayoutState* st) {
  return BuildCopy(kc, st, "Out@GRAD", "X@GRAD");
}

// src_slot[0] permuted: output dim i is input dim perm[i].
FleetStatus* BuildPermute(const FleetKernelContext* kc, LayoutState* st, const char* src_slot,
                          const char* dst_slot, bool inverse) {
  const FleetTensor* x = Input(kc, src_slot);
  if (x == nullptr) return Missing(kc, src_slot);
  if (Output(kc, dst_slot) == nullptr) return Missing(kc, dst_slot);
  const std::vector<int64_t> dims = Dims(x);
  const std::vector<int64_t> axis = IntsAttr(kc, "axis");
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (static_cast<int64_t>(axis.size()) != rank) {
    return InvalidArgument(std::string(kc->op_type) + ": axis " + DimsText(axis) +
                           " does not match " + src_slot + " of rank " + std::to_string(rank));
  }
  std::vector<int64_t> perm(axis.size(), -1);
  for (size_t i = 0; i < axis.size(); ++i) {
    int64_t a = 0;
    if (!NormalizeAxis(axis[i], rank, &a)) {
      return InvalidArgument(std::string(kc->op_type) + ": axis " + DimsText(axis) +
                             " is out of range");
    }
    if (inverse) perm[static_cast<size_t>(a)] = static_cast<int64_t>(i);
    else perm[i] = a;
  }
  for (int64_t p : perm) {
    if (p < 0) {
      return InvalidArgument(std::string(kc->op_type) + ": axis " + DimsText(axis) +
                             " is not a permutation");
    }
  }
  const std::vector<int64_t> strides = DenseStrides(dims);
  std::vector<int64_t> box(perm.size()), box_strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    box[i] = dims[static_cast<size_t>(perm[i])];
    box_strides[i] = strides[static_cast<size_t>(perm[i])];
  }
  return AddBoxStep(kc, st, src_slot, 0, dst_slot, 0, box, box_strides, 0, false);
}

FleetStatus* BuildTranspose(const FleetKernelContext* kc, LayoutState* st) {
  return BuildPermute(kc, st, "X", "Out", false);
}
FleetStatus* BuildTransposeGrad(const FleetKernelContext* kc, LayoutState* st) {
  return BuildPermute(kc, st, "Out@GRAD", "X@GRAD", true);
}

// Joins (or, with `cut`, splits) along an axis: `whole` is the one tensor, `parts` the list.
// Each part is a [outer, part_dim * inner] box inside [outer, whole_dim * inner]. The axis is
// the op's "axis" attribute, or dim 0 with `rows` (split_byref has no axis).
FleetStatus* BuildJoin(const FleetKernelContext* kc, LayoutState* st, bool cut,
                       const char* whole_slot, const char* parts_slot, bool rows = false) {
  const FleetTensor* whole = cut ? Input(kc, whole_slot) : Output(kc, whole_slot);
  if (whole == nullptr) return Missing(kc, whole_slot);
  const std::vector<int64_t> wd = Dims(whole);
  const int64_t rank = static_cast<int64_t>(wd.size());
  int64_t axis = 0;
  if (rows && rank == 0) {
    return InvalidArgument(std::string(kc->op_type) + ": X must have at least one dimension");
  }
  if (!rows && !NormalizeAxis(IntAttr(kc, "axis"), rank, &axis)) {
    return InvalidArgument(std::string(kc->op_type) + ": axis " +
                           std::to_string(IntAttr(kc, "axis")) + " is out of range for rank " +
                           std::to_string(rank));
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= wd[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= wd[static_cast<size_t>(i)];
  const int64_t row = wd[static_cast<size_t>(axis)] * inner;
  const size_t n = cut ? OutputCount(kc, parts_slot) : InputCount(kc, parts_slot);
  if (n == 0 && cut) return nullptr;  // no gradient wanted at all
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const FleetTensor* part = cut ? Output(kc, parts_slot, i) : Input(kc, parts_slot, i);
    if (part == nullptr) {
      if (!cut || std::string_view(parts_slot) != "X@GRAD") return Missing(kc, parts_slot, i);
      // An output gradient nobody needs: nothing to write, but its place still counts. Its
      // size along the axis comes from the matching forward input when there is one.
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
      return InvalidArgument(std::string(kc->op_type) + ": " + parts_slot + "[" +
                             std::to_string(i) + "] " + DimsText(pd) + " does not fit " +
                             whole_slot + " " + DimsText(wd) + " along axis " +
                             std::to_string(axis));
    }
    const int64_t chunk = pd[static_cast<size_t>(axis)] * inner;
    FleetStatus* err =
        cut ? AddBoxStep(kc, st, whole_slot, 0, parts_slot, i, {outer, chunk}, {row, 1}, offset,
                         false)
            : AddBoxStep(kc, st, parts_slot, i, whole_slot, 0, {outer, chunk}, {row, 1}, offset,
                         true);
    if (err != nullptr) return err;
    offset += chunk;
  }
  if (offset != row) {
    return InvalidArgument(std::string(kc->op_type) + ": the parts cover " +
                           std::to_string(offset / std::max<int64_t>(inner, 1)) + " of " +
                           std::to_string(wd[static_cast<size_t>(axis)]) +
                           " entries along axis " + std::to_string(axis));
  }
  return nullptr;
}

FleetStatus* BuildConcat(const FleetKernelContext* kc, LayoutState* st) {
  return BuildJoin(kc, st, false, "Out", "X");
}
FleetStatus* BuildConcatGrad(const FleetKernelContext* kc, LayoutState* st) {
  return BuildJoin(kc, st, true, "Out@GRAD", "X@GRAD");
}
FleetStatus* BuildSplit(const FleetKernelContext* kc, LayoutState* st) {
  return BuildJoin(kc, st, true, "X", "Out");
}
// split_byref: a row split; the parts' shapes (from `sections`) give the rows of each.
FleetStatus* BuildSplitByref(const FleetKernelContext* kc, LayoutState* st) {
  return BuildJoin(kc, st, true, "X", "Out", /*rows=*/true);
}

// The box slice takes out of `input_dims` (same clamping as the schema's shape function).
FleetStatus* SliceBox(const FleetKernelContext* kc, const std::vector<int64_t>& input_dims,
                      std::vector<int64_t>* box, int64_t* offset) {
  const std::vector<int64_t> axes = IntsAttr(kc, "axes");
  const std::vector<int64_t> starts = IntsAttr(kc, "starts");
  const std::vector<int64_t> ends = IntsAttr(kc, "ends");
  if (starts.size() != axes.size() || ends.size() != axes.size()) {
    return InvalidArgument(std::string(kc->op_type) + ": axes, starts and ends differ in length");
  }
  const int64_t rank = static_cast<int64_t>(input_dims.size());
  const std::vector<int64_t> strides = DenseStrides(input_dims);
  *box = input_dims;
  *offset = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = 0;
    if (!NormalizeAxis(axes[i], rank, &axis)) {
      return InvalidArgument(std::string(kc->op_type) + ": axes " + DimsText(axes) +
                             " out of range for rank " + std::to_string(rank));
    }
    const int64_t dim = input_dims[static_cast<size_t>(axis)];
    int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    b = std::min(std::max<int64_t>(b, 0), dim);
    e = std::min(std::max<int64_t>(e, 0), dim);
    if (e < b) {
      return InvalidArgument(std::string(kc->op_type) + ": empty slice along axis " +
                             std::to_string(axis));
    }
    (*box)[static_cast<size_t>(axis)] = e - b;
    *offset += b * strides[static_cast<size_t>(axis)];
  }
  return nullptr;
}

FleetStatus* BuildSliceImpl(const FleetKernelContext* kc, LayoutState* st, bool grad) {
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
  if (FleetStatus* err = SliceBox(kc, dims, &box, &offset)) return err;
  int64_t n = 1;
  for (int64_t d : box) n *= d;
  if (n != Numel(out)) {
    return InvalidArgument(std::string(kc->op_type) + ": the slice " + DimsText(box) +
                           " does not match " + (grad ? src : dst) + " " +
                           DimsText(Dims(out)));
  }
  if (grad) st->zero_outputs.emplace_back(dst, 0);
  return AddBoxStep(kc, st, src, 0, dst, 0, box, DenseStrides(dims), offset, grad);
}

FleetStatus* BuildSlice(const FleetKernelContext* kc, LayoutState* st) {
  return BuildSliceImpl(kc, st, false);
}
FleetStatus* BuildSliceGrad(const FleetKernelContext* kc, LayoutState* st) {
  return BuildSliceImpl(kc, st, true);
}

using Builder = FleetStatus* (*)(const FleetKernelContext*, LayoutState*);

template <Builder kBuild>
FleetStatus* PrepareLayout(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto st = std::make_unique<LayoutState>();
    if (FleetStatus* err = kBuild(kc, st.get())) return err;
    *state = st.release();
    return nullptr;
  });
}

void ReleaseLayout(void*, void* state) { delete static_cast<LayoutState*>(state); }

template <typename E>
FleetStatus* LaunchLayout(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* st = static_cast<const LayoutState*>(state);
    if (st == nullptr) return InvalidArgument(std::string(kc->op_type) + ": not prepared");
    for (const auto& [slot, i] : st->zero_outputs) {
      const FleetTensor* t = Output(kc, slot, i);
      if (t != nullptr && t->data != nullptr) {
        std::memset(t->data, 0, static_cast<size_t>(Numel(t)) * sizeof(E));
      }
    }
    for (const Step& step : st->steps) {
      const FleetTensor* src = Input(kc, step.src_slot, step.src_index);
      const FleetTensor* dst = Output(kc, step.dst_slot, step.dst_index);
      if (src == nullptr || dst == nullptr) continue;
      if (src->data == nullptr || dst->data == nullptr) continue;  // zero elements
      if (step.plain && src->data == dst->data) continue;          // in place
      tensor::RunCopy(step.plan, static_cast<const E*>(src->data), static_cast<E*>(dst->data));
    }
    return nullptr;
  });
}

// Registers a layout kernel for every dtype, by element size.
void AddLayout(KernelList& list, const char* op, PrepareFn prepare) {
  Add(list, op, FLEET_DTYPE_BOOL, LaunchLayout<uint8_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT8, LaunchLayout<uint8_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_UINT8, LaunchLayout<uint8_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT16, LaunchLayout<uint16_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_FLOAT16, LaunchLayout<uint16_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_BFLOAT16, LaunchLayout<uint16_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT32, LaunchLayout<uint32_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_FLOAT32, LaunchLayout<uint32_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT64, LaunchLayout<uint64_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_FLOAT64, LaunchLayout<uint64_t>, prepare, ReleaseLayout);
}

}  // namespace

void AddTensorKernels(KernelList& list) {
  AddLayout(list, "reshape2", PrepareLayout<BuildXToOut>);
  AddLayout(list, "reshape2_grad", PrepareLayout<BuildGradToXGrad>);
  AddLayout(list, "flatten_contiguous_range", PrepareLayout<BuildXToOut>);
  AddLayout(list, "flatten_contiguous_range_grad", PrepareLayout<BuildGradToXGrad>);
  AddLayout(list, "assign", PrepareLayout<BuildXToOut>);
  AddLayout(list, "transpose2", PrepareLayout<BuildTranspose>);
  AddLayout(list, "transpose2_grad", PrepareLayout<BuildTransposeGrad>);
  AddLayout(list, "concat", PrepareLayout<BuildConcat>);
  AddLayout(list, "concat_grad", PrepareLayout<BuildConcatGrad>);
  AddLayout(list, "split", PrepareLayout<BuildSplit>);
  AddLayout(list, "split_byref", PrepareLayout<BuildSplitByref>);
  AddLayout(list, "slice", PrepareLayout<BuildSlice>);
  AddLayout(list, "slice_grad", PrepareLayout<BuildSliceGrad>);
  tensor::AddTensorCreateKernels(list);
}

}  // namespace fleet_cpu
