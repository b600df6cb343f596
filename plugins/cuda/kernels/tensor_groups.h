// The tensor group (AddTensorKernels, tensor_kernels.cu) is spread over two files so that the
// layout kernels and the creation kernels compile separately; each file registers its own.
#pragma once

#include "kernels/kernel_util.h"
#include "layout_plan.h"

namespace fleet_cuda {

// tensor_shape.cu: reshape2, flatten_contiguous_range, assign, transpose2, concat, split,
// split_byref, slice and their gradients, for every dtype.
void AddTensorShapeKernels(KernelList& list);

// Layout kernels of other files (tensor_shape.cu): prepare runs `build` and keeps the copy
// steps as the kernel's state; AddLayoutKernel registers launch (which runs them) for every
// dtype, by element size.
FleetStatus* PrepareLayoutPlan(const FleetKernelContext* kc, fleet::kernel::LayoutBuilder build,
                               void** state);
template <fleet::kernel::LayoutBuilder kBuild>
FleetStatus* PrepareLayoutWith(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return PrepareLayoutPlan(kc, kBuild, state);
}
void AddLayoutKernel(KernelList& list, const char* op, PrepareFn prepare);

// tensor_shape_ext.cu: unsqueeze2, squeeze2, expand_v2, expand_as_v2, tile, stack, unstack,
// flip, roll, tril_triu, strided_slice, pad3d, pad and their gradients.
void AddTensorShapeExtKernels(KernelList& list);

// tensor_index.cu: gather, index_select, gather_nd, scatter, one_hot_v2 and their gradients.
void AddTensorIndexKernels(KernelList& list);

// tensor_create.cu: cast (+ cast_grad), fill_constant, fill_any_like, fill_zeros_like,
// increment, uniform_random, gaussian_random, truncated_gaussian_random.
void AddTensorCreateKernels(KernelList& list);

}  // namespace fleet_cuda
