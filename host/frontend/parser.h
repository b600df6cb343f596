// The parser of the program file (syntax.h): recursive descent over the lexer's tokens, with
// Python's precedence. Statements are in syntax.cc, expressions in parse_expr.cc. Each level of
// nesting (brackets, operators) is counted so that hostile input cannot overflow the stack,
// here or in the interpreter and destructors that recurse the same way. Internal to frontend/.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/lexer.h"
#include "frontend/syntax.h"
#include "support/status.h"

namespace fleet::frontend {

inline constexpr int kMaxNesting = 64;

// Python's keywords, and why each one the language leaves out is left out.
bool IsKeyword(std::string_view word);
std::string Unsupported(std::string_view word);

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view file)
      : tokens_(std::move(tokens)), file_(file) {}

  StatusOr<Block> File();

  // One expression filling the whole token list (an f-string field).
  StatusOr<Expr> Fragment();

 private:
  // Counts one level of nesting for the scope of a parse function.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) { ++p_.depth_; }
    ~Nest() { --p_.depth_; }
    Status Check() const {
      if (p_.depth_ <= kMaxNesting) return OkStatus();
      return ErrorAt(p_.file_, p_.Cur().pos,
                     "values nest more than " + std::to_string(kMaxNesting) +
                         " levels deep (brackets, calls or operators inside each other)");
    }

   private:
    Parser& p_;
  };

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Next() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  bool IsOp(std::string_view op) const { return Cur().kind == Tok::kOp && Cur().text == op; }
  bool IsWord(std::string_view w) const { return Cur().kind == Tok::kName && Cur().text == w; }
  bool Accept(std::string_view op) {
    if (!IsOp(op)) return false;
    ++pos_;
    return true;
  }
  bool AcceptWord(std::string_view w) {
    if (!IsWord(w)) return false;
    ++pos_;
    return true;
  }
  Status Expected(std::string_view what) const {
    std::string got = Cur().kind == Tok::kNewline || Cur().kind == Tok::kEof ||
                              Cur().kind == Tok::kIndent || Cur().kind == Tok::kDedent
                          ? Cur().raw
                          : "'" + Cur().raw.substr(0, 40) + "'";
    return ErrorAt(file_, Cur().pos, "expected " + std::string(what) + ", got " + got);
  }
  Status Expect(std::string_view op, std::string_view context) {
    if (Accept(op)) return OkStatus();
    return Expected("'" + std::string(op) + "' " + std::string(context));
  }

  // ---- statements ----

  Status Statement(Block& out);
  Status SimpleLine(Block& out);
  Status Simple(Block& out);
  // Assignment targets: names, attributes, subscripts, and (when `unpack`) tuples/lists of them.
  Status CheckTarget(const Expr& e, bool unpack) const;
  Status Import(Block& out);
  StatusOr<std::string> Dotted();
  // assert cond[, message] runs as: if not cond: stop with the message.
  Status Assert(Block& out);
  // ':' then a block: statements on the same line, or NEWLINE INDENT statements DEDENT.
  StatusOr<std::shared_ptr<Block>> Suite(std::string_view what);
  Status Def(Block& out);
  // A loop target: NAME or NAME, NAME, ... (possibly parenthesised, nested).
  StatusOr<Expr> LoopTarget();
  StatusOr<Expr> TargetList();
  Status For(Block& out);
  Status If(Block& out);
  Status With(Block& out);

  // ---- expressions ----

  // exprs := expr {',' expr} [','] — a tuple when a comma appears.
  StatusOr<Expr> Exprs();
  // `item` {',' `item`} [','] — a tuple when a comma appears.
  StatusOr<Expr> CommaList(StatusOr<Expr> (Parser::*item)());
  bool StartsExpr() const;
  // expr := or ['if' or 'else' expr]
  StatusOr<Expr> Expr1();
  StatusOr<Expr> Or() { return BoolChain("or", &Parser::And); }
  StatusOr<Expr> And() { return BoolChain("and", &Parser::Not); }

  StatusOr<Expr> BoolChain(std::string_view word, StatusOr<Expr> (Parser::*next)());
  StatusOr<Expr> Not();
  StatusOr<Expr> Comparison();
  // Bitwise operators have no build-time meaning here; on tensors Paddle's would be
  // logical ops, which are called by name.
  StatusOr<Expr> BitOr();
  StatusOr<Expr> Binary(Expr left, std::string op, Expr right);
  StatusOr<Expr> Sum();
  StatusOr<Expr> Term();
  StatusOr<Expr> Factor();
  StatusOr<Expr> Power();
  StatusOr<Expr> Postfix();
  Status Arguments(Expr& call);
  Status Subscripts(Expr& sub);
  StatusOr<Expr> SliceItem();
  StatusOr<Expr> Atom();
  StatusOr<Expr> Number();
  // Adjacent literals join, as in Python; any f-string among them makes the whole an f-string.
  StatusOr<Expr> Strings();
  // Splits an f-string's body into literal parts and {expr[!r|!s][:spec]} fields.
  Status FormatParts(const Token& t, std::vector<Expr>& parts);
  // (), (x), (x,), (a, b).
  StatusOr<Expr> Parenthesised();
  StatusOr<Expr> ListDisplay();
  StatusOr<Expr> DictDisplay();

  std::vector<Token> tokens_;
  std::string_view file_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace fleet::frontend
