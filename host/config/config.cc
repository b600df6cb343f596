#include "config/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include "config/config_schema.h"
#include "support/text.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;
using config_internal::Diagnostics;

std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// Nesting deeper than this (dotted-key parts, table-header parts, arrays and inline tables, all
// counted together) is refused before TOML++ sees the text: TOML++ builds, and later destroys,
// one nested table per key part recursively, and so do our own walks over the result, so a key
// with a few hundred thousand parts overflows the stack.
constexpr size_t kMaxNesting = 64;
// The largest config file read; a config is a few kilobytes.
constexpr size_t kMaxConfigBytes = 16u << 20;

// A scan of TOML text that counts nesting without building anything. It is lenient: whatever it
// does not understand it skips, leaving the syntax error to TOML++; it only refuses depth.
class DepthScan {
 public:
  explicit DepthScan(std::string_view text) : text_(text) {}

  // Empty when the nesting is within kMaxNesting, else "line:col: ..." for the first excess.
  std::string Run() {
    while (pos_ < text_.size() && error_.empty()) {
      SkipBlank(/*newlines=*/true);
      if (pos_ >= text_.size()) break;
      char c = text_[pos_];
      if (c == '#') {
        SkipComment();
      } else if (c == '[') {
        Advance();
        if (Peek() == '[') Advance();
        size_t line = line_, col = col_;
        size_t parts = ScanKey();
        if (parts > kMaxNesting) Fail(line, col, "table header", parts);
        table_parts_ = parts;
        SkipLine();
      } else {
        size_t line = line_, col = col_;
        size_t parts = ScanKey();
        if (table_parts_ + parts > kMaxNesting) Fail(line, col, "key", table_parts_ + parts);
        if (parts == 0) {  // not a key: let TOML++ say what it is
          SkipLine();
          continue;
        }
        SkipBlank(false);
        if (Peek() == '=') Advance();
        ScanValue(table_parts_ + parts);
      }
    }
    return error_;
  }

 private:
  struct Open {
    bool array;
    size_t depth;  // array: the depth of its elements; inline table: the depth of its keys' base
  };

  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void SkipBlank(bool newlines) {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        Advance();
      } else {
        break;
      }
    }
  }
  void SkipComment() {
    while (pos_ < text_.size() && text_[pos_] != '\n') Advance();
  }
  void SkipLine() {
    while (pos_ < text_.size() && text_[pos_] != '\n') {
      if (text_[pos_] == '"' || text_[pos_] == '\'') {
        SkipString();
      } else {
        Advance();
      }
    }
  }
  // Skips a basic, literal or multi-line string starting at the quote.
  void SkipString() {
    char q = text_[pos_];
    bool multi = Peek(1) == q && Peek(2) == q;
    for (int i = 0; i < (multi ? 3 : 1); ++i) Advance();
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\\' && q == '"') {
        Advance();
        if (pos_ < text_.size()) Advance();
        continue;
      }
      if (!multi && c == '\n') return;
      if (c == q && (!multi || (Peek(1) == q && Peek(2) == q))) {
        for (int i = 0; i < (multi ? 3 : 1); ++i) Advance();
        return;
      }
      Advance();
    }
  }
  // Reads a (possibly dotted) key and returns how many parts it has.
  size_t ScanKey() {
    size_t parts = 0;
    while (pos_ < text_.size()) {
      SkipBlank(false);
      char c = Peek();
      if (c == '"' || c == '\'') {
        SkipString();
      } else {
        size_t start = pos_;
        while (pos_ < text_.size()) {
          char b = text_[pos_];
          if (std::isalnum(static_cast<unsigned char>(b)) || b == '_' || b == '-' ||
              static_cast<unsigned char>(b) >= 0x80) {
            Advance();
          } else {
            break;
          }
        }
        if (pos_ == start) return parts;
      }
      ++parts;
      SkipBlank(false);
      if (Peek() != '.') return parts;
      Advance();
    }
    return parts;
  }
  // Skips the value of a key at `depth`, counting the arrays and inline tables it opens.
  void ScanValue(size_t depth) {
    std::vector<Open> open;
    size_t value_depth = depth;
    while (pos_ < text_.size() && error_.empty()) {
      char c = text_[pos_];
      if (c == '\n' && open.empty()) return;
      if (c == '"' || c == '\'') {
        SkipString();
      } else if (c == '#') {
        SkipComment();
      } else if (c == '[') {
        if (value_depth + 1 > kMaxNesting) return Fail(line_, col_, "array", value_depth + 1);
        Advance();
        open.push_back({true, value_depth + 1});
        value_depth = value_depth + 1;
      } else if (c == '{') {
        Advance();
        open.push_back({false, value_depth});
        InlineKey(open.back().depth, value_depth);
      } else if (c == ']' || c == '}') {
        Advance();
        if (!open.empty()) open.pop_back();
        value_depth = open.empty() ? depth : open.back().depth;
      } else if (c == ',') {
        Advance();
        if (!open.empty() && !open.back().array) {
          InlineKey(open.back().depth, value_depth);
        } else if (!open.empty()) {
          value_depth = open.back().depth;
        }
      } else {
        Advance();
      }
    }
  }
  // After `{` or `,` in an inline table whose keys start at `base`: reads the key, if any, and
  // sets `value_depth` to the depth of its value.
  void InlineKey(size_t base, size_t& value_depth) {
    SkipBlank(true);
    size_t line = line_, col = col_;
    size_t parts = ScanKey();
    value_depth = base + parts;
    if (value_depth > kMaxNesting) Fail(line, col, "key", value_depth);
    SkipBlank(false);
    if (Peek() == '=') Advance();
  }
  void Fail(size_t line, size_t col, const char* what, size_t depth) {
    if (!error_.empty()) return;
    error_ = std::to_string(line) + ":" + std::to_string(col) + ": " + what + " nested " +
             std::to_string(depth) +
             " levels deep; at most " + std::to_string(kMaxNesting) + " are allowed";
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 1;
  size_t col_ = 1;
  size_t table_parts_ = 0;
  std::string error_;
};

