// A server's growable tables (server.h): setting them up from listen_and_serv, giving their
// vars room as rows are made, serving their rows by id, and their part in checkpoints and in
// the parameters saved at exit.
#include <algorithm>
#include <cstring>
#include <new>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "data/npy.h"
#include "pserver/server_internal.h"
#include "support/host_memory.h"
#include "support/logging.h"

namespace fleet {
namespace {

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(std::move(w));
  return words;
}

size_t RowBytes(const exec::ScopeVar& v) {
  size_t bytes = ir::DataTypeSize(v.dtype);
  for (size_t d = 1; d < v.dims.size(); ++d) bytes *= static_cast<size_t>(v.dims[d]);
  return bytes;
}

}  // namespace

Status PsServer::SetupGrowable(const ir::Op& ls, const ir::Program& startup) {
  const ir::Attribute* attr = ls.FindAttr("growable_tables");
  const auto* entries = attr == nullptr ? nullptr : std::get_if<std::vector<std::string>>(attr);
  if (entries == nullptr || entries->empty()) return OkStatus();
  if (!host_memory_) {
    return Unimplemented(label_ + ": growable tables are kept in host memory only; this "
                                  "device has none");
  }
  const exec::Scope& scope = executor_->scope();
  GrowableTableOptions o{options_.admit_after, options_.evict_after};
  for (const std::string& entry : *entries) {
    auto g = std::make_unique<Growable>(o);
    g->vars = Words(entry);
    if (g->vars.empty()) return InvalidArgument(label_ + ": an empty growable_tables entry");
    g->name = g->vars[0];
    for (const std::string& var : g->vars) {
      const exec::ScopeVar* v = scope.Find(var);
      if (v == nullptr || v->height >= 0 || v->dims.size() != 2 || v->dims[0] != 1) {
        return InvalidArgument(label_ + ": growable table '" + g->name + "': its var '" + var +
                               "' is not a one-row prototype [1, dim] in the server's scope");
      }
      if (var == g->name) {
        g->dtype = v->dtype;
        g->width = v->dims[1];
      }
      if (v->dtype != ir::DataType::kFloat32 && v->dtype != ir::DataType::kFloat64) {
        return InvalidArgument(label_ + ": growable table '" + g->name + "': '" + var +
                               "' is " + std::string(ir::DataTypeName(v->dtype)) +
                               "; rows are float32 or float64");
      }
      FLEET_ASSIGN_OR_RETURN(RowInitializer init, FindRowInitializer(startup, var, g->name));
      // Seed 0 means the executor's per-op seed; rows take the job's seed instead, which every
      // server shares, so that a row does not depend on which server draws it.
      if (init.seed == 0) init.seed = options_.seed;
      g->inits.push_back(init);
    }
    if (!growable_.emplace(g->name, std::move(g)).second) {
      return InvalidArgument(label_ + ": growable table '" + entry + "' is listed twice");
    }
  }
  return OkStatus();
}

void PsServer::DeclareGrowable(Block& block) {
  ir::Block& decls = block.program.global();
  for (auto& [name, g] : growable_) {
    bool writes = false;
    for (const ir::Op& op : decls.ops) {
      for (const std::string& out : op.OutputVars()) writes = writes || out == name;
    }
    if (!writes) continue;
    g->writer = &block;
    block.growable = g.get();
    // The vars, and the gradients (every sparse var of the block, which updates this table
    // alone), take its slots as rows.
    for (auto& [var_name, var] : decls.vars) {
      const bool slab = std::find(g->vars.begin(), g->vars.end(), var_name) != g->vars.end();
      if (!slab && !var.selected_rows) continue;
      var.shape[0] = g->capacity;
      g->decls.push_back(var_name);
    }
  }
}

void PsServer::BindGrowable() {
  for (auto& [name, receive] : sparse_) {
    if (receive->reader == nullptr || receive->reader->growable == nullptr) continue;
    receive->growable = receive->reader->growable;
    receive->growable->receives.push_back(name);
  }
}

