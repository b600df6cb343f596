#include "ops/op_registry.h"

namespace fleet::ops {

void RegisterNnOps(OpRegistry& registry) { (void)registry; }

}  // namespace fleet::ops
