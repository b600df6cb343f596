// The sequence rules of the executor (executor.h): where each sequence var's offsets come from
// when a program is prepared (a feed, the input an output follows, or an op that makes offsets
// of its own), the checks of fed offsets, the offsets a Derivation makes before its op runs, and
// preparing again when sequence feeds outgrow their capacity.
#include <algorithm>
#include <cstring>

#include "executor/executor.h"
#include "support/logging.h"

namespace fleet::exec {

int64_t SequenceCapacity(int64_t rows) {
  constexpr int64_t kMin = 16;
  if (rows <= kMin) return kMin;
  if (rows > (int64_t{1} << 60)) return rows;
  int64_t pow2 = kMin;
  while (pow2 < rows) pow2 *= 2;
  // Eighths of the power of two above half of it: at most 25% over, four values per octave.
  int64_t cap = pow2 / 2;
  while (cap < rows) cap += pow2 / 8;
  return cap;
}

std::string Executor::LodBufferName(const std::string& var) { return "@lod@" + var; }

// Errors name the feed and the first offset that is wrong.
Status Executor::CheckFeedOffsets(const std::string& name, const HostTensor& t,
                                  int64_t sequences) {
  const std::vector<int64_t>& lod = t.lod;
  if (lod.empty()) {
    return InvalidArgument("feed '" + name + "' is a sequence var (lod_level 1) but the tensor "
                           "has no offsets (HostTensor::lod)");
  }
  if (static_cast<int64_t>(lod.size()) != sequences + 1) {
    return InvalidArgument("feed '" + name + "' holds " + std::to_string(lod.size() - 1) +
                           " sequences but the program was prepared for " +
                           std::to_string(sequences));
  }
  if (t.dims.empty()) return InvalidArgument("feed '" + name + "' has no rows dimension");
  if (lod[0] != 0) {
    return InvalidArgument("feed '" + name + "': its offsets start at " +
                           std::to_string(lod[0]) + ", not 0");
  }
  for (size_t i = 1; i < lod.size(); ++i) {
    if (lod[i] < lod[i - 1]) {
      return InvalidArgument("feed '" + name + "': offset " + std::to_string(i) + " (" +
                             std::to_string(lod[i]) + ") is before offset " +
                             std::to_string(i - 1) + " (" + std::to_string(lod[i - 1]) + ")");
    }
  }
  if (lod.back() != t.dims[0]) {
    return InvalidArgument("feed '" + name + "': its offsets end at " +
                           std::to_string(lod.back()) + " but the tensor has " +
                           std::to_string(t.dims[0]) + " rows");
  }
  return OkStatus();
}

Status Executor::CheckSequenceInputs(const PreparedProgram& p, const ops::OpSchema& schema,
                                     const ir::Op& op, const LodOf& lod_of) {
  if (schema.mixed_sequences) return OkStatus();
  std::string first_var;
  int first = -1;
  for (const auto& [slot, names] : op.inputs) {
    for (const std::string& n : names) {
      auto it = lod_of.find(n);
      if (it == lod_of.end()) continue;
      if (first < 0) {
        first = it->second;
        first_var = n;
      } else if (it->second != first) {
        return InvalidArgument("inputs '" + first_var + "' and '" + n +
                               "' hold different sequences (those of '" +
                               p.lod_sources_[static_cast<size_t>(first)].feed + "' and of '" +
                               p.lod_sources_[static_cast<size_t>(it->second)].feed +
                               "'), whose rows do not correspond; pool each first "
                               "(sequence_pool)");
      }
    }
  }
  return OkStatus();
}

int Executor::FollowedSource(const ops::OpSchema& schema, const ir::Op& op, const LodOf& lod_of,
                             const std::string& slot, size_t k) {
  std::string in_slot;
  size_t in_index = 0;
  const bool shared = std::any_of(schema.lod_share.begin(), schema.lod_share.end(),
                                  [&](const auto& pair) { return pair.first == slot; });
  if (schema.sequence_kernel && !shared) {
    for (const auto& [s, names] : op.inputs) {
      for (size_t j = 0; j < names.size() && in_slot.empty(); ++j) {
        if (lod_of.count(names[j]) > 0) {
          in_slot = s;
          in_index = j;
        }
      }
      if (!in_slot.empty()) break;
    }
  } else {
    for (const auto& [out_slot, from] : schema.lod_share) {
      if (out_slot != slot) continue;
      in_slot = from;
      const size_t count = op.Input(from).size();
      in_index = k < count ? k : 0;
    }
  }
  const auto& names = op.Input(in_slot);
  if (in_index >= names.size()) return -1;
  auto it = lod_of.find(names[in_index]);
  return it == lod_of.end() ? -1 : it->second;
}

Status Executor::AddDerivation(PreparedProgram& p, size_t index, const ir::Op& op,
                               const ops::OpSchema& schema, const std::string& var,
                               const ops::TensorInfo& info, LodOf& lod_of) {
  if (info.dims.empty() || info.sequences < 0) {
    return Internal("output '" + var + "' holds sequences of its own, but the shape function "
                    "gave no rows or sequences");
  }
  PreparedProgram::LodSource source;
  source.feed = var;
  source.sequences = info.sequences;
  source.capacity = info.dims[0];
  PreparedProgram::Derivation d;
  d.op = index;
  d.source = static_cast<int>(p.lod_sources_.size());
  d.schema = &schema;
  for (const auto& [slot, names] : op.inputs) {
    std::vector<int> sources;
    for (const std::string& n : names) {
      auto it = lod_of.find(n);
      sources.push_back(it == lod_of.end() ? -1 : it->second);
    }
    d.inputs.emplace_back(slot, std::move(sources));
  }
  for (const std::string& slot : schema.derive_reads) {
    for (const std::string& n : op.Input(slot)) {
      const ops::TensorInfo& r = p.infos_[n];
      if (r.dtype != ir::DataType::kInt64 && r.dtype != ir::DataType::kInt32) {
        return Internal(slot + " '" + n + "' is read for offsets but is not int64 or int32");
      }
      int64_t count = 1;
      for (int64_t dim : r.dims) count *= dim;
      d.reads.push_back({slot, n, nullptr, r.dtype, count, nullptr, nullptr});
    }
  }
  lod_of[var] = d.source;
  p.lod_sources_.push_back(std::move(source));
  p.derivations_.push_back(std::move(d));
  return OkStatus();
}

Status Executor::Derive(PreparedProgram& p, PreparedProgram::Derivation& d) {
  const int32_t ordinal = options_.device_ordinal;
  PreparedProgram::LodSource& out = p.lod_sources_[static_cast<size_t>(d.source)];
  // The values are data an earlier op may have just written: a device must finish first.
  if (!d.reads.empty() && !host_memory_) {
    for (const PreparedProgram::Derivation::Read& r : d.reads) {
      const size_t bytes = static_cast<size_t>(r.count) * ir::DataTypeSize(r.dtype);
      if (bytes > 0) {
        FLEET_RETURN_IF_ERROR(device_.CopyToHost(ordinal, r.staging, r.data, bytes, stream_));
      }
    }
    FLEET_RETURN_IF_ERROR(device_.StreamSynchronize(stream_));
    d.pending = false;
  }
  for (const PreparedProgram::Derivation::Read& r : d.reads) {
    const void* src = host_memory_ ? r.data : r.staging;
    std::vector<int64_t>& values = *r.to;  // sized at prepare
    for (size_t e = 0; e < values.size(); ++e) {
      values[e] = r.dtype == ir::DataType::kInt64 ? static_cast<const int64_t*>(src)[e]
                                                  : static_cast<const int32_t*>(src)[e];
    }
  }
  FLEET_RETURN_IF_ERROR(d.schema->derive_offsets(d.in, out.offsets));
  // The kernels trust offsets as they trust a feed's: checked like one.
  const std::vector<int64_t>& o = out.offsets;
  bool valid = static_cast<int64_t>(o.size()) == out.sequences + 1 && o[0] == 0 &&
               o.back() <= out.capacity;
  for (size_t s = 1; valid && s < o.size(); ++s) valid = o[s] >= o[s - 1];
  if (!valid) {
    return Internal(d.schema->type + ": the offsets made for '" + out.feed +
                    "' do not rise from 0 to at most its " + std::to_string(out.capacity) +
                    " rows over " + std::to_string(out.sequences) + " sequences");
  }
  const size_t bytes = o.size() * sizeof(int64_t);
  if (host_memory_) {
    std::memcpy(out.data, o.data(), bytes);
    return OkStatus();
  }
  // The staging buffer may still feed the previous run's copy.
  if (d.pending) FLEET_RETURN_IF_ERROR(device_.EventSynchronize(d.copied));
  std::memcpy(out.staging, o.data(), bytes);
  FLEET_RETURN_IF_ERROR(device_.CopyToDevice(ordinal, out.data, out.staging, bytes, stream_));
  FLEET_RETURN_IF_ERROR(device_.EventRecord(d.copied, stream_));
  d.pending = true;
  return OkStatus();
}

// Each sequence tensor's offsets in the arena (with a staging copy on devices without host
// memory), the values derivations read, the offsets every kernel call is handed, and the
// padding rows each op's sequence outputs leave.
Status Executor::BindSequences(PreparedProgram& p, const std::vector<OpSlots>& op_slots,
                               const LodOf& lod_of) {
  for (PreparedProgram::LodSource& l : p.lod_sources_) {
    l.data = static_cast<int64_t*>(p.data_[LodBufferName(l.feed)]);
    if (stream_ != nullptr) {
      FLEET_ASSIGN_OR_RETURN(l.staging, device_.HostAlloc(static_cast<size_t>(l.sequences + 1) *
                                                          sizeof(int64_t)));
    }
  }
  for (PreparedProgram::Derivation& d : p.derivations_) {
    const PreparedProgram::LodSource& out = p.lod_sources_[static_cast<size_t>(d.source)];
    d.in.op = &p.program_->global().ops[d.op];
    d.in.capacity = out.capacity;
    d.in.sequences = out.sequences;
    for (const auto& [slot, sources] : d.inputs) {
      auto& offsets = d.in.offsets[slot];
      for (int source : sources) {
        offsets.push_back(source < 0 ? nullptr
                                     : &p.lod_sources_[static_cast<size_t>(source)].offsets);
      }
    }
    for (const PreparedProgram::Derivation::Read& r : d.reads) {
      d.in.values[r.slot].emplace_back(static_cast<size_t>(r.count));
    }
    std::map<std::string, size_t> taken;  // per slot, the values handed out so far
    for (PreparedProgram::Derivation::Read& r : d.reads) {
      r.to = &d.in.values[r.slot][taken[r.slot]++];
      r.data = p.data_[r.var];
      if (stream_ != nullptr) {
        FLEET_ASSIGN_OR_RETURN(r.staging,
                               device_.HostAlloc(static_cast<size_t>(r.count) *
                                                 ir::DataTypeSize(r.dtype)));
      }
    }
    if (stream_ != nullptr) {
      FLEET_ASSIGN_OR_RETURN(d.copied, device_.EventCreate(options_.device_ordinal));
    }
  }
  // Offsets for the kernels that read them, and the padding rows each op's outputs leave.
  p.paddings_.resize(p.calls_.size());
  for (size_t i = 0; i < p.calls_.size(); ++i) {
    KernelCall& call = *p.calls_[i];
    for (int output = 0; output < 2; ++output) {
      const auto& slot_names = output ? op_slots[i].outputs : op_slots[i].inputs;
      for (size_t s = 0; s < slot_names.size(); ++s) {
        for (size_t k = 0; k < slot_names[s].size(); ++k) {
          const std::string& name = slot_names[s][k];
          auto lod = lod_of.find(name);
          if (lod == lod_of.end()) continue;
          const PreparedProgram::LodSource& l = p.lod_sources_[static_cast<size_t>(lod->second)];
          call.SetLod(output != 0, s, k, l.data);
          if (output == 0) continue;
          // A row: the product of the dims after the rows (a capacity of l.capacity).
          const ops::TensorInfo& info = p.infos_[name];
          size_t row_bytes = ir::DataTypeSize(info.dtype);
          for (size_t d = 1; d < info.dims.size(); ++d) {
            row_bytes *= static_cast<size_t>(info.dims[d]);
          }
          p.paddings_[i].push_back({static_cast<uint8_t*>(p.data_[name]), row_bytes,
                                    lod->second});
        }
      }
    }
  }
  return OkStatus();
}

std::vector<std::string> PreparedProgram::sequence_feeds() const {
  std::vector<std::string> out;
  for (const Binding& f : feeds_) {
    if (f.lod >= 0) out.push_back(f.name);
  }
  return out;
}

Status Executor::FitSequences(PreparedProgram& p, const FeedMap& feeds) {
  std::map<std::string, int64_t> rows;
  for (const PreparedProgram::Binding& f : p.feeds_) {
    auto it = feeds.find(f.name);
    if (f.lod >= 0 && it != feeds.end() && !it->second.dims.empty()) {
      rows[f.name] = it->second.dims[0];  // a missing feed: Run says why
    }
  }
  return ReserveSequenceRows(p, rows);
}

Status Executor::ReserveSequenceRows(PreparedProgram& p,
                                     const std::map<std::string, int64_t>& rows) {
  bool grow = false;
  for (const PreparedProgram::Binding& f : p.feeds_) {
    auto it = rows.find(f.name);
    if (f.lod >= 0 && it != rows.end()) grow = grow || it->second > f.dims[0];
  }
  if (!grow) return OkStatus();
  // Preparing again costs every kernel's prepare, so each sequence feed gets a quarter more
  // room than this batch needs: a program with many slots settles after a few batches.
  FeedShapes shapes = p.feed_shapes_;
  for (const PreparedProgram::Binding& f : p.feeds_) {
    auto it = rows.find(f.name);
    if (f.lod < 0 || it == rows.end()) continue;
    const int64_t need = it->second;
    shapes[f.name][0] = std::max(f.dims[0], SequenceCapacity(need + need / 4));
    if (shapes[f.name][0] != f.dims[0]) {
      Log().debug("executor: feed '{}' has {} rows; preparing for {} (was {})", f.name, need,
                  shapes[f.name][0], f.dims[0]);
    }
  }
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<PreparedProgram> fresh,
                         Prepare(*p.program_, shapes, p.fetch_names_, p.feed_sequences_));
  // The new preparation continues the old one's runs (random streams, profile).
  fresh->runs_ = p.runs_;
  fresh->next_launch_index_ = p.next_launch_index_;
  if (fresh->op_seconds_.size() == p.op_seconds_.size()) fresh->op_seconds_ = p.op_seconds_;
  if (stream_ != nullptr) FLEET_RETURN_IF_ERROR(device_.StreamSynchronize(stream_));
  p.Swap(*fresh);
  return OkStatus();  // `fresh` now holds the old preparation and frees it
}

}  // namespace fleet::exec
