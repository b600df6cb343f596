// Small text helpers shared by the config reader, the job and the CLI.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fleet {

// Levenshtein distance between a and b.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a plausible typo (distance at most
// a third of the word's length, and at least 1), else an empty string.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);
// Up to `max` candidates close enough in that sense, the closest first (ties in name order).
std::vector<std::string> ClosestMatches(std::string_view word,
                                        const std::vector<std::string>& candidates, size_t max);
// "'a'", "'a' or 'b'", "'a', 'b' or 'c'": ClosestMatches for a "did you mean ...?".
std::string QuotedAlternatives(const std::vector<std::string>& words);

// "a, b and c"
std::string JoinWords(const std::vector<std::string>& words, std::string_view last_sep = " and ");

std::vector<std::string> Split(std::string_view text, char sep);

// `v` with `digits` digits after the point ("%.*f").
std::string FormatFixed(double v, int digits);

// `text` for an error message: in single quotes, bytes outside printable ASCII (control
// characters, escape sequences, invalid UTF-8) and the backslash written as \\xHH, and cut after
// `max_bytes` with "..." so a huge input cannot flood a log.
std::string QuoteForMessage(std::string_view text, size_t max_bytes = 80);

// Names for an error message: the first `max_items`, each quoted by QuoteForMessage (or taken
// as they are with `quote` false, for items already made safe), joined by ", ", then
// "and N more" when there are more. A list from input (the tensors of a file) cannot flood a
// message, however many it holds.
std::string NamesForMessage(const std::vector<std::string>& names, size_t max_items = 8,
                            bool quote = true);

// The length of the UTF-8 sequence starting at text[i] (1 to 4), or 0 where it is not valid
// UTF-8 (a truncated sequence, a bad continuation byte, an overlong form, a surrogate, a code
// point beyond U+10FFFF).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// Whether the `n`-byte UTF-8 sequence at text[i] is a C1 control (U+0080 to U+009F). Terminals
// may obey them as they obey ESC sequences (U+009B is CSI), so they are escaped and refused in
// names like the C0 controls.
bool IsC1Control(std::string_view text, size_t i, size_t n);

// `message` made safe for a terminal or a log: newlines and tabs kept, other control characters
// (escape sequences among them), DEL and bytes that are not valid UTF-8 written as \xHH, and the
// text cut after `max_bytes` bytes with a note of how much was left out. Messages echo input
// (names, values, file contents), which must not drive the terminal or flood it.
std::string ForTerminal(std::string_view message, size_t max_bytes = 16384);

}  // namespace fleet
