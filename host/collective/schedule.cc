// The schedule fingerprint and its comparison. Entries are compared by 64-bit FNV-1a hashes:
// each rank writes its hashes into its own row of a [world, K] int64 array and a sum all-reduce
// hands every rank every row (the other rows are zero), so no rank needs another's text.
#include "collective/schedule.h"

#include <algorithm>
#include <utility>

#include "ops/op_registry.h"

namespace fleet {
namespace {

// Entries compared one by one; a difference past them still shows in the whole-schedule hash.
constexpr size_t kCompared = 256;

uint64_t Fnv1a(const std::string& text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string VarText(const ir::Program& p, const std::string& name) {
  const ir::Var* v = p.FindVarRecursive(0, name);
  return v == nullptr ? name : name + ":" + ir::TypeShapeText(v->dtype, v->shape);
}

void AddCollectives(const ir::Program& p, const char* which, CollectiveSchedule& s) {
  std::vector<std::string>& out = s.entries;
  for (const ir::Op& op : p.global().ops) {
    const ops::OpSchema* schema = ops::BuiltinOps().Find(op.type);
    if (schema == nullptr || !schema->collective) continue;
    std::string e = std::string(which) + " " + op.type;
    ScheduledOp structured;
    structured.type = op.type;
    if (const ir::Attribute* ring = op.FindAttr("ring_id")) {
      structured.ring = static_cast<int32_t>(ir::AttrAsInt(*ring).value_or(0));
      e += " ring " + std::to_string(ir::AttrAsInt(*ring).value_or(0));
    }
    for (const std::string& n : op.Input("X")) {
      const ir::Var* v = p.FindVarRecursive(0, n);
      structured.vars.push_back(n);
      structured.dtypes.push_back(v == nullptr ? -1 : static_cast<int32_t>(v->dtype));
      std::vector<int64_t> dims = v == nullptr ? std::vector<int64_t>{} : v->shape;
      // A sparse tensor's dims[0] counts its entries, which the declared height does not tell.
      if (v != nullptr && v->selected_rows && !dims.empty()) dims[0] = -1;
      structured.dims.push_back(std::move(dims));
    }
    s.ops.push_back(std::move(structured));
    for (const auto& [slot, names] : op.inputs) {
      for (const std::string& n : names) e += " " + slot + "=" + VarText(p, n);
    }
    for (const auto& [slot, names] : op.outputs) {
      for (const std::string& n : names) e += " " + slot + "=" + VarText(p, n);
    }
    out.push_back(std::move(e));
  }
}


}  // namespace

std::string RankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  }
  return s;
}

CollectiveSchedule ScheduleOf(const ir::Program& startup, const ir::Program& main, int64_t steps) {
  CollectiveSchedule s;
  AddCollectives(startup, "startup:", s);
  AddCollectives(main, "main:", s);
  s.entries.push_back("steps: " + std::to_string(steps));
  return s;
}

std::vector<std::string> VarNamer::Next(std::string_view type, int32_t ring,
                                        const std::vector<int32_t>& dtypes,
                                        const std::vector<std::vector<int64_t>>& dims) {
  auto matches = [&](const ScheduledOp& op) {
    if (op.type != type || op.ring != ring || op.vars.size() != dtypes.size()) return false;
    for (size_t i = 0; i < dtypes.size(); ++i) {
      if (op.dtypes[i] != -1 && op.dtypes[i] != dtypes[i]) return false;
      if (op.dims[i].empty()) continue;  // a var the program does not declare
      if (op.dims[i].size() != dims[i].size()) return false;
      for (size_t d = 0; d < dims[i].size(); ++d) {
        if (op.dims[i][d] >= 0 && op.dims[i][d] != dims[i][d]) return false;
      }
    }
    return true;
  };
  prepared_.resize(ops_.size(), 0);
  std::vector<size_t> group;
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (matches(ops_[i])) group.push_back(i);
  }
  if (group.empty()) return {};
  // The count lives with the group's first op; a program prepared again starts over.
  const size_t k = prepared_[group[0]]++ % group.size();
  return ops_[group[k]].vars;
}

Status CheckSchedulesAgree(Communicator& comm, const CollectiveSchedule& mine) {
  const int world = comm.world_size();
  const int rank = comm.rank();
  if (world <= 1) return OkStatus();
  // Row layout: [whole-schedule hash, entry count, hash of entry 0, 1, ..., K-1].
  const size_t width = 2 + kCompared;
  std::vector<int64_t> rows(static_cast<size_t>(world) * width, 0);
  int64_t* row = rows.data() + static_cast<size_t>(rank) * width;
  uint64_t whole = 1469598103934665603ull;
  for (const std::string& e : mine.entries) whole = Fnv1a(e + "\n", whole);
  row[0] = static_cast<int64_t>(whole);
  row[1] = static_cast<int64_t>(mine.entries.size());
  for (size_t i = 0; i < std::min(kCompared, mine.entries.size()); ++i) {
    row[2 + i] = static_cast<int64_t>(Fnv1a(mine.entries[i]));
  }
  FLEET_RETURN_IF_ERROR(comm.AllReduceHost(rows.data(), FLEET_DTYPE_INT64,
                                           static_cast<int64_t>(rows.size()), FLEET_REDUCE_SUM)
                            .WithContext("the collective schedule check"));
  auto at = [&](int r, size_t k) { return rows[static_cast<size_t>(r) * width + k]; };
  bool same = true;
  for (int r = 1; r < world; ++r) same = same && at(r, 0) == at(0, 0);
  if (same) return OkStatus();

  // The first entry where some rank differs from rank 0 (or has none).
  size_t first = 0;
  int64_t longest = 0;
  for (int r = 0; r < world; ++r) longest = std::max(longest, at(r, 1));
  for (; first < std::min(kCompared, static_cast<size_t>(longest)); ++first) {
    bool differs = false;
    for (int r = 1; r < world; ++r) {
      const bool has0 = static_cast<size_t>(at(0, 1)) > first;
      const bool hasr = static_cast<size_t>(at(r, 1)) > first;
      differs = differs || has0 != hasr || at(r, 2 + first) != at(0, 2 + first);
    }
    if (differs) break;
  }
  std::vector<int> agree, differ;
  for (int r = 0; r < world; ++r) {
    const bool has0 = static_cast<size_t>(at(0, 1)) > first;
    const bool hasr = static_cast<size_t>(at(r, 1)) > first;
    const bool same_entry = first < kCompared && has0 == hasr && at(r, 2 + first) == at(0, 2 + first);
    (same_entry ? agree : differ).push_back(r);
  }
  const std::string here = first < mine.entries.size() ? mine.entries[first] : "(nothing)";
  return FailedPrecondition(
      "the ranks would run different collectives: at entry #" + std::to_string(first) +
      " of the schedule, " + RankList(differ) + " differ" + (differ.size() == 1 ? "s" : "") +
      " from " + RankList(agree) + "; here (rank " + std::to_string(rank) + ") it is '" + here +
      "' (do all ranks run the same program with the same config?)");
}

}  // namespace fleet
