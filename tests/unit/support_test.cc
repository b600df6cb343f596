#include <gtest/gtest.h>

#include <ostream>
#include <sstream>
#include <string>
#include <thread>

#include "rendezvous/memory_store.h"
#include "support/status.h"
#include "support/terminal_buf.h"
#include "support/text.h"

namespace fleet {
namespace {

TEST(StatusTest, OkAndErrorsPrintTheirCode) {
  EXPECT_TRUE(OkStatus().ok());
  EXPECT_EQ(OkStatus().ToString(), "OK");
  Status s = NotFound("no such plugin");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: no such plugin");
  EXPECT_EQ(s.WithContext("plugin x").message(), "plugin x: no such plugin");
  EXPECT_TRUE(OkStatus().WithContext("ignored").ok());
}

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  FLEET_ASSIGN_OR_RETURN(int half, Half(x));
  FLEET_ASSIGN_OR_RETURN(*out, Half(half));
  return OkStatus();
}

TEST(StatusTest, MacrosPropagateTheFirstError) {
  int q = 0;
  EXPECT_TRUE(Quarter(12, &q).ok());
  EXPECT_EQ(q, 3);
  Status s = Quarter(6, &q);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "3 is odd");
}

TEST(TextTest, EditDistanceAndClosestMatch) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(ClosestMatch("backnd", {"backend", "plugin"}), "backend");
  EXPECT_EQ(ClosestMatch("zzzzzz", {"backend", "plugin"}), "");
  // The closest first, ties in name order, duplicates once, at most `max`, none too far.
  EXPECT_EQ(ClosestMatches("relu", {"selu", "relu6", "elu", "gelu", "selu", "softmax"}, 3),
            (std::vector<std::string>{"elu", "gelu", "relu6"}));
  EXPECT_EQ(ClosestMatches("zzzz", {"relu"}, 3), std::vector<std::string>{});
  EXPECT_EQ(QuotedAlternatives({"a", "b", "c"}), "'a', 'b' or 'c'");
  EXPECT_EQ(JoinWords({"a", "b", "c"}), "a, b and c");
  EXPECT_EQ(JoinWords({"a"}), "a");
  EXPECT_EQ(Split("a::b", ':'), (std::vector<std::string>{"a", "", "b"}));
}

// Messages echo input; what reaches a terminal cannot drive it or flood it.
TEST(TextTest, ForTerminalEscapesControlsAndBadUtf8AndCuts) {
  EXPECT_EQ(ForTerminal("plain\nlines\tand tabs, caf\xc3\xa9"), "plain\nlines\tand tabs, caf\xc3\xa9");
  EXPECT_EQ(ForTerminal("red \x1b[31mtext\x1b[0m\r\x7f"),
            "red \\x1b[31mtext\\x1b[0m\\x0d\\x7f");
  EXPECT_EQ(ForTerminal("bad \xff\xc0\xaf utf8 \xe2\x82"), "bad \\xff\\xc0\\xaf utf8 \\xe2\\x82");
  EXPECT_EQ(ForTerminal(std::string(20, 'a'), 8), "aaaaaaaa... (12 more bytes)");
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80", 0), 0u);  // a surrogate
  // C1 controls are valid UTF-8, and terminals obey some of them (U+009B is CSI).
  EXPECT_EQ(ForTerminal("a\xc2\x9b""31mb \xc2\xa0nbsp"), "a\\xc2\\x9b31mb \xc2\xa0nbsp");
}

// What fleet-host's stdout and stderr go through: each line escaped, a UTF-8 sequence cut by a
// flush held until it is whole, a long line cut (counting from the last flush) but ended.
TEST(TextTest, TerminalSafeBufEscapesEveryLine) {
  std::ostringstream sink;
  {
    TerminalSafeBuf buf(sink.rdbuf(), 32);
    std::ostream out(&buf);
    out << "unknown option '\x1b[2J'\n";
    out << "caf\xc3" << std::flush << "\xa9 " << std::string(40, 'x') << "\n";
    out << "no newline \x07";
  }
  EXPECT_EQ(sink.str(),
            "unknown option '\\x1b[2J'\ncaf\xc3\xa9 " + std::string(29, 'x') +
                "... (12 more bytes)\nno newline \\x07");
}

TEST(MemoryStoreTest, GetWaitsForSetFromAnotherThread) {
  MemoryStore store;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store.Set("uid", "abc");
  });
  auto v = store.Get("uid", std::chrono::milliseconds(5000));
  writer.join();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "abc");
}

TEST(MemoryStoreTest, WaitPastDeadlineNamesMissingKeys) {
  MemoryStore store;
  store.Set("rank0", "x");
  Status s = store.Wait({"rank0", "rank1", "rank2"}, std::chrono::milliseconds(30));
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded);
  EXPECT_NE(s.message().find("'rank1' and 'rank2'"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("'rank0'"), std::string::npos) << s.message();
}

TEST(MemoryStoreTest, AddCountsAndRejectsNonIntegers) {
  MemoryStore store;
  EXPECT_EQ(*store.Add("n", 2), 2);
  EXPECT_EQ(*store.Add("n", 3), 5);
  store.Set("s", "text");
  EXPECT_EQ(store.Add("s", 1).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace fleet
