// The program verifier: checks that a program is well formed against the op schemas before any
// stage relies on it (after the frontend, after autodiff, after each pass, before prepare).
//
// What it checks, per block and op:
//   - blocks: index equals position, block 0 has no parent, others have an earlier parent;
//     each var is keyed by its own name; a parameter is persistable; no var is named
//     ir::kEmptyVarName ("@EMPTY@");
//   - the op type is known (with a did-you-mean);
//   - every slot exists in the schema; a non-duplicable slot holds at most one var; a required
//     (non-optional) slot is present and non-empty;
//   - every var an op reads or writes is declared in its block or an ancestor; an output entry
//     may instead be the placeholder ir::kEmptyVarName (not computed), an input never;
//   - no var is read before it is defined: a var that some op of the same block writes must
//     not be read by that op or an earlier one, unless it is persistable. A var no op of the
//     block writes is an external input (a feed, or a value of an enclosing block) and is fine;
//   - every attribute exists in the schema and has the schema's kind. Numeric widths are
//     lenient (an int attribute given as int64 when it fits, float given as double, an int
//     list where a float list is expected, an empty list of any type for any list); kinds are
//     strict (a float for an int, a string for a bool, a list for a scalar are errors).
//     A block attribute names an existing block;
//   - output shapes agree with the op's shape function (same dtype, same rank, equal known
//     dims), checked only for ops that passed every check above.
//
// All errors are collected, except that a block whose parent is not an earlier block stops the
// check after the block-level checks (var lookups follow parents and would not end). Each names the block, the op index and type, and the slot,
// attribute or var at fault.
#pragma once

#include <string>
#include <vector>

#include "ir/program.h"
#include "ops/op_registry.h"
#include "support/status.h"

namespace fleet::ir {

// Every problem found, in program order; empty for a valid program.
std::vector<std::string> VerifyProgramErrors(const Program& program,
                                             const ops::OpRegistry& registry = ops::BuiltinOps());

// OK, or INVALID_ARGUMENT whose message lists every problem, one per line (the first line
// says how many there are when there are several).
Status VerifyProgram(const Program& program,
                     const ops::OpRegistry& registry = ops::BuiltinOps());

}  // namespace fleet::ir
