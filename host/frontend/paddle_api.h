// The Paddle API names a program file may call (paddle.static.nn.fc, fluid.layers.fc,
// paddle.nn.functional.relu, paddle.optimizer.Adam, ...), each mapped to a Fleet layer, op or
// configuration object with the keyword names that Paddle API uses. One table serves the
// interpreter, `fleet-host ops`-style listings and the table in docs/program.md (a test checks
// the document against it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fleet::frontend {

struct PaddleApi {
  std::string_view name;    // the full dotted name: "paddle.static.nn.fc"
  std::string_view target;  // a Fleet builtin or op type ("fc", "relu"); "@..." are internal
  // Paddle's parameters in its positional order, space-separated: "x" keeps the name,
  // "x=input" renames it to the target's, "name=-" accepts it and ignores it. After a "|",
  // keyword-only spellings older or newer Paddle versions use ("| input act").
  std::string_view params;
  // Arguments the API fixes or defaults differently from the target, in the target's names:
  // "axis=-1 lower=True". Applied when the call does not give them.
  std::string_view defaults = "";
};

// Every entry, sorted by name.
const std::vector<PaddleApi>& PaddleApis();

// The entry for a full dotted name (after aliases such as fluid -> paddle.fluid are expanded);
// nullptr when unknown.
const PaddleApi* FindPaddleApi(std::string_view name);

// Whether `path` is a module of the table ("paddle", "paddle.static.nn", "paddle.fluid"), i.e.
// a prefix of some entry's name.
bool IsPaddleModule(std::string_view path);

// Up to three known names closest to `name`, for "did you mean" hints.
std::vector<std::string> ClosestPaddleApis(std::string_view name);

// The table as Markdown, for docs/program.md (a test checks the document holds exactly this).
std::string PaddleApiMarkdown();

// One parsed parameter of an entry.
struct PaddleParam {
  std::string paddle;  // the name a Paddle script uses
  std::string target;  // the target's name; "" when accepted and ignored
  bool positional = true;
};
std::vector<PaddleParam> ParsePaddleParams(std::string_view params);

}  // namespace fleet::frontend
