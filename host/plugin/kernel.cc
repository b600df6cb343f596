#include "plugin/kernel.h"

#include <algorithm>
#include <type_traits>

#include "plugin/host_api.h"

namespace fleet {

std::vector<KernelCandidate> FindKernels(const PluginRegistry& registry, std::string_view op_type,
                                         std::string_view device, ir::DataType dtype) {
  std::vector<KernelCandidate> out;
  for (const ComponentRecord* c : registry.Components(FLEET_COMPONENT_KERNELS)) {
    const auto* table = c->table<FleetKernelsVTable>();
    for (size_t i = 0; i < table->count; ++i) {
      const FleetKernelDef* def = table->kernels[i];
      if (def == nullptr || def->op_type == nullptr || def->device == nullptr) continue;
      if (op_type == def->op_type && device == def->device &&
          def->dtype == static_cast<int32_t>(dtype)) {
        out.push_back({c, def});
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelCandidate& a, const KernelCandidate& b) {
    return a.def->priority > b.def->priority;
  });
  return out;
}

std::vector<std::string> ListKernels(const PluginRegistry& registry) {
  std::vector<std::string> out;
  for (const ComponentRecord* c : registry.Components(FLEET_COMPONENT_KERNELS)) {
    const auto* table = c->table<FleetKernelsVTable>();
    for (size_t i = 0; i < table->count; ++i) {
      const FleetKernelDef* def = table->kernels[i];
      if (def == nullptr || def->op_type == nullptr || def->device == nullptr) continue;
      out.push_back(std::string(def->op_type) + "/" + def->device + "/" +
                    std::string(ir::DataTypeName(static_cast<ir::DataType>(def->dtype))));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool TakesSequences(const FleetKernelDef& def) {
  return def.struct_size >= FLEET_STRUCT_SIZE(FleetKernelDef, flags) &&
         (def.flags & FLEET_KERNEL_FLAG_SEQUENCES) != 0;
}

bool TakesSelectedRows(const FleetKernelDef& def) {
  return def.struct_size >= FLEET_STRUCT_SIZE(FleetKernelDef, flags) &&
         (def.flags & FLEET_KERNEL_FLAG_SELECTED_ROWS) != 0;
}

bool HasSelectedRows(const KernelCallArgs& args) {
  for (const auto* slots : {&args.inputs, &args.outputs}) {
    for (const SlotShapes& slot : *slots) {
      for (const TensorShape& t : slot.tensors) {
        if (t.height >= 0) return true;
      }
    }
  }
  return false;
}

StatusOr<std::unique_ptr<KernelCall>> ChooseKernel(const PluginRegistry& registry,
                                                   std::string_view device, ir::DataType dtype,
                                                   const KernelCallArgs& args, bool sequences) {
  std::string what = "op '" + args.op_type + "' on device '" + std::string(device) +
                     "' with dtype " + std::string(ir::DataTypeName(dtype));
  std::vector<KernelCandidate> candidates = FindKernels(registry, args.op_type, device, dtype);
  if (sequences) {
    std::erase_if(candidates, [](const KernelCandidate& c) { return !TakesSequences(*c.def); });
    what += " that reads sequence offsets (FLEET_KERNEL_FLAG_SEQUENCES)";
  }
  if (HasSelectedRows(args)) {
    std::erase_if(candidates, [](const KernelCandidate& c) { return !TakesSelectedRows(*c.def); });
    what += std::string(sequences ? " and" : " that") +
            " takes SelectedRows (FLEET_KERNEL_FLAG_SELECTED_ROWS; a sparse gradient: build the "
            "embedding with is_sparse=False to keep it dense)";
  }
  if (candidates.empty()) return NotFound("no kernel for " + what);
  std::string refusals;
  for (const KernelCandidate& c : candidates) {
    std::unique_ptr<KernelCall> call = KernelCall::Create(c, args);
    Status s = call->Supports();
    if (s.ok()) return call;
    refusals += "; " + s.message();
  }
  return NotFound("every kernel for " + what + " refused it" + refusals);
}

void ToFleetAttr(const char* name, const ir::Attribute& attr, std::vector<int64_t>& ints,
                 std::vector<double>& floats, std::vector<const char*>& strings, FleetAttr& out) {
  out = FleetAttr{};
  out.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
  out.name = name;
  out.type = ir::AttrTypeOf(attr);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
                      std::is_same_v<T, bool>) {
          out.i = static_cast<int64_t>(v);
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          out.f = static_cast<double>(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.s = v.c_str();
          out.s_len = v.size();
        } else if constexpr (std::is_same_v<T, ir::BlockRef>) {
          out.i = v.index;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          strings.clear();
          for (const auto& s : v) strings.push_back(s.c_str());
          out.count = strings.size();
          out.strings = strings.data();
        } else if constexpr (std::is_same_v<T, std::vector<float>> ||
                             std::is_same_v<T, std::vector<double>>) {
          floats.assign(v.begin(), v.end());
          out.count = floats.size();
          out.floats = floats.data();
        } else {  // int32, int64 and bool lists
          ints.assign(v.begin(), v.end());
          out.count = ints.size();
          out.ints = ints.data();
        }
      },
      attr);
}

std::unique_ptr<KernelCall> KernelCall::Create(const KernelCandidate& kernel,
                                               KernelCallArgs args) {
  std::unique_ptr<KernelCall> call(new KernelCall());
  call->kernel_ = kernel;
  call->args_ = std::move(args);
  KernelCallArgs& a = call->args_;
  const bool sequences = TakesSequences(*kernel.def);
  const bool selected_rows = TakesSelectedRows(*kernel.def);

  auto build = [&](std::vector<SlotShapes>& slots, std::vector<std::vector<FleetTensor>>& tensors,
                   std::vector<std::vector<const FleetTensor*>>& ptrs,
                   std::vector<FleetTensorSlot>& slot_structs,
                   std::vector<const FleetTensorSlot*>& slot_ptrs) {
    tensors.resize(slots.size());
    ptrs.resize(slots.size());
    slot_structs.resize(slots.size());
    for (size_t s = 0; s < slots.size(); ++s) {
      tensors[s].resize(slots[s].tensors.size());
      for (size_t i = 0; i < slots[s].tensors.size(); ++i) {
        const TensorShape& shape = slots[s].tensors[i];
        FleetTensor& t = tensors[s][i];
        t = FleetTensor{};
        t.struct_size = FLEET_STRUCT_SIZE(FleetTensor, height);
        t.dtype = static_cast<int32_t>(shape.dtype);
        t.ndim = static_cast<int32_t>(shape.dims.size());
        t.dims = shape.dims.data();
        t.device_type = a.device_type;
        t.device_ordinal = a.device_ordinal;
        // A kernel that does not read offsets sees the dense rows (padding included).
        t.lod_count = sequences ? shape.lod_count : 0;
        // ChooseKernel hands a SelectedRows tensor only to a kernel that takes one.
        t.height = selected_rows ? shape.height : -1;
        ptrs[s].push_back(&t);
      }
      FleetTensorSlot& fs = slot_structs[s];
      fs = FleetTensorSlot{};
      fs.struct_size = FLEET_STRUCT_SIZE(FleetTensorSlot, tensors);
      fs.name = slots[s].name.c_str();
      fs.count = ptrs[s].size();
      fs.tensors = ptrs[s].data();
    }
    for (auto& fs : slot_structs) slot_ptrs.push_back(&fs);
  };
  build(a.inputs, call->in_tensors_, call->in_ptrs_, call->in_slots_, call->in_slot_ptrs_);
  build(a.outputs, call->out_tensors_, call->out_ptrs_, call->out_slots_, call->out_slot_ptrs_);

  const size_t n = a.attrs.size();
  call->attr_names_.reserve(n);
  call->attr_ints_.resize(n);
  call->attr_floats_.resize(n);
  call->attr_strings_.resize(n);
  call->attrs_.resize(n);
  size_t k = 0;
  for (const auto& [name, value] : a.attrs) {
    call->attr_names_.push_back(name);
    ToFleetAttr(call->attr_names_.back().c_str(), value, call->attr_ints_[k],
                call->attr_floats_[k], call->attr_strings_[k], call->attrs_[k]);
    ++k;
  }
  for (auto& at : call->attrs_) call->attr_ptrs_.push_back(&at);

  FleetKernelContext& c = call->context_;
  c.struct_size = FLEET_STRUCT_SIZE(FleetKernelContext, launch_index);
  c.op_type = a.op_type.c_str();
  c.num_inputs = call->in_slot_ptrs_.size();
  c.inputs = call->in_slot_ptrs_.data();
  c.num_outputs = call->out_slot_ptrs_.size();
  c.outputs = call->out_slot_ptrs_.data();
  c.num_attrs = call->attr_ptrs_.size();
  c.attrs = call->attr_ptrs_.data();
  c.device_ordinal = a.device_ordinal;
  c.num_threads = a.num_threads;
  c.stream = a.stream;
  c.seed = a.seed;
  return call;
}

KernelCall::~KernelCall() {
  if (prepared_ && kernel_.def->release != nullptr) {
    kernel_.def->release(kernel_.component->ctx, state_);
  }
}

Status KernelCall::Convert(FleetStatus* status, std::string_view slot) const {
  return TakeStatus(status, "kernel " + args_.op_type + " (plugin '" +
                                kernel_.component->plugin + "', " + std::string(slot) + ")");
}

Status KernelCall::Supports() const {
  if (kernel_.def->supports == nullptr) return OkStatus();
  return Convert(kernel_.def->supports(kernel_.component->ctx, &context_), "supports");
}

StatusOr<size_t> KernelCall::Prepare() {
  size_t scratch = 0;
  if (kernel_.def->prepare != nullptr) {
    FLEET_RETURN_IF_ERROR(
        Convert(kernel_.def->prepare(kernel_.component->ctx, &context_, &state_, &scratch),
                "prepare"));
  }
  prepared_ = true;
  return scratch;
}

void KernelCall::SetData(bool output, size_t slot, size_t i, void* data) {
  (output ? out_tensors_ : in_tensors_)[slot][i].data = data;
}

void KernelCall::SetLod(bool output, size_t slot, size_t i, const int64_t* lod) {
  FleetTensor& t = (output ? out_tensors_ : in_tensors_)[slot][i];
  if (t.lod_count > 0) t.lod = lod;
}

void KernelCall::SetRows(bool output, size_t slot, size_t i, int64_t* rows) {
  FleetTensor& t = (output ? out_tensors_ : in_tensors_)[slot][i];
  if (t.height >= 0) t.rows = rows;
}

bool KernelCall::takes_sequences() const { return TakesSequences(*kernel_.def); }

Status KernelCall::Launch(uint64_t launch_index) {
  context_.launch_index = launch_index;
  // The hot path: build no message unless the kernel failed.
  FleetStatus* s = kernel_.def->launch(kernel_.component->ctx, &context_, state_);
  if (s == nullptr) return OkStatus();
  return Convert(s, "launch");
}

}  // namespace fleet
