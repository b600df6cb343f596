// Tokens of the program file, Python's: names, numbers, strings, operators, and the NEWLINE /
// INDENT / DEDENT tokens that give blocks their structure. Internal to frontend/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "frontend/syntax.h"
#include "support/status.h"

namespace fleet::frontend {

enum class Tok { kName, kInt, kFloat, kString, kFString, kOp, kNewline, kIndent, kDedent, kEof };

struct Token {
  Tok kind = Tok::kEof;
  Pos pos;
  // Names, numbers and operators: their text. Strings: the decoded value. F-strings: the raw
  // text between the quotes (the parser splits it into literal parts and fields).
  std::string text;
  std::string raw;       // the source spelling, for messages
  Pos body_pos;          // f-strings: where the text between the quotes starts
  bool raw_string = false;  // f-strings: written rf"..." (no escapes in the literal parts)
};

// Splits `text` into tokens. `start` is the position of text[0] (f-string fields are lexed on
// their own, from inside the string); `fragment` lexes an expression without NEWLINE /
// INDENT / DEDENT tokens. Errors name FILE:LINE:COL.
StatusOr<std::vector<Token>> Lex(std::string_view text, std::string_view file, Pos start = {1, 1},
                                 bool fragment = false);

// Decodes the backslash escapes of one literal string part: \\ \' \" \n \t \r \0 and a
// backslash-newline (which joins lines). `pos` locates text[0] for errors.
StatusOr<std::string> DecodeEscapes(std::string_view text, std::string_view file, Pos pos);

}  // namespace fleet::frontend
