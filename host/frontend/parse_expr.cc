// The parser's expressions (parser.h): Python's precedence from conditional expressions down to
// atoms, f-strings split into literal parts and fields, and displays of lists, tuples and dicts.
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

#include "frontend/parser.h"
#include "support/text.h"

namespace fleet::frontend {

StatusOr<Expr> Parser::Exprs() { return CommaList(&Parser::Expr1); }

StatusOr<Expr> Parser::CommaList(StatusOr<Expr> (Parser::*item)()) {
  Pos pos = Cur().pos;
  FLEET_ASSIGN_OR_RETURN(Expr first, (this->*item)());
  if (!IsOp(",")) return first;
  Expr tuple;
  tuple.kind = Expr::Kind::kTuple;
  tuple.pos = pos;
  tuple.items.push_back(std::move(first));
  while (Accept(",")) {
    if (!StartsExpr()) break;  // a trailing comma, or `in` after a loop's targets
    FLEET_ASSIGN_OR_RETURN(Expr next, (this->*item)());
    tuple.items.push_back(std::move(next));
  }
  return tuple;
}

bool Parser::StartsExpr() const {
  const Token& t = Cur();
  switch (t.kind) {
    case Tok::kName:
      return !IsKeyword(t.text) || t.text == "True" || t.text == "False" ||
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

StatusOr<Expr> Parser::Expr1() {
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

StatusOr<Expr> Parser::BoolChain(std::string_view word, StatusOr<Expr> (Parser::*next)()) {
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

StatusOr<Expr> Parser::Not() {
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

StatusOr<Expr> Parser::Comparison() {
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

StatusOr<Expr> Parser::BitOr() {
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

StatusOr<Expr> Parser::Binary(Expr left, std::string op, Expr right) {
  Expr e;
  e.kind = Expr::Kind::kBinary;
  e.pos = left.pos;
  e.text = std::move(op);
  e.items.push_back(std::move(left));
  e.items.push_back(std::move(right));
  return e;
}

StatusOr<Expr> Parser::Sum() {
  FLEET_ASSIGN_OR_RETURN(Expr e, Term());
  while (IsOp("+") || IsOp("-")) {
    std::string op = Cur().text;
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(Expr right, Term());
    FLEET_ASSIGN_OR_RETURN(e, Binary(std::move(e), std::move(op), std::move(right)));
  }
  return e;
}

StatusOr<Expr> Parser::Term() {
  FLEET_ASSIGN_OR_RETURN(Expr e, Factor());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%") || IsOp("@")) {
    std::string op = Cur().text;
    ++pos_;
    FLEET_ASSIGN_OR_RETURN(Expr right, Factor());
    FLEET_ASSIGN_OR_RETURN(e, Binary(std::move(e), std::move(op), std::move(right)));
  }
  return e;
}

StatusOr<Expr> Parser::Factor() {
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

StatusOr<Expr> Parser::Power() {
  FLEET_ASSIGN_OR_RETURN(Expr base, Postfix());
  if (!IsOp("**")) return base;
  Nest nest(*this);
  FLEET_RETURN_IF_ERROR(nest.Check());
  ++pos_;
  FLEET_ASSIGN_OR_RETURN(Expr exponent, Factor());
  return Binary(std::move(base), "**", std::move(exponent));
}

StatusOr<Expr> Parser::Postfix() {
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

Status Parser::Arguments(Expr& call) {
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

Status Parser::Subscripts(Expr& sub) {
  do {
    if (IsOp("]")) break;
    FLEET_ASSIGN_OR_RETURN(Expr item, SliceItem());
    sub.items.push_back(std::move(item));
  } while (Accept(","));
  if (sub.items.empty()) return Expected("an index inside '[]'");
  return Expect("]", "or ',' after an index");
}

StatusOr<Expr> Parser::SliceItem() {
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

StatusOr<Expr> Parser::Atom() {
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
      if (IsKeyword(t.text)) {
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

StatusOr<Expr> Parser::Number() {
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

StatusOr<Expr> Parser::Strings() {
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

Status Parser::FormatParts(const Token& t, std::vector<Expr>& parts) {
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

StatusOr<Expr> Parser::Parenthesised() {
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

StatusOr<Expr> Parser::ListDisplay() {
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

StatusOr<Expr> Parser::DictDisplay() {
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

}  // namespace fleet::frontend
