// A recursive-descent parser over the lexer's tokens. Precedence follows Python's grammar; each
// level of nesting (brackets, operators, blocks) is counted so that hostile input cannot
// overflow the stack, here or in the interpreter and destructors that recurse the same way.
#include "frontend/syntax.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

#include "frontend/lexer.h"
#include "support/text.h"

namespace fleet::frontend {

Status ErrorAt(std::string_view file, Pos pos, std::string_view message) {
  return InvalidArgument(std::string(file) + ":" + std::to_string(pos.line) + ":" +
                         std::to_string(pos.col) + ": " + std::string(message));
}

namespace {

const std::set<std::string, std::less<>> kKeywords = {
    "False", "None",   "True",    "and",      "as",     "assert", "async", "await",
    "break", "class",  "continue", "def",     "del",    "elif",   "else",  "except",
    "finally", "for",  "from",    "global",   "if",     "import", "in",    "is",
    "lambda", "nonlocal", "not",  "or",       "pass",   "raise",  "return", "try",
    "while", "with",   "yield"};

// Why each Python keyword the language leaves out is left out, and what to write instead.
std::string Unsupported(std::string_view word) {
  if (word == "while") {
    return "'while' loops are not supported: loop a known number of times with "
           "'for i in range(n)' (graph loops such as while_loop are out of scope)";
  }
  if (word == "class") {
    return "'class' is not supported: write the model as functions (def) that build layers";
  }
  if (word == "lambda") return "'lambda' is not supported: use a def";
  if (word == "try" || word == "except" || word == "finally" || word == "raise") {
    return "'" + std::string(word) + "' is not supported: a program file has no exceptions "
           "(use assert to check a build-time condition)";
  }
  if (word == "global" || word == "nonlocal") {
    return "'" + std::string(word) + "' is not supported: return values from functions instead";
  }
  return "'" + std::string(word) + "' is not supported in a program file";
}

constexpr int kMaxNesting = 64;

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view file)
      : tokens_(std::move(tokens)), file_(file) {}

  StatusOr<Block> File() {
    Block out;
    while (Cur().kind != Tok::kEof) {
      if (Cur().kind == Tok::kIndent) return ErrorAt(file_, Cur().pos, "unexpected indent");
      FLEET_RETURN_IF_ERROR(Statement(out));
    }
    return out;
  }

  // One expression filling the whole token list (an f-string field).
  StatusOr<Expr> Fragment() {
    FLEET_ASSIGN_OR_RETURN(Expr e, Exprs());
    if (Cur().kind != Tok::kEof) return Expected("the end of the f-string field");
    return e;
  }

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

  Status Statement(Block& out) {
    const Token& t = Cur();
    if (t.kind == Tok::kName) {
      if (t.text == "def") return Def(out);
      if (t.text == "for") return For(out);
      if (t.text == "if") return If(out);
      if (t.text == "with") return With(out);
      if (t.text == "elif" || t.text == "else") {
        return ErrorAt(file_, t.pos, "'" + t.text + "' without an 'if' before it");
      }
    }
    return SimpleLine(out);
  }

  Status SimpleLine(Block& out) {
    while (true) {
      FLEET_RETURN_IF_ERROR(Simple(out));
      if (!Accept(";")) break;
      if (Cur().kind == Tok::kNewline) break;
    }
    if (Cur().kind != Tok::kNewline) return Expected("end of line after the statement");
    ++pos_;
    return OkStatus();
  }

