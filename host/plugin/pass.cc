#include "plugin/pass.h"

#include <limits>

#include "fleet/fleet_pass.h"
#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "plugin/host_api.h"
#include "plugin/kernel.h"
#include "plugin/program_api.h"
#include "support/text.h"

namespace fleet {
namespace {

std::string PassName(const ComponentRecord& pass) {
  return "pass '" + pass.name + "' (plugin '" + pass.plugin + "')";
}

bool IsIntType(int32_t t) { return t == FLEET_ATTR_INT || t == FLEET_ATTR_INT64; }
bool IsRealType(int32_t t) { return t == FLEET_ATTR_FLOAT || t == FLEET_ATTR_DOUBLE; }
bool IsIntsType(int32_t t) { return t == FLEET_ATTR_INTS || t == FLEET_ATTR_INT64S; }
bool IsRealsType(int32_t t) { return t == FLEET_ATTR_FLOATS || t == FLEET_ATTR_DOUBLES; }
bool IsListType(int32_t t) { return t >= FLEET_ATTR_INTS && t <= FLEET_ATTR_STRINGS; }

bool FitsInt32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

size_t ListSize(const ir::Attribute& a) {
  return std::visit(
      [](const auto& v) -> size_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return 0;
        } else if constexpr (requires { v.size(); }) {
          return v.size();
        } else {
          return 0;
        }
      },
      a);
}

// `given` in the type of `declared`, or nullopt when the kinds differ or the value does not fit.
std::optional<ir::Attribute> ConvertOption(const ir::Attribute& given,
                                           const ir::Attribute& declared) {
  int32_t g = ir::AttrTypeOf(given), d = ir::AttrTypeOf(declared);
  if (g == d) return given;
  if (IsIntType(d) && IsIntType(g)) {
    int64_t v = *ir::AttrAsInt(given);
    if (d == FLEET_ATTR_INT64) return ir::Attribute(v);
    if (!FitsInt32(v)) return std::nullopt;
    return ir::Attribute(static_cast<int32_t>(v));
  }
  if (IsRealType(d) && (IsIntType(g) || IsRealType(g))) {
    double v = *ir::AttrAsDouble(given);
    if (d == FLEET_ATTR_FLOAT) return ir::Attribute(static_cast<float>(v));
    return ir::Attribute(v);
  }
  if (IsListType(d) && IsListType(g) && ListSize(given) == 0) {
    // An empty list of any element type stands for an empty list of the declared one.
    ir::Attribute out = declared;
    std::visit(
        [](auto& v) {
          if constexpr (requires { v.clear(); }) v.clear();
        },
        out);
    return out;
  }
  if (IsIntsType(d) && IsIntsType(g)) {
    std::vector<int64_t> v = *ir::AttrAsInts(given);
    if (d == FLEET_ATTR_INT64S) return ir::Attribute(std::move(v));
    std::vector<int32_t> narrow;
    for (int64_t x : v) {
      if (!FitsInt32(x)) return std::nullopt;
      narrow.push_back(static_cast<int32_t>(x));
    }
    return ir::Attribute(std::move(narrow));
  }
  if (IsRealsType(d) && (IsIntsType(g) || IsRealsType(g))) {
    std::vector<double> v = *ir::AttrAsDoubles(given);
    if (d == FLEET_ATTR_DOUBLES) return ir::Attribute(std::move(v));
    return ir::Attribute(std::vector<float>(v.begin(), v.end()));
  }
  return std::nullopt;
}

}  // namespace

StatusOr<ir::AttrMap> PassOptionDefaults(const ComponentRecord& pass) {
  if (pass.kind != FLEET_COMPONENT_PASS) {
    return InvalidArgument(ComponentKindName(pass.kind) + " '" + pass.name + "' is not a pass");
  }
  const auto* vt = pass.table<FleetPassVTable>();
  if (vt->num_options > 0 && vt->options == nullptr) {
    return InvalidArgument(PassName(pass) + " declares " + std::to_string(vt->num_options) +
                           " options but its options array is NULL");
  }
  ir::AttrMap defaults;
  for (size_t i = 0; i < vt->num_options; ++i) {
    const FleetAttr* a = vt->options[i];
    std::string what = PassName(pass) + ": option " + std::to_string(i);
    if (a == nullptr || a->struct_size < FLEET_STRUCT_SIZE(FleetAttr, strings) ||
        a->name == nullptr || *a->name == '\0') {
      return InvalidArgument(what + " is NULL, too small or unnamed");
    }
    FLEET_ASSIGN_OR_RETURN(ir::Attribute value,
                           FromFleetAttr(*a, what + " '" + std::string(a->name) + "'"));
    if (!defaults.emplace(a->name, std::move(value)).second) {
      return InvalidArgument(what + ": '" + std::string(a->name) + "' is declared twice");
    }
  }
  return defaults;
}

