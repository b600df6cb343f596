// A C++ view of kernels components: finding the kernel for (op, device, dtype) and calling it.
//
// A KernelCall binds one kernel to one op with fixed shapes. It owns every argument struct the
// kernel sees (slots, tensor descriptors, attributes), so after Create nothing is allocated:
// the executor sets data pointers with SetData and calls Launch step after step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/fleet_kernels.h"
#include "ir/program.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// One kernel offered by a plugin, with the component it came from.
struct KernelCandidate {
  const ComponentRecord* component = nullptr;  // kind FLEET_COMPONENT_KERNELS
  const FleetKernelDef* def = nullptr;
};

// Every kernel for (op_type, device, dtype) across the registry's kernels components, highest
// priority first; ties keep registration order.
std::vector<KernelCandidate> FindKernels(const PluginRegistry& registry, std::string_view op_type,
                                         std::string_view device, ir::DataType dtype);

// "op_type/device/dtype" triples of every registered kernel, sorted (for listings and tests).
std::vector<std::string> ListKernels(const PluginRegistry& registry);

// Shape of one tensor argument of a KernelCall.
struct TensorShape {
  ir::DataType dtype = ir::DataType::kInvalid;
  std::vector<int64_t> dims;
  // A sequence tensor's offset count (sequences + 1); 0 for a dense tensor. Handed to kernels
  // that declare FLEET_KERNEL_FLAG_SEQUENCES only.
  int64_t lod_count = 0;
  // A SelectedRows tensor's height (the rows of the dense tensor it stands for; dims[0] is its
  // capacity of entries); -1 for any other tensor. Only kernels that declare
  // FLEET_KERNEL_FLAG_SELECTED_ROWS are chosen for a call with one.
  int64_t height = -1;
};

// A slot's tensors by position. An absent optional input is an empty `tensors`.
struct SlotShapes {
  std::string name;
  std::vector<TensorShape> tensors;
};

struct KernelCallArgs {
  std::string op_type;
  std::vector<SlotShapes> inputs;
  std::vector<SlotShapes> outputs;
  ir::AttrMap attrs;              // every schema attribute, defaults filled in
  int32_t device_type = 0;        // the device component's type id
  int32_t device_ordinal = 0;
  int32_t num_threads = 0;
  FleetStream* stream = nullptr;
  uint64_t seed = 0;
};

class KernelCall {
 public:
  // Builds the argument structs; calls nothing in the plugin.
  static std::unique_ptr<KernelCall> Create(const KernelCandidate& kernel, KernelCallArgs args);
  ~KernelCall();  // calls release if prepare made state
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

  // The kernel's `supports` (OK when it has none). Data pointers are NULL.
  Status Supports() const;
  // The kernel's `prepare` (once). Returns the scratch bytes it asked for.
  StatusOr<size_t> Prepare();
  // Points tensor `i` of input (or output) slot `slot` at `data`. Indices are those of the
  // KernelCallArgs this call was created from.
  void SetData(bool output, size_t slot, size_t i, void* data);
  // Points the same tensor's offsets at `lod` (device memory), for a kernel that declares
  // FLEET_KERNEL_FLAG_SEQUENCES; a no-op for any other kernel.
  void SetLod(bool output, size_t slot, size_t i, const int64_t* lod);
  // Points the same tensor's row indices at `rows` (device memory); a no-op for a tensor that
  // is not SelectedRows.
  void SetRows(bool output, size_t slot, size_t i, int64_t* rows);
  // Whether the kernel declares FLEET_KERNEL_FLAG_SEQUENCES.
  bool takes_sequences() const;
  void SetScratch(void* scratch) { context_.scratch = scratch; }
  void SetStream(FleetStream* stream) { context_.stream = stream; }
  // The kernel's `launch`, with FleetKernelContext.launch_index set to `launch_index`. Errors
  // name the op and the plugin.
  Status Launch(uint64_t launch_index);

  const KernelCandidate& kernel() const { return kernel_; }
  const std::string& op_type() const { return args_.op_type; }

 private:
  KernelCall() = default;
  Status Convert(FleetStatus* status, std::string_view slot) const;

  KernelCandidate kernel_;
  KernelCallArgs args_;
  // Argument storage; stable addresses after Create.
  std::vector<std::vector<FleetTensor>> in_tensors_, out_tensors_;
  std::vector<std::vector<const FleetTensor*>> in_ptrs_, out_ptrs_;
  std::vector<FleetTensorSlot> in_slots_, out_slots_;
  std::vector<const FleetTensorSlot*> in_slot_ptrs_, out_slot_ptrs_;
  std::vector<std::string> attr_names_;
  std::vector<std::vector<int64_t>> attr_ints_;
  std::vector<std::vector<double>> attr_floats_;
  std::vector<std::vector<const char*>> attr_strings_;
  std::vector<FleetAttr> attrs_;
  std::vector<const FleetAttr*> attr_ptrs_;
  FleetKernelContext context_{};
  void* state_ = nullptr;
  bool prepared_ = false;
};

// Kernels the host itself provides for the ops whose schema is `collective` (they call a
// communicator rather than a device); the executor takes those ops' kernels from here only.
class HostKernels {
 public:
  virtual ~HostKernels() = default;
  // The kernel for op_type, or nullptr when the host does not provide one. The candidate must
  // stay valid while any KernelCall made from it exists.
  virtual const KernelCandidate* Find(std::string_view op_type) const = 0;
};

// The kernel for `args.op_type` on `device` with `dtype`: candidates are tried by priority and
// the first whose `supports` accepts `args` is returned, not yet prepared. With `sequences`, only
// kernels that declare FLEET_KERNEL_FLAG_SEQUENCES are candidates; for args with a SelectedRows
// tensor, only kernels that declare FLEET_KERNEL_FLAG_SELECTED_ROWS. NOT_FOUND names op, device
// and dtype when no kernel exists, and lists each refusal when all of them refuse.
StatusOr<std::unique_ptr<KernelCall>> ChooseKernel(const PluginRegistry& registry,
                                                   std::string_view device, ir::DataType dtype,
                                                   const KernelCallArgs& args,
                                                   bool sequences = false);

// Whether `def` declares FLEET_KERNEL_FLAG_SEQUENCES (an ABI 1.4 definition never does).
bool TakesSequences(const FleetKernelDef& def);
// Whether `def` declares FLEET_KERNEL_FLAG_SELECTED_ROWS (a definition before ABI 1.6 never does).
bool TakesSelectedRows(const FleetKernelDef& def);

// Fills `out` from `attr` (name must outlive `out`); arrays go to the given storage vectors,
// which must outlive `out` too. Shared with other places that hand attributes to plugins.
void ToFleetAttr(const char* name, const ir::Attribute& attr, std::vector<int64_t>& ints,
                 std::vector<double>& floats, std::vector<const char*>& strings, FleetAttr& out);

}  // namespace fleet
