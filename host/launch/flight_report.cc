#include "launch/flight_report.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "support/text.h"

namespace fleet::launcher_internal {
namespace {

// "08:09:01.123Z" (the report's date is in its own time stamp).
std::string ClockText(int64_t ns) {
  if (ns <= 0) return "?";
  const std::time_t seconds = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof(ms), ".%03dZ", static_cast<int>((ns / 1000000) % 1000));
  return std::string(buf) + ms;
}

// "2026-01-02T03:04:05.678Z", or null.
nlohmann::json IsoTime(int64_t ns) {
  if (ns <= 0) return nullptr;
  const std::time_t seconds = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof(ms), ".%03dZ", static_cast<int>((ns / 1000000) % 1000));
  return std::string(buf) + ms;
}

std::string Seconds(int64_t ns) { return FormatFixed(static_cast<double>(ns) / 1e9, 2) + " s"; }

std::string RankName(const std::vector<int>& ranks) {
  std::vector<std::string> words;
  for (int r : ranks) words.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + JoinWords(words);
}

// "#57 on ring 0, c_allreduce_sum(fc_0.w_0@GRAD: 4096 float32)".
std::string EntryText(const FlightEntry& e) {
  return "#" + std::to_string(e.call.seq) + " on ring " + std::to_string(e.call.ring) + ", " +
         CallText(Unpack(e.call));
}

std::string StateWithTime(const FlightEntry& e) {
  switch (e.state) {
    case CallState::kDone:
      return "done";
    case CallState::kFailed:
      return e.done_ns > e.entered_ns ? "failed after " + Seconds(e.done_ns - e.entered_ns)
                                      : "failed";
    case CallState::kInFlight:
      return "in flight since " + ClockText(e.entered_ns);
    case CallState::kChecking:
      return "comparing calls with the other ranks since " + ClockText(e.entered_ns);
    case CallState::kUnknown:
      break;
  }
  return "state unknown";
}

nlohmann::json EntryJson(const FlightEntry& e) {
  const CollectiveCall c = Unpack(e.call);
  nlohmann::json j = nlohmann::json::object();
  j["seq"] = e.call.seq;
  j["ring"] = e.call.ring;
  j["op"] = CallName(c);
  j["var"] = std::string(c.var);  // dumped with invalid UTF-8 replaced (failure_report.cc)
  j["tensors"] = c.tensors;
  j["numel"] = c.numel;
  j["bytes"] = c.bytes;
  j["dtype"] = DtypeText(c.dtype);
  if (c.kind == CollectiveKind::kBroadcast) j["root"] = c.arg;
  j["state"] = StateText(e.state);
  j["entered"] = IsoTime(e.entered_ns);
  j["done"] = IsoTime(e.done_ns);
  return j;
}

const FlightEntry* LastCompleted(const FlightRecord& r) {
  for (auto it = r.entries.rbegin(); it != r.entries.rend(); ++it) {
    if (it->state == CallState::kDone) return &*it;
  }
  return nullptr;
}

}  // namespace

std::vector<RankFlight> ReadFlights(const std::vector<ChildRecord>& records) {
  std::vector<RankFlight> out;
  bool any_file = false;
  for (const ChildRecord& c : records) {
    if (c.flight_recorder.empty()) continue;
    RankFlight f;
    f.rank = c.rank;
    f.path = c.flight_recorder;
    auto read = ReadFlightRecord(c.flight_recorder);
    if (read.ok()) {
      f.record = std::move(*read);
    } else if (read.status().code() == Code::kNotFound) {
      f.error = "no flight record: it ended before its collective runtime started";
    } else {
      f.error = "unreadable flight record: " + read.status().message();
    }
    any_file = any_file || f.record.has_value() || read.status().code() != Code::kNotFound;
    out.push_back(std::move(f));
  }
  // Ranks that never made a collective runtime (another program, a job without rings) have
  // nothing to report; saying so for each would only bury the failure.
  if (!any_file) out.clear();
  return out;
}

