// The parsing half of the text IR (text.h): a recursive-descent reader over the text with
// context-dependent tokens (a name, a dtype and an attribute literal are read by different
// functions), so var names such as "fc_0.w_0@GRAD" need no quoting. Whitespace, including line
// breaks, only separates tokens; `#` comments run to the end of the line.
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/text.h"

namespace fleet::ir {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '@' || c == '/' || c == '-';
}

// Characters of an attribute literal: names plus the '+' of an exponent.
bool IsLiteralChar(char c) { return IsNameChar(c) || c == '+'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses all of `text` as a T with std::from_chars; nullopt if anything is left over.
template <typename T>
std::optional<T> FromChars(std::string_view text) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  StatusOr<Program> ParseSingle() {
    FLEET_RETURN_IF_ERROR(ExpectKeyword("program", "'program'"));
    Program program;
    FLEET_RETURN_IF_ERROR(ParseProgramBody(program));
    SkipSpace();
    if (pos_ < text_.size()) return Error(pos_, "end of input");
    return program;
  }

  StatusOr<std::map<std::string, Program>> ParseSet() {
    std::map<std::string, Program> programs;
    SkipSpace();
    while (pos_ < text_.size()) {
      FLEET_RETURN_IF_ERROR(ExpectKeyword("program", "'program'"));
      SkipSpace();
      size_t name_pos = pos_;
      FLEET_ASSIGN_OR_RETURN(std::string name, ReadName("a program name"));
      if (programs.count(name) > 0) {
        return ErrorMessage(name_pos, "program '" + name + "' is defined twice");
      }
      Program program;
      FLEET_RETURN_IF_ERROR(ParseProgramBody(program));
      programs.emplace(std::move(name), std::move(program));
      SkipSpace();
    }
    return programs;
  }

 private:
  // ---- positions and errors ----

  std::pair<size_t, size_t> LineCol(size_t pos) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return {line, col};
  }

  std::string Where(size_t pos) const {
    auto [line, col] = LineCol(pos);
    return std::string(source_) + ":" + std::to_string(line) + ":" + std::to_string(col);
  }

  // What stands at `pos`, for "got ...".
  std::string Describe(size_t pos) const {
    if (pos >= text_.size()) return "end of input";
    char c = text_[pos];
    if (c == '"') return "a string";
    if (text_.substr(pos, 2) == "->") return "'->'";
    if (IsLiteralChar(c)) {
      size_t end = pos;
      while (end < text_.size() && IsLiteralChar(text_[end]) && end - pos < 40) ++end;
      return "'" + std::string(text_.substr(pos, end - pos)) + "'";
    }
    if (static_cast<unsigned char>(c) < 0x20) return "a control character";
    return "'" + std::string(1, c) + "'";
  }

  Status Error(size_t pos, std::string_view expected) const {
    return InvalidArgument(Where(pos) + ": expected " + std::string(expected) + ", got " +
                           Describe(pos));
  }

  Status ErrorMessage(size_t pos, std::string_view message) const {
    return InvalidArgument(Where(pos) + ": " + std::string(message));
  }

  // ---- tokens ----

  void SkipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // Consumes `c` if it is next (after space).
  bool Accept(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Status Expect(char c) {
    if (Accept(c)) return OkStatus();
    return Error(pos_, "'" + std::string(1, c) + "'");
  }

  Status ExpectArrow() {
    SkipSpace();
    if (text_.substr(pos_, 2) == "->") {
      pos_ += 2;
      return OkStatus();
    }
    return Error(pos_, "'->'");
  }

  // The run of name characters at the current position (after space), not consumed.
  std::string_view PeekWord() {
    SkipSpace();
    size_t end = pos_;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    return text_.substr(pos_, end - pos_);
  }

  std::string_view PeekLiteral() {
    SkipSpace();
    size_t end = pos_;
    while (end < text_.size() && IsLiteralChar(text_[end])) ++end;
    return text_.substr(pos_, end - pos_);
  }

  Status ExpectKeyword(std::string_view keyword, std::string_view expected) {
    if (PeekWord() != keyword) return Error(pos_, expected);
    pos_ += keyword.size();
    return OkStatus();
  }

  // A double-quoted string with \" \\ \n \t \r \xHH escapes, on one line.
  StatusOr<std::string> ReadString() {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '"') return Error(pos_, "a string");
    size_t start = pos_++;
    std::string out;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        return ErrorMessage(start, "string is not closed on its line");
      }
      char c = text_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return ErrorMessage(start, "string is not closed on its line");
      size_t esc_pos = pos_ - 1;
      char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          int hi = pos_ < text_.size() ? HexValue(text_[pos_]) : -1;
          int lo = pos_ + 1 < text_.size() ? HexValue(text_[pos_ + 1]) : -1;
          if (hi < 0 || lo < 0) return Error(esc_pos, "an escape \\xHH with two hex digits");
          out += static_cast<char>(hi * 16 + lo);
          pos_ += 2;
          break;
        }
        default:
          return Error(esc_pos, "an escape (\\\", \\\\, \\n, \\t, \\r or \\xHH)");
      }
    }
    return out;
  }

  // A bare name (letters, digits, _ . @ / -) or a quoted string.
  StatusOr<std::string> ReadName(std::string_view what) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '"') return ReadString();
    std::string_view word = PeekWord();
    if (word.empty()) return Error(pos_, what);
    pos_ += word.size();
    return std::string(word);
  }

  StatusOr<int64_t> ReadInt(std::string_view what) {
    SkipSpace();
    std::string_view word = PeekLiteral();
    auto v = FromChars<int64_t>(word);
    if (!v) return Error(pos_, what);
    pos_ += word.size();
    return *v;
  }

  // ---- program structure ----

  Status ParseProgramBody(Program& program) {
    FLEET_RETURN_IF_ERROR(Expect('{'));
    int32_t next_index = 0;
    while (!Accept('}')) {
      SkipSpace();
      if (pos_ >= text_.size()) return Error(pos_, "'block' or '}'");
      FLEET_RETURN_IF_ERROR(ExpectKeyword("block", "'block' or '}'"));
      SkipSpace();
      size_t index_pos = pos_;
      FLEET_ASSIGN_OR_RETURN(int64_t index, ReadInt("a block index"));
      if (index != next_index) {
        return ErrorMessage(index_pos, "expected block " + std::to_string(next_index) +
                                           " (blocks are numbered in order), got block " +
                                           std::to_string(index));
      }
      int32_t parent = -1;
      if (PeekWord() == "parent") {
        size_t parent_kw = pos_;
        pos_ += 6;
        SkipSpace();
        size_t parent_pos = pos_;
        FLEET_ASSIGN_OR_RETURN(int64_t p, ReadInt("a parent block index"));
        if (index == 0) return ErrorMessage(parent_kw, "block 0 has no parent");
        if (p < 0 || p >= index) {
          return ErrorMessage(parent_pos, "parent of block " + std::to_string(index) +
                                              " must be an earlier block (0 to " +
                                              std::to_string(index - 1) + "), got " +
                                              std::to_string(p));
        }
        parent = static_cast<int32_t>(p);
      }
      if (index > 0) program.AddBlock(parent);
      FLEET_RETURN_IF_ERROR(ParseBlockBody(program.block(next_index)));
      ++next_index;
    }
    return OkStatus();
  }

  Status ParseBlockBody(Block& block) {
    FLEET_RETURN_IF_ERROR(Expect('{'));
    while (!Accept('}')) {
      std::string_view word = PeekWord();
      if (word == "var" || word == "param") {
        pos_ += word.size();
        FLEET_RETURN_IF_ERROR(ParseVar(block, word == "param"));
      } else if (word == "op") {
        pos_ += word.size();
        FLEET_RETURN_IF_ERROR(ParseOp(block));
      } else {
        return Error(pos_, "'var', 'param', 'op' or '}'");
      }
    }
    return OkStatus();
  }

  Status ParseVar(Block& block, bool is_param) {
    Var var;
    SkipSpace();
    size_t name_pos = pos_;
    FLEET_ASSIGN_OR_RETURN(var.name, ReadName("a var name"));
    if (Status bad = CheckVarName(var.name); !bad.ok()) {
      return ErrorMessage(name_pos, bad.message());
    }
    if (block.vars.count(var.name) > 0) {
      return ErrorMessage(name_pos, "var '" + var.name + "' is declared twice in block " +
                                        std::to_string(block.index));
    }
    FLEET_RETURN_IF_ERROR(Expect(':'));
    if (PeekWord() == "selected_rows") {
      pos_ += std::string_view("selected_rows").size();
      SkipSpace();
      var.selected_rows = true;
    }
    std::string_view dtype = PeekWord();
    var.dtype = ParseDataType(dtype);
    if (var.dtype == DataType::kInvalid && dtype != "invalid") {
      return Error(pos_, "a data type (float32, int64, ...)");
    }
    pos_ += dtype.size();
    FLEET_RETURN_IF_ERROR(Expect('['));
    if (!Accept(']')) {
      do {
        SkipSpace();
        size_t dim_pos = pos_;
        FLEET_ASSIGN_OR_RETURN(int64_t dim, ReadInt("a dimension"));
        if (dim < -1) return Error(dim_pos, "a dimension (-1 for unknown, or 0 and more)");
        var.shape.push_back(dim);
      } while (Accept(','));
      FLEET_RETURN_IF_ERROR(Expect(']'));
    }
    var.persistable = is_param;
    while (true) {
      std::string_view flag = PeekWord();
      if (flag == "persistable") {
        var.persistable = true;
      } else if (flag == "stop_gradient") {
        var.stop_gradient = true;
      } else if (flag == "not_persistable" && is_param) {
        var.persistable = false;
      } else if (flag == "lod_level") {
        pos_ += flag.size();
        SkipSpace();
        const size_t level_pos = pos_;
        FLEET_ASSIGN_OR_RETURN(int64_t level, ReadInt("a LoD level"));
        if (level < 0 || level > 1) {
          return ErrorMessage(level_pos, "lod_level " + std::to_string(level) +
                                             ": only levels 0 and 1 are supported");
        }
        var.lod_level = static_cast<int32_t>(level);
        continue;
      } else {
        break;
      }
      pos_ += flag.size();
    }
    if (var.selected_rows && (is_param || var.lod_level != 0 || var.shape.empty())) {
      return ErrorMessage(name_pos, "selected_rows var '" + var.name +
                                        "' must have a shape [height, ...] and be neither a "
                                        "parameter nor a sequence");
    }
    if (is_param) {
      ParamInfo info;
      if (Accept('{')) FLEET_RETURN_IF_ERROR(ParseParamInfo(info));
      var.param = std::move(info);
    }
    block.vars.emplace(var.name, std::move(var));
    return OkStatus();
  }

  // After '{': trainable=BOOL, lr=NUMBER, regularizer=STRING, coeff=NUMBER, any subset.
  Status ParseParamInfo(ParamInfo& info) {
    if (Accept('}')) return OkStatus();
    std::map<std::string, bool> seen;
    do {
      SkipSpace();
      size_t key_pos = pos_;
      std::string key(PeekWord());
      if (key != "trainable" && key != "lr" && key != "regularizer" && key != "coeff") {
        return Error(key_pos, "a parameter option (trainable, lr, regularizer or coeff)");
      }
      if (seen[key]) return ErrorMessage(key_pos, "parameter option '" + key + "' given twice");
      seen[key] = true;
      pos_ += key.size();
      FLEET_RETURN_IF_ERROR(Expect('='));
      SkipSpace();
      size_t value_pos = pos_;
      FLEET_ASSIGN_OR_RETURN(Attribute value, ParseScalar());
      if (key == "trainable") {
        const bool* b = std::get_if<bool>(&value);
        if (b == nullptr) return Error(value_pos, "true or false");
        info.trainable = *b;
      } else if (key == "regularizer") {
        const std::string* s = std::get_if<std::string>(&value);
        if (s == nullptr) return Error(value_pos, "a string (\"l2\", \"l1\" or \"\")");
        info.regularizer = *s;
      } else {
        std::optional<double> d;
        if (!std::holds_alternative<bool>(value)) d = AttrAsDouble(value);
        if (!d) return Error(value_pos, "a number");
        (key == "lr" ? info.learning_rate : info.regularization_coeff) = *d;
      }
    } while (Accept(','));
    return Expect('}');
  }

  Status ParseOp(Block& block) {
    Op op;
    FLEET_ASSIGN_OR_RETURN(op.type, ReadName("an op type"));
    FLEET_RETURN_IF_ERROR(ParseSlots(op.inputs));
    FLEET_RETURN_IF_ERROR(ExpectArrow());
    FLEET_RETURN_IF_ERROR(ParseSlots(op.outputs));
    if (Accept('{') && !Accept('}')) {
      do {
        SkipSpace();
        size_t name_pos = pos_;
        FLEET_ASSIGN_OR_RETURN(std::string name, ReadName("an attribute name"));
        if (op.attrs.count(name) > 0) {
          return ErrorMessage(name_pos, "attribute '" + name + "' is given twice");
        }
        FLEET_RETURN_IF_ERROR(Expect('='));
        FLEET_ASSIGN_OR_RETURN(Attribute value, ParseValue());
        op.attrs.emplace(std::move(name), std::move(value));
      } while (Accept(','));
      FLEET_RETURN_IF_ERROR(Expect('}'));
    }
    block.ops.push_back(std::move(op));
    return OkStatus();
  }

  Status ParseSlots(SlotMap& slots) {
    FLEET_RETURN_IF_ERROR(Expect('('));
    if (Accept(')')) return OkStatus();
    do {
      SkipSpace();
      size_t name_pos = pos_;
      FLEET_ASSIGN_OR_RETURN(std::string slot, ReadName("a slot name"));
      if (slots.count(slot) > 0) {
        return ErrorMessage(name_pos, "slot '" + slot + "' is given twice");
      }
      FLEET_RETURN_IF_ERROR(Expect('='));
      FLEET_RETURN_IF_ERROR(Expect('['));
      std::vector<std::string> vars;
      if (!Accept(']')) {
        do {
          FLEET_ASSIGN_OR_RETURN(std::string var, ReadName("a var name"));
          vars.push_back(std::move(var));
        } while (Accept(','));
        FLEET_RETURN_IF_ERROR(Expect(']'));
      }
      slots.emplace(std::move(slot), std::move(vars));
    } while (Accept(','));
    return Expect(')');
  }

  // ---- attribute values ----

  // A scalar literal: "text", true, false, 1 (int32), 1L (int64), 0.5f (float), 0.5 (double).
  StatusOr<Attribute> ParseScalar() {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '"') {
      FLEET_ASSIGN_OR_RETURN(std::string s, ReadString());
      return Attribute(std::move(s));
    }
    std::string_view word = PeekLiteral();
    size_t start = pos_;
    if (word.empty()) return Error(pos_, "a value");
    if (word == "true" || word == "false") {
      pos_ += word.size();
      return Attribute(word == "true");
    }
    std::optional<Attribute> value;
    char last = word.back();
    std::string_view body = word.substr(0, word.size() - 1);
    if (last == 'L') {
      if (auto v = FromChars<int64_t>(body)) value = Attribute(*v);
    } else if (last == 'f' && word != "inf" && word != "-inf") {
      if (auto v = FromChars<float>(body)) value = Attribute(*v);
    } else if (word.find_first_of(".eEni") != std::string_view::npos) {
      // Has a point, an exponent, or is inf/nan: a double.
      if (auto v = FromChars<double>(word)) value = Attribute(*v);
    } else if (auto v = FromChars<int64_t>(word)) {
      if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
        return ErrorMessage(start, "'" + std::string(word) +
                                       "' does not fit an int32 attribute; write " +
                                       std::string(word) + "L for an int64");
      }
      value = Attribute(static_cast<int32_t>(*v));
    }
    if (!value) {
      return Error(start, "a value (\"text\", true, 1, 1L, 0.5f, 0.5, [..], block(N))");
    }
    pos_ += word.size();
    return *value;
  }

  // Converts a scalar literal to element type T of a typed list; nullopt if the kinds differ.
  template <typename T>
  static std::optional<T> ConvertElement(const Attribute& a) {
    if constexpr (std::is_same_v<T, int32_t>) {
      if (const auto* v = std::get_if<int32_t>(&a)) return *v;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (const auto* v = std::get_if<int32_t>(&a)) return *v;
      if (const auto* v = std::get_if<int64_t>(&a)) return *v;
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (std::holds_alternative<bool>(a) || std::holds_alternative<std::string>(a)) {
        return std::nullopt;
      }
      if (auto d = AttrAsDouble(a)) {
        if (const auto* f = std::get_if<float>(&a)) return static_cast<T>(*f);
        return static_cast<T>(*d);
      }
    } else if constexpr (std::is_same_v<T, bool>) {
      if (const auto* v = std::get_if<bool>(&a)) return *v;
    } else {
      if (const auto* v = std::get_if<std::string>(&a)) return *v;
    }
    return std::nullopt;
  }

  // After '[': elements of type T, each converted from its literal, then ']'.
  template <typename T>
  StatusOr<Attribute> ParseTypedElements(std::string_view type_name) {
    std::vector<T> out;
    if (Accept(']')) return Attribute(std::move(out));
    do {
      SkipSpace();
      size_t elem_pos = pos_;
      FLEET_ASSIGN_OR_RETURN(Attribute a, ParseScalar());
      std::optional<T> v = ConvertElement<T>(a);
      if (!v) {
        return ErrorMessage(elem_pos, "expected an element of " + std::string(type_name) +
                                          ", got " + std::string(AttrTypeName(AttrTypeOf(a))) +
                                          " " + PrintAttribute(a));
      }
      out.push_back(*v);
    } while (Accept(','));
    FLEET_RETURN_IF_ERROR(Expect(']'));
    return Attribute(std::move(out));
  }

  // After '[' of an untyped list: the first element fixes the type.
  StatusOr<Attribute> ParseUntypedList() {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      return Error(pos_, "a list element (write an empty list with its type: ints[], "
                         "int64s[], floats[], doubles[], bools[], strings[])");
    }
    size_t first_pos = pos_;
    FLEET_ASSIGN_OR_RETURN(Attribute first, ParseScalar());
    pos_ = first_pos;  // re-read the whole list with the element type now known
    switch (first.index()) {
      case 0: return ParseTypedElements<int32_t>("ints");
      case 1: return ParseTypedElements<int64_t>("int64s");
      case 2: return ParseStrictElements<float>("floats");
      case 3: return ParseStrictElements<double>("doubles");
      case 4: return ParseTypedElements<bool>("bools");
      default: return ParseTypedElements<std::string>("strings");
    }
  }

  // Untyped lists of reals keep float and double apart: every element must carry the same
  // literal kind as the first, so that "[0.5f, 0.25]" is an error instead of a silent cast.
  template <typename T>
  StatusOr<Attribute> ParseStrictElements(std::string_view type_name) {
    std::vector<T> out;
    do {
      SkipSpace();
      size_t elem_pos = pos_;
      FLEET_ASSIGN_OR_RETURN(Attribute a, ParseScalar());
      const T* v = std::get_if<T>(&a);
      if (v == nullptr) {
        return ErrorMessage(elem_pos, "expected an element of " + std::string(type_name) +
                                          " like the first, got " +
                                          std::string(AttrTypeName(AttrTypeOf(a))) + " " +
                                          PrintAttribute(a));
      }
      out.push_back(*v);
    } while (Accept(','));
    FLEET_RETURN_IF_ERROR(Expect(']'));
    return Attribute(std::move(out));
  }

  StatusOr<Attribute> ParseValue() {
    SkipSpace();
    if (Accept('[')) return ParseUntypedList();
    std::string_view word = PeekWord();
    size_t after = pos_ + word.size();
    char next = after < text_.size() ? text_[after] : '\0';
    if (word == "block" && next == '(') {
      pos_ = after + 1;
      SkipSpace();
      size_t index_pos = pos_;
      FLEET_ASSIGN_OR_RETURN(int64_t index, ReadInt("a block index"));
      if (index < 0 || index > std::numeric_limits<int32_t>::max()) {
        return Error(index_pos, "a block index (0 or more)");
      }
      FLEET_RETURN_IF_ERROR(Expect(')'));
      return Attribute(BlockRef{static_cast<int32_t>(index)});
    }
    if (next == '[') {
      pos_ = after + 1;
      if (word == "ints") return ParseTypedElements<int32_t>(word);
      if (word == "int64s") return ParseTypedElements<int64_t>(word);
      if (word == "floats") return ParseTypedElements<float>(word);
      if (word == "doubles") return ParseTypedElements<double>(word);
      if (word == "bools") return ParseTypedElements<bool>(word);
      if (word == "strings") return ParseTypedElements<std::string>(word);
      pos_ = after - word.size();
      return Error(pos_, "a list type (ints, int64s, floats, doubles, bools or strings)");
    }
    return ParseScalar();
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<Program> ParseProgram(std::string_view text, std::string_view source_name) {
  return Parser(text, source_name).ParseSingle();
}

StatusOr<std::map<std::string, Program>> ParseProgramSet(std::string_view text,
                                                         std::string_view source_name) {
  return Parser(text, source_name).ParseSet();
}

}  // namespace fleet::ir
