#include "kernels/kernel_util.h"

namespace fleet_cpu {

void AddTensorKernels(KernelList& list) { (void)list; }

}  // namespace fleet_cpu
