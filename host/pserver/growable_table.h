// A growable table's index on one parameter server: which slot (row of the server's vars) holds
// each id's row, which ids wait for admission, and which rows have gone unseen long enough to be
// dropped. The rows themselves live in the server's scope (the table's block and the optimizer's
// per-row accumulators), [capacity, dim] vars the server grows as slots are handed out; this
// class only hands out slots and says which rows to initialise.
//
// Ids are any int64 in [0, 2^63 - 1); which server holds an id is fleet_row_shard (the trainers
// route by it). Memory is proportional to the ids seen: one hash entry per row and per id
// waiting for admission, plus one per row touched in the last evict_after updates.
//
// Admission (admit_after = N): an id's row is made in the N-th update in which it is looked up
// (any number of trainers' prefetches in one update count once); before that it reads as zeros
// and gradient entries for it are dropped. N = 1 makes a row on first touch, a gradient
// included.
// Eviction (evict_after = K > 0): a row, or a waiting id's count, that no lookup or gradient
// touched in the last K updates of the table is dropped at the end of the K-th; its slot is
// handed out again, and a returning id starts afresh from the initializer.
//
// Not thread-safe: the server holds the table's lock around every call.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/program.h"
#include "support/status.h"

namespace fleet {

// Appended to a growable table's block name in a row prefetch: a read (an evaluation's lookup)
// that makes no row and counts nothing; an id without a row reads as a training lookup would
// find it (its first value when admission is immediate, else zeros).
inline constexpr std::string_view kGrowableReadView = "@READ";

// How a new row is drawn: from the table's declared initializer, with a stream of its own per
// id (seeded by the initializer's seed and the id), so a row's first value depends on neither
// the order ids arrive in, nor the server, nor a restart.
struct RowInitializer {
  enum class Kind { kConstant, kUniform, kGaussian };
  Kind kind = Kind::kConstant;
  double a = 0;  // constant: the value; uniform: min; gaussian: mean
  double b = 0;  // uniform: max; gaussian: std
  uint64_t seed = 0;

  // Writes row `id`'s first value: `width` elements of `dtype` (float32 or float64) at `row`.
  void Fill(int64_t id, ir::DataType dtype, int64_t width, void* row) const;
  // "uniform_random(-0.1, 0.1, seed 7)", for logs.
  std::string Describe() const;
};

// The initializer of `var` in a server's startup program: the fill_constant, uniform_random or
// gaussian_random that writes it, followed through assign and split_byref. Any other writer is
// INVALID_ARGUMENT naming it and `table`.
StatusOr<RowInitializer> FindRowInitializer(const ir::Program& startup, const std::string& var,
                                            const std::string& table);

struct GrowableTableOptions {
  int64_t admit_after = 1;  // >= 1: updates in which an id is looked up before it gets a row
  int64_t evict_after = 0;  // >= 0: updates a row may go unseen; 0 = never evicted
};

class GrowableTable {
 public:
  explicit GrowableTable(GrowableTableOptions options) : options_(options) {}

  // The slot of each of ids[0 .. n), or -1 for one without a row (not admitted yet; or, for a
  // gradient, not looked up first when admit_after > 1). `lookup`: a trainer's prefetch, whose
  // first in an update counts toward admission. An id with a row is marked seen in the current
  // update, and so is a waiting id a lookup names. The rows made now are appended to `created` as
  // (id, slot): the caller writes their first values. Repeated ids get the same slot. Ids must
  // be >= 0 (the caller checks).
  void Resolve(const int64_t* ids, int64_t n, bool lookup, int64_t* slots,
               std::vector<std::pair<int64_t, int64_t>>* created);

  // The slot of `id`, or -1 when it has no row; changes nothing.
  int64_t Find(int64_t id) const {
    auto row = slot_of_.find(id);
    return row == slot_of_.end() ? -1 : row->second.slot;
  }

  // The table's update ran: the clock advances, and with evict_after > 0 the rows and waiting
  // ids unseen for evict_after updates are dropped. Returns the number of rows dropped.
  int64_t EndUpdate();

  // Slots [0, slots_used()) have been handed out (the vars need that many rows).
  int64_t slots_used() const { return static_cast<int64_t>(slot_ids_.size()); }
  int64_t rows() const { return static_cast<int64_t>(slot_of_.size()); }
  int64_t waiting() const { return static_cast<int64_t>(pending_.size()); }
  int64_t evicted() const { return evicted_; }
  // Bytes of the index itself (hash entries, slot list, eviction queue), approximately.
  uint64_t IndexBytes() const;

  // The index as tensors for a checkpoint: "ids" int64 [slots] (the id in each slot, -1 when
  // free), "seen" int64 [slots] (its last update), "waiting" int64 [W, 3] (id, count, last
  // update) and "clock" int64 [1].
  std::vector<std::pair<std::string, std::vector<int64_t>>> Save() const;
  // The inverse of Save (the vectors in that order). Errors name `what` and the entry at fault:
  // a negative id, an id in two slots, a count out of range.
  Status Restore(const std::vector<int64_t>& ids, const std::vector<int64_t>& seen,
                 const std::vector<int64_t>& waiting, int64_t clock, const std::string& what);

 private:
  void Touch(int64_t id, int64_t& last_seen);

  GrowableTableOptions options_;
  struct Row {
    int64_t slot = 0;
    int64_t last_seen = 0;
  };
  struct Waiting {
    int64_t count = 0;
    int64_t last_seen = 0;
  };
  std::unordered_map<int64_t, Row> slot_of_;
  std::unordered_map<int64_t, Waiting> pending_;
  std::vector<int64_t> slot_ids_;   // by slot: its id, -1 when free
  std::vector<int64_t> free_;       // free slots, a min-heap: the lowest is reused first
  // (update, id) for each id the first time it is seen in an update; eviction pops the front.
  std::deque<std::pair<int64_t, int64_t>> touched_;
  int64_t clock_ = 0;
  int64_t evicted_ = 0;
};

}  // namespace fleet