// `text` as a TOML basic string, so that keys and bare --set values go through the same parser
// as everything else and come out with the same kind of source information.
std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

// Whether `text` is a complete TOML value on its own ("4", "[1, 2]", "'x'") rather than a bare
// word that should be taken as a string ("cpu", "/opt/plugins").
bool IsTomlValue(const std::string& text) {
  try {
    toml::table probe = toml::parse(std::string_view("v = " + text));
    return probe.size() == 1 && probe.contains("v");
  } catch (const toml::parse_error&) {
    return false;
  }
}

// Moves `node` into `table` under `key`, replacing what was there. The node keeps its source
// information, which is how Diagnostics tells overridden values from the file's.
void Put(toml::table& table, const toml::key& key, toml::node&& node) {
  std::move(node).visit([&](auto&& value) { table.insert_or_assign(key, std::move(value)); });
}

// Applies override number `index` ("a.b.c=value") to `root`, reporting problems to `diag`.
void ApplyOverride(toml::table& root, size_t index, std::string_view text, Diagnostics& diag) {
  size_t eq = text.find('=');
  std::vector<std::string> parts;
  if (eq != std::string_view::npos) parts = Split(Trim(text.substr(0, eq)), '.');
  for (std::string& part : parts) part = std::string(Trim(part));
  if (parts.empty() ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    diag.ForOverride(index, "--set " + std::string(text) + ": expected KEY=VALUE");
    return;
  }
  if (parts.size() > kMaxNesting) {
    diag.ForOverride(index, "--set: key '" + parts.front() + "." + parts[1] + "...' has " +
                                std::to_string(parts.size()) + " parts; at most " +
                                std::to_string(kMaxNesting) + " are allowed");
    return;
  }
  std::string key_path;
  for (const std::string& part : parts) key_path += (key_path.empty() ? "" : ".") + part;
  std::string label = "--set " + key_path;

  // Parsed as `"a"."b"."c" = value`, under the label as its source path: every node it creates,
  // intermediate tables included, can then be traced back to this override.
  std::string value_text(Trim(text.substr(eq + 1)));
  std::string document;
  for (const std::string& part : parts) {
    if (!document.empty()) document += '.';
    document += Quote(part);
  }
  document += " = ";
  document += IsTomlValue(value_text) ? value_text : Quote(value_text);
  toml::table parsed;
  try {
    parsed = toml::parse(std::string_view(document), std::string_view(label));
  } catch (const toml::parse_error& e) {
    diag.ForOverride(index, label + ": " + std::string(e.description()));
    return;
  }
  diag.AddOverrideSource(parsed.source().path, index);

  toml::table* target = &root;
  toml::table* source = &parsed;
  std::string here;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto incoming = source->find(parts[i]);
    toml::node* existing = target->get(parts[i]);
    here = i == 0 ? parts[i] : here + "." + parts[i];
    bool last = i + 1 == parts.size();
    if (existing == nullptr || (last && (!existing->is_table() || incoming->second.is_table()))) {
      Put(*target, incoming->first, std::move(incoming->second));
      return;
    }
    if (last) {
      diag.ForOverride(index, label + ": cannot replace a table with " +
                                  config_internal::TypeName(incoming->second));
      return;
    }
    if (!existing->is_table()) {
      diag.ForOverride(index, label + ": '" + here + "' is " +
                                  config_internal::TypeName(*existing) + ", not a table");
      return;
    }
    target = existing->as_table();
    source = incoming->second.as_table();
  }
}

