// The parser's statements (parser.h), and the entry point.
#include "frontend/syntax.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

#include "frontend/parser.h"
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

}  // namespace

bool IsKeyword(std::string_view word) { return kKeywords.count(word) != 0; }

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

StatusOr<Block> Parser::File() {
  Block out;
  while (Cur().kind != Tok::kEof) {
    if (Cur().kind == Tok::kIndent) return ErrorAt(file_, Cur().pos, "unexpected indent");
    FLEET_RETURN_IF_ERROR(Statement(out));
  }
  return out;
}

StatusOr<Expr> Parser::Fragment() {
  FLEET_ASSIGN_OR_RETURN(Expr e, Exprs());
  if (Cur().kind != Tok::kEof) return Expected("the end of the f-string field");
  return e;
}

Status Parser::Statement(Block& out) {
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

Status Parser::SimpleLine(Block& out) {
  while (true) {
    FLEET_RETURN_IF_ERROR(Simple(out));
    if (!Accept(";")) break;
    if (Cur().kind == Tok::kNewline) break;
  }
  if (Cur().kind != Tok::kNewline) return Expected("end of line after the statement");
  ++pos_;
  return OkStatus();
}

Status Parser::Simple(Block& out) {
  Stmt s;
  s.pos = Cur().pos;
  const Token& t = Cur();
  if (t.kind == Tok::kName && IsKeyword(t.text)) {
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

Status Parser::CheckTarget(const Expr& e, bool unpack) const {
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

Status Parser::Import(Block& out) {
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

StatusOr<std::string> Parser::Dotted() {
  if (Cur().kind != Tok::kName || IsKeyword(Cur().text)) return Expected("a module name");
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

Status Parser::Assert(Block& out) {
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

StatusOr<std::shared_ptr<Block>> Parser::Suite(std::string_view what) {
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

Status Parser::Def(Block& out) {
  Stmt s;
  s.kind = Stmt::Kind::kDef;
  s.pos = Cur().pos;
  ++pos_;
  if (Cur().kind != Tok::kName || IsKeyword(Cur().text)) {
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
    if (Cur().kind != Tok::kName || IsKeyword(Cur().text)) return Expected("a parameter");
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

StatusOr<Expr> Parser::LoopTarget() {
  FLEET_ASSIGN_OR_RETURN(Expr target, TargetList());
  FLEET_RETURN_IF_ERROR(CheckTarget(target, true));
  return target;
}

StatusOr<Expr> Parser::TargetList() { return CommaList(&Parser::BitOr); }

Status Parser::For(Block& out) {
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

Status Parser::If(Block& out) {
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

Status Parser::With(Block& out) {
  Stmt s;
  s.kind = Stmt::Kind::kWith;
  s.pos = Cur().pos;
  ++pos_;
  do {
    FLEET_ASSIGN_OR_RETURN(Expr e, Expr1());
    std::string as;
    if (AcceptWord("as")) {
      if (Cur().kind != Tok::kName || IsKeyword(Cur().text)) {
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

StatusOr<Block> ParseProgram(std::string_view text, std::string_view file_name) {
  FLEET_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(text, file_name));
  return Parser(std::move(tokens), file_name).File();
}

}  // namespace fleet::frontend
