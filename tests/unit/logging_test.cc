// Every log line, the host's and a plugin's through the host API, reaches the terminal escaped:
// no escape sequence, no invalid UTF-8, no forged line, no flood.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "plugin/host_api.h"
#include "plugin/registry.h"  // ComponentRecord, which PluginContext holds
#include "support/logging.h"
#include "temp_dir.h"

namespace fleet {
namespace {

// What the loggers write to stderr while `log` runs: fd 2 is pointed at a file meanwhile.
template <typename Fn>
std::string CaptureStderr(Fn log) {
  test_util::TempDir dir("fleet_logging");
  const std::string path = (dir.path() / "stderr").string();
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(saved, 0);
  EXPECT_GE(fd, 0);
  ::dup2(fd, 2);
  ::close(fd);
  log();
  Log().flush();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Nothing a terminal would act on: no control character but the line feed, no invalid UTF-8.
// The colour the sink itself puts around the level (on a terminal) is the one exception.
void ExpectTerminalSafe(std::string out) {
  static const std::regex kLevelColour("\\[(?:\x1b\\[[0-9;]*m)+([a-z]+)\x1b\\[m\\]");
  out = std::regex_replace(out, kLevelColour, "[$1]");
  for (size_t i = 0; i < out.size(); ++i) {
    const auto c = static_cast<unsigned char>(out[i]);
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f))
        << "byte 0x" << std::hex << static_cast<int>(c) << " at " << std::dec << i << " in "
        << out;
  }
}

const std::string kHostile = "title\x1b]0;pwned\x07 red\x1b[31m bad\xff\xfe utf8 \x9b" "2J end";

TEST(LoggingTest, HostLinesAreEscaped) {
  const std::string out = CaptureStderr([] { Log().warn("peer said: {}", kHostile); });
  ExpectTerminalSafe(out);
  EXPECT_NE(out.find("[fleet] [warning] peer said: title\\x1b]0;pwned\\x07 red\\x1b[31m bad"
                     "\\xff\\xfe utf8 \\x9b2J end\n"),
            std::string::npos)
      << out;
}

TEST(LoggingTest, PluginLinesThroughTheHostApiAreEscaped) {
  const std::string out = CaptureStderr([&] {
    PluginContext ctx(nullptr, "evil", nullptr);
    const FleetHostApi* api = ctx.api();
    api->log(api->host_ctx, FLEET_LOG_ERROR, kHostile.c_str());
    // A line break must not start a line that looks like the host's.
    api->log(api->host_ctx, FLEET_LOG_WARN,
             "first\n[12:00:00.000] [fleet] [error] forged\r\nsecond\n");
  });
  ExpectTerminalSafe(out);
  EXPECT_NE(out.find("[plugin:evil] [error] title\\x1b]0;pwned\\x07 red\\x1b[31m"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[plugin:evil] [warning] first\n    [12:00:00.000] [fleet] [error] "
                     "forged\\x0d\n    second\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("\n[12:00:00.000]"), std::string::npos) << out;
}

TEST(LoggingTest, LongLinesAreCut) {
  const std::string huge(kMaxLogMessageBytes * 4, 'x');
  const std::string out = CaptureStderr([&] { Log().warn("{}", huge); });
  EXPECT_LT(out.size(), kMaxLogMessageBytes + 200);
  EXPECT_NE(out.find("... (" + std::to_string(huge.size() - kMaxLogMessageBytes) +
                     " more bytes)"),
            std::string::npos)
      << out.substr(out.size() - 100);
}

TEST(LoggingTest, LogSafeKeepsValidUtf8AndPlainText) {
  EXPECT_EQ(LogSafe("plain text"), "plain text");
  EXPECT_EQ(LogSafe("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(LogSafe("a\tb\n"), "a\tb");
  EXPECT_EQ(LogSafe("a\nb"), "a\n    b");
  EXPECT_EQ(LogSafe("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(LogSafe("\xc0\xaf"), "\\xc0\\xaf");  // an overlong '/'
}

}  // namespace
}  // namespace fleet