StatusOr<Config> Parse(std::string_view text, std::string_view source_name,
                       const fs::path& base_dir, const std::vector<std::string>& overrides) {
  // Before TOML++: it (and everything after it) recurses once per level of nesting.
  if (std::string depth_error = DepthScan(text).Run(); !depth_error.empty()) {
    return InvalidArgument(std::string(source_name) + ":" + depth_error);
  }
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    return InvalidArgument(std::string(source_name) + ":" + std::to_string(at.line) + ":" +
                           std::to_string(at.column) +
                           ": syntax error: " + std::string(e.description()));
  }

  Diagnostics diag{std::string(source_name)};
  for (size_t i = 0; i < overrides.size(); ++i) ApplyOverride(root, i, overrides[i], diag);

  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  fs::path base = base_dir.empty() ? cwd : fs::absolute(base_dir, ec);
  if (ec) base = base_dir;
  Config config = config_internal::CheckSchema(root, base, cwd, diag);
  FLEET_RETURN_IF_ERROR(diag.ToStatus());
  config.source = std::string(source_name);
  return config;
}

}  // namespace

StatusOr<Config> ParseConfig(std::string_view text, std::string_view source_name,
                             const fs::path& base_dir, const std::vector<std::string>& overrides) {
  // TOML++ and std::filesystem report through exceptions; callers get a Status either way.
  try {
    return Parse(text, source_name, base_dir, overrides);
  } catch (const std::exception& e) {
    return Internal("reading config " + std::string(source_name) + ": " + e.what());
  }
}

StatusOr<Config> LoadConfig(const fs::path& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return ParseConfig("", "<defaults>", fs::path(), overrides);

  // Opened without blocking (a FIFO would wait for a writer forever), and refused unless it is a
  // regular file: /dev/zero or a pipe would be read until memory runs out. The read is capped too,
  // since the size fstat gave can change under us.
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return NotFound("cannot read config '" + name + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return NotFound("cannot read config '" + name + "': " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return NotFound("cannot read config '" + name + "': " + std::strerror(EISDIR));
  }
  // /dev/null is the usual way to say "an empty config"; it reads as nothing at once.
  struct stat null_st {};
  const bool is_null = S_ISCHR(st.st_mode) && ::stat("/dev/null", &null_st) == 0 &&
                       S_ISCHR(null_st.st_mode) && null_st.st_rdev == st.st_rdev;
  if (!S_ISREG(st.st_mode) && !is_null) {
    ::close(fd);
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return NotFound("cannot read config '" + name + "': it is " + what +
                           ", not a regular file");
  }
  auto too_big = [&](const std::string& size) {
    return NotFound("cannot read config '" + name + "': it is " + size +
                           " bytes; a config may be at most " + std::to_string(kMaxConfigBytes) +
                           " bytes");
  };
  if (st.st_size > static_cast<off_t>(kMaxConfigBytes)) {
    ::close(fd);
    return too_big(std::to_string(st.st_size));
  }
  std::string text;
  char buffer[1 << 14];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return NotFound("cannot read config '" + name + "': " + std::strerror(err));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > kMaxConfigBytes) {
      ::close(fd);
      return too_big("over " + std::to_string(kMaxConfigBytes));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);

  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  return ParseConfig(text, path.string(), (ec ? path : absolute).parent_path(), overrides);
}

fs::path DefaultConfigPath() {
  std::error_code ec;
  if (fs::exists("fleet.toml", ec)) return "fleet.toml";
  return {};
}

}  // namespace fleet
