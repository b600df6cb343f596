#include "frontend/syntax.h"
#include "support/text.h"

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace fleet::frontend {

Status ErrorAt(std::string_view file, Pos pos, std::string_view message) {
  return InvalidArgument(std::string(file) + ":" + std::to_string(pos.line) + ":" +
                         std::to_string(pos.col) + ": " + std::string(message));
}

namespace {

enum class Tok { kName, kInt, kFloat, kString, kPunct, kNewline, kEof };

struct Token {
  Tok kind = Tok::kEof;
  Pos pos;
  std::string text;   // raw text (names, numbers, punctuation); the decoded value for strings
  std::string raw;    // the source spelling, for messages
};

// Python's statement keywords: none of them has a meaning in a program file.
constexpr std::array<std::string_view, 22> kPythonKeywords{
    "for",    "while", "if",  "elif", "else",  "def",    "class", "import",
    "from",   "return", "with", "try", "except", "finally", "lambda", "pass",
    "break",  "continue", "global", "yield", "async", "del"};

bool IsPythonKeyword(std::string_view word) {
  for (auto k : kPythonKeywords) {
    if (k == word) return true;
  }
  return false;
}

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  StatusOr<std::vector<Token>> Run() {
    std::vector<Token> out;
    int depth = 0;
    while (i_ < text_.size()) {
      char c = text_[i_];
      if (c == ' ' || c == '\t' || c == '\r') {
        Advance();
      } else if (c == '#') {
        while (i_ < text_.size() && text_[i_] != '\n') Advance();
      } else if (c == '\\' && Peek(1) == '\n') {
        Advance();
        Advance();
      } else if (c == '\\' && Peek(1) == '\r' && Peek(2) == '\n') {
        Advance();
        Advance();
        Advance();
      } else if (c == '\n') {
        if (depth == 0) out.push_back({Tok::kNewline, Here(), "\n", "end of line"});
        Advance();
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        Token t{Tok::kName, Here(), "", ""};
        while (i_ < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[i_])) || text_[i_] == '_')) {
          t.text += text_[i_];
          Advance();
        }
        t.raw = t.text;
        out.push_back(std::move(t));
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && std::isdigit(static_cast<unsigned char>(Peek(1))))) {
        FLEET_ASSIGN_OR_RETURN(Token t, Number());
        out.push_back(std::move(t));
      } else if (c == '"' || c == '\'') {
        FLEET_ASSIGN_OR_RETURN(Token t, String());
        out.push_back(std::move(t));
      } else {
        Token t{Tok::kPunct, Here(), std::string(1, c), std::string(1, c)};
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        out.push_back(std::move(t));
        Advance();
      }
    }
    out.push_back({Tok::kNewline, Here(), "\n", "end of file"});
    out.push_back({Tok::kEof, Here(), "", "end of file"});
    return out;
  }

 private:
  char Peek(size_t ahead) const {
    return i_ + ahead < text_.size() ? text_[i_ + ahead] : '\0';
  }
  Pos Here() const { return {line_, col_}; }
  void Advance() {
    if (text_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }

  StatusOr<Token> Number() {
    Token t{Tok::kInt, Here(), "", ""};
    auto digits = [&] {
      while (i_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i_]))) {
        t.text += text_[i_];
        Advance();
      }
    };
    digits();
    if (i_ < text_.size() && text_[i_] == '.') {
      t.kind = Tok::kFloat;
      t.text += '.';
      Advance();
      digits();
    }
    if (i_ < text_.size() && (text_[i_] == 'e' || text_[i_] == 'E')) {
      size_t save_i = i_;
      Pos save = Here();
      std::string exp = "e";
      Advance();
      if (i_ < text_.size() && (text_[i_] == '+' || text_[i_] == '-')) {
        exp += text_[i_];
        Advance();
      }
      if (i_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i_]))) {
        t.kind = Tok::kFloat;
        t.text += exp;
        digits();
      } else {
        return ErrorAt(file_, save, "malformed exponent in number '" + t.text +
                                        std::string(text_.substr(save_i, i_ - save_i)) + "'");
      }
    }
    if (i_ < text_.size() &&
        (std::isalpha(static_cast<unsigned char>(text_[i_])) || text_[i_] == '_')) {
      return ErrorAt(file_, Here(), "unexpected '" + std::string(1, text_[i_]) +
                                        "' right after the number '" + t.text + "'");
    }
    t.raw = t.text;
    return t;
  }

  StatusOr<Token> String() {
    Token t{Tok::kString, Here(), "", ""};
    char quote = text_[i_];
    size_t start = i_;
    Advance();
    while (true) {
      if (i_ >= text_.size() || text_[i_] == '\n') {
        return ErrorAt(file_, t.pos, std::string("unterminated string: expected a closing ") +
                                         quote + " on the same line");
      }
      char c = text_[i_];
      if (c == quote) {
        Advance();
        break;
      }
      if (c == '\\') {
        Pos esc = Here();
        Advance();
        if (i_ >= text_.size()) continue;
        char e = text_[i_];
        switch (e) {
          case 'n': t.text += '\n'; break;
          case 't': t.text += '\t'; break;
          case 'r': t.text += '\r'; break;
          case '0': t.text += '\0'; break;
          case '\\': case '\'': case '"': t.text += e; break;
          default:
            return ErrorAt(file_, esc, std::string("unknown escape '\\") + e +
                                           "' in string (use \\\\, \\', \\\", \\n, \\t or \\r)");
        }
        Advance();
        continue;
      }
      t.text += c;
      Advance();
    }
    t.raw = std::string(text_.substr(start, i_ - start));
    return t;
  }

  std::string_view text_;
  std::string_view file_;
  size_t i_ = 0;
  int line_ = 1;
  int col_ = 1;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view file)
      : tokens_(std::move(tokens)), file_(file) {}

  StatusOr<std::vector<Stmt>> Run() {
    std::vector<Stmt> stmts;
    while (Cur().kind != Tok::kEof) {
      if (Cur().kind == Tok::kNewline) {
        ++pos_;
        continue;
      }
      FLEET_ASSIGN_OR_RETURN(Stmt s, Statement());
      stmts.push_back(std::move(s));
    }
    return stmts;
  }

 private:
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Next() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  bool IsPunct(const Token& t, std::string_view p) const {
    return t.kind == Tok::kPunct && t.text == p;
  }
  static std::string Describe(const Token& t) {
    if (t.kind == Tok::kNewline || t.kind == Tok::kEof) return t.raw;
    return "'" + t.raw + "'";
  }
  Status Expected(std::string_view what) const {
    return ErrorAt(file_, Cur().pos, "expected " + std::string(what) + ", got " + Describe(Cur()));
  }
  Status KeywordError(const Token& t) const {
    return ErrorAt(file_, t.pos,
                   "'" + t.text + "' is not supported: a program file is data, not code (no "
                   "loops, conditions, functions or imports); write each call out, one per "
                   "line");
  }

  StatusOr<Stmt> Statement() {
    Stmt s;
    s.pos = Cur().pos;
    if (Cur().kind == Tok::kName && IsPythonKeyword(Cur().text)) return KeywordError(Cur());
    if (Cur().kind == Tok::kName && IsPunct(Next(), "=")) {
      if (Cur().text == "True" || Cur().text == "False" || Cur().text == "None") {
        return ErrorAt(file_, Cur().pos, "cannot assign to '" + Cur().text + "'");
      }
      s.target = Cur().text;
      s.target_pos = Cur().pos;
      pos_ += 2;
    } else if (Cur().kind == Tok::kName && IsPunct(Next(), ",")) {
      return ErrorAt(file_, Next().pos,
                     "expected '=' or '(' after '" + Cur().text +
                         "', got ','; unpacking several results is not supported");
    }
    FLEET_ASSIGN_OR_RETURN(s.value, Expression());
    if (Cur().kind != Tok::kNewline) {
      if (s.target.empty() && s.value.kind == Expr::Kind::kName) {
        return Expected("'=' or '(' after '" + s.value.text + "'");
      }
      return Expected("end of line after the statement");
    }
    ++pos_;
    return s;
  }

  // Values nest (lists, parentheses, calls) at most this deep. The parser, the evaluator and
  // the tree's destructor all recurse per level, so an unbounded depth would let a program file
  // overflow the stack; real programs nest a handful of levels.
  static constexpr int kMaxNesting = 64;

  StatusOr<Expr> Expression() {
    if (depth_ >= kMaxNesting) {
      return ErrorAt(file_, Cur().pos,
                     "values nest more than " + std::to_string(kMaxNesting) +
                         " levels deep (lists, parentheses or calls inside each other)");
    }
    ++depth_;
    StatusOr<Expr> e = NestedExpression();
    --depth_;
    return e;
  }

  StatusOr<Expr> NestedExpression() {
    const Token& t = Cur();
    Expr e;
    e.pos = t.pos;
    switch (t.kind) {
      case Tok::kInt:
      case Tok::kFloat:
        return Number(false, t.pos);
      case Tok::kString:
        e.kind = Expr::Kind::kString;
        e.text = t.text;
        ++pos_;
        // Adjacent literals concatenate, as in Python.
        while (Cur().kind == Tok::kString) {
          e.text += Cur().text;
          ++pos_;
        }
        return e;
      case Tok::kName:
        if (IsPythonKeyword(t.text)) return KeywordError(t);
        if (t.text == "True" || t.text == "False") {
          e.kind = Expr::Kind::kBool;
          e.bool_value = t.text == "True";
          ++pos_;
          return e;
        }
        if (t.text == "None") {
          e.kind = Expr::Kind::kNone;
          ++pos_;
          return e;
        }
        e.text = t.text;
        ++pos_;
        if (IsPunct(Cur(), "(")) return Call(std::move(e));
        if (IsPunct(Cur(), ".")) {
          return ErrorAt(file_, Cur().pos,
                         "'.' after '" + e.text +
                             "': attribute access is not supported; call layers and ops by "
                             "their plain name, e.g. fc(...) rather than fluid.layers.fc(...)");
        }
        e.kind = Expr::Kind::kName;
        return e;
      case Tok::kPunct:
        if (t.text == "-" || t.text == "+") {
          Pos sign = t.pos;
          bool negative = t.text == "-";
          ++pos_;
          if (Cur().kind != Tok::kInt && Cur().kind != Tok::kFloat) {
            return Expected("a number after '" + t.text + "'");
          }
          return Number(negative, sign);
        }
        if (t.text == "[") return Sequence("]", t.pos);
        if (t.text == "(") return Sequence(")", t.pos);
        break;
      default:
        break;
    }
    return Expected("a value (number, string, True, False, None, list, name or call)");
  }

  StatusOr<Expr> Number(bool negative, Pos pos) {
    const Token& t = Cur();
    Expr e;
    e.pos = pos;
    std::string text = (negative ? "-" : "") + t.text;
    errno = 0;
    if (t.kind == Tok::kInt) {
      e.kind = Expr::Kind::kInt;
      e.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) {
        return ErrorAt(file_, pos, "integer " + QuoteForMessage(text, 40) + " does not fit in 64 bits");
      }
    } else {
      e.kind = Expr::Kind::kFloat;
      e.float_value = std::strtod(text.c_str(), nullptr);
      if (errno == ERANGE && (e.float_value > 1.0 || e.float_value < -1.0)) {
        return ErrorAt(file_, pos, "number '" + text + "' is out of range");
      }
    }
    ++pos_;
    return e;
  }

  // A list [a, b] or a parenthesised value (a) / tuple (a, b), which reads as a list.
  StatusOr<Expr> Sequence(std::string_view close, Pos open_pos) {
    ++pos_;
    Expr e;
    e.kind = Expr::Kind::kList;
    e.pos = open_pos;
    bool saw_comma = false;
    while (!IsPunct(Cur(), close)) {
      FLEET_ASSIGN_OR_RETURN(Expr item, Expression());
      e.items.push_back(std::move(item));
      if (IsPunct(Cur(), ",")) {
        saw_comma = true;
        ++pos_;
        continue;
      }
      if (!IsPunct(Cur(), close)) {
        return Expected("'" + std::string(close) + "' or ',' after " +
                        (close == "]" ? "a list item" : "a value"));
      }
    }
    ++pos_;
    if (close == ")" && e.items.size() == 1 && !saw_comma) return std::move(e.items[0]);
    if (close == ")" && e.items.empty()) {
      return ErrorAt(file_, open_pos, "expected a value inside '()'");
    }
    return e;
  }

  StatusOr<Expr> Call(Expr callee) {
    Expr e = std::move(callee);
    e.kind = Expr::Kind::kCall;
    ++pos_;  // '('
    while (!IsPunct(Cur(), ")")) {
      if (Cur().kind == Tok::kName && IsPunct(Next(), "=")) {
        const Token& name = Cur();
        for (const auto& k : e.keyword_names) {
          if (k == name.text) {
            return ErrorAt(file_, name.pos, "keyword argument '" + name.text + "' repeated");
          }
        }
        e.keyword_names.push_back(name.text);
        e.keyword_pos.push_back(name.pos);
        pos_ += 2;
        FLEET_ASSIGN_OR_RETURN(Expr v, Expression());
        e.keyword_values.push_back(std::move(v));
      } else {
        Pos arg_pos = Cur().pos;
        FLEET_ASSIGN_OR_RETURN(Expr v, Expression());
        if (!e.keyword_names.empty()) {
          return ErrorAt(file_, arg_pos, "positional argument follows keyword argument");
        }
        e.items.push_back(std::move(v));
      }
      if (IsPunct(Cur(), ",")) {
        ++pos_;
        continue;
      }
      if (!IsPunct(Cur(), ")")) return Expected("')' or ',' after argument");
    }
    ++pos_;
    return e;
  }

  std::vector<Token> tokens_;
  std::string_view file_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

StatusOr<std::vector<Stmt>> ParseStatements(std::string_view text, std::string_view file_name) {
  Lexer lexer(text, file_name);
  FLEET_ASSIGN_OR_RETURN(std::vector<Token> tokens, lexer.Run());
  Parser parser(std::move(tokens), file_name);
  return parser.Run();
}

}  // namespace fleet::frontend
