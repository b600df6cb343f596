// Shared by the tensor kernels: running the strided copy plans that the layout kernels build
// (the plans themselves, and the builders, are shared with the CUDA plugin in
// plugins/common/layout_plan.h) and the dtype dispatch of the creation kernels.
//
// A CopyPlan is computed once in a kernel's prepare; launching one allocates nothing and only
// walks the box it describes, with a memcpy for every contiguous innermost run.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/kernel_util.h"
#include "layout_plan.h"

namespace fleet_cpu::tensor {

using fleet::kernel::CopyPlan;
using fleet::kernel::kMaxCopyRank;

// Copies the box; E is a trivially copyable type of the element size.
template <typename E>
void RunCopy(const CopyPlan& p, const E* src, E* dst) {
  const int r = p.rank;
  const E* s = src + p.src_offset;
  E* d = dst + p.dst_offset;
  if (r == 0) {
    *d = *s;
    return;
  }
  for (int i = 0; i < r; ++i) {
    if (p.dims[i] == 0) return;
  }
  const int64_t n = p.dims[r - 1];
  const int64_t ss = p.src_strides[r - 1];
  const int64_t ds = p.dst_strides[r - 1];
  int64_t idx[kMaxCopyRank] = {};
  for (;;) {
    if (ss == 1 && ds == 1) {
      std::memcpy(d, s, static_cast<size_t>(n) * sizeof(E));
    } else {
      for (int64_t k = 0; k < n; ++k) d[k * ds] = s[k * ss];
    }
    int j = r - 2;
    for (; j >= 0; --j) {
      s += p.src_strides[j];
      d += p.dst_strides[j];
      if (++idx[j] < p.dims[j]) break;
      s -= p.src_strides[j] * p.dims[j];
      d -= p.dst_strides[j] * p.dims[j];
      idx[j] = 0;
    }
    if (j < 0) return;
  }
}

// ---- dtype dispatch -----------------------------------------------------------------------
// An element type; bool tensors are stored one byte per element and read as "nonzero".
template <typename T, bool kBool = false>
struct Elem {
  using type = T;
  static constexpr bool is_bool = kBool;
};

// Calls f(Elem<...>{}) for the numeric dtypes the creation kernels support (bool, int32,
// int64, float32, float64); false for any other.
template <typename F>
bool VisitNumeric(int32_t dtype, F&& f) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL: f(Elem<uint8_t, true>{}); return true;
    case FLEET_DTYPE_INT32: f(Elem<int32_t>{}); return true;
    case FLEET_DTYPE_INT64: f(Elem<int64_t>{}); return true;
    case FLEET_DTYPE_FLOAT32: f(Elem<float>{}); return true;
    case FLEET_DTYPE_FLOAT64: f(Elem<double>{}); return true;
    default: return false;
  }
}

// The creation kernels (tensor_create_kernels.cc).
void AddTensorCreateKernels(KernelList& list);

// ---- layout kernels (tensor_kernels.cc) ------------------------------------------------------
// Prepare of a layout kernel: runs `build` and keeps the plan as the kernel's state.
FleetStatus* PrepareLayoutPlan(const FleetKernelContext* kc, fleet::kernel::LayoutBuilder build,
                               void** state);
template <fleet::kernel::LayoutBuilder kBuild>
FleetStatus* PrepareLayoutWith(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return PrepareLayoutPlan(kc, kBuild, state);
}
// Registers a layout kernel (launch runs the plan's copy steps) for every dtype, by element
// size.
void AddLayoutKernel(KernelList& list, const char* op, PrepareFn prepare);

// The indexing and masking kernels and the layout ops of shape_plan.h
// (tensor_index_kernels.cc, tensor_shape_ext_kernels.cc).
void AddTensorIndexKernels(KernelList& list);
void AddTensorShapeExtKernels(KernelList& list);

}  // namespace fleet_cpu::tensor
