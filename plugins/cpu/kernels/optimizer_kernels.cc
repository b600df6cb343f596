#include "kernels/kernel_util.h"

namespace fleet_cpu {

void AddOptimizerKernels(KernelList& list) { (void)list; }

}  // namespace fleet_cpu
