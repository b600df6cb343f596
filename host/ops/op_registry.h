// host/ops: the op schemas (slots, attributes, shape inference, gradient rules) and the
// verifier that checks whole programs against them.
// Depends on: ir/, support/.
//
// Op schemas: for every op type the host knows, its slots, attributes with defaults, shape
// inference and gradient rule. Kernels live in device plugins; everything else about an op
// lives here, so a program can be checked, differentiated and shaped without any plugin.
//
// Vocabulary is Paddle's: slot names "X", "Y", "Out", attribute names "x_num_col_dims", gradient
// ops "<type>_grad" whose slots are the forward slots plus "<Out>@GRAD" inputs and "<In>@GRAD"
// outputs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/program.h"
#include "support/status.h"

namespace fleet::ops {

struct SlotSpec {
  std::string name;
  bool optional = false;     // may be absent or empty
  bool duplicable = false;   // may hold several vars
  bool no_grad = false;      // inputs only: never differentiated (labels, indices, seeds)
};

struct AttrSpec {
  std::string name;
  ir::Attribute default_value;  // also fixes the attribute's type
};

// What a shape function sees. `inputs` has an entry per present input slot, one TensorInfo per
// var; `outputs` has an entry per output slot the op uses, pre-sized to its var count, for the
// shape function to fill in. Dims of -1 are unknown (the batch dimension before run time):
// shape functions propagate them and skip them in consistency checks.
//
// A sequence tensor (lod_level 1, Paddle's LoD) has rows of several sequences in dims[0]; before
// run time that dim is -1, and in the executor it is a capacity (padding rows past the last
// sequence are zero, see FleetTensor.lod). `sequences` is how many sequences it holds (-1 before
// run time).
struct TensorInfo {
  ir::DataType dtype = ir::DataType::kInvalid;
  std::vector<int64_t> dims;
  int32_t lod_level = 0;
  int64_t sequences = -1;
  // A SelectedRows tensor (ir::Var::selected_rows, FleetTensor.rows): the height of the dense
  // tensor it stands for, `dims` being [entries, dense dims after the first...], the entries a
  // capacity fixed at prepare (-1 before run time). -1 for every other tensor.
  int64_t height = -1;
  bool operator==(const TensorInfo&) const = default;
  bool selected_rows() const { return height >= 0; }
};

// What a shape function sees for a declared var (a SelectedRows var: entries unknown, height
// its declared first dim), and the shape a var is declared with for an inferred tensor (a
// SelectedRows tensor's dense shape, [height, ...]).
TensorInfo InfoOfVar(const ir::Var& v);
std::vector<int64_t> DeclaredShape(const TensorInfo& info);

// See OpSchema::rpc.
inline constexpr std::string_view kSlotNamesAttrPrefix = "@names@";

struct OpSchema;

class ShapeContext {
 public:
  ShapeContext(const OpSchema& schema, const ir::Op& op) : schema_(schema), op_(op) {}

  std::map<std::string, std::vector<TensorInfo>> inputs;
  std::map<std::string, std::vector<TensorInfo>> outputs;

  // Input values known before the program runs, for the few shape functions whose output
  // shape depends on them (range). `values_tracked` says whether the caller knows values at
  // all: the executor does (what fill_constant writes, see FixedOutputValues), and so does
  // the conformance harness (its input tensors); program building does not. Untracked, such a
  // shape function leaves the dims unknown (-1); tracked but without a value for the var (it
  // is computed at run time), it reports that its shape cannot be fixed.
  bool values_tracked = false;
  std::map<std::string, std::vector<std::vector<double>>> input_values;  // slot -> per var

  const ir::Op& op() const { return op_; }
  bool HasInput(std::string_view slot) const;
  bool HasOutput(std::string_view slot) const;
  // Slot `slot`, var `i`. Asking for an absent one is a bug in the shape function (asserted);
  // check HasInput for optional slots.
  const TensorInfo& Input(std::string_view slot, size_t i = 0) const;
  TensorInfo& Output(std::string_view slot, size_t i = 0);
  size_t InputCount(std::string_view slot) const;
  // The known values of input `slot` var `i`, or nullptr.
  const std::vector<double>* InputValue(std::string_view slot, size_t i = 0) const;
  size_t OutputCount(std::string_view slot) const;

  // The attribute as set on the op, else the schema's default. Asking for an attribute the
  // schema lacks is a bug (asserted).
  const ir::Attribute& Attr(std::string_view name) const;
  int64_t IntAttr(std::string_view name) const;
  double FloatAttr(std::string_view name) const;
  bool BoolAttr(std::string_view name) const;
  std::string StringAttr(std::string_view name) const;
  std::vector<int64_t> IntsAttr(std::string_view name) const;
  std::vector<double> FloatsAttr(std::string_view name) const;