Status PsServer::GrowTable(Growable& g, int64_t need, bool exact) {
  if (need <= g.capacity && !exact) return OkStatus();
  const int64_t rows = exact ? need : std::max(need, g.capacity * 2);
  exec::Scope& scope = executor_->scope();
  const uint64_t row_bytes = static_cast<uint64_t>(g.width) * ir::DataTypeSize(g.dtype);
  for (const std::string& var : g.vars) {
    Status s = scope.Regrow(var, rows);
    if (!s.ok()) {
      // Some vars may have grown already: the table cannot go on, and neither can the server.
      const uint64_t total = row_bytes * static_cast<uint64_t>(rows) * g.vars.size();
      Status why = ResourceExhausted(
          label_ + ": growable table '" + g.name + "' holds " + std::to_string(g.table.rows()) +
          " rows in " + BytesText(row_bytes * static_cast<uint64_t>(g.capacity) *
                                  g.vars.size()) +
          " and cannot grow to " + std::to_string(rows) + " rows (" + BytesText(total) +
          "): " + s.message());
      Fail(why);
      return why;
    }
  }
  for (const std::string& var : g.receives) {
    FLEET_RETURN_IF_ERROR(scope.Regrow(var, rows).WithContext(label_));
  }
  for (const std::string& var : g.decls) {
    if (ir::Var* v = g.writer->program.global().FindVar(var)) v->shape[0] = rows;
  }
  g.capacity = rows;
  g.writer->stale = true;
  return OkStatus();
}

Status PsServer::ResolveRows(Growable& g, const int64_t* ids, int64_t n, bool lookup,
                             int64_t* slots) {
  std::vector<std::pair<int64_t, int64_t>>& created = g.created;
  created.clear();
  try {
    g.table.Resolve(ids, n, lookup, slots, &created);
  } catch (const std::bad_alloc&) {
    // The index is whole (each id's entry is made at once), but the rows it promised may not
    // be: the table cannot go on.
    Status why = ResourceExhausted(label_ + ": growable table '" + g.name + "' ran out of "
                                   "memory for its index at " + std::to_string(g.table.rows()) +
                                   " rows (" + BytesText(g.table.IndexBytes()) + ")");
    Fail(why);
    return why;
  }
  FLEET_RETURN_IF_ERROR(GrowTable(g, g.table.slots_used(), /*exact=*/false));
  const exec::Scope& scope = executor_->scope();
  for (size_t k = 0; k < g.vars.size(); ++k) {
    const exec::ScopeVar& v = *scope.Find(g.vars[k]);
    const size_t row = RowBytes(v);
    for (const auto& [id, slot] : created) {
      g.inits[k].Fill(id, v.dtype, g.width,
                      static_cast<uint8_t*>(v.data) + static_cast<size_t>(slot) * row);
    }
  }
  return OkStatus();
}

