// Internal to the config reader: the diagnostics collector and the schema check that turns a
// parsed (and overridden) TOML tree into a Config. Only host/config/*.cc include this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config/config.h"
#include "support/status.h"

namespace fleet::config_internal {

// Collects every error of one LoadConfig call and renders them as one message, one line each.
//
// Whether a node came from the file or from an override is read off the source path TOML++
// stamps on every node it parses: each override is parsed as its own small document with its
// own path object, so the pointer identifies it even after its nodes are moved into the tree.
class Diagnostics {
 public:
  explicit Diagnostics(std::string file_name) : file_name_(std::move(file_name)) {}

  // Nodes whose source path is `path` came from override number `index`.
  void AddOverrideSource(const toml::source_path_ptr& path, size_t index);

  bool IsOverride(const toml::node& node) const;

  // Where a value was set: "FILE:LINE:COL", or "--set KEY.PATH" for an overridden one.
  std::string Where(const toml::node& node, std::string_view key_path) const;

  // An error about a value, at the value's position.
  void AtValue(const toml::node& node, std::string_view key_path, std::string_view message);
  // An error about a key itself (unknown, badly named), at the key's position when it has one.
  void AtKey(const toml::key& key, const toml::node& value, std::string_view key_path,
             std::string_view message);
  // An error of override number `index` that has no node to point at; `line` is the whole line.
  void ForOverride(size_t index, std::string line);

  bool empty() const { return errors_.empty(); }

  // InvalidArgument with the errors sorted: file errors by position, then override errors in
  // the order the overrides were given.
  Status ToStatus() const;

 private:
  struct Entry {
    size_t rank;  // 0: the file; 1 + i: override i
    uint32_t line;
    uint32_t column;
    std::string text;
  };

  // The override a node came from, or -1 for the file.
  long OverrideIndex(const toml::node& node) const;
  void AtPosition(const toml::node& origin, const toml::source_position& position,
                  std::string_view key_path, std::string_view message);

  std::string file_name_;
  std::map<const std::string*, size_t> override_sources_;
  std::vector<Entry> errors_;
};

// "an integer", "a table", ...; with `plural`, "integers", "tables", ...
std::string TypeName(const toml::node& node, bool plural = false);

// Checks `root` against the fleet.toml schema and returns the Config it describes. Errors go to
// `diag`; the returned Config is only meaningful when `diag` stays empty. Relative plugin dirs
// from the file resolve against `base_dir`, those from overrides against `cwd`.
Config CheckSchema(const toml::table& root, const std::filesystem::path& base_dir,
                   const std::filesystem::path& cwd, Diagnostics& diag);

}  // namespace fleet::config_internal
