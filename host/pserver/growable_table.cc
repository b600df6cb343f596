#include "pserver/growable_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

namespace fleet {
namespace {

// SplitMix64: a row's stream is the sequence of outputs from a state seeded by (seed, id), so
// any row can be drawn alone, in any order, on any server.
uint64_t Mix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// In [0, 1), 53 bits.
double Unit(uint64_t& state) { return static_cast<double>(Mix(state) >> 11) * 0x1.0p-53; }

const ir::Attribute* Find(const ir::Op& op, const char* name) { return op.FindAttr(name); }

double FloatOf(const ir::Op& op, const char* name, double fallback) {
  const ir::Attribute* a = Find(op, name);
  if (a == nullptr) return fallback;
  return ir::AttrAsDouble(*a).value_or(fallback);
}

}  // namespace

void RowInitializer::Fill(int64_t id, ir::DataType dtype, int64_t width, void* row) const {
  uint64_t state = seed * 0xD1B54A32D192ED03ull ^ static_cast<uint64_t>(id);
  Mix(state);  // decorrelates neighbouring ids before the first draw
  auto value = [&](int64_t) -> double {
    switch (kind) {
      case Kind::kConstant:
        return a;
      case Kind::kUniform:
        return a + (b - a) * Unit(state);
      case Kind::kGaussian: {
        // Box-Muller; 1 - u keeps the logarithm finite.
        const double u = 1.0 - Unit(state), v = Unit(state);
        return a + b * std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
      }
    }
    return 0.0;
  };
  if (dtype == ir::DataType::kFloat64) {
    auto* out = static_cast<double*>(row);
    for (int64_t j = 0; j < width; ++j) out[j] = value(j);
  } else {
    auto* out = static_cast<float*>(row);
    for (int64_t j = 0; j < width; ++j) out[j] = static_cast<float>(value(j));
  }
}

std::string RowInitializer::Describe() const {
  std::ostringstream s;
  switch (kind) {
    case Kind::kConstant:
      s << "fill_constant(" << a << ")";
      return s.str();
    case Kind::kUniform:
      s << "uniform_random(" << a << ", " << b;
      break;
    case Kind::kGaussian:
      s << "gaussian_random(mean " << a << ", std " << b;
      break;
  }
  s << ", seed " << seed << ")";
  return s.str();
}

StatusOr<RowInitializer> FindRowInitializer(const ir::Program& startup, const std::string& var,
                                            const std::string& table) {
  const std::vector<ir::Op>& ops = startup.global().ops;
  std::string want = var;
  // The last writer of `want`, followed back through copies (at most one hop per op).
  for (size_t hops = 0; hops <= ops.size(); ++hops) {
    const ir::Op* writer = nullptr;
    for (const ir::Op& op : ops) {
      for (const std::string& out : op.OutputVars()) {
        if (out == want) writer = &op;
      }
    }
    if (writer == nullptr) {
      return InvalidArgument("growable table '" + table + "': no op of the server's startup "
                             "initialises '" + want + "'");
    }
    if (writer->type == "assign" || writer->type == "split_byref") {
      want = std::string(writer->InputOne("X"));
      continue;
    }
    RowInitializer init;
    const ir::Attribute* seed = Find(*writer, "seed");
    init.seed = static_cast<uint64_t>(seed == nullptr ? 0 : ir::AttrAsInt(*seed).value_or(0));
    if (writer->type == "fill_constant") {
      init.kind = RowInitializer::Kind::kConstant;
      init.a = FloatOf(*writer, "value", 0.0);
      const ir::Attribute* text = Find(*writer, "str_value");
      if (const auto* s = text == nullptr ? nullptr : std::get_if<std::string>(text);
          s != nullptr && !s->empty()) {
        init.a = std::strtod(s->c_str(), nullptr);
      }
      return init;
    }
    if (writer->type == "uniform_random") {
      init.kind = RowInitializer::Kind::kUniform;
      init.a = FloatOf(*writer, "min", -1.0);
      init.b = FloatOf(*writer, "max", 1.0);
      return init;
    }
    if (writer->type == "gaussian_random") {
      init.kind = RowInitializer::Kind::kGaussian;
      init.a = FloatOf(*writer, "mean", 0.0);
      init.b = FloatOf(*writer, "std", 1.0);
      return init;
    }
    return InvalidArgument("growable table '" + table + "': '" + want + "' is initialised by " +
                           writer->type + ", which cannot draw one row at a time; use a "
                           "Constant, Uniform or Normal initializer");
  }
  return InvalidArgument("growable table '" + table + "': the startup's copies of '" + var +
                         "' form a cycle");
}

void GrowableTable::Touch(int64_t id, int64_t& last_seen) {
  if (last_seen == clock_) return;  // already seen in this update
  last_seen = clock_;
  if (options_.evict_after > 0) touched_.emplace_back(clock_, id);
}

void GrowableTable::Resolve(const int64_t* ids, int64_t n, bool lookup, int64_t* slots,
                            std::vector<std::pair<int64_t, int64_t>>* created) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    auto row = slot_of_.find(id);
    if (row != slot_of_.end()) {
      Touch(id, row->second.last_seen);
      slots[i] = row->second.slot;
      continue;
    }
    bool admit = options_.admit_after <= 1;
    if (!admit && lookup) {
      // One count per update, whichever trainer's lookup comes first: in a sync job every
      // trainer of a round then sees the same rows, whatever order their lookups arrive in.
      Waiting& w = pending_[id];
      if (w.count == 0) w.last_seen = clock_ - 1;
      if (w.last_seen != clock_) {
        ++w.count;
        Touch(id, w.last_seen);
      }
      admit = w.count >= options_.admit_after;
      if (admit) pending_.erase(id);
    }
    if (!admit) {
      slots[i] = -1;
      continue;
    }
    int64_t slot;
    if (!free_.empty()) {
      std::pop_heap(free_.begin(), free_.end(), std::greater<>());
      slot = free_.back();
      free_.pop_back();
      slot_ids_[static_cast<size_t>(slot)] = id;
    } else {
      slot = static_cast<int64_t>(slot_ids_.size());
      slot_ids_.push_back(id);
    }
    Row& r = slot_of_[id];
    r.slot = slot;
    r.last_seen = clock_ - 1;
    Touch(id, r.last_seen);
    slots[i] = slot;
    created->emplace_back(id, slot);
  }
}

