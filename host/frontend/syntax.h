// Syntax of the program file: the subset of Python in which paddle.static model code is written,
// parsed into a tree the interpreter (interpreter.h) runs once, at build time.
//
//   file       := { stmt } EOF
//   stmt       := simple { ';' simple } NEWLINE | compound
//   simple     := targets '=' ... '=' exprs | target AUGOP expr | exprs
//               | 'return' [exprs] | 'pass' | 'break' | 'continue'
//               | 'import' dotted ['as' NAME] {',' ...} | 'from' dotted 'import' NAME ['as' NAME] ...
//   compound   := 'def' NAME '(' params ')' ':' block
//               | 'for' targets 'in' exprs ':' block
//               | 'if' expr ':' block { 'elif' expr ':' block } [ 'else' ':' block ]
//               | 'with' expr ['as' NAME] {',' ...} ':' block
//   block      := simple-line | NEWLINE INDENT { stmt } DEDENT
//   expr       := or ['if' or 'else' expr]
//   or/and/not := Python's boolean operators
//   comparison := bitor { ('<' | '>' | '==' | '!=' | '<=' | '>=' | 'in' | 'not' 'in'
//                         | 'is' | 'is' 'not') bitor }
//   arith      := Python's + - * / // % @ (left) and unary - + ~, ** (right, binds tighter)
//   postfix    := atom { '(' args ')' | '[' subscripts ']' | '.' NAME }
//   atom       := NAME | NUMBER | STRING+ | f-string | '(' ... ')' | '[' ... ']' | '{' ... '}'
//               | '[' expr 'for' targets 'in' or ['if' or] ']'
//
// Everything Python has beyond this (class, while, try, lambda, global, yield, ...) is refused
// with a message naming it and its position. Newlines inside brackets do not end a statement; a
// backslash before a newline joins lines; tabs and spaces must not be mixed in indentation.
#pragma once

#include <cstdint>
#include <memory>
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
  enum class Kind {
    kNone, kBool, kInt, kFloat, kString,
    kFString,    // items: the parts (kString literals and kFormat fields)
    kFormat,     // one {expr[:spec]} field of an f-string: operand; text = the spec
    kName,       // text
    kList,       // items
    kTuple,      // items
    kDict,       // items: key0, value0, key1, value1, ...
    kListComp,   // operand = element, targets = loop target, items[0] = iterable, [1] = filter
    kCall,       // operand = callee; items = positional; keyword_* = keywords
    kAttribute,  // operand.text
    kSubscript,  // operand[items...] (one item per comma-separated index)
    kSlice,      // items = lower, upper, step (kNone when absent)
    kEllipsis,   // ...
    kUnary,      // text = "-", "+", "~", "not"; operand
    kBinary,     // text = "+", "-", "*", "/", "//", "%", "**", "@"; items = left, right
    kCompare,    // items = operands; ops = the operators between them ("<", "not in", ...)
    kBoolOp,     // text = "and" / "or"; items = operands
    kIfElse,     // items = value, condition, else-value
  };
  Kind kind = Kind::kNone;
  Pos pos;
  bool bool_value = false;
  int64_t int_value = 0;
  double float_value = 0.0;
  std::string text;
  std::vector<Expr> items;
  std::vector<std::string> ops;
  std::vector<std::string> keyword_names;  // keyword arguments of a call, in order
  std::vector<Pos> keyword_pos;
  std::vector<Expr> keyword_values;
  std::shared_ptr<Expr> operand;   // callee, object, subscripted value, unary operand
  std::shared_ptr<Expr> targets;   // list comprehension: the loop target
};

struct Stmt;
using Block = std::vector<Stmt>;

// A parameter of a def: NAME or NAME '=' default.
struct DefParam {
  std::string name;
  Pos pos;
  std::shared_ptr<Expr> default_value;  // null when the parameter has none
};

struct Stmt {
  enum class Kind {
    kExpr,       // value
    kAssign,     // targets = value (several targets for a = b = value)
    kAugAssign,  // targets[0] op= value; text = the operator without '='
    kReturn,     // value (kNone when absent), has_value
    kPass, kBreak, kContinue,
    kImport,     // imports: (module path, bound name)
    kDef,        // text = name, params, body
    kFor,        // targets[0] in value: body
    kIf,         // value: body, else orelse (elif is an if inside orelse)
    kWith,       // items: (context expr, bound name) in withs; body
  };
  Kind kind = Kind::kExpr;
  Pos pos;
  std::vector<Expr> targets;
  Expr value;
  bool has_value = false;
  std::string text;
  std::vector<DefParam> params;
  std::vector<std::pair<std::string, std::string>> imports;  // (module or module.name, as)
  std::vector<std::pair<Expr, std::string>> withs;
  std::shared_ptr<Block> body;
  std::shared_ptr<Block> orelse;
};

// Parses a whole file. Errors are "FILE:LINE:COL: expected ..., got ...".
StatusOr<Block> ParseProgram(std::string_view text, std::string_view file_name);

}  // namespace fleet::frontend
