#include "executor/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>

#include "fleet/fleet_plugin.h"
#include "ops/shape_inference.h"
#include "support/host_memory.h"
#include "support/logging.h"

namespace fleet::exec {
namespace {

std::string OpLabel(size_t index, const ir::Op& op) {
  return "op #" + std::to_string(index) + " (" + op.type + ")";
}

// "; the largest is 'fc_0.tmp_0' float32[64, 128] (32768 bytes (32.0 KiB)), written by op #3
// (mul)": what to shrink when a program's tensors do not fit.
std::string LargestVar(const std::vector<VarLifetime>& vars,
                       const std::map<std::string, ops::TensorInfo, std::less<>>& infos,
                       const ir::Block& block) {
  const VarLifetime* largest = nullptr;
  for (const VarLifetime& v : vars) {
    if (largest == nullptr || v.bytes > largest->bytes) largest = &v;
  }
  if (largest == nullptr) return {};
  auto info = infos.find(largest->name);
  if (info == infos.end()) return {};
  std::string text = "; the largest is '" + largest->name + "' " +
                     ir::TypeShapeText(info->second.dtype, info->second.dims) + " (" +
                     BytesText(largest->bytes) + ")";
  if (largest->first < 0) return text + ", a feed";
  const auto op = static_cast<size_t>(largest->first);
  return op < block.ops.size() ? text + ", written by " + OpLabel(op, block.ops[op]) : text;
}

bool FullyKnown(const std::vector<int64_t>& dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
}

// The values of a tensor; a SelectedRows tensor's row indices follow them (RowsOffset).
size_t ValueBytes(const ops::TensorInfo& info) {
  size_t n = 1;
  for (int64_t d : info.dims) n *= static_cast<size_t>(d);
  return n * ir::DataTypeSize(info.dtype);
}

size_t RowsOffset(const ops::TensorInfo& info) { return SelectedRowsOffset(info.dtype, info.dims); }

size_t Bytes(const ops::TensorInfo& info) {
  if (!info.selected_rows()) return ValueBytes(info);
  return RowsOffset(info) + static_cast<size_t>(info.dims[0]) * sizeof(int64_t);
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Stable per op: the base seed, the op's position and what it writes.
uint64_t OpSeed(uint64_t base, size_t index, const ir::Op& op) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the op type and output names
  auto mix = [&](std::string_view s) {
    for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  mix(op.type);
  for (const auto& [slot, names] : op.outputs) {
    for (const auto& n : names) mix(n);
  }
  return SplitMix(SplitMix(base) ^ SplitMix(h + index));
}

// The op's outputs with each placeholder entry (ir::kEmptyVarName: not computed, named by no
// var) given a name of its own for this op alone, so that it gets a buffer the kernel may write
// (the ABI hands kernels allocated outputs) that lives for the op only and that no other op,
// fetch or shape check sees. '/' cannot occur in a declared name, so these never clash.
ir::SlotMap OutputsOf(size_t index, const ir::Op& op) {
  ir::SlotMap outputs = op.outputs;
  for (auto& [slot, names] : outputs) {
    for (size_t k = 0; k < names.size(); ++k) {
      if (!ir::IsEmptyVar(names[k])) continue;
      names[k] = std::string(ir::kEmptyVarName) + "/op" + std::to_string(index) + "/" + slot +
                 "/" + std::to_string(k);
    }
  }
  return outputs;
}

}  // namespace

// ---- PreparedProgram --------------------------------------------------------------------------

PreparedProgram::~PreparedProgram() {
  // Kernels still queued may read the arena and the staging buffers.
  if (stream_ != nullptr) {
    if (Status s = device_->StreamSynchronize(stream_); !s.ok()) {
      Log().warn("executor: waiting for the stream before freeing: {}", s.message());
    }
  }
  for (auto* bindings : {&feeds_, &fetches_}) {
    for (Binding& b : *bindings) {
      if (b.staging == nullptr) continue;
      if (Status s = device_->HostFree(b.staging); !s.ok()) {
        Log().warn("executor: freeing the staging buffer of '{}': {}", b.name, s.message());
      }
    }
  }
  for (LodSource& l : lod_sources_) {
    if (l.staging == nullptr) continue;
    if (Status s = device_->HostFree(l.staging); !s.ok()) {
      Log().warn("executor: freeing the offsets buffer of '{}': {}", l.feed, s.message());
    }
  }
  for (Derivation& d : derivations_) {
    for (Derivation::Read& r : d.reads) {
      if (r.staging != nullptr) (void)device_->HostFree(r.staging);
    }
    if (d.copied != nullptr) (void)device_->EventDestroy(d.copied);
  }
  if (feeds_copied_ != nullptr) (void)device_->EventDestroy(feeds_copied_);
  calls_.clear();  // kernel state may point into the arena
  if (arena_ != nullptr) {
    if (Status s = device_->Free(ordinal_, arena_); !s.ok()) {
      Log().warn("executor: freeing the arena: {}", s.message());
    }
  }
}

void PreparedProgram::Swap(PreparedProgram& o) {
  std::swap(device_, o.device_);
  std::swap(ordinal_, o.ordinal_);
  std::swap(stream_, o.stream_);
  std::swap(feeds_copied_, o.feeds_copied_);
  std::swap(feeds_pending_, o.feeds_pending_);
  std::swap(program_, o.program_);
  std::swap(feed_shapes_, o.feed_shapes_);
  std::swap(feed_sequences_, o.feed_sequences_);
  std::swap(lod_sources_, o.lod_sources_);
  std::swap(derivations_, o.derivations_);
  std::swap(paddings_, o.paddings_);
  std::swap(fetch_names_, o.fetch_names_);
  std::swap(infos_, o.infos_);
  std::swap(data_, o.data_);
  std::swap(feeds_, o.feeds_);
  std::swap(fetches_, o.fetches_);
  std::swap(calls_, o.calls_);
  std::swap(plan_, o.plan_);
  std::swap(arena_, o.arena_);
  std::swap(scratch_bytes_, o.scratch_bytes_);
  std::swap(op_seconds_, o.op_seconds_);
  std::swap(runs_, o.runs_);
  std::swap(next_launch_index_, o.next_launch_index_);
}

const ops::TensorInfo* PreparedProgram::VarInfo(std::string_view name) const {
  auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

const void* PreparedProgram::VarData(std::string_view name) const {
  auto it = data_.find(name);
  return it == data_.end() ? nullptr : it->second;
}

// ---- Executor ---------------------------------------------------------------------------------

StatusOr<std::unique_ptr<Executor>> Executor::Create(const PluginRegistry& registry,
                                                     std::string_view device,
                                                     ExecutorOptions options) {
  const ComponentRecord* component = registry.Find(FLEET_COMPONENT_DEVICE, device);
  if (component == nullptr) {
    return NotFound("no device component '" + std::string(device) + "' is loaded");
  }
  std::unique_ptr<Executor> exec(new Executor(registry, component, options));
  FLEET_ASSIGN_OR_RETURN(int32_t count, exec->device_.Count());
  if (options.device_ordinal < 0 || options.device_ordinal >= count) {
    return OutOfRange("device '" + std::string(device) + "' has no ordinal " +
                      std::to_string(options.device_ordinal) + " (" + std::to_string(count) +
                      " present)");
  }
  FLEET_ASSIGN_OR_RETURN(DeviceProps props, exec->device_.Props(options.device_ordinal));
  // Buffers are aligned to at least a cache line, and to a power of two.
  size_t align = 64;
  while (align < props.alignment) align *= 2;
  exec->alignment_ = align;
  exec->host_memory_ = (props.caps & FLEET_DEVICE_CAP_HOST_MEMORY) != 0;
  // Sizes are checked against the device's memory before they are allocated; a device that
  // computes in host memory gets no more than this process may use.
  exec->limit_.device = "device '" + std::string(device) + "' " +
                        std::to_string(options.device_ordinal);
  if (props.total_memory > 0) exec->limit_.bytes = props.total_memory;
  if (exec->host_memory_ && HostMemoryBytes() < exec->limit_.bytes) {
    exec->limit_.bytes = HostMemoryBytes();
    exec->limit_.device += " that this process can use";
  }
  exec->scope_.SetMemoryLimit(exec->limit_);
  if (!exec->host_memory_) {
    FLEET_ASSIGN_OR_RETURN(exec->stream_, exec->device_.StreamCreate(options.device_ordinal));
    exec->scope_.SetStream(exec->stream_);
  }
  return exec;
}

Executor::~Executor() {
  if (stream_ == nullptr) return;
  if (Status s = Synchronize(); !s.ok()) Log().warn("executor: {}", s.message());
  cache_.clear();
  scope_.SetStream(nullptr);
  if (Status s = device_.StreamDestroy(stream_); !s.ok()) Log().warn("executor: {}", s.message());
}

Status Executor::Synchronize() const {
  if (stream_ == nullptr) return OkStatus();
  return device_.StreamSynchronize(stream_);
}

// Feeds: declared, non-persistable data vars with a shape that fits the declaration; each
// sequence feed is a source of offsets.
Status Executor::AddFeeds(PreparedProgram& p, LodOf& lod_of) {
  for (const auto& [name, dims] : p.feed_shapes_) {
    const ir::Var* v = p.program_->FindVarRecursive(0, name);
    if (v == nullptr) return InvalidArgument("feed '" + name + "' is not a var of the program");
    if (v->persistable || v->selected_rows) {
      return InvalidArgument("feed '" + name + "' is a " +
                             (v->persistable ? "persistable var" : "sparse gradient") +
                             "; feed data vars only");
    }
    if (!FullyKnown(dims) || !ir::ShapesCompatible(v->shape, dims)) {
      return InvalidArgument("feed '" + name + "' has shape " + ir::ShapeText(dims) +
                             " but the var is declared " + ir::TypeShapeText(v->dtype, v->shape));
    }
    if (auto bytes = ir::TensorBytes(v->dtype, dims); !bytes.ok()) {
      return InvalidArgument("feed '" + name + "': " + bytes.status().message());
    }
    p.infos_[name] = {v->dtype, dims};
    auto seq = p.feed_sequences_.find(name);
    if (v->lod_level == 0) {
      if (seq != p.feed_sequences_.end()) {
        return InvalidArgument("feed '" + name + "' is given a number of sequences but the var "
                               "is dense (declare it with lod_level=1)");
      }
      continue;
    }
    if (seq == p.feed_sequences_.end() || seq->second < 0) {
      return InvalidArgument("feed '" + name + "' is a sequence var (lod_level 1): prepare it "
                             "with its number of sequences");
    }
    if (dims.empty()) return InvalidArgument("feed '" + name + "' has no rows dimension");
    p.infos_[name].lod_level = 1;
    p.infos_[name].sequences = seq->second;
    lod_of[name] = static_cast<int>(p.lod_sources_.size());
    PreparedProgram::LodSource source;
    source.feed = name;
    source.sequences = seq->second;
    source.capacity = dims[0];
    p.lod_sources_.push_back(std::move(source));
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<PreparedProgram>> Executor::Prepare(
    const ir::Program& program, const FeedShapes& feed_shapes,
    const std::vector<std::string>& fetch, const FeedSequences& sequences) {
  const ops::OpRegistry& schemas = ops::BuiltinOps();
  const ir::Block& block = program.global();
  std::unique_ptr<PreparedProgram> prepared(new PreparedProgram());
  PreparedProgram& p = *prepared;
  p.device_ = &device_;
  p.ordinal_ = options_.device_ordinal;
  p.stream_ = stream_;
  p.program_ = &program;
  p.feed_shapes_ = feed_shapes;
  p.feed_sequences_ = sequences;
  p.fetch_names_ = fetch;
  auto& infos = p.infos_;
  // Var -> the offsets it carries (index in p.lod_sources_).
  LodOf lod_of;

  auto declared = [&](const std::string& name) { return program.FindVarRecursive(0, name); };
  auto persistable = [&](const std::string& name) {
    const ir::Var* v = declared(name);
    return v != nullptr && v->persistable;
  };

  FLEET_RETURN_IF_ERROR(AddFeeds(p, lod_of));

  // Values known before the run (fill_constant outputs), for value-dependent shapes.
  std::map<std::string, std::vector<double>> constants;
  // Shapes, kernels and kernel calls, op by op.
  std::vector<OpSlots> op_slots;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    const std::string label = OpLabel(i, op);
    const ops::OpSchema* schema = schemas.Find(op.type);
    if (schema == nullptr) return NotFound(label + ": unknown op type '" + op.type + "'");
    for (const auto& [slot, names] : op.inputs) {
      if (schema->FindInput(slot) == nullptr) {
        return InvalidArgument(label + ": the op has no input slot '" + slot + "'");
      }
    }
    for (const auto& [slot, names] : op.outputs) {
      if (schema->FindOutput(slot) == nullptr) {
        return InvalidArgument(label + ": the op has no output slot '" + slot + "'");
      }
    }

    if (Status s = ops::CheckOpSlots(*schema, op); !s.ok()) {
      return Status(s.code(), label + ": " + s.message());
    }
    const ir::SlotMap outputs = OutputsOf(i, op);
    ops::ShapeContext ctx(*schema, op);
    ctx.values_tracked = true;
    for (const auto& [slot, names] : op.inputs) {
      auto& slot_infos = ctx.inputs[slot];
      auto& slot_values = ctx.input_values[slot];
      for (const std::string& name : names) {
        auto known = constants.find(name);
        slot_values.push_back(known != constants.end() ? known->second : std::vector<double>{});
        auto it = infos.find(name);
        if (it == infos.end()) {
          const ir::Var* v = declared(name);
          if (v == nullptr) {
            return NotFound(label + ": input " + slot + " reads '" + name +
                            "', which is not declared");
          }
          if (!v->persistable) {
            return InvalidArgument(label + ": input " + slot + " reads '" + name +
                                   "', which is not fed and no earlier op writes");
          }
          const ScopeVar* sv = scope_.Find(name);
          if (sv == nullptr) {
            return FailedPrecondition(label + ": input " + slot + " reads persistable '" + name +
                                      "', which is not in the scope (run the startup program "
                                      "first)");
          }
          // A sparse one (a gradient a parameter server received) holds entries of the rows of
          // the tensor it is declared as.
          std::vector<int64_t> dense = sv->dims;
          if (sv->height >= 0) dense[0] = sv->height;
          if (sv->dtype != v->dtype || !ir::ShapesCompatible(v->shape, dense) ||
              v->selected_rows != (sv->height >= 0)) {
            return InvalidArgument(label + ": persistable '" + name + "' is " +
                                   (sv->height >= 0 ? "sparse " : "") +
                                   ir::TypeShapeText(sv->dtype, dense) + " in the scope but declared " +
                                   (v->selected_rows ? "sparse " : "") +
                                   ir::TypeShapeText(v->dtype, v->shape));
          }
          ops::TensorInfo info{sv->dtype, sv->dims};
          info.height = sv->height;
          it = infos.emplace(name, std::move(info)).first;
        }
        slot_infos.push_back(it->second);
      }
    }
    for (const auto& [slot, names] : op.outputs) ctx.outputs[slot].resize(names.size());
    if (Status s = schema->infer_shape(ctx); !s.ok()) {
      return Status(s.code(), label + ": " + s.message());
    }
    if (Status s = ops::ApplyLodRules(*schema, ctx); !s.ok()) {
      return Status(s.code(), label + ": " + s.message());
    }
    if (Status st = CheckSequenceInputs(p, *schema, op, lod_of); !st.ok()) {
      return Status(st.code(), label + ": " + st.message());
    }
    for (const auto& [slot, names] : outputs) {
      const auto& out = ctx.outputs[slot];
      for (size_t k = 0; k < names.size(); ++k) {
        ops::TensorInfo info = k < out.size() ? out[k] : ops::TensorInfo{};
        const ir::Var* v = declared(names[k]);
        if (info.dtype == ir::DataType::kInvalid && v != nullptr && FullyKnown(v->shape)) {
          info = {v->dtype, v->shape};
        }
        if (info.dtype == ir::DataType::kInvalid) {
          return Internal(label + ": the shape function gave output " + slot + " '" + names[k] +
                          "' no dtype");
        }
        if (!FullyKnown(info.dims)) {
          return InvalidArgument(label + ": output " + slot + " '" + names[k] +
                                 "' has an unknown dimension: " + ir::ShapeText(info.dims));
        }
        // Every buffer is sized from these dims; they are checked before any is allocated.
        if (auto bytes = ir::TensorBytes(info.dtype, info.dims); !bytes.ok()) {
          return InvalidArgument(label + ": output " + slot + " '" + names[k] +
                                 "': " + bytes.status().message());
        }
        if (info.selected_rows() && v != nullptr && v->persistable) {
          return InvalidArgument(label + ": output " + slot + " '" + names[k] +
                                 "' would be a sparse gradient (selected_rows), but it is "
                                 "persistable");
        }
        if (info.lod_level != 0 && slot == schema->derive_lod) {
          if (v != nullptr && v->persistable) {
            return InvalidArgument(label + ": output " + slot + " '" + names[k] +
                                   "' would hold sequences, but it is persistable");
          }
          if (Status st = AddDerivation(p, i, op, *schema, names[k], info, lod_of); !st.ok()) {
            return Status(st.code(), label + ": " + st.message());
          }
        } else if (info.lod_level != 0) {
          const int source = FollowedSource(*schema, op, lod_of, slot, k);
          if (source < 0) {
            return Internal(label + ": output " + slot + " '" + names[k] +
                            "' holds sequences, but no sequence input of the op gives them");
          }
          if (v != nullptr && v->persistable) {
            return InvalidArgument(label + ": output " + slot + " '" + names[k] +
                                   "' would hold sequences, but it is persistable");
          }
          if (info.dims.empty() || info.dims[0] != p.lod_sources_[static_cast<size_t>(source)].capacity) {
            return Internal(label + ": sequence output " + slot + " '" + names[k] + "' has " +
                            ir::ShapeText(info.dims) + ", not the rows of its sequences");
          }
          lod_of[names[k]] = source;
        } else {
          lod_of.erase(names[k]);
        }
        if (v != nullptr && v->persistable) {
          auto sv = scope_.GetOrCreate(names[k], info.dtype, info.dims);
          if (!sv.ok()) return Status(sv.status().code(), label + ": " + sv.status().message());
        }
        auto existing = infos.find(names[k]);
        if (existing != infos.end() && existing->second != info) {
          return InvalidArgument(label + ": output " + slot + " '" + names[k] + "' is " +
                                 ir::TypeShapeText(info.dtype, info.dims) + " but is already " +
                                 ir::TypeShapeText(existing->second.dtype, existing->second.dims));
        }
        infos[names[k]] = info;
        // What this op writes is known before the run only when its attributes fix it.
        std::optional<std::vector<double>> fixed;
        if (slot == "Out" && k == 0) fixed = ops::FixedOutputValues(op, info);
        if (fixed) {
          constants[names[k]] = std::move(*fixed);
        } else {
          constants.erase(names[k]);
        }
      }
    }

    // The kernel call, slots in schema order.
    auto LodCount = [&](const std::string& var) -> int64_t {
      auto it = lod_of.find(var);
      return it == lod_of.end() ? 0 : p.lod_sources_[static_cast<size_t>(it->second)].sequences + 1;
    };
    KernelCallArgs args;
    args.op_type = op.type;
    OpSlots slots;
    for (const ops::SlotSpec& spec : schema->inputs) {
      const auto& names = op.Input(spec.name);
      if (names.empty() && !spec.optional) {
        return InvalidArgument(label + ": required input " + spec.name + " is missing");
      }
      SlotShapes shapes{spec.name, {}};
      for (const std::string& n : names) {
        shapes.tensors.push_back({infos[n].dtype, infos[n].dims, LodCount(n), infos[n].height});
      }
      args.inputs.push_back(std::move(shapes));
      slots.inputs.push_back(names);
    }
    for (const ops::SlotSpec& spec : schema->outputs) {
      auto found = outputs.find(spec.name);
      const std::vector<std::string> names =
          found != outputs.end() ? found->second : std::vector<std::string>{};
      if (names.empty() && !spec.optional) {
        return InvalidArgument(label + ": required output " + spec.name + " is missing");
      }
      SlotShapes shapes{spec.name, {}};
      for (const std::string& n : names) {
        shapes.tensors.push_back({infos[n].dtype, infos[n].dims, LodCount(n), infos[n].height});
      }
      args.outputs.push_back(std::move(shapes));
      slots.outputs.push_back(names);
    }
    args.attrs = ops::AttrsWithDefaults(*schema, op);
    if (schema->rpc) {
      for (const auto& slots_of : {&op.inputs, &op.outputs}) {
        for (const auto& [slot, names] : *slots_of) {
          args.attrs[std::string(ops::kSlotNamesAttrPrefix) + slot] = names;
        }
      }
    }
    args.device_type = device_.type_id();
    args.device_ordinal = options_.device_ordinal;
    args.num_threads = options_.num_threads;
    args.seed = OpSeed(options_.seed, i, op);

    const ir::DataType dtype = ops::KernelDtype(*schema, op, [&](const std::string& var) {
      auto it = infos.find(var);
      return it == infos.end() ? ir::DataType::kInvalid : it->second.dtype;
    });
    // Collective ops run on the host's kernels over the communicator, whatever the device.
    StatusOr<std::unique_ptr<KernelCall>> chosen = NotFound("");
    if (schema->collective) {
      const KernelCandidate* k =
          options_.host_kernels != nullptr ? options_.host_kernels->Find(op.type) : nullptr;
      if (k == nullptr) {
        return FailedPrecondition(label + ": a collective op needs a communicator; run the job "
                                          "with [strategy] mode = \"collective\"");
      }
      chosen = KernelCall::Create(*k, args);
    } else if (schema->rpc) {
      // Parameter-server ops likewise run on the host's kernels, over the job's transport.
      const KernelCandidate* k =
          options_.host_kernels != nullptr ? options_.host_kernels->Find(op.type) : nullptr;
      if (k == nullptr) {
        return FailedPrecondition(label + ": a parameter-server op needs a transport; run the "
                                          "job with [strategy] mode = \"pserver\"");
      }
      chosen = KernelCall::Create(*k, args);
    } else {
      chosen = ChooseKernel(registry_, device_.name(), dtype, args, schema->sequence_kernel);
    }
    if (!chosen.ok()) return chosen.status().WithContext(label);
    p.calls_.push_back(std::move(*chosen));
    op_slots.push_back(std::move(slots));
  }

  // Fetches: anything the program touched, or a persistable already in the scope.
  for (const std::string& name : fetch) {
    if (infos.count(name) == 0) {
      const ScopeVar* sv = persistable(name) ? scope_.Find(name) : nullptr;
      if (sv == nullptr) {
        return InvalidArgument("fetch '" + name + "': no feed, op or persistable provides it");
      }
      infos[name] = {sv->dtype, sv->dims};
    }
    if (infos[name].selected_rows()) {
      return InvalidArgument("fetch '" + name + "': a sparse gradient (selected_rows) cannot be "
                             "fetched; fetch the parameter it updates");
    }
  }

  // Liveness of the non-persistable vars, in op order.
  const int num_ops = static_cast<int>(block.ops.size());
  std::map<std::string, VarLifetime> lifetimes;
  auto touch = [&](const std::string& name, int t, bool write) {
    if (persistable(name)) return;
    auto [it, inserted] = lifetimes.try_emplace(name);
    VarLifetime& lt = it->second;
    if (inserted) {
      lt.name = name;
      lt.bytes = Bytes(infos[name]);
      lt.first = write ? t : -1;
      lt.last = t;
    }
    lt.last = std::max(lt.last, t);
  };
  for (const auto& [name, dims] : feed_shapes) touch(name, -1, true);
  for (int i = 0; i < num_ops; ++i) {
    const OpSlots& slots = op_slots[static_cast<size_t>(i)];
    for (const auto& names : slots.inputs) {
      for (const auto& n : names) touch(n, i, false);
    }
    for (const auto& names : slots.outputs) {
      for (const auto& n : names) touch(n, i, true);
    }
  }
  for (const std::string& name : fetch) touch(name, num_ops, false);
  std::vector<VarLifetime> vars;
  for (auto& [name, lt] : lifetimes) vars.push_back(lt);
  // Offsets live through the whole run: fed first, read by any op and by fetches.
  for (const PreparedProgram::LodSource& l : p.lod_sources_) {
    const std::string buffer = LodBufferName(l.feed);
    if (declared(buffer) != nullptr) {
      return InvalidArgument("var '" + buffer + "' has the name the offsets of feed '" + l.feed +
                             "' need");
    }
    vars.push_back({buffer, static_cast<size_t>(l.sequences + 1) * sizeof(int64_t), -1,
                    num_ops});
  }
  p.plan_ = PlanMemory(vars, alignment_);

  // Kernel state, then the arena (buffers + one scratch region shared by every launch, since
  // launches never overlap).
  for (size_t i = 0; i < p.calls_.size(); ++i) {
    auto scratch = p.calls_[i]->Prepare();
    if (!scratch.ok()) {
      return Status(scratch.status().code(),
                    OpLabel(i, block.ops[i]) + ": " + scratch.status().message());
    }
    p.scratch_bytes_ = std::max(p.scratch_bytes_, *scratch);
  }
  size_t scratch_offset = p.plan_.arena_bytes;
  size_t total = 0;
  if (__builtin_add_overflow(scratch_offset, p.scratch_bytes_, &total)) total = SIZE_MAX;
  // Checked before allocating: the batch or a layer's size may make the arena impossible.
  if (std::string over = limit_.Exceeded(total); !over.empty()) {
    return ResourceExhausted("the program's tensors need " + over +
                             LargestVar(vars, infos, block));
  }
  auto arena = device_.Alloc(options_.device_ordinal, total);
  if (!arena.ok()) {
    return Status(arena.status().code(), "the program's tensors (" + BytesText(total) +
                                             LargestVar(vars, infos, block) +
                                             "): " + arena.status().message());
  }
  p.arena_ = *arena;
  auto* base = static_cast<uint8_t*>(p.arena_);
  for (const auto& [name, buffer] : p.plan_.buffer_of) {
    p.data_[name] = base + p.plan_.buffer_offsets[static_cast<size_t>(buffer)];
  }
  for (const auto& [name, info] : infos) {
    if (p.data_.count(name) == 0) {
      const ScopeVar* sv = scope_.Find(name);
      if (sv == nullptr) return Internal("executor: var '" + name + "' has no storage");
      p.data_[name] = sv->data;
    }
  }
  // A SelectedRows var's row indices live right after its values, in the same buffer.
  auto bind = [&](KernelCall& call, bool output, size_t s, size_t k, const std::string& name) {
    void* data = p.data_[name];
    call.SetData(output, s, k, data);
    const ops::TensorInfo& info = infos[name];
    if (info.selected_rows()) {
      call.SetRows(output, s, k,
                   reinterpret_cast<int64_t*>(static_cast<uint8_t*>(data) + RowsOffset(info)));
    }
  };
  for (size_t i = 0; i < p.calls_.size(); ++i) {
    KernelCall& call = *p.calls_[i];
    for (size_t s = 0; s < op_slots[i].inputs.size(); ++s) {
      for (size_t k = 0; k < op_slots[i].inputs[s].size(); ++k) {
        bind(call, false, s, k, op_slots[i].inputs[s][k]);
      }
    }
    for (size_t s = 0; s < op_slots[i].outputs.size(); ++s) {
      for (size_t k = 0; k < op_slots[i].outputs[s].size(); ++k) {
        bind(call, true, s, k, op_slots[i].outputs[s][k]);
      }
    }
    call.SetScratch(p.scratch_bytes_ > 0 ? base + scratch_offset : nullptr);
    call.SetStream(stream_);
  }
  FLEET_RETURN_IF_ERROR(BindSequences(p, op_slots, lod_of));

  auto lod_index = [&](const std::string& name) {
    auto it = lod_of.find(name);
    return it == lod_of.end() ? -1 : it->second;
  };
  for (const auto& [name, dims] : feed_shapes) {
    const ops::TensorInfo& info = infos[name];
    p.feeds_.push_back({name, info.dtype, info.dims, p.data_[name], Bytes(info), nullptr,
                        lod_index(name)});
  }
  for (const std::string& name : fetch) {
    const ops::TensorInfo& info = infos[name];
    p.fetches_.push_back({name, info.dtype, info.dims, p.data_[name], Bytes(info), nullptr,
                          lod_index(name)});
  }
  if (stream_ != nullptr) {
    for (auto* bindings : {&p.feeds_, &p.fetches_}) {
      for (PreparedProgram::Binding& b : *bindings) {
        FLEET_ASSIGN_OR_RETURN(b.staging, device_.HostAlloc(b.bytes));
      }
    }
    FLEET_ASSIGN_OR_RETURN(p.feeds_copied_, device_.EventCreate(options_.device_ordinal));
  }
  prepared->op_seconds_.assign(prepared->calls_.size(), 0.0);
  return prepared;
}

Status Executor::ZeroRows(uint8_t* data, size_t row_bytes, int64_t from, int64_t to) {
  if (to <= from || row_bytes == 0) return OkStatus();
  uint8_t* start = data + static_cast<size_t>(from) * row_bytes;
  const size_t bytes = static_cast<size_t>(to - from) * row_bytes;
  if (host_memory_) {
    std::memset(start, 0, bytes);
    return OkStatus();
  }
  return device_.Memset(options_.device_ordinal, start, 0, bytes, stream_);
}

Status Executor::Run(PreparedProgram& p, const FeedMap& feeds, std::vector<HostTensor>& fetched) {
  const int32_t ordinal = options_.device_ordinal;
  if (!p.lod_sources_.empty()) FLEET_RETURN_IF_ERROR(FitSequences(p, feeds));
  for (const PreparedProgram::Binding& f : p.feeds_) {
    auto it = feeds.find(f.name);
    if (it == feeds.end()) return InvalidArgument("feed '" + f.name + "' is missing");
    const HostTensor& t = it->second;
    if (t.dtype != f.dtype) {
      return InvalidArgument("feed '" + f.name + "' is " + ir::TypeShapeText(t.dtype, t.dims) +
                             " but the var is " + ir::TypeShapeText(f.dtype, f.dims));
    }
    if (f.lod >= 0) {
      PreparedProgram::LodSource& l = p.lod_sources_[static_cast<size_t>(f.lod)];
      FLEET_RETURN_IF_ERROR(CheckFeedOffsets(f.name, t, l.sequences));
      if (t.dims.size() != f.dims.size() ||
          !std::equal(t.dims.begin() + 1, t.dims.end(), f.dims.begin() + 1)) {
        return InvalidArgument("feed '" + f.name + "' has rows of shape " +
                               ir::ShapeText(t.dims) + " but the program was prepared for " +
                               ir::ShapeText(f.dims) + " (rows vary, the rest may not)");
      }
      if (t.bytes.size() != f.bytes / static_cast<size_t>(std::max<int64_t>(f.dims[0], 1)) *
                                static_cast<size_t>(t.dims[0])) {
        return InvalidArgument("feed '" + f.name + "' holds " + std::to_string(t.bytes.size()) +
                               " bytes, not those of " + ir::TypeShapeText(t.dtype, t.dims));
      }
      continue;
    }
    if (!t.lod.empty()) {
      return InvalidArgument("feed '" + f.name + "' brings sequence offsets but the var is "
                             "dense (declare it with lod_level=1)");
    }
    if (t.dims != f.dims) {
      return InvalidArgument("feed '" + f.name + "' has shape " + ir::ShapeText(t.dims) +
                             " but the program was prepared for " + ir::ShapeText(f.dims));
    }
    if (t.bytes.size() != f.bytes) {
      return InvalidArgument("feed '" + f.name + "' holds " + std::to_string(t.bytes.size()) +
                             " bytes, not the " + std::to_string(f.bytes) + " of " +
                             ir::TypeShapeText(f.dtype, f.dims));
    }
  }
  if (stream_ != nullptr && p.feeds_pending_) {
    // The previous run's copies may still be reading the staging buffers about to be rewritten.
    FLEET_RETURN_IF_ERROR(device_.EventSynchronize(p.feeds_copied_));
    p.feeds_pending_ = false;
  }
  for (const PreparedProgram::Binding& f : p.feeds_) {
    if (f.bytes == 0 && f.lod < 0) continue;
    const HostTensor& t = feeds.find(f.name)->second;
    // A sequence feed fills its first rows; the rest of its capacity is zero padding.
    const size_t bytes = f.lod >= 0 ? t.bytes.size() : f.bytes;
    if (host_memory_ && bytes > 0) {
      std::memcpy(f.data, t.bytes.data(), bytes);
    } else if (!host_memory_ && bytes > 0) {
      std::memcpy(f.staging, t.bytes.data(), bytes);
      FLEET_RETURN_IF_ERROR(device_.CopyToDevice(ordinal, f.data, f.staging, bytes, stream_));
    }
    if (f.lod < 0) continue;
    PreparedProgram::LodSource& l = p.lod_sources_[static_cast<size_t>(f.lod)];
    const size_t row_bytes = f.bytes / static_cast<size_t>(std::max<int64_t>(f.dims[0], 1));
    FLEET_RETURN_IF_ERROR(
        ZeroRows(static_cast<uint8_t*>(f.data), row_bytes, t.dims[0], f.dims[0]));
    l.offsets.assign(t.lod.begin(), t.lod.end());
    const size_t lod_bytes = l.offsets.size() * sizeof(int64_t);
    if (host_memory_) {
      std::memcpy(l.data, l.offsets.data(), lod_bytes);
    } else {
      std::memcpy(l.staging, l.offsets.data(), lod_bytes);
      FLEET_RETURN_IF_ERROR(device_.CopyToDevice(ordinal, l.data, l.staging, lod_bytes, stream_));
    }
  }
  if (stream_ != nullptr && !p.feeds_.empty()) {
    FLEET_RETURN_IF_ERROR(device_.EventRecord(p.feeds_copied_, stream_));
    p.feeds_pending_ = true;
  }
  if (feeds.size() != p.feeds_.size()) {
    for (const auto& [name, t] : feeds) {
      if (p.feed_shapes_.count(name) == 0) {
        return InvalidArgument("feed '" + name + "' is not a feed of the prepared program");
      }
    }
  }
  size_t next_derivation = 0;
  for (size_t i = 0; i < p.calls_.size(); ++i) {
    std::chrono::steady_clock::time_point start;
    if (options_.profile) start = std::chrono::steady_clock::now();
    for (; next_derivation < p.derivations_.size() && p.derivations_[next_derivation].op == i;
         ++next_derivation) {
      Status s = Derive(p, p.derivations_[next_derivation]);
      if (!s.ok()) {
        return Status(s.code(), OpLabel(i, p.program_->global().ops[i]) + ": " + s.message());
      }
    }
    Status s = p.calls_[i]->Launch(p.next_launch_index_);
    if (!s.ok()) return Status(s.code(), "op #" + std::to_string(i) + ": " + s.message());
    for (const PreparedProgram::Padding& pad : p.paddings_[i]) {
      const PreparedProgram::LodSource& l = p.lod_sources_[static_cast<size_t>(pad.lod)];
      FLEET_RETURN_IF_ERROR(ZeroRows(pad.data, pad.row_bytes, l.offsets.back(), l.capacity));
    }
    if (options_.profile) {
      p.op_seconds_[i] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  ++p.runs_;
  ++p.next_launch_index_;
  if (fetched.size() != p.fetches_.size()) fetched.resize(p.fetches_.size());
  if (stream_ != nullptr && !p.fetches_.empty()) {
    // The only wait of a step: every fetch is queued behind the kernels, then one sync.
    for (const PreparedProgram::Binding& f : p.fetches_) {
      if (f.bytes == 0) continue;
      FLEET_RETURN_IF_ERROR(device_.CopyToHost(ordinal, f.staging, f.data, f.bytes, stream_));
    }
    FLEET_RETURN_IF_ERROR(device_.StreamSynchronize(stream_));
    p.feeds_pending_ = false;  // the stream passed the feeds' copies too
  }
  for (size_t i = 0; i < p.fetches_.size(); ++i) {
    const PreparedProgram::Binding& f = p.fetches_[i];
    if (f.lod >= 0) {
      // A sequence tensor comes back with this run's rows and offsets, without the padding.
      const PreparedProgram::LodSource& l = p.lod_sources_[static_cast<size_t>(f.lod)];
      std::vector<int64_t> dims = f.dims;
      dims[0] = l.offsets.back();
      fetched[i].Reshape(f.dtype, dims);
      fetched[i].lod.assign(l.offsets.begin(), l.offsets.end());
      if (!fetched[i].bytes.empty()) {
        std::memcpy(fetched[i].bytes.data(), host_memory_ ? f.data : f.staging,
                    fetched[i].bytes.size());
      }
      continue;
    }
    fetched[i].Reshape(f.dtype, f.dims);
    if (f.bytes == 0) continue;
    std::memcpy(fetched[i].bytes.data(), host_memory_ ? f.data : f.staging, f.bytes);
  }
  return OkStatus();
}

Status Executor::Run(const ir::Program& program, const FeedMap& feeds,
                     const std::vector<std::string>& fetch, std::vector<HostTensor>& fetched) {
  for (const auto& entry : cache_) {
    if (entry->program_ != &program || entry->fetch_names_ != fetch ||
        entry->feeds_.size() != feeds.size()) {
      continue;
    }
    bool match = true;
    for (const PreparedProgram::Binding& f : entry->feeds_) {
      auto it = feeds.find(f.name);
      if (it == feeds.end()) {
        match = false;
      } else if (f.lod >= 0) {  // rows may vary (Run grows the capacity), sequences may not
        const HostTensor& t = it->second;
        match = static_cast<int64_t>(t.lod.size()) ==
                    entry->lod_sources_[static_cast<size_t>(f.lod)].sequences + 1 &&
                t.dims.size() == f.dims.size() &&
                std::equal(t.dims.begin() + 1, t.dims.end(), f.dims.begin() + 1);
      } else {
        match = it->second.dims == f.dims;
      }
      if (!match) break;
    }
    if (match) return Run(*entry, feeds, fetched);
  }
  FeedShapes shapes;
  FeedSequences sequences;
  for (const auto& [name, t] : feeds) {
    shapes[name] = t.dims;
    if (!t.lod.empty() && !t.dims.empty()) {
      shapes[name][0] = SequenceCapacity(t.dims[0]);
      sequences[name] = static_cast<int64_t>(t.lod.size()) - 1;
    }
  }
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<PreparedProgram> prepared,
                         Prepare(program, shapes, fetch, sequences));
  cache_.push_back(std::move(prepared));
  return Run(*cache_.back(), feeds, fetched);
}

}  // namespace fleet::exec
