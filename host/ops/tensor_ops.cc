#include "ops/op_registry.h"

namespace fleet::ops {

void RegisterTensorOps(OpRegistry& registry) { (void)registry; }

}  // namespace fleet::ops
