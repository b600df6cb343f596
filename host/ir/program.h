// host/ir: the program IR (Program, Block, Var, Op) and its text form (printer and parser).
// Depends on: support/.
//
// The program IR: Program -> Blocks -> Vars and Ops, with Paddle's vocabulary.
//
// A Program is plain data: copying one copies everything, and nothing here allocates behind the
// caller's back or keeps pointers into other programs. Vars of a block are kept sorted by name
// and slots/attributes of an op are kept sorted by name, so printing is deterministic without
// any extra bookkeeping. Ops keep their order: it is the order of execution.
//
// Shapes use -1 for a dimension not known until run time (the batch dimension). A scalar has
// an empty shape.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fleet/fleet_abi.h"
#include "support/status.h"

namespace fleet::ir {

// Element types; the values are the ABI's FLEET_DTYPE_* so they cross the boundary unchanged.
enum class DataType : int32_t {
  kInvalid = FLEET_DTYPE_INVALID,
  kBool = FLEET_DTYPE_BOOL,
  kInt8 = FLEET_DTYPE_INT8,
  kUInt8 = FLEET_DTYPE_UINT8,
  kInt16 = FLEET_DTYPE_INT16,
  kInt32 = FLEET_DTYPE_INT32,
  kInt64 = FLEET_DTYPE_INT64,
  kFloat16 = FLEET_DTYPE_FLOAT16,
  kBFloat16 = FLEET_DTYPE_BFLOAT16,
  kFloat32 = FLEET_DTYPE_FLOAT32,
  kFloat64 = FLEET_DTYPE_FLOAT64,
};

// "float32", "int64", ... (Paddle's spelling).
std::string_view DataTypeName(DataType dtype);
// Inverse of DataTypeName; kInvalid for anything else.
DataType ParseDataType(std::string_view name);
// Bytes per element; 0 for kInvalid.
size_t DataTypeSize(DataType dtype);

// An attribute referring to a sub-block of the same program.
struct BlockRef {
  int32_t index = 0;
  bool operator==(const BlockRef&) const = default;
};

// Alternatives are in the order of FLEET_ATTR_* (index + 1 == FLEET_ATTR_*), which AttrTypeOf
// relies on.
using Attribute = std::variant<int32_t, int64_t, float, double, bool, std::string,
                               std::vector<int32_t>, std::vector<int64_t>, std::vector<float>,
                               std::vector<double>, std::vector<bool>, std::vector<std::string>,
                               BlockRef>;

// FLEET_ATTR_* of an attribute.
int32_t AttrTypeOf(const Attribute& attr);
// "int", "int64", "float", "double", "bool", "string", "ints", "int64s", "floats", "doubles",
// "bools", "strings", "block".
std::string_view AttrTypeName(int32_t fleet_attr_type);

// Numeric attributes converted to the type a reader wants: an int attribute read as int64 or
// double, a float read as double, ints read as int64s, and so on. Returns nullopt when the
// stored type does not convert (a string read as a number, a double read as an int).
std::optional<int64_t> AttrAsInt(const Attribute& attr);
std::optional<double> AttrAsDouble(const Attribute& attr);
std::optional<bool> AttrAsBool(const Attribute& attr);
std::optional<std::vector<int64_t>> AttrAsInts(const Attribute& attr);
std::optional<std::vector<double>> AttrAsDoubles(const Attribute& attr);

// Options of a trainable parameter (Paddle's ParamAttr after layer expansion).
struct ParamInfo {
  bool trainable = true;
  double learning_rate = 1.0;        // multiplies the optimizer's learning rate
  std::string regularizer;           // "" (none), "l2" or "l1"
  double regularization_coeff = 0.0;
  bool operator==(const ParamInfo&) const = default;
};

struct Var {
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;        // -1 = known at run time
  bool persistable = false;
  bool stop_gradient = false;
  std::optional<ParamInfo> param;    // set for parameters (always persistable)
  // 1: a sequence tensor (Paddle's LoD level 1): shape[0] counts rows of all sequences together
  // and the tensor carries offsets saying where each sequence starts (exec::HostTensor::lod).
  // 0: dense. Deeper levels are not supported.
  int32_t lod_level = 0;
  // A SelectedRows var (Paddle's sparse rows, FleetTensor.rows): `shape` is the dense tensor it
  // stands for, [height, ...]; at run time it holds a capacity of (row index, slice) entries
  // fixed at prepare (ops::TensorInfo::height). Only sparse gradients are SelectedRows: never a
  // parameter, fed or fetched, and persistable only where a parameter server receives one (the
  // server sizes its entries; no op may write a persistable one). Written "selected_rows"
  // before the dtype in the text form.
  bool selected_rows = false;
  bool operator==(const Var&) const = default;
};

// The height a growable table's sparse gradient stands for (its rows are ids, any value in
// [0, 2^63 - 1)); the pserver pass declares such gradients [kGrowableHeight, dim].
inline constexpr int64_t kGrowableHeight = INT64_MAX;

using SlotMap = std::map<std::string, std::vector<std::string>>;
using AttrMap = std::map<std::string, Attribute>;

struct Op {
  std::string type;
  SlotMap inputs;    // slot name ("X", "Y", ...) -> var names
  SlotMap outputs;
  AttrMap attrs;