int64_t GrowableTable::EndUpdate() {
  ++clock_;
  if (options_.evict_after <= 0) return 0;
  int64_t dropped = 0;
  // clock_ updates are done; what was last seen at update u < clock_ - evict_after missed each
  // of the last evict_after.
  while (!touched_.empty() && touched_.front().first < clock_ - options_.evict_after) {
    const auto [when, id] = touched_.front();
    touched_.pop_front();
    if (auto row = slot_of_.find(id); row != slot_of_.end() && row->second.last_seen == when) {
      slot_ids_[static_cast<size_t>(row->second.slot)] = -1;
      free_.push_back(row->second.slot);
      std::push_heap(free_.begin(), free_.end(), std::greater<>());
      slot_of_.erase(row);
      ++dropped;
    } else if (auto w = pending_.find(id); w != pending_.end() && w->second.last_seen == when) {
      pending_.erase(w);
    }
  }
  evicted_ += dropped;
  return dropped;
}

uint64_t GrowableTable::IndexBytes() const {
  // An unordered_map node holds the pair, a next pointer and the cached hash; each bucket is a
  // pointer.
  const uint64_t row_node = sizeof(std::pair<const int64_t, Row>) + 2 * sizeof(void*);
  const uint64_t wait_node = sizeof(std::pair<const int64_t, Waiting>) + 2 * sizeof(void*);
  return slot_of_.size() * row_node + slot_of_.bucket_count() * sizeof(void*) +
         pending_.size() * wait_node + pending_.bucket_count() * sizeof(void*) +
         slot_ids_.capacity() * sizeof(int64_t) + free_.capacity() * sizeof(int64_t) +
         touched_.size() * sizeof(std::pair<int64_t, int64_t>);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> GrowableTable::Save() const {
  std::vector<int64_t> seen(slot_ids_.size(), -1);
  for (const auto& [id, row] : slot_of_) seen[static_cast<size_t>(row.slot)] = row.last_seen;
  // Waiting ids in id order, so that a checkpoint's bytes do not depend on the hash's.
  std::vector<std::pair<int64_t, Waiting>> waits(pending_.begin(), pending_.end());
  std::sort(waits.begin(), waits.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<int64_t> waiting;
  for (const auto& [id, w] : waits) {
    waiting.insert(waiting.end(), {id, w.count, w.last_seen});
  }
  return {{"ids", slot_ids_}, {"seen", seen}, {"waiting", waiting}, {"clock", {clock_}}};
}

Status GrowableTable::Restore(const std::vector<int64_t>& ids, const std::vector<int64_t>& seen,
                              const std::vector<int64_t>& waiting, int64_t clock,
                              const std::string& what) {
  if (ids.size() != seen.size() || waiting.size() % 3 != 0 || clock < 0) {
    return DataLoss(what + ": the table's index is malformed (" + std::to_string(ids.size()) +
                    " ids, " + std::to_string(seen.size()) + " times, " +
                    std::to_string(waiting.size()) + " waiting entries, clock " +
                    std::to_string(clock) + ")");
  }
  GrowableTable restored(options_);
  restored.clock_ = clock;
  restored.slot_ids_ = ids;
  for (size_t s = 0; s < ids.size(); ++s) {
    if (ids[s] == -1) {
      restored.free_.push_back(static_cast<int64_t>(s));
      continue;
    }
    if (ids[s] < 0 || seen[s] < 0 || seen[s] > clock) {
      return DataLoss(what + ": slot " + std::to_string(s) + " holds id " +
                      std::to_string(ids[s]) + " last seen at update " +
                      std::to_string(seen[s]) + " (clock " + std::to_string(clock) + ")");
    }
    if (!restored.slot_of_.emplace(ids[s], Row{static_cast<int64_t>(s), seen[s]}).second) {
      return DataLoss(what + ": id " + std::to_string(ids[s]) + " is in two slots");
    }
  }
  std::make_heap(restored.free_.begin(), restored.free_.end(), std::greater<>());
  for (size_t i = 0; i < waiting.size(); i += 3) {
    const int64_t id = waiting[i], count = waiting[i + 1], when = waiting[i + 2];
    if (id < 0 || count < 1 || count >= options_.admit_after || when < 0 || when > clock ||
        restored.slot_of_.count(id) != 0 ||
        !restored.pending_.emplace(id, Waiting{count, when}).second) {
      return DataLoss(what + ": waiting id " + std::to_string(id) + " (count " +
                      std::to_string(count) + ", last seen " + std::to_string(when) +
                      ") does not fit the table");
    }
  }
  if (options_.evict_after > 0) {
    // Rebuild the eviction queue in time order: what a live server would hold.
    std::vector<std::pair<int64_t, int64_t>> all;
    for (const auto& [id, row] : restored.slot_of_) all.emplace_back(row.last_seen, id);
    for (const auto& [id, w] : restored.pending_) all.emplace_back(w.last_seen, id);
    std::sort(all.begin(), all.end());
    restored.touched_.assign(all.begin(), all.end());
  }
  *this = std::move(restored);
  return OkStatus();
}

}  // namespace fleet
