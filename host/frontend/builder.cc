#include "frontend/builder.h"

#include <cmath>
#include <type_traits>

#include "ops/shape_inference.h"

namespace fleet::frontend {
namespace {

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

template <typename T>
constexpr bool kIsNumber = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
                           std::is_same_v<T, float> || std::is_same_v<T, double>;

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// Numeric conversion; a fractional value never becomes an int.
template <typename To, typename From>
std::optional<To> ConvertNumber(From v) {
  if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::floor(v) != v) return std::nullopt;
  }
  return static_cast<To>(v);
}

// One alternative of an attribute converted to another's type, or nullopt. A function
// template of its own rather than a lambda inside a lambda: clang 14 instantiates the discarded
// branches of `if constexpr` in nested generic lambdas.
template <typename To, typename From>
std::optional<ir::Attribute> ConvertAlternative(const From& src) {
  if constexpr (kIsNumber<To> && kIsNumber<From>) {
    auto n = ConvertNumber<To>(src);
    if (!n) return std::nullopt;
    return ir::Attribute(*n);
  } else if constexpr (std::is_same_v<To, std::string> && std::is_same_v<From, int32_t>) {
    auto name = ir::DataTypeName(static_cast<ir::DataType>(src));
    if (name == "invalid") return std::nullopt;
    return ir::Attribute(std::string(name));
  } else if constexpr (kIsNumber<To> && std::is_same_v<From, std::string>) {
    ir::DataType dt = ir::ParseDataType(src);
    if (dt == ir::DataType::kInvalid) return std::nullopt;
    return ir::Attribute(static_cast<To>(static_cast<int32_t>(dt)));
  } else if constexpr (IsVector<To>::value && IsVector<From>::value) {
    using ToE = typename To::value_type;
    using FromE = typename From::value_type;
    if constexpr (kIsNumber<ToE> && kIsNumber<FromE>) {
      To out;
      for (auto e : src) {
        auto n = ConvertNumber<ToE>(e);
        if (!n) return std::nullopt;
        out.push_back(*n);
      }
      return ir::Attribute(std::move(out));
    } else {
      if (src.empty()) return ir::Attribute(To{});
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
}

}  // namespace

std::optional<ir::Attribute> ConvertAttr(const ir::Attribute& value, const ir::Attribute& like) {
  if (value.index() == like.index()) return value;
  return std::visit(
      [&](const auto& target) -> std::optional<ir::Attribute> {
        using To = std::decay_t<decltype(target)>;
        return std::visit(
            [&](const auto& src) -> std::optional<ir::Attribute> {
              return ConvertAlternative<To, std::decay_t<decltype(src)>>(src);
            },
            value);
      },
      like);
}

std::pair<double, double> ComputeFans(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {1.0, 1.0};
  if (shape.size() == 1) return {double(shape[0]), double(shape[0])};
  if (shape.size() == 2) return {double(shape[0]), double(shape[1])};
  double receptive = 1.0;
  for (size_t i = 2; i < shape.size(); ++i) receptive *= double(shape[i]);
  return {double(shape[1]) * receptive, double(shape[0]) * receptive};
}

std::string ProgramBuilder::NewLayerName(std::string_view type) {
  auto it = counters_.find(type);
  if (it == counters_.end()) it = counters_.emplace(std::string(type), 0).first;
  return std::string(type) + "_" + std::to_string(it->second++);
}

std::string ProgramBuilder::NewTmp(std::string_view layer) {
  return NewLayerName(std::string(layer) + ".tmp");
}

Status ProgramBuilder::AddData(const std::string& name, std::vector<int64_t> shape,
                               ir::DataType dtype, int32_t lod_level) {
  if (main_.global().FindVar(name) != nullptr) {
    return InvalidArgument("a variable named '" + name + "' already exists");
  }
  ir::Var v;
  v.name = name;
  v.shape = std::move(shape);
  v.dtype = dtype;
  v.stop_gradient = true;
  v.lod_level = lod_level;
  return main_.global().AddVar(std::move(v)).status();
}

StatusOr<std::string> ProgramBuilder::CreateParameter(std::string_view layer, bool is_bias,
                                                      const std::vector<int64_t>& shape,
                                                      ir::DataType dtype,
                                                      const ParamAttrSpec& attr,
                                                      const InitSpec& default_init) {
  for (int64_t d : shape) {
    if (d <= 0) {
      return InvalidArgument("parameter shape " + ShapeText(shape) +
                             " must have known, positive dims");
    }
  }
  std::string name = attr.name.empty()
                         ? NewLayerName(std::string(layer) + (is_bias ? ".b" : ".w"))
                         : attr.name;
  ir::ParamInfo info;
  info.trainable = attr.trainable;
  info.learning_rate = attr.learning_rate;
  info.regularizer = attr.regularizer;
  info.regularization_coeff = attr.regularization_coeff;
  if (const ir::Var* existing = main_.global().FindVar(name)) {
    // Paddle shares a parameter between layers that name it in their ParamAttr.
    if (!existing->param.has_value()) {
      return InvalidArgument("parameter name '" + name + "' is already used by a variable");
    }
    if (existing->shape != shape || existing->dtype != dtype) {
      return InvalidArgument("parameter '" + name + "' is shared, but this layer needs " +
                             std::string(ir::DataTypeName(dtype)) + ShapeText(shape) +
                             " and it was created as " +
                             std::string(ir::DataTypeName(existing->dtype)) +
                             ShapeText(existing->shape));
    }
    return name;
  }
  // A parameter's shape is fully known; one too large for any tensor is refused at its layer.
  FLEET_RETURN_IF_ERROR(ir::TensorBytes(dtype, shape).status());
  ir::Var v;
  v.name = name;
  v.dtype = dtype;
  v.shape = shape;
  v.persistable = true;
  v.stop_gradient = !attr.trainable;
  v.param = info;
  FLEET_RETURN_IF_ERROR(main_.global().AddVar(v).status());
  FLEET_RETURN_IF_ERROR(startup_.global().AddVar(v).status());
  FLEET_RETURN_IF_ERROR(AppendInitializer(name, shape, dtype, attr.init.value_or(default_init)));
  return name;
}

Status ProgramBuilder::CreatePersistable(const std::string& name,
                                         const std::vector<int64_t>& shape, ir::DataType dtype,
                                         const InitSpec& init) {
  if (main_.global().FindVar(name) != nullptr) {
    return InvalidArgument("a variable named '" + name + "' already exists");
  }
  FLEET_RETURN_IF_ERROR(ir::TensorBytes(dtype, shape).status());
  ir::Var v;
  v.name = name;
  v.dtype = dtype;
  v.shape = shape;
  v.persistable = true;
  v.stop_gradient = true;
  FLEET_RETURN_IF_ERROR(main_.global().AddVar(v).status());
  FLEET_RETURN_IF_ERROR(startup_.global().AddVar(v).status());
  return AppendInitializer(name, shape, dtype, init);
}

Status ProgramBuilder::AppendInitializer(const std::string& var, const std::vector<int64_t>& shape,
                                         ir::DataType dtype, const InitSpec& init) {
  ir::Op op;
  op.outputs["Out"] = {var};
  op.attrs["shape"] = shape;
  op.attrs["dtype"] = static_cast<int32_t>(dtype);
  auto [fan_in, fan_out] = ComputeFans(shape);
  if (init.fan_in) fan_in = *init.fan_in;
  if (init.fan_out) fan_out = *init.fan_out;
  auto uniform = [&](double low, double high) {
    op.type = "uniform_random";
    op.attrs["min"] = static_cast<float>(low);
    op.attrs["max"] = static_cast<float>(high);
    op.attrs["seed"] = static_cast<int32_t>(init.seed);
  };
  auto normal = [&](std::string type, double mean, double std) {
    op.type = std::move(type);
    op.attrs["mean"] = static_cast<float>(mean);
    op.attrs["std"] = static_cast<float>(std);
    op.attrs["seed"] = static_cast<int32_t>(init.seed);
  };
  if (init.kind == "constant") {
    op.type = "fill_constant";
    op.attrs["value"] = static_cast<float>(init.value);
  } else if (init.kind == "uniform") {
    uniform(init.low, init.high);
  } else if (init.kind == "normal") {
    normal("gaussian_random", init.mean, init.std);
  } else if (init.kind == "truncated_normal") {
    normal("truncated_gaussian_random", init.mean, init.std);
  } else if (init.kind == "xavier") {
    if (init.uniform) {
      double limit = std::sqrt(6.0 / (fan_in + fan_out));
      uniform(-limit, limit);
    } else {
      normal("gaussian_random", 0.0, std::sqrt(2.0 / (fan_in + fan_out)));
    }
  } else if (init.kind == "msra") {
    if (init.uniform) {
      double limit = std::sqrt(6.0 / fan_in);
      uniform(-limit, limit);
    } else {
      normal("gaussian_random", 0.0, std::sqrt(2.0 / fan_in));
    }
  } else {
    return Internal("unknown initializer kind '" + init.kind + "'");
  }
  const ops::OpSchema* schema = registry_.Find(op.type);
  if (schema == nullptr) {
    return InvalidArgument("initializer op '" + op.type + "' is not defined");
  }
  FLEET_RETURN_IF_ERROR(NormalizeAttrs(*schema, op));
  startup_.global().ops.push_back(std::move(op));
  return OkStatus();
}

Status ProgramBuilder::NormalizeAttrs(const ops::OpSchema& schema, ir::Op& op) const {
  ir::AttrMap out;
  for (auto& [name, value] : op.attrs) {
    const ops::AttrSpec* spec = schema.FindAttr(name);
    if (spec == nullptr) continue;
    std::optional<ir::Attribute> converted = ConvertAttr(value, spec->default_value);
    if (!converted) {
      return Internal(op.type + ": cannot store attribute '" + name + "' of type " +
                      std::string(ir::AttrTypeName(ir::AttrTypeOf(value))) + " as " +
                      std::string(ir::AttrTypeName(ir::AttrTypeOf(spec->default_value))));
    }
    out.emplace(name, std::move(*converted));
  }
  op.attrs = std::move(out);
  return OkStatus();
}

Status ProgramBuilder::AppendOp(ir::Op op) {
  const ops::OpSchema* schema = registry_.Find(op.type);
  if (schema == nullptr) return InvalidArgument("op type '" + op.type + "' is not defined");
  for (const auto& [slot, vars] : op.inputs) {
    if (schema->FindInput(slot) == nullptr) {
      return Internal(op.type + ": the schema has no input slot " + slot);
    }
  }
  for (const auto& [slot, vars] : op.outputs) {
    if (schema->FindOutput(slot) == nullptr) {
      return Internal(op.type + ": the schema has no output slot " + slot);
    }
  }
  FLEET_RETURN_IF_ERROR(NormalizeAttrs(*schema, op));
  FLEET_RETURN_IF_ERROR(ops::InferAndDeclareOutputs(registry_, main_, 0, op));
  main_.global().ops.push_back(std::move(op));
  return OkStatus();
}

void ProgramBuilder::SetStopGradient(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (ir::Var* v = main_.global().FindVar(n)) v->stop_gradient = true;
  }
}

}  // namespace fleet::frontend