  // The var names of a slot; empty if the op lacks it.
  const std::vector<std::string>& Input(std::string_view slot) const;
  const std::vector<std::string>& Output(std::string_view slot) const;
  // The single var of a slot, or "" if the slot is absent or empty.
  std::string_view InputOne(std::string_view slot) const;
  std::string_view OutputOne(std::string_view slot) const;
  const Attribute* FindAttr(std::string_view name) const;
  // Every var name the op reads / writes, in slot order. Placeholder entries (kEmptyVarName)
  // name no var and are left out; Input/Output above keep them, positions intact.
  std::vector<std::string> InputVars() const;
  std::vector<std::string> OutputVars() const;

  bool operator==(const Op&) const = default;
};

// An op from its type, slots and attributes.
Op MakeOp(std::string type, SlotMap inputs, SlotMap outputs, AttrMap attrs = {});

// Paddle's kEmptyVarName: an entry of an op's output slot that is not computed. Autodiff writes
// it where a duplicable gradient slot has entries nobody needs (a data var among concat's
// inputs), so the remaining entries keep the positions of the forward slot. It names no var:
// it is never declared, read, fetched, communicated or kept across ops; the verifier refuses it
// as an input, and the executor hands the kernel a buffer that lives for that op alone.
inline constexpr std::string_view kEmptyVarName = "@EMPTY@";
inline bool IsEmptyVar(std::string_view name) { return name == kEmptyVarName; }

// Var names are file names too (saved parameters, checkpoints) and appear in messages and JSON,
// so every name entering a program is checked: non-empty, at most kMaxVarNameBytes bytes of
// valid UTF-8, no control characters, no '/' or '\\', not "." or "..", and not kEmptyVarName.
// INVALID_ARGUMENT saying what is wrong, the name quoted by QuoteForMessage (support/text.h).
inline constexpr size_t kMaxVarNameBytes = 1024;
Status CheckVarName(std::string_view name);

struct Block {
  int32_t index = 0;
  int32_t parent = -1;               // -1 for the global block
  std::map<std::string, Var> vars;   // keyed by Var::name
  std::vector<Op> ops;

  Var* FindVar(std::string_view name);
  const Var* FindVar(std::string_view name) const;
  // Adds `var`; INVALID_ARGUMENT for a name CheckVarName refuses, ALREADY_EXISTS if the name
  // is taken in this block.
  StatusOr<Var*> AddVar(Var var);

  bool operator==(const Block&) const = default;
};

class Program {
 public:
  Program();  // one empty global block

  std::vector<Block>& blocks() { return blocks_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  Block& global() { return blocks_[0]; }
  const Block& global() const { return blocks_[0]; }
  Block& block(int32_t index) { return blocks_[static_cast<size_t>(index)]; }
  const Block& block(int32_t index) const { return blocks_[static_cast<size_t>(index)]; }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }

  // Appends an empty block whose parent is `parent` and returns its index.
  int32_t AddBlock(int32_t parent);

  // Looks a var up in `block` and then its ancestors; nullptr if none has it.
  const Var* FindVarRecursive(int32_t block, std::string_view name) const;
  Var* FindVarRecursive(int32_t block, std::string_view name);

  bool operator==(const Program&) const = default;

 private:
  std::vector<Block> blocks_;
};

// "[2, -1, 3]".
std::string ShapeText(const std::vector<int64_t>& dims);
// "float32[2, -1, 3]".
std::string TypeShapeText(DataType dtype, const std::vector<int64_t>& dims);
// Same rank and every pair of known (non-negative) dims equal: -1 matches anything.
bool ShapesCompatible(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// The element count, or -1 when a dim is unknown.
int64_t KnownNumel(const std::vector<int64_t>& dims);

// Tensors hold at most kMaxTensorBytes bytes (2^62), so every element count, byte count and
// offset within one fits int64_t and size_t.
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 62;
// The bytes of a tensor of `dtype` with fully known `dims`, multiplied out without overflow.
// INVALID_ARGUMENT naming the type and shape for an unknown dim or a tensor larger than
// kMaxTensorBytes: sizes that come from input are checked here before anything is allocated.
StatusOr<size_t> TensorBytes(DataType dtype, const std::vector<int64_t>& dims);

// Suffix of gradient variables, as in Paddle ("fc_0.w_0@GRAD").
inline constexpr std::string_view kGradSuffix = "@GRAD";

// Paddle's op roles (framework.proto OpRole), kept in every op's optional "op_role" attribute so
// transpile passes can tell the phases of a training program apart: autodiff marks what it
// appends Backward (the loss-gradient seed Backward|Loss), optimizers mark theirs Optimize and
// the learning-rate schedule LRSched. An op without the attribute is Forward. "op_role_var"
// holds [parameter, gradient] pairs on the op that finally produces each parameter's gradient.
namespace op_role {
inline constexpr int32_t kForward = 0x0000;
inline constexpr int32_t kBackward = 0x0001;
inline constexpr int32_t kOptimize = 0x0002;
inline constexpr int32_t kRPC = 0x0004;       // send/recv/barriers a pserver transpile inserts
inline constexpr int32_t kDist = 0x0008;      // split_byref/concat around them
inline constexpr int32_t kLRSched = 0x0010;
inline constexpr int32_t kLoss = 0x0100;
inline constexpr std::string_view kAttr = "op_role";
inline constexpr std::string_view kVarAttr = "op_role_var";
}  // namespace op_role
// The op's role bits (kForward when it has no op_role attribute).
int32_t OpRoleOf(const Op& op);
// The op's op_role_var list (empty when absent).
std::vector<std::string> OpRoleVars(const Op& op);
std::string GradVarName(std::string_view var);
// "x@GRAD" -> "x"; "" when `name` is not a gradient name.
std::string_view ForwardVarName(std::string_view name);

}  // namespace fleet::ir
