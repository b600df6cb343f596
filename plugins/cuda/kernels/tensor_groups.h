// The tensor group (AddTensorKernels, tensor_kernels.cu) is spread over two files so that the
// layout kernels and the creation kernels compile separately; each file registers its own.
#pragma once

#include "kernels/kernel_util.h"

namespace fleet_cuda {

// tensor_shape.cu: reshape2, flatten_contiguous_range, assign, transpose2, concat, split,
// split_byref, slice and their gradients, for every dtype.
void AddTensorShapeKernels(KernelList& list);

// tensor_create.cu: cast (+ cast_grad), fill_constant, fill_any_like, fill_zeros_like,
// increment, uniform_random, gaussian_random, truncated_gaussian_random.
void AddTensorCreateKernels(KernelList& list);

}  // namespace fleet_cuda
