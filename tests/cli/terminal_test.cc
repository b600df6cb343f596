// Whatever a message quotes, fleet-host's output carries no terminal controls: ESC sequences,
// C1 controls (U+009B is an 8-bit CSI) and invalid UTF-8 from the command line or from files
// come out escaped, on stderr and on stdout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Output {
  int code = -1;
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs fleet-host with `args` (a bash word list; $'...' quoting allowed).
Output RunHostWith(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("fleet_term_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = "bash -c \"" + std::string(FLEET_HOST_EXE) + " " + args + " >'" +
                          (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'\"";
  Output o;
  const int status = std::system(cmd.c_str());
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = Slurp(dir / "out");
  o.err = Slurp(dir / "err");
  fs::remove_all(dir);
  return o;
}

// No C0 control but newline and tab, no DEL, no C1 control, and valid UTF-8... simply: no byte
// a terminal could act on.
bool Safe(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      return false;
    }
  }
  return true;
}

TEST(TerminalOutput, AnUnknownCommandIsEchoedEscaped) {
  const Output o = RunHostWith("$'\\e[2J\\e]0;owned\\a'");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_TRUE(Safe(o.err)) << o.err;
  EXPECT_NE(o.err.find("\\x1b[2J"), std::string::npos) << o.err;
}

TEST(TerminalOutput, AnUnknownOptionWithAC1ControlIsEchoedEscaped) {
  const Output o = RunHostWith("$'--\\xc2\\x9b31m' check x.fleet");
  EXPECT_NE(o.code, 0);
  EXPECT_TRUE(Safe(o.err)) << o.err;
  EXPECT_NE(o.err.find("\\xc2\\x9b31m"), std::string::npos) << o.err;
}

TEST(TerminalOutput, AStageNameIsEchoedEscaped) {
  const Output o = RunHostWith(std::string("show ") + FLEET_EXAMPLES_DIR +
                       "/mlp/mlp.fleet --stage $'\\e[31mred'");
  EXPECT_NE(o.code, 0);
  EXPECT_TRUE(Safe(o.err)) << o.err;
  EXPECT_TRUE(Safe(o.out)) << o.out;
}

}  // namespace
