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

// "a, b and c"
std::string JoinWords(const std::vector<std::string>& words, std::string_view last_sep = " and ");

std::vector<std::string> Split(std::string_view text, char sep);

// `v` with `digits` digits after the point ("%.*f").
std::string FormatFixed(double v, int digits);

}  // namespace fleet
