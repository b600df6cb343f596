// The text form of programs: what `fleet-host show` prints and what pass tests are written in.
//
// Printing is deterministic (vars, slots and attributes are sorted maps; ops keep their order)
// and exact: ParseProgram(PrintProgram(p)) == p for every program, including the distinction
// between int32/int64/float/double attributes, -1 dims, scalar shapes, parameter options and
// nested blocks. The grammar is documented in docs/ir.md; in short:
//
//   program {
//     block 0 {
//       var x : float32[-1, 32] stop_gradient
//       param fc_0.w_0 : float32[32, 128] {lr=1.0, regularizer="l2", coeff=0.0001}
//       op mul(X=[x], Y=[fc_0.w_0]) -> (Out=[fc_0.tmp_0]) {x_num_col_dims=1, y_num_col_dims=1}
//     }
//     block 1 parent 0 { ... }
//   }
//
// A program set (main, startup, pserver.0, ...) prints as one `program NAME { ... }` per
// program, in name order. `#` starts a comment that runs to the end of the line.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ir/program.h"
#include "support/status.h"

namespace fleet::ir {

// The text of one program, ending in a newline.
std::string PrintProgram(const Program& program);

// Parses the text of one program. Errors are INVALID_ARGUMENT
// "SOURCE:LINE:COL: expected ..., got ..." (1-based line and column).
StatusOr<Program> ParseProgram(std::string_view text, std::string_view source_name);

// The text of a named set of programs, in name order.
std::string PrintProgramSet(const std::map<std::string, Program>& programs);

// Parses a named set of programs; a duplicate name is an error.
StatusOr<std::map<std::string, Program>> ParseProgramSet(std::string_view text,
                                                         std::string_view source_name);

// One attribute value as the printer writes it ("1", "1L", "0.5f", "[1, 2]", "block(1)", ...).
std::string PrintAttribute(const Attribute& attr);

}  // namespace fleet::ir
