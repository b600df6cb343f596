#include "frontend/lexer.h"

#include <array>
#include <cctype>

#include "support/text.h"

namespace fleet::frontend {
namespace {

// Longest first, so "**=" is not read as "**" then "=".
constexpr std::array<std::string_view, 47> kOperators{
    "**=", "//=", ">>=", "<<=", "...", "**", "//", "==", "!=", "<=", ">=", "+=", "-=", "*=",
    "/=",  "%=",  "@=",  "&=",  "|=",  "^=", "->", "<<", ">>", ":=", "(",  ")",  "[",  "]",
    "{",   "}",   ",",   ":",   ".",   ";",  "@",  "=",  "+",  "-",  "*",  "/",  "%",  "<",
    ">",   "&",   "|",   "^",   "~"};

// The nesting of blocks: Python's own parser stops at 100 levels.
constexpr size_t kMaxIndentLevels = 100;

Token MakeToken(Tok kind, Pos pos, std::string text, std::string raw) {
  Token t;
  t.kind = kind;
  t.pos = pos;
  t.text = std::move(text);
  t.raw = std::move(raw);
  return t;
}

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file, Pos start, bool fragment)
      : text_(text), file_(file), line_(start.line), col_(start.col), fragment_(fragment) {}

  StatusOr<std::vector<Token>> Run() {
    bool line_start = !fragment_;
    while (i_ < text_.size()) {
      if (line_start) {
        line_start = false;
        FLEET_ASSIGN_OR_RETURN(bool content, Indentation());
        if (!content) continue;
      }
      const char c = text_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        Advance();
      } else if (c == '#') {
        while (i_ < text_.size() && text_[i_] != '\n') Advance();
      } else if (c == '\\') {
        size_t skip = Peek(1) == '\n' ? 2 : (Peek(1) == '\r' && Peek(2) == '\n') ? 3 : 0;
        if (skip == 0) {
          return ErrorAt(file_, Here(), "unexpected '\\' (a backslash continues a line only "
                                        "right before its end)");
        }
        for (size_t k = 0; k < skip; ++k) Advance();
      } else if (c == '\n') {
        if (brackets_.empty() && !fragment_) {
          if (!out_.empty() && out_.back().kind != Tok::kNewline) {
            out_.push_back(MakeToken(Tok::kNewline, Here(), "\n", "end of line"));
          }
          line_start = true;
        }
        Advance();
      } else if (IsNameStart(c)) {
        FLEET_RETURN_IF_ERROR(NameOrString());
      } else if (IsDigit(c) || (c == '.' && IsDigit(Peek(1)))) {
        FLEET_RETURN_IF_ERROR(Number());
      } else if (c == '"' || c == '\'') {
        FLEET_RETURN_IF_ERROR(String("", Here()));
      } else {
        FLEET_RETURN_IF_ERROR(Operator());
      }
    }
    if (!brackets_.empty()) {
      const Token& open = brackets_.back();
      return ErrorAt(file_, open.pos, "'" + open.text + "' is never closed");
    }
    if (!fragment_) {
      if (!out_.empty() && out_.back().kind != Tok::kNewline) {
        out_.push_back(MakeToken(Tok::kNewline, Here(), "\n", "end of file"));
      }
      for (size_t k = 1; k < indents_.size(); ++k) {
        out_.push_back(MakeToken(Tok::kDedent, Here(), "", "end of file"));
      }
    }
    out_.push_back(MakeToken(Tok::kEof, Here(), "", "end of file"));
    return std::move(out_);
  }

 private:
  char Peek(size_t ahead) const { return i_ + ahead < text_.size() ? text_[i_ + ahead] : '\0'; }
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

  // Reads the indentation of a line and emits INDENT / DEDENT tokens. Returns false for a line
  // holding only blanks or a comment, which does not count. Levels compare as strings, so a
  // block indented with a tab under one indented with spaces is refused instead of guessed at.
  StatusOr<bool> Indentation() {
    Pos pos;
    size_t begin = 0;
    while (true) {
      pos = Here();
      begin = i_;
      while (i_ < text_.size() &&
             (text_[i_] == ' ' || text_[i_] == '\t' || text_[i_] == '\f')) {
        Advance();
      }
      if (i_ < text_.size() && text_[i_] != '\n' && text_[i_] != '#' &&
          !(text_[i_] == '\r' && Peek(1) == '\n')) {
        break;
      }
      while (i_ < text_.size() && text_[i_] != '\n') Advance();
      if (i_ >= text_.size()) return false;
      Advance();
    }
    const std::string indent(text_.substr(begin, i_ - begin));
    const Pos first = Here();
    if (indent == indents_.back()) return true;
    if (indent.size() > indents_.back().size() && indent.rfind(indents_.back(), 0) == 0) {
      if (indents_.size() > kMaxIndentLevels) {
        return ErrorAt(file_, first, "blocks nest more than " +
                                         std::to_string(kMaxIndentLevels) + " levels deep");
      }
      indents_.push_back(indent);
      out_.push_back(MakeToken(Tok::kIndent, first, "", "an indented line"));
      return true;
    }
    while (indents_.size() > 1 && indents_.back().size() > indent.size()) {
      indents_.pop_back();
      out_.push_back(MakeToken(Tok::kDedent, first, "", "a less indented line"));
    }
    if (indents_.back() != indent) {
      return ErrorAt(file_, pos, "this line's indentation matches no enclosing block (mixing "
                                 "tabs and spaces, or dedenting to a level never used)");
    }
    return true;
  }

  Status NameOrString() {
    const Pos pos = Here();
    size_t begin = i_;
    while (i_ < text_.size() && IsNameChar(text_[i_])) Advance();
    std::string word(text_.substr(begin, i_ - begin));
    if (i_ < text_.size() && (text_[i_] == '"' || text_[i_] == '\'') && word.size() <= 2) {
      std::string prefix = word;
      for (char& ch : prefix) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (prefix == "r" || prefix == "u" || prefix == "f" || prefix == "rf" || prefix == "fr") {
        return String(prefix, pos);
      }
      if (prefix.find('b') != std::string::npos) {
        return ErrorAt(file_, pos, "bytes literals are not supported; use a string");
      }
    }
    out_.push_back(MakeToken(Tok::kName, pos, word, word));
    return OkStatus();
  }

  Status Number() {
    Token t = MakeToken(Tok::kInt, Here(), "", "");
    auto digits = [&] {
      while (i_ < text_.size() && (IsDigit(text_[i_]) || (text_[i_] == '_' && IsDigit(Peek(1))))) {
        if (text_[i_] != '_') t.text += text_[i_];
        Advance();
      }
    };
    if (text_[i_] == '0' && (Peek(1) == 'x' || Peek(1) == 'X' || Peek(1) == 'o' ||
                             Peek(1) == 'O' || Peek(1) == 'b' || Peek(1) == 'B')) {
      return ErrorAt(file_, t.pos, "hexadecimal, octal and binary numbers are not supported; "
                                   "write the number in decimal");
    }
    digits();
    if (i_ < text_.size() && text_[i_] == '.' && Peek(1) != '.') {
      t.kind = Tok::kFloat;
      t.text += '.';
      Advance();
      digits();
    }
    if (i_ < text_.size() && (text_[i_] == 'e' || text_[i_] == 'E')) {
      const Pos save = Here();
      std::string exp = "e";
      Advance();
      if (i_ < text_.size() && (text_[i_] == '+' || text_[i_] == '-')) {
        exp += text_[i_];
        Advance();
      }
      if (i_ >= text_.size() || !IsDigit(text_[i_])) {
        return ErrorAt(file_, save, "malformed exponent in number '" + t.text + exp + "'");
      }
      t.kind = Tok::kFloat;
      t.text += exp;
      digits();
    }
    if (i_ < text_.size() && (IsNameChar(text_[i_]))) {
      return ErrorAt(file_, Here(), "unexpected '" + std::string(1, text_[i_]) +
                                        "' right after the number '" + t.text + "'");
    }
    t.raw = t.text;
    out_.push_back(std::move(t));
    return OkStatus();
  }

  // A string literal after its prefix (r, u, f, rf): '...', "...", '''...''' or """...""".
  Status String(std::string_view prefix, Pos pos) {
    const bool raw = prefix.find('r') != std::string_view::npos;
    const bool format = prefix.find('f') != std::string_view::npos;
    const char quote = text_[i_];
    const bool triple = Peek(1) == quote && Peek(2) == quote;
    const size_t start = i_ - prefix.size();
    for (int k = 0; k < (triple ? 3 : 1); ++k) Advance();
    const Pos body_pos = Here();
    const size_t body = i_;
    while (true) {
      if (i_ >= text_.size() || (!triple && text_[i_] == '\n')) {
        return ErrorAt(file_, pos, std::string("unterminated string: expected a closing ") +
                                       (triple ? std::string(3, quote) : std::string(1, quote)) +
                                       (triple ? "" : " on the same line"));
      }
      if (text_[i_] == '\\' && i_ + 1 < text_.size()) {
        Advance();
        Advance();
        continue;
      }
      if (text_[i_] == quote && (!triple || (Peek(1) == quote && Peek(2) == quote))) break;
      Advance();
    }
    std::string_view inner = text_.substr(body, i_ - body);
    for (int k = 0; k < (triple ? 3 : 1); ++k) Advance();
    Token t = MakeToken(format ? Tok::kFString : Tok::kString, pos, "", "");
    t.raw = std::string(text_.substr(start, i_ - start));
    t.body_pos = body_pos;
    t.raw_string = raw;
    if (format || raw) {
      t.text = std::string(inner);
    } else {
      FLEET_ASSIGN_OR_RETURN(t.text, DecodeEscapes(inner, file_, body_pos));
    }
    out_.push_back(std::move(t));
    return OkStatus();
  }

  Status Operator() {
    const Pos pos = Here();
    for (std::string_view op : kOperators) {
      if (text_.substr(i_, op.size()) != op) continue;
      for (size_t k = 0; k < op.size(); ++k) Advance();
      Token t = MakeToken(Tok::kOp, pos, std::string(op), std::string(op));
      if (op == "(" || op == "[" || op == "{") {
        brackets_.push_back(t);
      } else if (op == ")" || op == "]" || op == "}") {
        static constexpr std::string_view kPairs = "()[]{}";
        if (brackets_.empty()) {
          return ErrorAt(file_, pos, "unmatched '" + std::string(op) + "'");
        }
        const char want = kPairs[kPairs.find(brackets_.back().text[0]) + 1];
        if (op[0] != want) {
          return ErrorAt(file_, pos, "'" + std::string(op) + "' does not match '" +
                                         brackets_.back().text + "' at " +
                                         std::to_string(brackets_.back().pos.line) + ":" +
                                         std::to_string(brackets_.back().pos.col));
        }
        brackets_.pop_back();
      }
      out_.push_back(std::move(t));
      return OkStatus();
    }
    const unsigned char c = static_cast<unsigned char>(text_[i_]);
    if (c >= 0x80) {
      return ErrorAt(file_, pos, "non-ASCII character outside a string or comment");
    }
    return ErrorAt(file_, pos, "unexpected character " +
                                   QuoteForMessage(std::string(1, static_cast<char>(c))));
  }

  std::string_view text_;
  std::string_view file_;
  size_t i_ = 0;
  int line_;
  int col_;
  bool fragment_;
  std::vector<Token> out_;
  std::vector<Token> brackets_;           // open brackets, innermost last
  std::vector<std::string> indents_{""};  // the indentation of each open block
};

}  // namespace

StatusOr<std::vector<Token>> Lex(std::string_view text, std::string_view file, Pos start,
                                 bool fragment) {
  return Lexer(text, file, start, fragment).Run();
}

StatusOr<std::string> DecodeEscapes(std::string_view text, std::string_view file, Pos pos) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++pos.line;
      pos.col = 1;
    } else {
      ++pos.col;
    }
    if (c != '\\' || i + 1 >= text.size()) {
      out += c;
      continue;
    }
    const char e = text[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case '\n': ++pos.line; pos.col = 0; break;
      case '\\': case '\'': case '"': out += e; break;
      default:
        return ErrorAt(file, {pos.line, pos.col - 1},
                       std::string("unknown escape '\\") + e +
                           "' in string (use \\\\, \\', \\\", \\n, \\t or \\r)");
    }
    ++pos.col;
  }
  return out;
}

}  // namespace fleet::frontend