StatusOr<ir::AttrMap> ResolvePassOptions(const ComponentRecord& pass, const ir::AttrMap& given) {
  FLEET_ASSIGN_OR_RETURN(ir::AttrMap options, PassOptionDefaults(pass));
  std::vector<std::string> names;
  for (const auto& [name, value] : options) names.push_back(name);
  for (const auto& [name, value] : given) {
    auto it = options.find(name);
    if (it == options.end()) {
      std::string close = ClosestMatch(name, names);
      return InvalidArgument(
          PassName(pass) + " has no option '" + name + "'" +
          (close.empty() ? "" : " (did you mean '" + close + "'?)") + "; it accepts " +
          (names.empty() ? std::string("none") : JoinWords(names)));
    }
    std::optional<ir::Attribute> converted = ConvertOption(value, it->second);
    if (!converted) {
      return InvalidArgument(PassName(pass) + ": option '" + name + "' is " +
                             std::string(ir::AttrTypeName(ir::AttrTypeOf(it->second))) +
                             ", got " + std::string(ir::AttrTypeName(ir::AttrTypeOf(value))) +
                             " " + ir::PrintAttribute(value));
    }
    it->second = std::move(*converted);
  }
  return options;
}

Status RunPass(const ComponentRecord& pass, std::map<std::string, ir::Program>& programs,
               const PassContextInfo& ctx, const ir::AttrMap& options,
               const ops::OpRegistry& registry) {
  FLEET_ASSIGN_OR_RETURN(ir::AttrMap resolved, ResolvePassOptions(pass, options));
  const auto* vt = pass.table<FleetPassVTable>();
  if (vt->run == nullptr) return Internal(PassName(pass) + " has no run slot");

  // Options as FleetAttr; the storage vectors are sized up front because attrs point into them.
  size_t n = resolved.size();
  std::vector<std::vector<int64_t>> ints(n);
  std::vector<std::vector<double>> floats(n);
  std::vector<std::vector<const char*>> strings(n);
  std::vector<FleetAttr> attrs(n);
  std::vector<const FleetAttr*> attr_ptrs;
  size_t i = 0;
  for (const auto& [name, value] : resolved) {
    ToFleetAttr(name.c_str(), value, ints[i], floats[i], strings[i], attrs[i]);
    attr_ptrs.push_back(&attrs[i]);
    ++i;
  }

  std::vector<const char*> endpoints;
  for (const auto& e : ctx.pserver_endpoints) endpoints.push_back(e.c_str());
  FleetPassContext pctx{};
  pctx.struct_size = FLEET_STRUCT_SIZE(FleetPassContext, pserver_endpoints);
  pctx.rank = ctx.rank;
  pctx.world_size = ctx.world_size;
  pctx.role = ctx.role.c_str();
  pctx.num_pservers = endpoints.size();
  pctx.pserver_endpoints = endpoints.data();

  std::map<std::string, ir::Program> work = programs;
  {
    ProgramSetBinding binding(work);
    FleetStatus* status = vt->run(pass.ctx, ProgramApi(), binding.handle(), &pctx,
                                  attr_ptrs.size(), attr_ptrs.data());
    FLEET_RETURN_IF_ERROR(TakeStatus(status, PassName(pass)));
  }
  for (const auto& [name, program] : work) {
    Status verified = ir::VerifyProgram(program, registry);
    if (!verified.ok()) {
      return Status(verified.code(), PassName(pass) + " left program '" + name +
                                         "' invalid: " + verified.message());
    }
  }
  programs = std::move(work);
  return OkStatus();
}

}  // namespace fleet
