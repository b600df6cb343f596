#include "kernels/kernel_util.h"

namespace fleet_cpu {

void AddNnKernels(KernelList& list) { (void)list; }

}  // namespace fleet_cpu
