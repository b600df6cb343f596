#include "data/batch_origin.h"

#include <algorithm>

namespace fleet::data {
namespace {

// Runs named in a description; a shuffled batch has a run per row, and a message listing 512
// lines helps nobody.
constexpr size_t kRunsNamed = 4;

const char* UnitWord(OriginUnit unit, bool plural) {
  switch (unit) {
    case OriginUnit::kLine:
      return plural ? "lines" : "line";
    case OriginUnit::kRecord:
      return plural ? "records" : "record";
    case OriginUnit::kSample:
      break;
  }
  return plural ? "samples" : "sample";
}

}  // namespace

void BatchOrigin::SetPlaces(std::shared_ptr<const std::vector<std::string>> places,
                            OriginUnit unit) {
  places_ = std::move(places);
  unit_ = unit;
}

void BatchOrigin::Begin() {
  ++batch_;
  ClearRows();
}

void BatchOrigin::SkipBatches(int64_t batches) {
  if (batches > 0) batch_ += batches;
  ClearRows();
}

void BatchOrigin::ClearRows() {
  runs_.clear();  // keeps the storage for the next batch
  rows_ = 0;
}

void BatchOrigin::Add(uint32_t place, int64_t first, int64_t count) {
  if (count <= 0) return;
  rows_ += count;
  if (!runs_.empty()) {
    Run& last = runs_.back();
    if (last.place == place && last.first + last.count == first) {
      last.count += count;
      return;
    }
  }
  runs_.push_back({place, first, count});
}

std::string BatchOrigin::Describe(int64_t first_row, int64_t rows) const {
  if (places_ == nullptr || runs_.empty()) return {};
  first_row = std::clamp<int64_t>(first_row, 0, rows_);
  const int64_t end = rows < 0 ? rows_ : std::min(rows_, first_row + rows);
  // The runs within [first_row, end), cut at its edges; past kRunsNamed only counted.
  std::vector<Run> named;
  int64_t more = 0;
  int64_t at = 0;
  for (const Run& run : runs_) {
    const int64_t lo = std::max(at, first_row);
    const int64_t hi = std::min(at + run.count, end);
    if (lo < hi) {
      if (named.size() < kRunsNamed) {
        named.push_back({run.place, run.first + (lo - at), hi - lo});
      } else {
        more += hi - lo;
      }
    }
    at += run.count;
  }
  if (named.empty()) return {};
  std::string text = "batch " + std::to_string(batch_) + ":";
  for (size_t i = 0; i < named.size();) {
    // One group per place in a row: "a.csv lines 3-5, 9".
    size_t j = i;
    int64_t group_rows = 0;
    while (j < named.size() && named[j].place == named[i].place) group_rows += named[j++].count;
    const uint32_t place = named[i].place;
    text += i == 0 ? " " : "; ";
    text += place < places_->size() ? (*places_)[place] : std::string("?");
    text += " ";
    text += UnitWord(unit_, group_rows > 1);
    for (size_t k = i; k < j; ++k) {
      text += k == i ? " " : ", ";
      text += std::to_string(named[k].first);
      if (named[k].count > 1) text += "-" + std::to_string(named[k].first + named[k].count - 1);
    }
    i = j;
  }
  if (more > 0) text += " and " + std::to_string(more) + (more == 1 ? " more row" : " more rows");
  return text;
}

Status BatchOrigin::Annotate(const Status& status, int64_t first_row, int64_t rows) const {
  if (status.ok()) return status;
  const std::string where = Describe(first_row, rows);
  if (where.empty()) return status;
  return Status(status.code(), status.message() + " (" + where + ")");
}

}  // namespace fleet::data
