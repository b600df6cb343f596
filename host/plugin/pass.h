// Running a pass component (FLEET_COMPONENT_PASS) over a set of named programs.
//
// RunPass is transactional: the pass edits a copy of the programs, and the copy replaces them
// only when the pass returns OK and every resulting program passes VerifyProgram. On any error
// the caller's programs are exactly as they were. Every error names the pass (and its plugin).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/program.h"
#include "ops/op_registry.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// What a pass learns about the job (FleetPassContext on the C side).
struct PassContextInfo {
  int32_t rank = 0;          // trainer rank, or pserver index for a pserver
  int32_t world_size = 1;    // number of trainers
  std::string role = "trainer";
  std::vector<std::string> pserver_endpoints;
};

// The options a pass declares, name -> default, read from its vtable and checked (non-empty,
// unique names; well-formed values).
StatusOr<ir::AttrMap> PassOptionDefaults(const ComponentRecord& pass);

// The options the pass will see: `given` checked against the declared ones and converted to
// their declared types, defaults filled in. An unknown name is INVALID_ARGUMENT with a
// did-you-mean; a value of another kind (a string for a number, a float for an int) is
// INVALID_ARGUMENT naming both types. Numbers convert within their kind and from int to real
// (a fleet.toml integer for a double option), when the value fits.
StatusOr<ir::AttrMap> ResolvePassOptions(const ComponentRecord& pass, const ir::AttrMap& given);

// Runs `pass` on `programs` (see the file comment). `registry` is what the result is verified
// against.
Status RunPass(const ComponentRecord& pass, std::map<std::string, ir::Program>& programs,
               const PassContextInfo& ctx, const ir::AttrMap& options,
               const ops::OpRegistry& registry = ops::BuiltinOps());

}  // namespace fleet
