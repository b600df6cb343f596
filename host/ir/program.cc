#include "ir/program.h"

#include <array>
#include <cstdint>
#include <type_traits>

#include "support/text.h"

namespace fleet::ir {
namespace {

struct DTypeEntry {
  DataType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeEntry, 10> kDTypes{{
    {DataType::kBool, "bool", 1},
    {DataType::kInt8, "int8", 1},
    {DataType::kUInt8, "uint8", 1},
    {DataType::kInt16, "int16", 2},
    {DataType::kInt32, "int32", 4},
    {DataType::kInt64, "int64", 8},
    {DataType::kFloat16, "float16", 2},
    {DataType::kBFloat16, "bfloat16", 2},
    {DataType::kFloat32, "float32", 4},
    {DataType::kFloat64, "float64", 8},
}};

const std::vector<std::string>& EmptyNames() {
  static const std::vector<std::string> empty;
  return empty;
}

}  // namespace

std::string_view DataTypeName(DataType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "invalid";
}

DataType ParseDataType(std::string_view name) {
  for (const auto& e : kDTypes) {
    if (e.name == name) return e.dtype;
  }
  return DataType::kInvalid;
}

size_t DataTypeSize(DataType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 0;
}

int32_t AttrTypeOf(const Attribute& attr) { return static_cast<int32_t>(attr.index()) + 1; }

std::string_view AttrTypeName(int32_t fleet_attr_type) {
  static constexpr std::array<std::string_view, 13> kNames{
      "int",    "int64",   "float", "double",  "bool",    "string", "ints",
      "int64s", "floats", "doubles", "bools", "strings", "block"};
  if (fleet_attr_type < 1 || fleet_attr_type > 13) return "invalid";
  return kNames[static_cast<size_t>(fleet_attr_type - 1)];
}

std::optional<int64_t> AttrAsInt(const Attribute& attr) {
  if (const auto* v = std::get_if<int32_t>(&attr)) return *v;
  if (const auto* v = std::get_if<int64_t>(&attr)) return *v;
  if (const auto* v = std::get_if<bool>(&attr)) return *v ? 1 : 0;
  return std::nullopt;
}

std::optional<double> AttrAsDouble(const Attribute& attr) {
  if (const auto* v = std::get_if<float>(&attr)) return *v;
  if (const auto* v = std::get_if<double>(&attr)) return *v;
  if (const auto* v = std::get_if<int32_t>(&attr)) return *v;
  if (const auto* v = std::get_if<int64_t>(&attr)) return static_cast<double>(*v);
  return std::nullopt;
}

std::optional<bool> AttrAsBool(const Attribute& attr) {
  if (const auto* v = std::get_if<bool>(&attr)) return *v;
  if (const auto* v = std::get_if<int32_t>(&attr)) return *v != 0;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> AttrAsInts(const Attribute& attr) {
  if (const auto* v = std::get_if<std::vector<int64_t>>(&attr)) return *v;
  if (const auto* v = std::get_if<std::vector<int32_t>>(&attr)) {
    return std::vector<int64_t>(v->begin(), v->end());
  }
  return std::nullopt;
}

std::optional<std::vector<double>> AttrAsDoubles(const Attribute& attr) {
  if (const auto* v = std::get_if<std::vector<double>>(&attr)) return *v;
  if (const auto* v = std::get_if<std::vector<float>>(&attr)) {
    return std::vector<double>(v->begin(), v->end());
  }
  if (auto ints = AttrAsInts(attr)) return std::vector<double>(ints->begin(), ints->end());
  return std::nullopt;
}

const std::vector<std::string>& Op::Input(std::string_view slot) const {
  auto it = inputs.find(std::string(slot));
  return it == inputs.end() ? EmptyNames() : it->second;
}

const std::vector<std::string>& Op::Output(std::string_view slot) const {
  auto it = outputs.find(std::string(slot));
  return it == outputs.end() ? EmptyNames() : it->second;
}

std::string_view Op::InputOne(std::string_view slot) const {
  const auto& v = Input(slot);
  return v.empty() ? std::string_view() : std::string_view(v.front());
}

std::string_view Op::OutputOne(std::string_view slot) const {
  const auto& v = Output(slot);
  return v.empty() ? std::string_view() : std::string_view(v.front());
}

const Attribute* Op::FindAttr(std::string_view name) const {
  auto it = attrs.find(std::string(name));
  return it == attrs.end() ? nullptr : &it->second;
}

namespace {

std::vector<std::string> VarsOf(const SlotMap& slots) {
  std::vector<std::string> out;
  for (const auto& [slot, vars] : slots) {
    for (const auto& v : vars) {
      if (!IsEmptyVar(v)) out.push_back(v);
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> Op::InputVars() const { return VarsOf(inputs); }

std::vector<std::string> Op::OutputVars() const { return VarsOf(outputs); }

Op MakeOp(std::string type, SlotMap inputs, SlotMap outputs, AttrMap attrs) {
  Op op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  return op;
}

Var* Block::FindVar(std::string_view name) {
  auto it = vars.find(std::string(name));
  return it == vars.end() ? nullptr : &it->second;
}

const Var* Block::FindVar(std::string_view name) const {
  auto it = vars.find(std::string(name));
  return it == vars.end() ? nullptr : &it->second;
}


Status CheckVarName(std::string_view name) {
  auto refuse = [&](const std::string& why) {
    return InvalidArgument("var name " + QuoteForMessage(name) + " " + why);
  };
  if (name.empty()) return InvalidArgument("a var name is empty");
  if (name.size() > kMaxVarNameBytes) {
    return refuse("is " + std::to_string(name.size()) + " bytes long, more than " +
                  std::to_string(kMaxVarNameBytes));
  }
  if (name == "." || name == "..") return refuse("is a path component, not a name");
  if (IsEmptyVar(name)) {
    return refuse("is reserved: it marks an output entry that is not computed");
  }
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) return refuse("holds a control character");
    if (c == '/' || c == '\\') return refuse("holds a path separator");
    const size_t n = Utf8SequenceLength(name, i);
    if (n == 0) return refuse("is not valid UTF-8");
    if (IsC1Control(name, i, n)) return refuse("holds a control character");
    i += n;
  }
  return OkStatus();
}

StatusOr<Var*> Block::AddVar(Var var) {
  FLEET_RETURN_IF_ERROR(CheckVarName(var.name));
  std::string name = var.name;
  auto [it, inserted] = vars.emplace(name, std::move(var));
  if (!inserted) {
    return AlreadyExists("variable '" + name + "' already exists in block " +
                         std::to_string(index));
  }
  return &it->second;
}

Program::Program() { blocks_.push_back(Block{}); }

int32_t Program::AddBlock(int32_t parent) {
  Block b;
  b.index = num_blocks();
  b.parent = parent;
  blocks_.push_back(std::move(b));
  return blocks_.back().index;
}

const Var* Program::FindVarRecursive(int32_t block, std::string_view name) const {
  // At most num_blocks() hops, so a malformed parent chain (a cycle) cannot loop forever.
  for (int32_t hops = 0; block >= 0 && block < num_blocks() && hops < num_blocks(); ++hops) {
    const Block& b = blocks_[static_cast<size_t>(block)];
    if (const Var* v = b.FindVar(name)) return v;
    block = b.parent;
  }
  return nullptr;
}

Var* Program::FindVarRecursive(int32_t block, std::string_view name) {
  return const_cast<Var*>(std::as_const(*this).FindVarRecursive(block, name));
}

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string TypeShapeText(DataType dtype, const std::vector<int64_t>& dims) {
  return std::string(DataTypeName(dtype)) + ShapeText(dims);
}

bool ShapesCompatible(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  }
  return true;
}

int64_t KnownNumel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

StatusOr<size_t> TensorBytes(DataType dtype, const std::vector<int64_t>& dims) {
  uint64_t bytes = DataTypeSize(dtype);
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument(TypeShapeText(dtype, dims) + " has an unknown dimension");
    if (d != 0 && bytes > kMaxTensorBytes / static_cast<uint64_t>(d)) {
      return InvalidArgument(TypeShapeText(dtype, dims) + " would take more than 2^62 bytes");
    }
    bytes *= static_cast<uint64_t>(d);
  }
  return static_cast<size_t>(bytes);
}

int32_t OpRoleOf(const Op& op) {
  const Attribute* a = op.FindAttr(op_role::kAttr);
  if (a == nullptr) return op_role::kForward;
  return static_cast<int32_t>(AttrAsInt(*a).value_or(op_role::kForward));
}

std::vector<std::string> OpRoleVars(const Op& op) {
  const Attribute* a = op.FindAttr(op_role::kVarAttr);
  if (a == nullptr) return {};
  if (const auto* v = std::get_if<std::vector<std::string>>(a)) return *v;
  return {};
}

std::string GradVarName(std::string_view var) {
  std::string out(var);
  out += kGradSuffix;
  return out;
}

std::string_view ForwardVarName(std::string_view name) {
  if (name.size() <= kGradSuffix.size() || !name.ends_with(kGradSuffix)) return {};
  return name.substr(0, name.size() - kGradSuffix.size());
}

}  // namespace fleet::ir