  // INVALID_ARGUMENT "<op type>: message" for shape functions to return.
  Status Error(std::string_view message) const;

 private:
  const OpSchema& schema_;
  const ir::Op& op_;
};

using ShapeFn = std::function<Status(ShapeContext&)>;

// Builds the gradient ops of one forward op, Paddle style: reads the forward op's vars, writes
// "<var>@GRAD" for the inputs it differentiates, reads "<out>@GRAD" for the outputs. Autodiff
// renames and prunes afterwards (no-grad inputs, fan-out accumulation); a grad maker always emits
// every input gradient it can compute.
using GradFn = std::function<std::vector<ir::Op>(const ir::Op& forward)>;

// What an op whose sequence output has offsets of its own (OpSchema::derive_lod) makes them
// from, at run time, before its kernel launches. Filled by the executor, and by the conformance
// harness, which runs kernels without one.
struct LodDeriveInputs {
  const ir::Op* op = nullptr;
  // Per input slot, per var: the offsets that var carries in this run, or nullptr when dense.
  std::map<std::string, std::vector<const std::vector<int64_t>*>, std::less<>> offsets;
  // Per slot of OpSchema::derive_reads, per var: its values (int32 and int64 read as int64).
  std::map<std::string, std::vector<std::vector<int64_t>>, std::less<>> values;
  int64_t capacity = 0;   // rows the output holds: its dims[0] from the shape function
  int64_t sequences = 0;  // the output's sequences, from the shape function
};
// Writes the output's sequences + 1 offsets; an error for values the op cannot take (a slice
// past its sequence, a length over the padded length) names the op, the slot and the sequence.
// The caller checks the result rises from 0 to at most `capacity` as well.
using LodDeriveFn = std::function<Status(const LodDeriveInputs&, std::vector<int64_t>& offsets)>;

struct OpSchema {
  std::string type;
  std::vector<SlotSpec> inputs;
  std::vector<SlotSpec> outputs;
  std::vector<AttrSpec> attrs;
  ShapeFn infer_shape;         // required
  GradFn grad;                 // empty: not differentiable
  // The slot (input or output) whose first var's dtype selects the kernel; "" = the first
  // declared input slot that is present, else the first output slot.
  std::string kernel_dtype_slot;
  std::string summary;
  // Run by the host over the job's communicator (a collective op), never by a device kernel.
  bool collective = false;
  // Sequence tensors (TensorInfo::lod_level 1). An op takes them in one of two ways, or refuses
  // them (the executor says which input and op):
  //  - `lod_share`: (output slot, input slot) pairs. The op treats rows alone, so its kernels
  //    see plain dense tensors; each listed output has one row per row of the input and takes
  //    its sequences. Unlisted outputs are dense. An empty output slot takes the input as rows
  //    with no output following it, right where zero padding rows add nothing (a gradient
  //    summed over rows). (lookup_table_v2: Out follows Ids; its grad takes Ids and Out@GRAD.)
  //  - `sequence_kernel`: the op reads the offsets (sequence_pool, ...). Only kernels that
  //    declare FLEET_KERNEL_FLAG_SEQUENCES are chosen; the shape function sets lod_level and
  //    sequences of its outputs, and a sequence output shares the offsets of the op's first
  //    sequence input.
  //    A sequence kernel's output may instead follow an input listed for it in `lod_share`
  //    (sequence_concat_grad: X@GRAD k follows X k).
  std::vector<std::pair<std::string, std::string>> lod_share;
  bool sequence_kernel = false;
  // A sequence kernel whose inputs may hold different sequences (those of several feeds, or an
  // input and an output with offsets of its own): it reads each tensor's own offsets, so the
  // executor does not require its sequence inputs to share one set.
  bool mixed_sequences = false;
  // A sequence kernel whose output slot `derive_lod` has offsets of its own (sequence_concat,
  // sequence_slice, sequence_unpad). The shape function sets that output's dims[0] to the most
  // rows it can hold and its sequences; before each launch the executor calls `derive_offsets`
  // with the inputs' offsets and the values of the slots in `derive_reads`, which it reads to
  // the host (on a device without host memory that waits for the stream: the lengths are data).
  std::string derive_lod;
  std::vector<std::string> derive_reads;
  LodDeriveFn derive_offsets;
  // Run by the host over the job's transport (a parameter-server RPC op: send, recv, barriers,
  // listen_and_serv), never by a device kernel. A transport addresses variables by name, which
  // the kernel ABI does not carry, so the executor hands these kernels, besides the schema's
  // attributes, one strings attribute per slot, kSlotNamesAttrPrefix + slot ("@names@X"),
  // holding that slot's var names in order.
  bool rpc = false;
  // Input slots that may hold SelectedRows tensors (sparse gradients); a SelectedRows var in any
  // other slot is refused at shape inference, naming the op, the slot and the var. The shape
  // function decides which outputs are SelectedRows (TensorInfo::height), and the executor
  // chooses only kernels that declare FLEET_KERNEL_FLAG_SELECTED_ROWS for an op with one.
  std::vector<std::string> selected_rows_inputs;

