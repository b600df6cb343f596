// The tensor group of the CUDA plugin: layout kernels (tensor_shape.cu) and creation and
// conversion kernels (tensor_create.cu), the same ops and dtypes as the CPU plugin's.
#include "kernels/tensor_groups.h"

namespace fleet_cuda {

void AddTensorKernels(KernelList& list) {
  AddTensorShapeKernels(list);
  AddTensorCreateKernels(list);
  AddTensorShapeExtKernels(list);
  AddTensorIndexKernels(list);
}

}  // namespace fleet_cuda
