#include "support/text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace fleet {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  const std::vector<std::string> best = ClosestMatches(word, candidates, 1);
  return best.empty() ? std::string() : best[0];
}

std::vector<std::string> ClosestMatches(std::string_view word,
                                        const std::vector<std::string>& candidates, size_t max) {
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::vector<std::pair<size_t, std::string>> close;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d <= limit) close.emplace_back(d, c);
  }
  std::sort(close.begin(), close.end());
  close.erase(std::unique(close.begin(), close.end()), close.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < close.size() && i < max; ++i) out.push_back(close[i].second);
  return out;
}

std::string QuotedAlternatives(const std::vector<std::string>& words) {
  std::vector<std::string> quoted;
  for (const std::string& w : words) quoted.push_back("'" + w + "'");
  return JoinWords(quoted, " or ");
}

std::string JoinWords(const std::vector<std::string>& words, std::string_view last_sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += (i + 1 == words.size()) ? std::string(last_sep) : std::string(", ");
    out += words[i];
  }
  return out;
}

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.emplace_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

std::string FormatFixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string NamesForMessage(const std::vector<std::string>& names, size_t max_items,
                            bool quote) {
  std::string out;
  const size_t shown = std::min(names.size(), max_items);
  for (size_t i = 0; i < shown; ++i) {
    out += (i > 0 ? ", " : "") + (quote ? QuoteForMessage(names[i]) : names[i]);
  }
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

std::string QuoteForMessage(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == max_bytes) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out + "'";
}

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsC1Control(std::string_view text, size_t i, size_t n) {
  return n == 2 && static_cast<unsigned char>(text[i]) == 0xC2 &&
         static_cast<unsigned char>(text[i + 1]) < 0xA0;
}

std::string ForTerminal(std::string_view message, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  while (i < message.size() && i < max_bytes) {
    const auto c = static_cast<unsigned char>(message[i]);
    const size_t n = Utf8SequenceLength(message, i);
    if (c == '\n' || c == '\t' || (n == 1 && c >= 0x20 && c != 0x7f) ||
        (n > 1 && !IsC1Control(message, i, n))) {
      const size_t take = n > 1 ? n : 1;
      out.append(message.substr(i, take));
      i += take;
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xF];
    ++i;
  }
  if (i < message.size()) {
    out += "... (" + std::to_string(message.size() - i) + " more bytes)";
  }
  return out;
}

}  // namespace fleet
