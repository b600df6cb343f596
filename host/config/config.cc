#include "config/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <system_error>
#include <utility>

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

  std::string text;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return NotFound("cannot read config '" + path.string() + "': " + std::strerror(errno));
  }
  char buffer[1 << 14];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  int read_error = std::ferror(file) ? (errno != 0 ? errno : EIO) : 0;
  std::fclose(file);
  if (read_error != 0) {
    return NotFound("cannot read config '" + path.string() + "': " + std::strerror(read_error));
  }

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