std::vector<std::string> FlightLines(const std::vector<RankFlight>& flights) {
  std::vector<std::string> lines;
  for (const RankFlight& f : flights) {
    std::string line = "rank " + std::to_string(f.rank) + ": ";
    if (!f.record) {
      lines.push_back(line + f.error);
      continue;
    }
    if (f.record->entries.empty()) {
      lines.push_back(line + "no collective recorded");
      continue;
    }
    const FlightEntry& last = f.record->entries.back();
    line += "last collective " + EntryText(last) + ": " + StateWithTime(last);
    const FlightEntry* done = LastCompleted(*f.record);
    if (done != nullptr && done != &last) line += "; last completed #" + std::to_string(done->call.seq);
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> FlightHints(const std::vector<RankFlight>& flights) {
  // Per ring: each rank's last entry on it.
  std::map<int32_t, std::map<int, const FlightEntry*>> last;
  for (const RankFlight& f : flights) {
    if (!f.record) continue;
    for (const FlightEntry& e : f.record->entries) last[e.call.ring][f.rank] = &e;
  }
  std::vector<std::string> hints;
  for (const auto& [ring, ranks] : last) {
    uint64_t newest = 0;
    for (const auto& [rank, e] : ranks) newest = std::max(newest, e->call.seq);
    std::vector<int> in, behind;
    bool waiting = false;  // some rank is still in (or failed in) the newest call
    const FlightEntry* example = nullptr;
    for (const auto& [rank, e] : ranks) {
      if (e->call.seq == newest) {
        in.push_back(rank);
        waiting = waiting || e->state != CallState::kDone;
        example = e;
      } else {
        behind.push_back(rank);
      }
    }
    // A rank with a record but no call on this ring never got as far as the ring's first call.
    for (const RankFlight& f : flights) {
      if (f.record && ranks.count(f.rank) == 0) behind.push_back(f.rank);
    }
    if (behind.empty() || !waiting) continue;
    std::sort(behind.begin(), behind.end());
    std::string hint = RankName(behind) + " never entered collective " + EntryText(*example) +
                       ", which " + RankName(in) + (in.size() == 1 ? " is" : " are") + " in";
    std::vector<std::string> lasts;
    for (int r : behind) {
      auto it = ranks.find(r);
      lasts.push_back(it == ranks.end()
                          ? "rank " + std::to_string(r) + " made no call on it"
                          : "rank " + std::to_string(r) + " last entered #" +
                                std::to_string(it->second->call.seq) + ", " +
                                StateText(it->second->state));
    }
    hints.push_back(hint + " (" + JoinWords(lasts, "; ") + ")");
  }
  return hints;
}

nlohmann::json FlightJson(const std::vector<RankFlight>& flights) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankFlight& f : flights) {
    nlohmann::json j = nlohmann::json::object();
    j["rank"] = f.rank;
    j["recorder"] = f.path;
    if (!f.record) {
      j["error"] = f.error;
      ranks.push_back(j);
      continue;
    }
    const FlightRecord& r = *f.record;
    j["calls_recorded"] = r.written;
    j["skipped_slots"] = r.skipped;
    j["last_enqueued"] = r.entries.empty() ? nlohmann::json(nullptr) : EntryJson(r.entries.back());
    const FlightEntry* done = LastCompleted(r);
    j["last_completed"] = done == nullptr ? nlohmann::json(nullptr) : EntryJson(*done);
    nlohmann::json tail = nlohmann::json::array();
    const size_t from = r.entries.size() > kFlightTail ? r.entries.size() - kFlightTail : 0;
    for (size_t i = from; i < r.entries.size(); ++i) tail.push_back(EntryJson(r.entries[i]));
    j["tail"] = tail;
    ranks.push_back(j);
  }
  nlohmann::json out = nlohmann::json::object();
  out["hint"] = FlightHints(flights);
  out["ranks"] = ranks;
  return out;
}

}  // namespace fleet::launcher_internal
