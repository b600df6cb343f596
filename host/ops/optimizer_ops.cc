#include "ops/op_registry.h"

namespace fleet::ops {

void RegisterOptimizerOps(OpRegistry& registry) { (void)registry; }

}  // namespace fleet::ops