Status PsServer::PrefetchGrowable(int32_t trainer_id, Growable& g, const int64_t* ids,
                                  int64_t num_ids, bool read_only, std::vector<uint8_t>& rows,
                                  std::vector<int64_t>& dims) {
  for (int64_t i = 0; i < num_ids; ++i) {
    if (ids[i] < 0 || ids[i] == ir::kGrowableHeight) {
      return InvalidArgument(label_ + ": trainer " + std::to_string(trainer_id) +
                             " asked for id " + std::to_string(ids[i]) + " of growable table '" +
                             g.name + "', which takes ids in [0, 2^63 - 1) (id " +
                             std::to_string(i) + " of the request)");
    }
  }
  std::vector<int64_t> slots(static_cast<size_t>(num_ids));
  std::lock_guard<std::mutex> lock(g.mu);
  if (read_only) {
    for (int64_t i = 0; i < num_ids; ++i) slots[static_cast<size_t>(i)] = g.table.Find(ids[i]);
  } else {
    FLEET_RETURN_IF_ERROR(ResolveRows(g, ids, num_ids, /*lookup=*/true, slots.data()));
  }
  const exec::ScopeVar& v = *executor_->scope().Find(g.name);
  const size_t row = RowBytes(v);
  try {
    rows.assign(static_cast<size_t>(num_ids) * row, 0);  // ids without a row read as zeros
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(label_ + ": no memory for the reply of " + std::to_string(num_ids) +
                             " rows of growable table '" + g.name + "'");
  }
  for (int64_t i = 0; i < num_ids; ++i) {
    if (slots[static_cast<size_t>(i)] < 0) {
      // A read of an id without a row: what training's first lookup would make of it.
      if (read_only && options_.admit_after <= 1) {
        g.inits[0].Fill(ids[i], g.dtype, g.width, rows.data() + static_cast<size_t>(i) * row);
      }
      continue;
    }
    std::memcpy(rows.data() + static_cast<size_t>(i) * row,
                static_cast<const uint8_t*>(v.data) +
                    static_cast<size_t>(slots[static_cast<size_t>(i)]) * row,
                row);
  }
  dims = {num_ids, g.width};
  return OkStatus();
}

Status PsServer::SaveGrowableParams(const Growable& g) const {
  // Rows in id order, with their ids: what a model needs, whatever slots they sat in.
  const auto index = g.table.Save();
  const std::vector<int64_t>& slot_ids = index[0].second;
  std::vector<std::pair<int64_t, int64_t>> order;  // (id, slot)
  for (size_t s = 0; s < slot_ids.size(); ++s) {
    if (slot_ids[s] >= 0) order.emplace_back(slot_ids[s], static_cast<int64_t>(s));
  }
  std::sort(order.begin(), order.end());
  FLEET_ASSIGN_OR_RETURN(exec::HostTensor all, Read(g.name));
  const size_t row = all.bytes.size() / static_cast<size_t>(std::max<int64_t>(all.dims[0], 1));
  data::NpyArray values, ids;
  values.dtype = all.dtype;
  values.dims = {static_cast<int64_t>(order.size()), g.width};
  values.bytes.resize(order.size() * row);
  ids.dtype = ir::DataType::kInt64;
  ids.dims = {static_cast<int64_t>(order.size())};
  ids.bytes.resize(order.size() * sizeof(int64_t));
  for (size_t i = 0; i < order.size(); ++i) {
    std::memcpy(values.bytes.data() + i * row,
                all.bytes.data() + static_cast<size_t>(order[i].second) * row, row);
    std::memcpy(ids.bytes.data() + i * sizeof(int64_t), &order[i].first, sizeof(int64_t));
  }
  const std::filesystem::path& dir = options_.save_params_dir;
  FLEET_RETURN_IF_ERROR(data::WriteNpy(dir / (g.name + ".npy"), values));
  return data::WriteNpy(dir / (g.name + ".ids.npy"), ids);
}

