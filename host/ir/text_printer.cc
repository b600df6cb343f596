// The printing half of the text IR (text.h). The grammar is in docs/ir.md; the parser
// (text_parser.cc) accepts exactly what this file writes, so the two change together.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "ir/text.h"

namespace fleet::ir {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '@' || c == '/' || c == '-';
}

void AppendQuoted(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[5];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// A var, slot, attribute or program name: bare when it is made of name characters, else quoted.
void AppendName(std::string& out, std::string_view name) {
  bool bare = !name.empty();
  for (char c : name) bare = bare && IsNameChar(c);
  if (bare) {
    out += name;
  } else {
    AppendQuoted(out, name);
  }
}

// Shortest text that reads back to the same value; always looks like a floating-point number
// ("1.0", not "1") so that it is not mistaken for an integer.
template <typename T>
void AppendReal(std::string& out, T value) {
  if (std::isnan(value)) {
    out += "nan";
    return;
  }
  if (std::isinf(value)) {
    out += value < 0 ? "-inf" : "inf";
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  std::string_view text(buf, ec == std::errc() ? static_cast<size_t>(end - buf) : 0);
  // The shortest form picks "1e-04" over "0.0001"; prefer plain decimals when they are barely
  // longer, as people write small coefficients that way. Both forms read back exactly.
  char fixed[400];
  if (text.find('e') != std::string_view::npos) {
    auto [fend, fec] = std::to_chars(fixed, fixed + sizeof(fixed), value, std::chars_format::fixed);
    if (fec == std::errc() && static_cast<size_t>(fend - fixed) <= text.size() + 2) {
      text = std::string_view(fixed, static_cast<size_t>(fend - fixed));
    }
  }
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

void AppendDouble(std::string& out, double v) { AppendReal(out, v); }
void AppendFloat(std::string& out, float v) {
  AppendReal(out, v);
  out += 'f';
}

template <typename T>
void AppendScalar(std::string& out, const T& v) {
  if constexpr (std::is_same_v<T, int32_t>) {
    out += std::to_string(v);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    out += std::to_string(v);
    out += 'L';
  } else if constexpr (std::is_same_v<T, float>) {
    AppendFloat(out, v);
  } else if constexpr (std::is_same_v<T, double>) {
    AppendDouble(out, v);
  } else if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else {
    static_assert(std::is_same_v<T, std::string>);
    AppendQuoted(out, v);
  }
}

void AppendAttr(std::string& out, const Attribute& attr) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, BlockRef>) {
          out += "block(" + std::to_string(v.index) + ")";
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          if (v.empty()) out += AttrTypeName(AttrTypeOf(attr));
          out += '[';
          for (size_t i = 0; i < v.size(); ++i) {
            if (i > 0) out += ", ";
            out += v[i] ? "true" : "false";
          }
          out += ']';
        } else if constexpr (requires { v.begin(); typename T::value_type; } &&
                             !std::is_same_v<T, std::string>) {
          // An empty list carries its type: "ints[]", "doubles[]", ...
          if (v.empty()) out += AttrTypeName(AttrTypeOf(attr));
          out += '[';
          for (size_t i = 0; i < v.size(); ++i) {
            if (i > 0) out += ", ";
            AppendScalar(out, v[i]);
          }
          out += ']';
        } else {
          AppendScalar(out, v);
        }
      },
      attr);
}

void AppendAttrs(std::string& out, const AttrMap& attrs) {
  out += '{';
  bool first = true;
  for (const auto& [name, value] : attrs) {
    if (!first) out += ", ";
    first = false;
    AppendName(out, name);
    out += '=';
    AppendAttr(out, value);
  }
  out += '}';
}

void AppendSlots(std::string& out, const SlotMap& slots) {
  out += '(';
  bool first = true;
  for (const auto& [slot, vars] : slots) {
    if (!first) out += ", ";
    first = false;
    AppendName(out, slot);
    out += "=[";
    for (size_t i = 0; i < vars.size(); ++i) {
      if (i > 0) out += ", ";
      AppendName(out, vars[i]);
    }
    out += ']';
  }
  out += ')';
}

void AppendVar(std::string& out, const Var& v, std::string_view indent) {
  out += indent;
  out += v.param ? "param " : "var ";
  AppendName(out, v.name);
  out += " : ";
  if (v.selected_rows) out += "selected_rows ";
  out += DataTypeName(v.dtype);
  out += '[';
  for (size_t i = 0; i < v.shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(v.shape[i]);
  }
  out += ']';
  // A parameter is persistable unless it says otherwise.
  if (v.param) {
    if (!v.persistable) out += " not_persistable";
  } else if (v.persistable) {
    out += " persistable";
  }
  if (v.stop_gradient) out += " stop_gradient";
  if (v.lod_level != 0) out += " lod_level " + std::to_string(v.lod_level);
  if (v.param) {
    const ParamInfo& p = *v.param;
    out += " {";
    if (!p.trainable) out += "trainable=false, ";
    out += "lr=";
    AppendDouble(out, p.learning_rate);
    if (!p.regularizer.empty() || p.regularization_coeff != 0.0) {
      out += ", regularizer=";
      AppendQuoted(out, p.regularizer);
      out += ", coeff=";
      AppendDouble(out, p.regularization_coeff);
    }
    out += '}';
  }
  out += '\n';
}

void AppendOp(std::string& out, const Op& op, std::string_view indent) {
  out += indent;
  out += "op ";
  AppendName(out, op.type);
  AppendSlots(out, op.inputs);
  out += " -> ";
  AppendSlots(out, op.outputs);
  if (!op.attrs.empty()) {
    out += ' ';
    AppendAttrs(out, op.attrs);
  }
  out += '\n';
}

void AppendProgramBody(std::string& out, const Program& program) {
  for (const Block& b : program.blocks()) {
    out += "  block " + std::to_string(b.index);
    if (b.parent != -1) out += " parent " + std::to_string(b.parent);
    out += " {\n";
    for (const auto& [name, var] : b.vars) AppendVar(out, var, "    ");
    for (const Op& op : b.ops) AppendOp(out, op, "    ");
    out += "  }\n";
  }
  out += "}\n";
}

}  // namespace

std::string PrintAttribute(const Attribute& attr) {
  std::string out;
  AppendAttr(out, attr);
  return out;
}

std::string PrintProgram(const Program& program) {
  std::string out = "program {\n";
  AppendProgramBody(out, program);
  return out;
}

std::string PrintProgramSet(const std::map<std::string, Program>& programs) {
  std::string out;
  for (const auto& [name, program] : programs) {
    out += "program ";
    AppendName(out, name);
    out += " {\n";
    AppendProgramBody(out, program);
  }
  return out;
}

}  // namespace fleet::ir
