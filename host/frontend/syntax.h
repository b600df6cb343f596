// Syntax of the program file: a lexer and parser turning text into statements.
//
//   file      := { [stmt] NEWLINE } EOF
//   stmt      := NAME '=' expr | expr
//   expr      := ['-' | '+'] NUMBER | STRING | 'True' | 'False' | 'None' | NAME | call
//              | '[' [expr {',' expr} [',']] ']' | '(' expr ')' | '(' expr ',' ... ')'
//   call      := NAME '(' [arg {',' arg} [',']] ')'
//   arg       := NAME '=' expr | expr       (positional arguments come first)
//
// Newlines inside brackets do not end a statement; a backslash before a newline joins lines.
// Python's statement keywords (for, if, def, import, ...) are rejected with a message saying
// that a program file is data, not code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace fleet::frontend {

// 1-based line and column (in bytes) of a token or expression.
struct Pos {
  int line = 0;
  int col = 0;
};

// "FILE:LINE:COL: message" as INVALID_ARGUMENT.
Status ErrorAt(std::string_view file, Pos pos, std::string_view message);

struct Expr {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kName, kList, kCall };
  Kind kind = Kind::kNone;
  Pos pos;
  bool bool_value = false;
  int64_t int_value = 0;
  double float_value = 0.0;
  std::string text;                 // string literal, name, or the callee of a call
  std::vector<Expr> items;          // list items, or the positional arguments of a call
  std::vector<std::string> keyword_names;  // keyword arguments of a call, in order
  std::vector<Pos> keyword_pos;
  std::vector<Expr> keyword_values;
};

struct Stmt {
  Pos pos;
  std::string target;  // "" for a bare expression statement
  Pos target_pos;
  Expr value;
};

// Parses a whole file. Errors are "FILE:LINE:COL: expected ..., got ...".
StatusOr<std::vector<Stmt>> ParseStatements(std::string_view text, std::string_view file_name);

}  // namespace fleet::frontend
