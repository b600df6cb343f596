#include "support/terminal_buf.h"

#include "support/text.h"

namespace fleet {
namespace {

// Where a flush may cut `text` without splitting a UTF-8 sequence: before a lead byte in the
// last three bytes whose sequence is not complete yet. Invalid bytes are not held back (they are
// escaped wherever they fall).
size_t CompletePrefix(const std::string& text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t want = 0;
    if ((c & 0xE0) == 0xC0) want = 2;
    if ((c & 0xF0) == 0xE0) want = 3;
    if ((c & 0xF8) == 0xF0) want = 4;
    return want > back ? n - back : n;
  }
  return n;
}

}  // namespace

TerminalSafeBuf::TerminalSafeBuf(std::streambuf* sink, size_t max_line_bytes)
    : sink_(sink), max_line_bytes_(max_line_bytes) {}

TerminalSafeBuf::~TerminalSafeBuf() {
  Emit(line_.size());
  sink_->pubsync();
}

void TerminalSafeBuf::Emit(size_t end) {
  if (end == 0) return;
  std::string safe = ForTerminal(std::string_view(line_).substr(0, end), max_line_bytes_);
  // A cut line keeps its end of line.
  if (line_[end - 1] == '\n' && safe.back() != '\n') safe.push_back('\n');
  sink_->sputn(safe.data(), static_cast<std::streamsize>(safe.size()));
  line_.erase(0, end);
}

TerminalSafeBuf::int_type TerminalSafeBuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  const char c = traits_type::to_char_type(ch);
  line_.push_back(c);
  if (c == '\n') Emit(line_.size());
  return ch;
}

std::streamsize TerminalSafeBuf::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) {
    line_.push_back(s[i]);
    if (s[i] == '\n') Emit(line_.size());
  }
  return n;
}

int TerminalSafeBuf::sync() {
  Emit(CompletePrefix(line_));
  return sink_->pubsync();
}

}  // namespace fleet
