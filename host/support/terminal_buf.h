// A stream buffer that makes everything written through it safe for a terminal: each line goes
// through ForTerminal (support/text.h) before it reaches the real buffer, so no message, however
// it quotes its input, can carry an escape sequence, a C1 control or invalid UTF-8 to the
// user's terminal or log. `fleet-host` wraps its stdout and stderr in one each.
//
// Lines are passed on at '\n' and at every flush; a multi-byte UTF-8 sequence cut by a flush is
// held back until its remaining bytes arrive. What is passed on at once (a line, or the part of
// one written since the last flush) is cut after `max_line_bytes`, saying how many bytes it
// dropped.
//
// Ownership: the sink must outlive this buffer; the destructor flushes what is pending.
// Threading: like any streambuf, one writer at a time.
#pragma once

#include <cstddef>
#include <streambuf>
#include <string>

namespace fleet {

class TerminalSafeBuf : public std::streambuf {
 public:
  TerminalSafeBuf(std::streambuf* sink, size_t max_line_bytes);
  ~TerminalSafeBuf() override;
  TerminalSafeBuf(const TerminalSafeBuf&) = delete;
  TerminalSafeBuf& operator=(const TerminalSafeBuf&) = delete;

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  // Passes line_ (up to `end`) on to the sink, escaped.
  void Emit(size_t end);

  std::streambuf* sink_;
  size_t max_line_bytes_;
  std::string line_;
};

}  // namespace fleet
