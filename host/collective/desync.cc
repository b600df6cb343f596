#include "collective/desync.h"

#include <algorithm>
#include <cstring>

#include "collective/schedule.h"
#include "support/logging.h"
#include "support/text.h"

namespace fleet {
namespace {

int64_t Word(uint64_t h) { return static_cast<int64_t>(h); }

uint64_t Fold(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

StatusOr<DesyncCheck> ParseDesyncCheck(std::string_view text) {
  if (text.empty() || text == "step") return DesyncCheck::kStep;
  if (text == "every" || text == "1") return DesyncCheck::kEvery;
  if (text == "off" || text == "0") return DesyncCheck::kOff;
  std::string shown(text.substr(0, 40));
  for (char& c : shown) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return InvalidArgument(std::string(kDesyncCheckEnv) + "='" + shown +
                         "': expected step (the default), every or off");
}

StatusOr<DesyncCheck> ResolveDesyncCheck(std::string_view config_value,
                                         const std::map<std::string, std::string>& env) {
  auto it = env.find(kDesyncCheckEnv);
  if (it != env.end() && !it->second.empty()) {
    FLEET_ASSIGN_OR_RETURN(DesyncCheck mode, ParseDesyncCheck(it->second));
    Log().info("collective check: {} (from {}, which overrides {} = \"{}\")",
               DesyncCheckName(mode), kDesyncCheckEnv, kDesyncCheckKey, config_value);
    return mode;
  }
  // The aliases "1" and "0" are the variable's; the key takes the names only.
  if (config_value != "step" && config_value != "every" && config_value != "off") {
    return InvalidArgument(std::string(kDesyncCheckKey) + " = " + QuoteForMessage(config_value) +
                           ": expected step, every or off");
  }
  const DesyncCheck mode = *ParseDesyncCheck(config_value);
  Log().info("collective check: {} (from {})", DesyncCheckName(mode), kDesyncCheckKey);
  return mode;
}

std::string_view DesyncCheckName(DesyncCheck mode) {
  switch (mode) {
    case DesyncCheck::kOff: return "off";
    case DesyncCheck::kStep: return "step";
    case DesyncCheck::kEvery: return "every";
  }
  return "?";
}

CallLedger::Ticket CallLedger::Enter(const CollectiveCall& call, bool repeat) {
  Ticket t;
  t.seq = ++seq_;
  const PackedCall packed = Pack(call, t.seq);
  hash_ = Fold(hash_, &packed, sizeof(packed));
  if (window_count_ < kWindow) window_[window_count_] = packed;
  ++window_count_;
  t.check = mode_ == DesyncCheck::kEvery ||
            (mode_ == DesyncCheck::kStep && (!call.from_program || repeat));
  if (recorder_ != nullptr) {
    t.record = recorder_->Begin(call, t.seq, t.check ? CallState::kChecking : CallState::kInFlight);
  }
  return t;
}

void CallLedger::Started(const Ticket& t) {
  if (recorder_ != nullptr && t.check) recorder_->Update(t.record, CallState::kInFlight);
}

void CallLedger::Finished(const Ticket& t, bool ok) {
  if (recorder_ != nullptr) recorder_->Update(t.record, ok ? CallState::kDone : CallState::kFailed);
}

void CallLedger::Agreed() {
  ++agreements_;
  window_first_ = seq_ + 1;
  window_count_ = 0;
}

std::array<int64_t, CallLedger::kFingerprintWords> CallLedger::FingerprintRow() const {
  return {Word(hash_), static_cast<int64_t>(seq_), static_cast<int64_t>(mode_)};
}

void CallLedger::WindowRow(int64_t* row) const {
  row[0] = static_cast<int64_t>(window_count_);
  row[1] = static_cast<int64_t>(window_first_);
  for (size_t i = 0; i < kWindow; ++i) {
    row[2 + i] = i < window_count_ ? Word(HashOf(window_[i])) : 0;
  }
}

void CallLedger::EntryRow(size_t i, int64_t* row) const {
  std::memset(row, 0, kEntryWords * sizeof(int64_t));
  if (i >= window_count_ || i >= kWindow) return;
  row[0] = 1;
  std::memcpy(row + 1, &window_[i], sizeof(PackedCall));
}

CallLedger::Verdict CallLedger::Judge(const std::vector<int64_t>& rows, int world) {
  const size_t w = kFingerprintWords;
  Verdict v = Verdict::kAgree;
  for (size_t r = 1; r < static_cast<size_t>(world); ++r) {
    if (rows[r * w + 2] != rows[2]) return Verdict::kModesDiffer;
    if (rows[r * w] != rows[0] || rows[r * w + 1] != rows[1]) v = Verdict::kCallsDiffer;
  }
  return v;
}

size_t FirstDifference(const std::vector<int64_t>& windows, int world) {
  const size_t w = CallLedger::kWindowWords;
  auto at = [&](int r, size_t k) { return windows[static_cast<size_t>(r) * w + k]; };
  int64_t longest = 0;
  for (int r = 0; r < world; ++r) longest = std::max(longest, at(r, 0));
  const size_t compared = std::min(CallLedger::kWindow, static_cast<size_t>(longest));
  for (size_t i = 0; i < compared; ++i) {
    auto value = [&](int r) { return at(r, 0) > static_cast<int64_t>(i) ? at(r, 2 + i) : 0; };
    for (int r = 1; r < world; ++r) {
      if (value(r) != value(0)) return i;
    }
  }
  return CallLedger::kWindow;
}

std::string DescribeDesync(const std::vector<int64_t>& windows,
                           const std::vector<int64_t>& entries, int world, int rank, int ring,
                           size_t first) {
  const auto since = static_cast<uint64_t>(windows[1]);  // every rank's window starts alike
  const std::string ring_text = " on ring " + std::to_string(ring);
  const std::string agreed =
      since <= 1 ? "since the communicator formed"
                 : "since they last agreed, after #" + std::to_string(since - 1);
  const std::string advice =
      " Every rank must issue the same collectives in the same order: do all ranks run the same "
      "program with the same config, data and number of steps? (this is rank " +
      std::to_string(rank) + ")";
  if (first >= CallLedger::kWindow) {
    return "the ranks' collectives went out of step" + ring_text + " " + agreed +
           ", later than the first " + std::to_string(CallLedger::kWindow) +
           " calls, which agree." + advice;
  }
  // Group the ranks by what they run at `first`, rank 0's group first.
  struct Group {
    uint64_t key;
    std::string text;
    std::vector<int> ranks;
  };
  std::vector<Group> groups;
  for (int r = 0; r < world; ++r) {
    const int64_t* row = entries.data() + static_cast<size_t>(r) * CallLedger::kEntryWords;
    uint64_t key = 0;
    std::string text = "nothing more (it had stopped issuing collectives)";
    if (row[0] == 1) {
      PackedCall p{};
      std::memcpy(&p, row + 1, sizeof(p));
      p.var[sizeof(p.var) - 1] = '\0';  // a peer's bytes are input
      key = HashOf(p) | 1;
      text = CallText(Unpack(p));
    }
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.key == key; });
    if (g == groups.end()) {
      groups.push_back({key, text, {}});
      g = groups.end() - 1;
    }
    g->ranks.push_back(r);
  }
  std::vector<int> differ;
  for (size_t g = 1; g < groups.size(); ++g) {
    differ.insert(differ.end(), groups[g].ranks.begin(), groups[g].ranks.end());
  }
  std::sort(differ.begin(), differ.end());
  std::string text = "the ranks' collectives went out of step at collective #" +
                     std::to_string(since + first) + ring_text + " (the first that differs " +
                     agreed + "): " + RankList(differ) + (differ.size() == 1 ? " differs" : " differ") +
                     " from " + RankList(groups[0].ranks) + ": ";
  for (size_t g = 0; g < groups.size(); ++g) {
    text += (g == 0 ? "" : "; ") + RankList(groups[g].ranks) +
            (groups[g].ranks.size() == 1 ? " runs " : " run ") + groups[g].text;
  }
  return text + "." + advice;
}

std::string DescribeModes(const std::vector<int64_t>& rows, int world) {
  // Ranks grouped by mode, in order of first appearance.
  std::vector<std::pair<int64_t, std::vector<int>>> groups;
  for (int r = 0; r < world; ++r) {
    const int64_t m = rows[static_cast<size_t>(r) * CallLedger::kFingerprintWords + 2];
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == m; });
    if (g == groups.end()) {
      groups.push_back({m, {}});
      g = groups.end() - 1;
    }
    g->second.push_back(r);
  }
  std::string text = std::string("the ranks run with different ") + kDesyncCheckKey + " / " +
                     kDesyncCheckEnv + " settings (";
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t m = groups[g].first;
    text += (g == 0 ? "" : "; ") + RankList(groups[g].second) + " " +
            (m < 0 || m > 2 ? "mode " + std::to_string(m)
                            : std::string(DesyncCheckName(static_cast<DesyncCheck>(m))));
  }
  return text + "), so they would compare their collectives at different points: set it alike on "
                "every rank";
}

}  // namespace fleet
