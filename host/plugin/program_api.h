// The host's implementation of FleetProgramApi (fleet_pass.h): the handle-based program-editing
// service passes use to read and rewrite a set of named programs.
//
// A ProgramSetBinding wraps a std::map<std::string, ir::Program> for the duration of one pass
// run and hands out its FleetProgramSet* handle; FleetProgram* handles are created on demand,
// one per program, and live as long as the binding. Edits go straight into the map.
//
// Lifetimes, as the ABI promises: strings and arrays returned by program_name, op_get, var_at
// and var_get stay valid until the next editing call (block_add, op_insert, op_remove,
// op_set_attr, op_set_slot, var_add, var_remove) on the same program; reads do not invalidate
// each other. Every editing call copies its arguments before it changes anything, so a pass
// may feed what it read back into an edit.
//
// Misuse never crashes the host: NULL handles or pointers, impossible struct sizes, unknown
// enum values, bad indices and malformed slots/attributes are answered with INVALID_ARGUMENT,
// OUT_OF_RANGE, NOT_FOUND, ALREADY_EXISTS or FAILED_PRECONDITION statuses naming the slot and
// the value at fault. The count slots (program_count, block_count, op_count, var_count) answer
// 0 for a NULL handle or a block index out of range; program_name answers NULL for an index
// out of range.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "fleet/fleet_pass.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet {

class ProgramSetBinding {
 public:
  // `programs` must outlive the binding.
  explicit ProgramSetBinding(std::map<std::string, ir::Program>& programs);
  ~ProgramSetBinding();
  ProgramSetBinding(const ProgramSetBinding&) = delete;
  ProgramSetBinding& operator=(const ProgramSetBinding&) = delete;

  FleetProgramSet* handle() { return set_.get(); }

  // The programs behind a handle a binding made, or nullptr for anything else. The host's own
  // passes use this to edit the C++ IR directly while going through the same registry, run
  // and verification as plugin passes.
  static std::map<std::string, ir::Program>* Programs(FleetProgramSet* handle);

 private:
  std::unique_ptr<FleetProgramSet> set_;
};

// The function table (struct_size covers every ABI 1.0 slot). Static; never NULL.
const FleetProgramApi* ProgramApi();

// An attribute (or pass option, or config value) received from a plugin, checked: a known type,
// non-NULL arrays where count > 0, INT within int32, BOOL(S) 0 or 1, BLOCK >= 0. The name is not
// part of the value; `what` names the argument in errors ("op_set_attr: attribute 'scale'").
StatusOr<ir::Attribute> FromFleetAttr(const FleetAttr& attr, std::string_view what);

}  // namespace fleet
