// `fleet-host ops`: the op vocabulary, from the same registry the frontend, autodiff and the
// executor use. For each op: its slots, attributes with their defaults, the grad ops its rule
// emits, and which devices of the loaded plugins have kernels for it in which dtypes. Listing
// loads every plugin on the search path, like `plugins`.
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/cli.h"
#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "ops/op_registry.h"
#include "plugin/registry.h"
#include "plugin/selection.h"
#include "support/text.h"

namespace fleet {
namespace {

using nlohmann::json;

// Bumped when a field changes meaning or goes away (adding fields does not bump it).
constexpr int kOpsSchemaVersion = 1;

json SlotsJson(const std::vector<ops::SlotSpec>& slots) {
  json out = json::array();
  for (const auto& s : slots) {
    out.push_back({{"name", s.name},
                   {"optional", s.optional},
                   {"duplicable", s.duplicable},
                   {"no_grad", s.no_grad}});
  }
  return out;
}

const char* AttrTypeName(const ir::Attribute& a) {
  static const char* names[] = {"int32",     "int64",      "float32",   "float64", "bool",
                                "string",    "int32[]",    "int64[]",   "float32[]",
                                "float64[]", "bool[]",     "string[]",  "block"};
  return a.index() < std::size(names) ? names[a.index()] : "?";
}

// The grad op types `schema`'s rule emits for an op with one var in every slot and default
// attributes (the rule may emit fewer for an op that leaves optional slots empty).
std::vector<std::string> GradTypes(const ops::OpSchema& schema) {
  std::vector<std::string> types;
  if (!schema.grad) return types;
  ir::Op op;
  op.type = schema.type;
  for (const auto& s : schema.inputs) op.inputs[s.name] = {"in_" + s.name};
  for (const auto& s : schema.outputs) op.outputs[s.name] = {"out_" + s.name};
  op.attrs = ops::AttrsWithDefaults(schema, op);
  try {
    for (const ir::Op& g : schema.grad(op)) {
      if (std::find(types.begin(), types.end(), g.type) == types.end()) types.push_back(g.type);
    }
  } catch (const std::exception&) {
    // A rule that needs more than a generic op says nothing here; the op is still listed.
  }
  return types;
}

// device -> op type -> dtype names, over every kernels component of the registry.
using KernelTable = std::map<std::string, std::map<std::string, std::set<std::string>>>;

KernelTable Kernels(const PluginRegistry& registry) {
  KernelTable table;
  for (const ComponentRecord* c : registry.Components(FLEET_COMPONENT_KERNELS)) {
    const auto* vt = c->table<FleetKernelsVTable>();
    for (size_t i = 0; i < vt->count; ++i) {
      const FleetKernelDef* k = vt->kernels[i];
      if (k == nullptr || k->op_type == nullptr || k->device == nullptr) continue;
      const auto dtype = static_cast<ir::DataType>(k->dtype);
      table[k->device][k->op_type].insert(std::string(ir::DataTypeName(dtype)));
    }
  }
  return table;
}

json OpJson(const ops::OpSchema& s, const KernelTable& kernels) {
  json j{{"type", s.type},
         {"summary", s.summary},
         {"inputs", SlotsJson(s.inputs)},
         {"outputs", SlotsJson(s.outputs)},
         {"attrs", json::array()},
         {"grad_ops", GradTypes(s)},
         {"runs_on", s.collective ? "communicator" : (s.rpc ? "transport" : "device")},
         {"kernels", json::object()}};
  for (const auto& a : s.attrs) {
    j["attrs"].push_back({{"name", a.name},
                          {"type", AttrTypeName(a.default_value)},
                          {"default", ir::PrintAttribute(a.default_value)}});
  }
  for (const auto& [device, ops] : kernels) {
    if (auto it = ops.find(s.type); it != ops.end()) {
      j["kernels"][device] = std::vector<std::string>(it->second.begin(), it->second.end());
    }
  }
  return j;
}

std::string SlotsText(const json& slots) {
  std::string out;
  for (const auto& s : slots) {
    out += (out.empty() ? "" : ", ") + s["name"].get<std::string>();
    if (s["duplicable"].get<bool>()) out += "[]";
    if (s["optional"].get<bool>()) out += "?";
  }
  return out;
}

std::string KernelsText(const json& kernels) {
  std::string out;
  for (const auto& [device, dtypes] : kernels.items()) {
    out += (out.empty() ? "" : "; ") + device + ":";
    for (const auto& d : dtypes) out += " " + d.get<std::string>();
  }
  return out.empty() ? "-" : out;
}

void PrintOne(const json& op, std::ostream& out) {
  out << op["type"].get<std::string>() << ": " << op["summary"].get<std::string>() << "\n"
      << "  inputs:   " << SlotsText(op["inputs"]) << "\n"
      << "  outputs:  " << SlotsText(op["outputs"]) << "\n";
  if (!op["attrs"].empty()) {
    out << "  attrs:\n";
    for (const auto& a : op["attrs"]) {
      out << "    " << a["name"].get<std::string>() << ": " << a["type"].get<std::string>()
          << " = " << a["default"].get<std::string>() << "\n";
    }
  }
  std::string grads;
  for (const auto& g : op["grad_ops"]) grads += (grads.empty() ? "" : ", ") + g.get<std::string>();
  out << "  grad:     " << (grads.empty() ? "none" : grads) << "\n";
  if (op["runs_on"] != "device") {
    out << "  runs on:  the job's " << op["runs_on"].get<std::string>() << " (host kernel)\n";
  } else {
    out << "  kernels:  " << KernelsText(op["kernels"]) << "\n";
  }
}

}  // namespace

int OpsCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err) {
  bool as_json = false;
  std::string name;
  for (const std::string& a : args) {
    if (a == "--json") {
      as_json = true;
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host ops: unknown option '" << a << "'\n";
      return kExitUsage;
    } else if (name.empty()) {
      name = a;
    } else {
      err << "fleet-host ops: give at most one op NAME\n";
      return kExitUsage;
    }
  }
  const ops::OpRegistry& registry = ops::BuiltinOps();
  std::vector<std::string> types = registry.Types();
  if (!name.empty() && registry.Find(name) == nullptr) {
    // The closest spelling, else the ops whose name contains the word (tril -> tril_triu).
    std::vector<std::string> hints = ClosestMatches(name, types, 3);
    if (hints.empty()) {
      for (const std::string& t : types) {
        if (t.find(name) != std::string::npos && t.find("_grad") == std::string::npos) {
          hints.push_back(t);
        }
      }
    }
    return Fail(err, NotFound("no op " + QuoteForMessage(name) +
                              (hints.empty() ? "" : "; did you mean " + QuotedAlternatives(hints) +
                                                        "?") +
                              " (fleet-host ops lists them all)"));
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  PluginRegistry plugins(LoadOptionsFor(*config));
  plugins.LoadAll();
  const KernelTable kernels = Kernels(plugins);

  json doc{{"schema_version", kOpsSchemaVersion}, {"ops", json::array()}};
  for (const std::string& t : types) {
    if (!name.empty() && t != name) continue;
    doc["ops"].push_back(OpJson(*registry.Find(t), kernels));
  }
  if (as_json) {
    out << doc.dump(2) << "\n";
    return kExitOk;
  }
  if (!name.empty()) {
    PrintOne(doc["ops"][0], out);
    return kExitOk;
  }
  size_t grads = 0;
  for (const auto& op : doc["ops"]) {
    const std::string t = op["type"].get<std::string>();
    const bool is_grad = t.size() > 5 && t.compare(t.size() - 5, 5, "_grad") == 0;
    grads += is_grad ? 1 : 0;
    out << t << "(" << SlotsText(op["inputs"]) << ") -> (" << SlotsText(op["outputs"]) << ")  "
        << KernelsText(op["kernels"]) << "\n";
  }
  out << doc["ops"].size() << " ops (" << doc["ops"].size() - grads << " forward, " << grads
      << " gradient); `fleet-host ops NAME` shows one with its attributes\n";
  return kExitOk;
}

}  // namespace fleet