Status PsServer::CanonicalGrowableState(checkpoint::SafeTensors& state) const {
  for (const auto& [name, g] : growable_) {
    std::lock_guard<std::mutex> lock(g->mu);
    const auto index = g->table.Save();
    const std::vector<int64_t>& slot_ids = index[0].second;
    const std::vector<int64_t>& slot_seen = index[1].second;
    std::vector<std::pair<int64_t, int64_t>> order;  // (id, slot), by id
    for (size_t s = 0; s < slot_ids.size(); ++s) {
      if (slot_ids[s] >= 0) order.emplace_back(slot_ids[s], static_cast<int64_t>(s));
    }
    std::sort(order.begin(), order.end());
    const int64_t rows = std::max<int64_t>(static_cast<int64_t>(order.size()), 1);
    for (checkpoint::NamedTensor& t : state.tensors) {
      if (std::find(g->vars.begin(), g->vars.end(), t.name) == g->vars.end()) continue;
      exec::HostTensor& all = t.tensor;
      const size_t row = all.bytes.size() / static_cast<size_t>(std::max<int64_t>(all.dims[0], 1));
      exec::HostTensor rows_by_id;
      rows_by_id.Reshape(all.dtype, {rows, all.dims[1]});
      std::fill(rows_by_id.bytes.begin(), rows_by_id.bytes.end(), uint8_t{0});
      for (size_t i = 0; i < order.size(); ++i) {
        std::memcpy(rows_by_id.bytes.data() + i * row,
                    all.bytes.data() + static_cast<size_t>(order[i].second) * row, row);
      }
      all = std::move(rows_by_id);
    }
    std::vector<int64_t> ids, seen;
    for (const auto& [id, slot] : order) {
      ids.push_back(id);
      seen.push_back(slot_seen[static_cast<size_t>(slot)]);
    }
    const std::pair<const char*, const std::vector<int64_t>*> parts[] = {
        {"ids", &ids}, {"seen", &seen}, {"waiting", &index[2].second},
        {"clock", &index[3].second}};
    for (const auto& [part, values] : parts) {
      exec::HostTensor t;
      t.Reshape(ir::DataType::kInt64, {static_cast<int64_t>(values->size())});
      if (!values->empty()) std::memcpy(t.bytes.data(), values->data(), t.bytes.size());
      state.tensors.push_back({name + "@" + part, std::move(t)});
    }
  }
  return OkStatus();
}

Status PsServer::RestoreGrowableState(std::map<std::string, exec::HostTensor>& index,
                                      const std::string& where) {
  for (auto& [name, g] : growable_) {
    std::vector<std::vector<int64_t>> parts;
    for (const char* part : {"ids", "seen", "waiting", "clock"}) {
      auto it = index.find(name + "@" + part);
      if (it == index.end() || it->second.dtype != ir::DataType::kInt64 ||
          it->second.dims.size() != 1) {
        return DataLoss(where + ": growable table '" + name + "' has no int64 '" + name + "@" +
                        part + "'");
      }
      std::vector<int64_t> v(static_cast<size_t>(it->second.dims[0]));
      if (!v.empty()) std::memcpy(v.data(), it->second.bytes.data(), v.size() * sizeof(int64_t));
      parts.push_back(std::move(v));
      index.erase(it);
    }
    if (parts[3].size() != 1) {
      return DataLoss(where + ": growable table '" + name + "' has a malformed clock");
    }
    std::lock_guard<std::mutex> lock(g->mu);
    FLEET_RETURN_IF_ERROR(g->table.Restore(parts[0], parts[1], parts[2], parts[3][0],
                                           where + ": growable table '" + name + "'"));
    if (std::find(parts[0].begin(), parts[0].end(), int64_t{-1}) != parts[0].end()) {
      return DataLoss(where + ": growable table '" + name + "' lists a free slot; a checkpoint "
                      "holds its rows in id order");
    }
    // The vars get the checkpoint's rows, one per id in the order saved, so that their saved
    // values fit them.
    FLEET_RETURN_IF_ERROR(GrowTable(*g, std::max<int64_t>(g->table.slots_used(), 1),
                                    /*exact=*/true));
  }
  return OkStatus();
}

std::string PsServer::DescribeGrowable() const {
  std::ostringstream s;
  for (const auto& [name, g] : growable_) {
    std::lock_guard<std::mutex> lock(g->mu);
    const uint64_t rows_bytes = static_cast<uint64_t>(g->capacity) *
                                static_cast<uint64_t>(g->width) * ir::DataTypeSize(g->dtype) *
                                g->vars.size();
    if (s.tellp() > 0) s << "; ";
    s << "growable table '" << name << "': " << g->table.rows() << " rows ("
      << g->table.waiting() << " ids waiting for admission, " << g->table.evicted()
      << " rows evicted), capacity " << g->capacity << ", " << BytesText(rows_bytes)
      << " in rows and " << BytesText(g->table.IndexBytes()) << " of index";
  }
  return s.str();
}

}  // namespace fleet