  Status Simple(Block& out) {
    Stmt s;
    s.pos = Cur().pos;
    const Token& t = Cur();
    if (t.kind == Tok::kName && kKeywords.count(t.text)) {
      if (t.text == "pass" || t.text == "break" || t.text == "continue") {
        s.kind = t.text == "pass" ? Stmt::Kind::kPass
                 : t.text == "break" ? Stmt::Kind::kBreak
                                     : Stmt::Kind::kContinue;
        ++pos_;
        out.push_back(std::move(s));
        return OkStatus();
      }
      if (t.text == "return") {
        s.kind = Stmt::Kind::kReturn;
        ++pos_;
        if (Cur().kind != Tok::kNewline && !IsOp(";")) {
          FLEET_ASSIGN_OR_RETURN(s.value, Exprs());
          s.has_value = true;
        }
        out.push_back(std::move(s));
        return OkStatus();
      }
      if (t.text == "import" || t.text == "from") return Import(out);
      if (t.text == "assert") return Assert(out);
      static const std::set<std::string, std::less<>> kValueWords = {
          "True", "False", "None", "not", "lambda", "await"};
      if (!kValueWords.count(t.text)) return ErrorAt(file_, t.pos, Unsupported(t.text));
    }
    FLEET_ASSIGN_OR_RETURN(Expr first, Exprs());
    if (IsOp("=")) {
      s.kind = Stmt::Kind::kAssign;
      std::vector<Expr> chain{std::move(first)};
      while (Accept("=")) {
        FLEET_ASSIGN_OR_RETURN(Expr e, Exprs());
        chain.push_back(std::move(e));
      }
      s.value = std::move(chain.back());
      chain.pop_back();
      for (Expr& target : chain) FLEET_RETURN_IF_ERROR(CheckTarget(target, true));
      s.targets = std::move(chain);
    } else if (Cur().kind == Tok::kOp && Cur().text.size() >= 2 && Cur().text.back() == '=' &&
               Cur().text != "==" && Cur().text != "!=" && Cur().text != "<=" &&
               Cur().text != ">=") {
      s.kind = Stmt::Kind::kAugAssign;
      s.text = Cur().text.substr(0, Cur().text.size() - 1);
      if (s.text == ":") return ErrorAt(file_, Cur().pos, "':=' is not supported");
      FLEET_RETURN_IF_ERROR(CheckTarget(first, false));
      ++pos_;
      FLEET_ASSIGN_OR_RETURN(s.value, Expr1());
      s.targets.push_back(std::move(first));
    } else if (IsOp(":")) {
      return ErrorAt(file_, Cur().pos, "annotations (name: type) are not supported");
    } else {
      s.kind = Stmt::Kind::kExpr;
      s.value = std::move(first);
    }
    out.push_back(std::move(s));
    return OkStatus();
  }

  // Assignment targets: names, attributes, subscripts, and (when `unpack`) tuples/lists of them.
  Status CheckTarget(const Expr& e, bool unpack) const {
    switch (e.kind) {
      case Expr::Kind::kName:
        return OkStatus();
      case Expr::Kind::kAttribute:
      case Expr::Kind::kSubscript:
        return OkStatus();
      case Expr::Kind::kTuple:
      case Expr::Kind::kList:
        if (unpack) {
          for (const Expr& item : e.items) FLEET_RETURN_IF_ERROR(CheckTarget(item, true));
          return OkStatus();
        }
        break;
      default:
        break;
    }
    return ErrorAt(file_, e.pos, "cannot assign to this expression");
  }

  Status Import(Block& out) {
    Stmt s;
    s.kind = Stmt::Kind::kImport;
    s.pos = Cur().pos;
    const bool from = Cur().text == "from";
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(std::string module, Dotted());
    if (from) {
      if (!AcceptWord("import")) return Expected("'import' after 'from " + module + "'");
      const bool paren = Accept("(");
      do {
        if (IsOp("*")) return ErrorAt(file_, Cur().pos, "'import *' is not supported");
        if (paren && IsOp(")")) break;
        if (Cur().kind != Tok::kName) return Expected("a name to import");
        std::string name = Cur().text;
        ++pos_;
        std::string as = name;
        if (AcceptWord("as")) {
          if (Cur().kind != Tok::kName) return Expected("a name after 'as'");
          as = Cur().text;
          ++pos_;
        }
        s.imports.push_back({module + "." + name, as});
      } while (Accept(","));
      if (paren) FLEET_RETURN_IF_ERROR(Expect(")", "to close the import list"));
    } else {
      while (true) {
        std::string as;
        if (AcceptWord("as")) {
          if (Cur().kind != Tok::kName) return Expected("a name after 'as'");
          as = Cur().text;
          ++pos_;
        }
        s.imports.push_back({module, as});  // "" binds the first component, as Python does
        if (!Accept(",")) break;
        FLEET_ASSIGN_OR_RETURN(module, Dotted());
      }
    }
    out.push_back(std::move(s));
    return OkStatus();
  }

  StatusOr<std::string> Dotted() {
    if (Cur().kind != Tok::kName || kKeywords.count(Cur().text)) return Expected("a module name");
    std::string name = Cur().text;
    ++pos_;
    while (IsOp(".")) {
      ++pos_;
      if (Cur().kind != Tok::kName) return Expected("a name after '.'");
      name += "." + Cur().text;
      ++pos_;
    }
    return name;
  }

  // assert cond[, message] runs as: if not cond: stop with the message.
  Status Assert(Block& out) {
    Stmt s;
    s.kind = Stmt::Kind::kIf;
    s.pos = Cur().pos;
    ++pos_;
    Expr cond;
    FLEET_ASSIGN_OR_RETURN(cond, Expr1());
    Expr negated;
    negated.kind = Expr::Kind::kUnary;
    negated.text = "not";
    negated.pos = cond.pos;
    negated.operand = std::make_shared<Expr>(std::move(cond));
    s.value = std::move(negated);
    Stmt fail;
    fail.kind = Stmt::Kind::kExpr;
    fail.pos = s.pos;
    fail.value.kind = Expr::Kind::kCall;
    fail.value.pos = s.pos;
    fail.value.operand = std::make_shared<Expr>();
    fail.value.operand->kind = Expr::Kind::kName;
    fail.value.operand->text = "__assert_failed__";
    fail.value.operand->pos = s.pos;
    if (Accept(",")) {
      FLEET_ASSIGN_OR_RETURN(Expr message, Expr1());
      fail.value.items.push_back(std::move(message));
    }
    s.body = std::make_shared<Block>();
    s.body->push_back(std::move(fail));
    out.push_back(std::move(s));
    return OkStatus();
  }