  const SlotSpec* FindInput(std::string_view name) const;
  const SlotSpec* FindOutput(std::string_view name) const;
  // Also finds the attributes every op may carry (op_role, op_role_var; see ir/program.h).
  const AttrSpec* FindAttr(std::string_view name) const;
};

// Paddle's DefaultGradOpMaker: a "<type>_grad" op (or `grad_type`) whose inputs are every
// forward input and output plus "<Out>@GRAD" for every output slot, and whose outputs are
// "<In>@GRAD" for every input slot not marked no_grad, with the forward attributes.
GradFn DefaultGrad(const OpSchema& forward_schema, std::string grad_type = "");

class OpRegistry {
 public:
  // INVALID_ARGUMENT for a schema without a type or shape function, ALREADY_EXISTS for a
  // duplicate type.
  Status Register(OpSchema schema);
  const OpSchema* Find(std::string_view type) const;
  std::vector<std::string> Types() const;  // sorted

 private:
  std::map<std::string, OpSchema, std::less<>> schemas_;
};

// Every op the host defines (built once, on first use; thread-safe).
const OpRegistry& BuiltinOps();

// The slot checks every shape function relies on: each required input slot holds a var, a
// non-duplicable slot holds at most one, and no slot is unknown to the schema. Errors name the
// op type and the slot.
Status CheckOpSlots(const OpSchema& schema, const ir::Op& op);

// The dtype that selects `op`'s kernel: the first var of the schema's kernel_dtype_slot (input
// or output), else of the first declared input slot the op uses, else of the first output slot.
// `dtype_of` gives a var's dtype (kInvalid when unknown). Called at prepare, not per step.
ir::DataType KernelDtype(const OpSchema& schema, const ir::Op& op,
                        const std::function<ir::DataType(const std::string& var)>& dtype_of);

// Attributes of `op` with every schema default filled in.
ir::AttrMap AttrsWithDefaults(const OpSchema& schema, const ir::Op& op);

// Registers a built-in schema. A failure is a bug in the host (a duplicate type, a schema
// without a shape function), reported on stderr before aborting.
void RegisterBuiltin(OpRegistry& registry, OpSchema schema);

// The product of dims[begin, end), or -1 when one of them is unknown.
int64_t ProductOrUnknown(const std::vector<int64_t>& dims, size_t begin, size_t end);

// Groups of built-in ops, each defined in its own file and called once by BuiltinOps().
void RegisterMathOps(OpRegistry& registry);       // math_ops.cc: mul, matmul_v2, elementwise,
                                                  // scale, sum, mean, reductions, activations,
                                                  // softmax, log_softmax
void RegisterNnOps(OpRegistry& registry);         // nn_ops.cc: losses, conv2d, pool2d, norms,
                                                  // dropout, lookup_table_v2, accuracy, top_k_v2
void RegisterTensorOps(OpRegistry& registry);     // tensor_ops.cc: reshape2, transpose2, flatten,
                                                  // concat, split, slice, cast, fill_constant,
                                                  // assign, random initializers
void RegisterOptimizerOps(OpRegistry& registry);  // optimizer_ops.cc: sgd, momentum, adam(w),
                                                  // learning-rate schedules, clipping helpers
void RegisterOptimizerExtOps(OpRegistry& registry);  // optimizer_ext_ops.cc: adagrad, rmsprop,
                                                     // lamb, clip_by_norm
void RegisterCollectiveOps(OpRegistry& registry);  // collective_ops.cc: c_allreduce_*,
                                                  // c_broadcast, c_comm_init, syncs
void RegisterPserverOps(OpRegistry& registry);    // pserver_ops.cc: send, recv, send_barrier,
                                                  // fetch_barrier, listen_and_serv, split_byref,
                                                  // split_selected_rows

}  // namespace fleet::ops