  // ':' then a block: statements on the same line, or NEWLINE INDENT statements DEDENT.
  StatusOr<std::shared_ptr<Block>> Suite(std::string_view what) {
    FLEET_RETURN_IF_ERROR(Expect(":", "to start the body of " + std::string(what)));
    auto block = std::make_shared<Block>();
    if (Cur().kind != Tok::kNewline) {
      FLEET_RETURN_IF_ERROR(SimpleLine(*block));
      return block;
    }
    ++pos_;
    if (Cur().kind != Tok::kIndent) return Expected("an indented block for " + std::string(what));
    ++pos_;
    while (Cur().kind != Tok::kDedent && Cur().kind != Tok::kEof) {
      if (Cur().kind == Tok::kIndent) return ErrorAt(file_, Cur().pos, "unexpected indent");
      FLEET_RETURN_IF_ERROR(Statement(*block));
    }
    if (Cur().kind == Tok::kDedent) ++pos_;
    return block;
  }

  Status Def(Block& out) {
    Stmt s;
    s.kind = Stmt::Kind::kDef;
    s.pos = Cur().pos;
    ++pos_;
    if (Cur().kind != Tok::kName || kKeywords.count(Cur().text)) {
      return Expected("a function name after 'def'");
    }
    s.text = Cur().text;
    ++pos_;
    FLEET_RETURN_IF_ERROR(Expect("(", "after the function name"));
    bool defaults = false;
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) {
        return ErrorAt(file_, Cur().pos, "*args and **kwargs parameters are not supported");
      }
      if (Cur().kind != Tok::kName || kKeywords.count(Cur().text)) return Expected("a parameter");
      DefParam p{Cur().text, Cur().pos, nullptr};
      for (const DefParam& q : s.params) {
        if (q.name == p.name) {
          return ErrorAt(file_, p.pos, "parameter '" + p.name + "' appears twice");
        }
      }
      ++pos_;
      if (IsOp(":")) return ErrorAt(file_, Cur().pos, "annotations are not supported");
      if (Accept("=")) {
        FLEET_ASSIGN_OR_RETURN(Expr d, Expr1());
        p.default_value = std::make_shared<Expr>(std::move(d));
        defaults = true;
      } else if (defaults) {
        return ErrorAt(file_, p.pos, "parameter '" + p.name +
                                         "' without a default follows one with a default");
      }
      s.params.push_back(std::move(p));
      if (!Accept(",")) break;
    }
    FLEET_RETURN_IF_ERROR(Expect(")", "to close the parameters"));
    if (IsOp("->")) return ErrorAt(file_, Cur().pos, "annotations are not supported");
    FLEET_ASSIGN_OR_RETURN(s.body, Suite("def " + s.text));
    out.push_back(std::move(s));
    return OkStatus();
  }

  // A loop target: NAME or NAME, NAME, ... (possibly parenthesised, nested).
  StatusOr<Expr> LoopTarget() {
    FLEET_ASSIGN_OR_RETURN(Expr target, TargetList());
    FLEET_RETURN_IF_ERROR(CheckTarget(target, true));
    return target;
  }

  StatusOr<Expr> TargetList() {
    Pos pos = Cur().pos;
    FLEET_ASSIGN_OR_RETURN(Expr first, BitOr());
    if (!IsOp(",")) return first;
    Expr tuple;
    tuple.kind = Expr::Kind::kTuple;
    tuple.pos = pos;
    tuple.items.push_back(std::move(first));
    while (Accept(",")) {
      if (IsWord("in")) break;
      FLEET_ASSIGN_OR_RETURN(Expr item, BitOr());
      tuple.items.push_back(std::move(item));
    }
    return tuple;
  }

  Status For(Block& out) {
    Stmt s;
    s.kind = Stmt::Kind::kFor;
    s.pos = Cur().pos;
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(Expr target, LoopTarget());
    s.targets.push_back(std::move(target));
    if (!AcceptWord("in")) return Expected("'in' in the for statement");
    FLEET_ASSIGN_OR_RETURN(s.value, Exprs());
    FLEET_ASSIGN_OR_RETURN(s.body, Suite("the for loop"));
    if (IsWord("else")) return ErrorAt(file_, Cur().pos, "'for ... else' is not supported");
    out.push_back(std::move(s));
    return OkStatus();
  }

  Status If(Block& out) {
    Stmt s;
    s.kind = Stmt::Kind::kIf;
    s.pos = Cur().pos;
    const std::string word = Cur().text;
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(s.value, Expr1());
    FLEET_ASSIGN_OR_RETURN(s.body, Suite("the '" + word + "'"));
    if (IsWord("elif")) {
      s.orelse = std::make_shared<Block>();
      FLEET_RETURN_IF_ERROR(If(*s.orelse));
    } else if (IsWord("else")) {
      ++pos_;
      FLEET_ASSIGN_OR_RETURN(s.orelse, Suite("the 'else'"));
    }
    out.push_back(std::move(s));
    return OkStatus();
  }

  Status With(Block& out) {
    Stmt s;
    s.kind = Stmt::Kind::kWith;
    s.pos = Cur().pos;
    ++pos_;
    do {
      FLEET_ASSIGN_OR_RETURN(Expr e, Expr1());
      std::string as;
      if (AcceptWord("as")) {
        if (Cur().kind != Tok::kName || kKeywords.count(Cur().text)) {
          return Expected("a name after 'as'");
        }
        as = Cur().text;
        ++pos_;
      }
      s.withs.push_back({std::move(e), as});
    } while (Accept(","));
    FLEET_ASSIGN_OR_RETURN(s.body, Suite("the 'with'"));
    out.push_back(std::move(s));
    return OkStatus();
  }

  // ---- expressions ----

  // exprs := expr {',' expr} [','] — a tuple when a comma appears.
  StatusOr<Expr> Exprs() {
    Pos pos = Cur().pos;
    FLEET_ASSIGN_OR_RETURN(Expr first, Expr1());
    if (!IsOp(",")) return first;
    Expr tuple;
    tuple.kind = Expr::Kind::kTuple;
    tuple.pos = pos;
    tuple.items.push_back(std::move(first));
    while (Accept(",")) {
      if (!StartsExpr()) break;
      FLEET_ASSIGN_OR_RETURN(Expr item, Expr1());
      tuple.items.push_back(std::move(item));
    }
    return tuple;
  }

  bool StartsExpr() const {
    const Token& t = Cur();
    switch (t.kind) {
      case Tok::kName:
        return !kKeywords.count(t.text) || t.text == "True" || t.text == "False" ||
               t.text == "None" || t.text == "not" || t.text == "lambda";
      case Tok::kInt: case Tok::kFloat: case Tok::kString: case Tok::kFString:
        return true;
      case Tok::kOp:
        return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" ||
               t.text == "+" || t.text == "~" || t.text == "...";
      default:
        return false;
    }
  }

  // expr := or ['if' or 'else' expr]
  StatusOr<Expr> Expr1() {
    Nest nest(*this);
    FLEET_RETURN_IF_ERROR(nest.Check());
    if (IsWord("lambda")) return ErrorAt(file_, Cur().pos, Unsupported("lambda"));
    FLEET_ASSIGN_OR_RETURN(Expr value, Or());
    if (!IsWord("if")) return value;
    Expr e;
    e.kind = Expr::Kind::kIfElse;
    e.pos = value.pos;
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(Expr cond, Or());
    if (!AcceptWord("else")) return Expected("'else' in the conditional expression");
    FLEET_ASSIGN_OR_RETURN(Expr other, Expr1());
    e.items = {std::move(value), std::move(cond), std::move(other)};
    return e;
  }

  StatusOr<Expr> Or() { return BoolChain("or", &Parser::And); }
  StatusOr<Expr> And() { return BoolChain("and", &Parser::Not); }

  StatusOr<Expr> BoolChain(std::string_view word, StatusOr<Expr> (Parser::*next)()) {
    FLEET_ASSIGN_OR_RETURN(Expr first, (this->*next)());
    if (!IsWord(word)) return first;
    Expr e;
    e.kind = Expr::Kind::kBoolOp;
    e.text = std::string(word);
    e.pos = first.pos;
    e.items.push_back(std::move(first));
    while (AcceptWord(word)) {
      FLEET_ASSIGN_OR_RETURN(Expr item, (this->*next)());
      e.items.push_back(std::move(item));
    }
    return e;
  }

  StatusOr<Expr> Not() {
    if (!IsWord("not")) return Comparison();
    Nest nest(*this);
    FLEET_RETURN_IF_ERROR(nest.Check());
    Expr e;
    e.kind = Expr::Kind::kUnary;
    e.text = "not";
    e.pos = Cur().pos;
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(Expr operand, Not());
    e.operand = std::make_shared<Expr>(std::move(operand));
    return e;
  }

  StatusOr<Expr> Comparison() {
    FLEET_ASSIGN_OR_RETURN(Expr first, BitOr());
    Expr e;
    e.kind = Expr::Kind::kCompare;
    e.pos = first.pos;
    e.items.push_back(std::move(first));
    while (true) {
      std::string op;
      if (Cur().kind == Tok::kOp && (Cur().text == "<" || Cur().text == ">" ||
                                     Cur().text == "==" || Cur().text == "!=" ||
                                     Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        ++pos_;
      } else if (AcceptWord("in")) {
        op = "in";
      } else if (IsWord("not") && Next().kind == Tok::kName && Next().text == "in") {
        pos_ += 2;
        op = "not in";
      } else if (AcceptWord("is")) {
        op = AcceptWord("not") ? "is not" : "is";
      } else {
        break;
      }
      FLEET_ASSIGN_OR_RETURN(Expr item, BitOr());
      e.ops.push_back(std::move(op));
      e.items.push_back(std::move(item));
    }
    if (e.ops.empty()) return std::move(e.items[0]);
    return e;
  }

  // Bitwise operators have no build-time meaning here; on tensors Paddle's would be
  // logical ops, which are called by name.
  StatusOr<Expr> BitOr() {
    FLEET_ASSIGN_OR_RETURN(Expr e, Sum());
    if (Cur().kind == Tok::kOp && (Cur().text == "|" || Cur().text == "&" ||
                                   Cur().text == "^" || Cur().text == "<<" ||
                                   Cur().text == ">>")) {
      return ErrorAt(file_, Cur().pos,
                     "operator '" + Cur().text + "' is not supported; call logical_and, "
                     "logical_or or logical_xor on tensors");
    }
    return e;
  }

  StatusOr<Expr> Binary(Expr left, std::string op, Expr right) {
    Expr e;
    e.kind = Expr::Kind::kBinary;
    e.pos = left.pos;
    e.text = std::move(op);
    e.items.push_back(std::move(left));
    e.items.push_back(std::move(right));
    return e;
  }

  StatusOr<Expr> Sum() {
    FLEET_ASSIGN_OR_RETURN(Expr e, Term());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      ++pos_;
      FLEET_ASSIGN_OR_RETURN(Expr right, Term());
      FLEET_ASSIGN_OR_RETURN(e, Binary(std::move(e), std::move(op), std::move(right)));
    }
    return e;
  }

  StatusOr<Expr> Term() {
    FLEET_ASSIGN_OR_RETURN(Expr e, Factor());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%") || IsOp("@")) {
      std::string op = Cur().text;
      ++pos_;
      FLEET_ASSIGN_OR_RETURN(Expr right, Factor());
      FLEET_ASSIGN_OR_RETURN(e, Binary(std::move(e), std::move(op), std::move(right)));
    }
    return e;
  }

  StatusOr<Expr> Factor() {
    if (!IsOp("-") && !IsOp("+") && !IsOp("~")) return Power();
    Nest nest(*this);
    FLEET_RETURN_IF_ERROR(nest.Check());
    Expr e;
    e.kind = Expr::Kind::kUnary;
    e.text = Cur().text;
    e.pos = Cur().pos;
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(Expr operand, Factor());
    // A sign on a literal folds into it, so shapes like [-1, 32] hold plain numbers.
    if (e.text == "-" && operand.kind == Expr::Kind::kInt) {
      operand.int_value = -operand.int_value;
      operand.pos = e.pos;
      return operand;
    }
    if (e.text == "-" && operand.kind == Expr::Kind::kFloat) {
      operand.float_value = -operand.float_value;
      operand.pos = e.pos;
      return operand;
    }
    e.operand = std::make_shared<Expr>(std::move(operand));
    return e;
  }

  StatusOr<Expr> Power() {
    FLEET_ASSIGN_OR_RETURN(Expr base, Postfix());
    if (!IsOp("**")) return base;
    Nest nest(*this);
    FLEET_RETURN_IF_ERROR(nest.Check());
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(Expr exponent, Factor());
    return Binary(std::move(base), "**", std::move(exponent));
  }

  StatusOr<Expr> Postfix() {
    FLEET_ASSIGN_OR_RETURN(Expr e, Atom());
    const Pos start = e.pos;  // a call is placed where its callee starts: `paddle.` of paddle.f()
    int chained = 0;
    while (IsOp("(") || IsOp("[") || IsOp(".")) {
      if (++chained > kMaxNesting) {
        return ErrorAt(file_, Cur().pos, "more than " + std::to_string(kMaxNesting) +
                                             " calls, subscripts or attributes in a row");
      }
      Expr outer;
      outer.pos = Cur().pos;
      if (Accept(".")) {
        if (Cur().kind != Tok::kName) return Expected("an attribute name after '.'");
        outer.kind = Expr::Kind::kAttribute;
        outer.text = Cur().text;
        outer.pos = Cur().pos;
        ++pos_;
      } else if (Accept("(")) {
        outer.kind = Expr::Kind::kCall;
        outer.pos = start;
        FLEET_RETURN_IF_ERROR(Arguments(outer));
      } else {
        ++pos_;
        outer.kind = Expr::Kind::kSubscript;
        FLEET_RETURN_IF_ERROR(Subscripts(outer));
      }
      outer.operand = std::make_shared<Expr>(std::move(e));
      e = std::move(outer);
    }
    return e;
  }

  Status Arguments(Expr& call) {
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) {
        return ErrorAt(file_, Cur().pos, "*args and **kwargs arguments are not supported");
      }
      if (Cur().kind == Tok::kName && Next().kind == Tok::kOp && Next().text == "=") {
        const Token& name = Cur();
        for (const auto& k : call.keyword_names) {
          if (k == name.text) {
            return ErrorAt(file_, name.pos, "keyword argument '" + name.text + "' repeated");
          }
        }
        call.keyword_names.push_back(name.text);
        call.keyword_pos.push_back(name.pos);
        pos_ += 2;
        FLEET_ASSIGN_OR_RETURN(Expr v, Expr1());
        call.keyword_values.push_back(std::move(v));
      } else {
        Pos arg_pos = Cur().pos;
        FLEET_ASSIGN_OR_RETURN(Expr v, Expr1());
        if (!call.keyword_names.empty()) {
          return ErrorAt(file_, arg_pos, "positional argument follows keyword argument");
        }
        if (IsWord("for")) {
          return ErrorAt(file_, Cur().pos, "generator expressions are not supported; use a "
                                           "list comprehension [... for ... in ...]");
        }
        call.items.push_back(std::move(v));
      }
      if (!Accept(",")) break;
    }
    return Expect(")", "or ',' after argument");
  }

  Status Subscripts(Expr& sub) {
    do {
      if (IsOp("]")) break;
      FLEET_ASSIGN_OR_RETURN(Expr item, SliceItem());
      sub.items.push_back(std::move(item));
    } while (Accept(","));
    if (sub.items.empty()) return Expected("an index inside '[]'");
    return Expect("]", "or ',' after an index");
  }

  StatusOr<Expr> SliceItem() {
    Expr lower;
    lower.pos = Cur().pos;
    if (!IsOp(":")) {
      FLEET_ASSIGN_OR_RETURN(lower, Expr1());
      if (!IsOp(":")) return lower;
    }
    Expr slice;
    slice.kind = Expr::Kind::kSlice;
    slice.pos = lower.pos;
    slice.items.push_back(std::move(lower));
    ++pos_;  // ':'
    for (int part = 0; part < 2; ++part) {
      Expr bound;
      bound.pos = Cur().pos;
      if (!IsOp(":") && !IsOp(",") && !IsOp("]")) {
        FLEET_ASSIGN_OR_RETURN(bound, Expr1());
      }
      slice.items.push_back(std::move(bound));
      if (part == 0 && !Accept(":")) {
        Expr none;
        none.pos = Cur().pos;
        slice.items.push_back(std::move(none));
        break;
      }
    }
    return slice;
  }

  StatusOr<Expr> Atom() {
    const Token& t = Cur();
    Expr e;
    e.pos = t.pos;
    switch (t.kind) {
      case Tok::kInt:
      case Tok::kFloat:
        return Number();
      case Tok::kString:
      case Tok::kFString:
        return Strings();
      case Tok::kName:
        if (t.text == "True" || t.text == "False") {
          e.kind = Expr::Kind::kBool;
          e.bool_value = t.text == "True";
          ++pos_;
          return e;
        }
        if (t.text == "None") {
          ++pos_;
          return e;
        }
        if (kKeywords.count(t.text)) {
          static const std::set<std::string, std::less<>> kOutOfPlace = {
              "in", "is", "and", "or", "if", "else", "elif", "as", "for", "from", "import",
              "def", "return", "pass", "break", "continue", "with", "not", "assert"};
          if (kOutOfPlace.count(t.text)) {
            return Expected("a value");
          }
          return ErrorAt(file_, t.pos, Unsupported(t.text));
        }
        e.kind = Expr::Kind::kName;
        e.text = t.text;
        ++pos_;
        return e;
      case Tok::kOp:
        if (t.text == "(") return Parenthesised();
        if (t.text == "[") return ListDisplay();
        if (t.text == "{") return DictDisplay();
        if (t.text == "...") {
          e.kind = Expr::Kind::kEllipsis;
          ++pos_;
          return e;
        }
        break;
      default:
        break;
    }
    return Expected("a value");
  }

  StatusOr<Expr> Number() {
    const Token& t = Cur();
    Expr e;
    e.pos = t.pos;
    errno = 0;
    if (t.kind == Tok::kInt) {
      e.kind = Expr::Kind::kInt;
      const unsigned long long v = std::strtoull(t.text.c_str(), nullptr, 10);
      if (errno == ERANGE || v > static_cast<unsigned long long>(
                                     std::numeric_limits<int64_t>::max())) {
        return ErrorAt(file_, t.pos, "integer " + QuoteForMessage(t.text, 40) +
                                         " does not fit in 64 bits");
      }
      e.int_value = static_cast<int64_t>(v);
    } else {
      e.kind = Expr::Kind::kFloat;
      e.float_value = std::strtod(t.text.c_str(), nullptr);
      if (errno == ERANGE && e.float_value > 1.0) {
        return ErrorAt(file_, t.pos, "number '" + t.text + "' is out of range");
      }
    }
    ++pos_;
    return e;
  }

  // Adjacent literals join, as in Python; any f-string among them makes the whole an f-string.
  StatusOr<Expr> Strings() {
    Expr e;
    e.kind = Expr::Kind::kString;
    e.pos = Cur().pos;
    std::vector<Expr> parts;
    bool format = false;
    while (Cur().kind == Tok::kString || Cur().kind == Tok::kFString) {
      const Token& t = Cur();
      if (t.kind == Tok::kString) {
        Expr lit;
        lit.kind = Expr::Kind::kString;
        lit.pos = t.pos;
        lit.text = t.text;
        parts.push_back(std::move(lit));
      } else {
        format = true;
        FLEET_RETURN_IF_ERROR(FormatParts(t, parts));
      }
      ++pos_;
    }
    if (!format) {
      for (const Expr& p : parts) e.text += p.text;
      return e;
    }
    e.kind = Expr::Kind::kFString;
    e.items = std::move(parts);
    return e;
  }

  // Splits an f-string's body into literal parts and {expr[!r|!s][:spec]} fields.
  Status FormatParts(const Token& t, std::vector<Expr>& parts) {
    const std::string& body = t.text;
    Pos pos = t.body_pos;
    auto advance = [&](size_t& i) {
      if (body[i] == '\n') {
        ++pos.line;
        pos.col = 1;
      } else {
        ++pos.col;
      }
      ++i;
    };
    std::string literal;
    Pos literal_pos = pos;
    auto flush = [&]() -> Status {
      if (literal.empty()) return OkStatus();
      Expr lit;
      lit.kind = Expr::Kind::kString;
      lit.pos = literal_pos;
      if (t.raw_string) {
        lit.text = literal;
      } else {
        FLEET_ASSIGN_OR_RETURN(lit.text, DecodeEscapes(literal, file_, literal_pos));
      }
      parts.push_back(std::move(lit));
      literal.clear();
      return OkStatus();
    };
    size_t i = 0;
    while (i < body.size()) {
      const char c = body[i];
      if ((c == '{' || c == '}') && i + 1 < body.size() && body[i + 1] == c) {
        if (literal.empty()) literal_pos = pos;
        literal += c;
        advance(i);
        advance(i);
        continue;
      }
      if (c == '}') return ErrorAt(file_, pos, "single '}' in an f-string (write '}}')");
      if (c != '{') {
        if (literal.empty()) literal_pos = pos;
        if (c == '\\' && i + 1 < body.size()) {
          literal += c;
          advance(i);
        }
        literal += body[i];
        advance(i);
        continue;
      }
      FLEET_RETURN_IF_ERROR(flush());
      const Pos field_pos = pos;
      advance(i);
      const Pos expr_pos = pos;
      const size_t start = i;
      int depth = 0;
      char quote = 0;
      size_t expr_end = std::string::npos, spec_start = std::string::npos;
      char conversion = 0;
      for (; i < body.size(); advance(i)) {
        const char d = body[i];
        if (quote) {
          if (d == quote) quote = 0;
          continue;
        }
        if (d == '\'' || d == '"') {
          quote = d;
        } else if (d == '(' || d == '[' || d == '{') {
          ++depth;
        } else if ((d == ')' || d == ']' || d == '}') && depth > 0) {
          --depth;
        } else if (depth == 0 && (d == '}' || d == ':' ||
                                  (d == '!' && i + 1 < body.size() && body[i + 1] != '='))) {
          if (expr_end == std::string::npos) expr_end = i;
          if (d == '}') break;
          if (d == '!') {
            if (i + 2 >= body.size() || (body[i + 1] != 'r' && body[i + 1] != 's') ||
                (body[i + 2] != '}' && body[i + 2] != ':')) {
              return ErrorAt(file_, pos, "an f-string conversion is !r or !s");
            }
            conversion = body[i + 1];
            advance(i);
            continue;
          }
          spec_start = i + 1;
          while (i < body.size() && body[i] != '}') {
            if (body[i] == '{') {
              return ErrorAt(file_, pos, "nested fields in an f-string format are not supported");
            }
            advance(i);
          }
          break;
        }
      }
      if (i >= body.size()) return ErrorAt(file_, field_pos, "'{' in an f-string is never closed");
      std::string_view expr_text(body.data() + start, expr_end - start);
      if (expr_text.find_first_not_of(" \t") == std::string_view::npos) {
        return ErrorAt(file_, field_pos, "empty field '{}' in an f-string");
      }
      FLEET_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(expr_text, file_, expr_pos, true));
      Parser sub(std::move(tokens), file_);
      sub.depth_ = depth_ + 1;
      FLEET_ASSIGN_OR_RETURN(Expr value, sub.Fragment());
      Expr field;
      field.kind = Expr::Kind::kFormat;
      field.pos = field_pos;
      if (spec_start != std::string::npos) field.text = body.substr(spec_start, i - spec_start);
      if (conversion) field.ops.push_back(std::string(1, conversion));
      field.operand = std::make_shared<Expr>(std::move(value));
      parts.push_back(std::move(field));
      advance(i);  // '}'
      literal_pos = pos;
    }
    return flush();
  }

  // (), (x), (x,), (a, b).
  StatusOr<Expr> Parenthesised() {
    Expr tuple;
    tuple.kind = Expr::Kind::kTuple;
    tuple.pos = Cur().pos;
    ++pos_;
    if (Accept(")")) return tuple;
    FLEET_ASSIGN_OR_RETURN(Expr first, Expr1());
    if (IsWord("for")) {
      return ErrorAt(file_, Cur().pos, "generator expressions are not supported; use a list "
                                       "comprehension [... for ... in ...]");
    }
    if (Accept(")")) return first;
    tuple.items.push_back(std::move(first));
    while (Accept(",")) {
      if (IsOp(")")) break;
      FLEET_ASSIGN_OR_RETURN(Expr item, Expr1());
      tuple.items.push_back(std::move(item));
    }
    FLEET_RETURN_IF_ERROR(Expect(")", "or ',' in the tuple"));
    return tuple;
  }

  StatusOr<Expr> ListDisplay() {
    Expr list;
    list.kind = Expr::Kind::kList;
    list.pos = Cur().pos;
    ++pos_;
    if (Accept("]")) return list;
    FLEET_ASSIGN_OR_RETURN(Expr first, Expr1());
    if (AcceptWord("for")) {
      Expr comp;
      comp.kind = Expr::Kind::kListComp;
      comp.pos = list.pos;
      comp.operand = std::make_shared<Expr>(std::move(first));
      FLEET_ASSIGN_OR_RETURN(Expr target, LoopTarget());
      comp.targets = std::make_shared<Expr>(std::move(target));
      if (!AcceptWord("in")) return Expected("'in' in the list comprehension");
      FLEET_ASSIGN_OR_RETURN(Expr iterable, Or());
      comp.items.push_back(std::move(iterable));
      if (AcceptWord("if")) {
        FLEET_ASSIGN_OR_RETURN(Expr cond, Or());
        comp.items.push_back(std::move(cond));
      }
      if (IsWord("for")) {
        return ErrorAt(file_, Cur().pos, "a list comprehension takes one 'for'");
      }
      FLEET_RETURN_IF_ERROR(Expect("]", "to close the list comprehension"));
      return comp;
    }
    list.items.push_back(std::move(first));
    while (Accept(",")) {
      if (IsOp("]")) break;
      FLEET_ASSIGN_OR_RETURN(Expr item, Expr1());
      list.items.push_back(std::move(item));
    }
    FLEET_RETURN_IF_ERROR(Expect("]", "or ',' after a list item"));
    return list;
  }

  StatusOr<Expr> DictDisplay() {
    Expr dict;
    dict.kind = Expr::Kind::kDict;
    dict.pos = Cur().pos;
    ++pos_;
    while (!IsOp("}")) {
      FLEET_ASSIGN_OR_RETURN(Expr key, Expr1());
      if (!IsOp(":")) {
        return ErrorAt(file_, Cur().pos, IsOp(",") || IsOp("}")
                                             ? "sets are not supported; use a list"
                                             : "expected ':' after a dict key");
      }
      ++pos_;
      FLEET_ASSIGN_OR_RETURN(Expr value, Expr1());
      dict.items.push_back(std::move(key));
      dict.items.push_back(std::move(value));
      if (!Accept(",")) break;
    }
    FLEET_RETURN_IF_ERROR(Expect("}", "or ',' in the dict"));
    return dict;
  }

  std::vector<Token> tokens_;
  std::string_view file_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

StatusOr<Block> ParseProgram(std::string_view text, std::string_view file_name) {
  FLEET_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(text, file_name));
  return Parser(std::move(tokens), file_name).File();
}

}  // namespace fleet::frontend
