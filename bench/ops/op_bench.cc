// fleet_op_bench: the time of one op's kernel on a device, through the plugin ABI exactly as the
// executor calls it (schema, shape inference, kernel choice, prepare once, then launches).
//
//   fleet_op_bench [--device cpu] [--threads 1] [--iters 200] [--warmup 20]
//                  [--plugin-dir DIR] SPEC
//
// SPEC is a JSON object: {"type": "cumsum", "attrs": {"axis": 1},
//   "inputs": {"X": [{"dims": [64, 4096], "dtype": "float32", "low": -1, "high": 1}]}},
// optionally with "outputs": {"State": 2}, the var count of a duplicable or optional output
// slot (required slots get one var by default, optional ones none). An input may carry "lod":
// [0, ...] (a sequence tensor with those offsets; dims[0] is its capacity) and "values": [...]
// (exact values instead of random ones, for lengths and offsets). A sequence output takes the
// executor's offsets; for an op that makes offsets of its own (OpSchema::derive_lod), each timed
// launch includes making them on the host and copying them to the device, as a step does.
// Attribute values are converted to the type of the schema's default. Inputs are uniform random
// in [low, high) (default [-1, 1)); integer inputs are whole numbers in that range, so index
// inputs name their bound with "high". Prints one JSON line: the median, 10th and 90th
// percentile microseconds per launch (each launch followed by a device synchronise, so a GPU
// figure includes the launch and the wait, as one op of a step would see it when it is alone).
// bench/ops.py runs it next to PyTorch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "fleet/fleet_plugin.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"
#include "plugin/device.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

using nlohmann::json;

struct Options {
  std::string device = "cpu";
  int threads = 1;
  int iters = 200;
  int warmup = 20;
  std::string plugin_dir = FLEET_BENCH_PLUGIN_DIR;
  std::string spec;
};

// The JSON value as the attribute type of `def` (the schema's default).
StatusOr<ir::Attribute> ToAttr(const std::string& name, const json& v, const ir::Attribute& def) {
  try {
    switch (def.index()) {
      case 0: return ir::Attribute(v.get<int32_t>());
      case 1: return ir::Attribute(v.get<int64_t>());
      case 2: return ir::Attribute(v.get<float>());
      case 3: return ir::Attribute(v.get<double>());
      case 4: return ir::Attribute(v.get<bool>());
      case 5: return ir::Attribute(v.get<std::string>());
      case 6: return ir::Attribute(v.get<std::vector<int32_t>>());
      case 7: return ir::Attribute(v.get<std::vector<int64_t>>());
      case 8: return ir::Attribute(v.get<std::vector<float>>());
      case 9: return ir::Attribute(v.get<std::vector<double>>());
      case 10: return ir::Attribute(v.get<std::vector<bool>>());
      case 11: return ir::Attribute(v.get<std::vector<std::string>>());
      default: break;
    }
  } catch (const json::exception& e) {
    return InvalidArgument("attribute '" + name + "': " + e.what());
  }
  return InvalidArgument("attribute '" + name + "' has a type this bench cannot set");
}

std::vector<unsigned char> RandomBytes(ir::DataType dtype, int64_t n, double lo, double hi,
                                       uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * ir::DataTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const double v = dist(gen);
    void* at = bytes.data() + static_cast<size_t>(i) * ir::DataTypeSize(dtype);
    switch (dtype) {
      case ir::DataType::kFloat32: { float f = static_cast<float>(v); std::memcpy(at, &f, 4); break; }
      case ir::DataType::kFloat64: std::memcpy(at, &v, 8); break;
      case ir::DataType::kInt32: { int32_t k = static_cast<int32_t>(std::floor(v)); std::memcpy(at, &k, 4); break; }
      case ir::DataType::kInt64: { int64_t k = static_cast<int64_t>(std::floor(v)); std::memcpy(at, &k, 8); break; }
      case ir::DataType::kBool: { bool b = v > (lo + hi) / 2; std::memcpy(at, &b, 1); break; }
      default: break;
    }
  }
  return bytes;
}

Status Bench(const Options& o) {
  json spec;
  try {
    spec = json::parse(o.spec);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("SPEC is not JSON: ") + e.what());
  }
  const std::string type = spec.value("type", "");
  const ops::OpSchema* schema = ops::BuiltinOps().Find(type);
  if (schema == nullptr) return NotFound("no op '" + type + "'");

  ir::Op op;
  op.type = type;
  const json attrs = spec.contains("attrs") ? spec.at("attrs") : json::object();
  for (const auto& [key, value] : attrs.items()) {
    const ops::AttrSpec* def = nullptr;
    for (const auto& a : schema->attrs) def = a.name == key ? &a : def;
    if (def == nullptr) return InvalidArgument(type + " has no attribute '" + key + "'");
    FLEET_ASSIGN_OR_RETURN(op.attrs[key], ToAttr(key, value, def->default_value));
  }
  struct Input {
    ir::DataType dtype;
    std::vector<int64_t> dims;
    std::vector<unsigned char> bytes;
    std::vector<int64_t> lod;     // empty: dense
    std::vector<int64_t> values;  // "values" as given (int inputs read for offsets)
  };
  std::vector<SlotShapes> in_slots;
  std::vector<std::vector<Input>> inputs;
  std::map<std::string, std::vector<ops::TensorInfo>> in_infos;
  uint64_t seed = 1;
  const json in_spec = spec.contains("inputs") ? spec.at("inputs") : json::object();
  for (const auto& slot : schema->inputs) {
    if (!in_spec.contains(slot.name)) continue;
    SlotShapes s{slot.name, {}};
    std::vector<Input> tensors;
    int k = 0;
    for (const auto& t : in_spec[slot.name]) {
      Input in;
      in.dtype = ir::ParseDataType(t.value("dtype", "float32"));
      if (in.dtype == ir::DataType::kInvalid) return InvalidArgument("bad dtype in " + slot.name);
      in.dims = t.at("dims").get<std::vector<int64_t>>();
      int64_t n = 1;
      for (int64_t d : in.dims) n *= d;
      in.bytes = RandomBytes(in.dtype, n, t.value("low", -1.0), t.value("high", 1.0), ++seed);
      if (t.contains("values")) {
        in.values = t.at("values").get<std::vector<int64_t>>();
        if (static_cast<int64_t>(in.values.size()) != n || in.dtype != ir::DataType::kInt64) {
          return InvalidArgument("values of " + slot.name + " must be " + std::to_string(n) +
                                 " int64 values");
        }
        std::memcpy(in.bytes.data(), in.values.data(), in.bytes.size());
      }
      ops::TensorInfo info{in.dtype, in.dims};
      if (t.contains("lod")) {
        in.lod = t.at("lod").get<std::vector<int64_t>>();
        if (in.lod.empty() || in.dims.empty() || in.lod.back() > in.dims[0]) {
          return InvalidArgument("lod of " + slot.name + " must end within dims[0]");
        }
        info.lod_level = 1;
        info.sequences = static_cast<int64_t>(in.lod.size()) - 1;
      }
      const std::string var = slot.name + "_" + std::to_string(k++);
      op.inputs[slot.name].push_back(var);
      in_infos[slot.name].push_back(info);
      s.tensors.push_back({in.dtype, in.dims, static_cast<int64_t>(in.lod.size())});
      tensors.push_back(std::move(in));
    }
    in_slots.push_back(std::move(s));
    inputs.push_back(std::move(tensors));
  }
  // Every required output slot gets one var; "outputs" may name how many a slot gets
  // (duplicable ones, and optional ones such as a grad op's @GRAD outputs).
  const json out_spec = spec.contains("outputs") ? spec.at("outputs") : json::object();
  for (const auto& slot : schema->outputs) {
    if (slot.optional && !out_spec.contains(slot.name)) continue;
    const int count = out_spec.value(slot.name, 1);
    for (int k = 0; k < count; ++k) {
      op.outputs[slot.name].push_back(slot.name + "_out" + std::to_string(k));
    }
  }
  ops::ShapeContext infer(*schema, op);
  infer.inputs = in_infos;
  for (const auto& [slot, names] : op.outputs) infer.outputs[slot].resize(names.size());
  FLEET_RETURN_IF_ERROR(schema->infer_shape(infer));
  FLEET_RETURN_IF_ERROR(ops::ApplyLodRules(*schema, infer));

  // The offsets of each sequence output, by the executor's rules: made by the op, those of the
  // input lod_share pairs it with, or the first sequence input's.
  ops::LodDeriveInputs derive;
  derive.op = &op;
  const std::vector<int64_t>* first_lod = nullptr;
  for (size_t s = 0; s < in_slots.size(); ++s) {
    auto& offsets = derive.offsets[in_slots[s].name];
    for (const Input& in : inputs[s]) {
      offsets.push_back(in.lod.empty() ? nullptr : &in.lod);
      if (first_lod == nullptr && !in.lod.empty()) first_lod = &in.lod;
    }
    for (const std::string& read : schema->derive_reads) {
      if (read != in_slots[s].name) continue;
      for (const Input& in : inputs[s]) derive.values[read].push_back(in.values);
    }
  }
  std::vector<int64_t> derived;  // the derived output's offsets, remade at every launch
  std::vector<SlotShapes> out_slots;
  std::vector<std::vector<const std::vector<int64_t>*>> out_lods;
  for (const auto& slot : schema->outputs) {
    auto it = infer.outputs.find(slot.name);
    if (it == infer.outputs.end() || it->second.empty()) continue;
    SlotShapes shapes{slot.name, {}};
    std::vector<const std::vector<int64_t>*> lods;
    for (size_t k = 0; k < it->second.size(); ++k) {
      const ops::TensorInfo& t = it->second[k];
      const std::vector<int64_t>* lod = nullptr;
      if (t.lod_level != 0 && slot.name == schema->derive_lod) {
        derive.capacity = t.dims.empty() ? 0 : t.dims[0];
        derive.sequences = t.sequences;
        FLEET_RETURN_IF_ERROR(schema->derive_offsets(derive, derived));
        lod = &derived;
      } else if (t.lod_level != 0) {
        lod = first_lod;
        for (const auto& [out_slot, in_slot] : schema->lod_share) {
          if (out_slot != slot.name) continue;
          const auto& from = derive.offsets[in_slot];
          if (!from.empty()) lod = from[k < from.size() ? k : 0];
        }
      }
      shapes.tensors.push_back(
          {t.dtype, t.dims, lod != nullptr ? static_cast<int64_t>(lod->size()) : 0});
      lods.push_back(lod);
    }
    out_slots.push_back(std::move(shapes));
    out_lods.push_back(std::move(lods));
  }
  const ir::DataType dtype = inputs.empty() || inputs[0].empty()
                                 ? ir::DataType::kFloat32
                                 : inputs[0][0].dtype;

  LoadOptions load;
  load.search_dirs = {o.plugin_dir};
  PluginRegistry registry(load);
  FLEET_RETURN_IF_ERROR(registry.Load(o.device).status());
  const ComponentRecord* rec = registry.Find(FLEET_COMPONENT_DEVICE, o.device);
  if (rec == nullptr) return NotFound("no device '" + o.device + "'");
  Device device(rec);
  FLEET_ASSIGN_OR_RETURN(int count, device.Count());
  if (count == 0) return Unavailable("device '" + o.device + "' has no unit here");

  KernelCallArgs args;
  args.op_type = type;
  args.inputs = in_slots;
  args.outputs = out_slots;
  args.attrs = ops::AttrsWithDefaults(*schema, op);
  args.device_type = device.type_id();
  args.device_ordinal = 0;
  args.num_threads = o.threads;
  args.seed = 7;
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<KernelCall> call,
                         ChooseKernel(registry, o.device, dtype, args, schema->sequence_kernel));
  FLEET_ASSIGN_OR_RETURN(size_t scratch, call->Prepare());

  std::vector<void*> owned;
  auto alloc = [&](size_t bytes) -> StatusOr<void*> {
    FLEET_ASSIGN_OR_RETURN(void* p, device.Alloc(0, bytes == 0 ? 1 : bytes));
    owned.push_back(p);
    return p;
  };
  Status status;
  auto run = [&]() -> Status {
    for (size_t s = 0; s < inputs.size(); ++s) {
      for (size_t i = 0; i < inputs[s].size(); ++i) {
        FLEET_ASSIGN_OR_RETURN(void* p, alloc(inputs[s][i].bytes.size()));
        FLEET_RETURN_IF_ERROR(
            device.CopyToDevice(0, p, inputs[s][i].bytes.data(), inputs[s][i].bytes.size()));
        call->SetData(false, s, i, p);
        if (!inputs[s][i].lod.empty()) {
          const std::vector<int64_t>& lod = inputs[s][i].lod;
          FLEET_ASSIGN_OR_RETURN(void* l, alloc(lod.size() * sizeof(int64_t)));
          FLEET_RETURN_IF_ERROR(device.CopyToDevice(0, l, lod.data(), lod.size() * sizeof(int64_t)));
          call->SetLod(false, s, i, static_cast<const int64_t*>(l));
        }
      }
    }
    void* derived_lod = nullptr;  // where the derived offsets go before each launch
    for (size_t s = 0; s < out_slots.size(); ++s) {
      for (size_t i = 0; i < out_slots[s].tensors.size(); ++i) {
        const TensorShape& t = out_slots[s].tensors[i];
        int64_t n = 1;
        for (int64_t d : t.dims) n *= d;
        FLEET_ASSIGN_OR_RETURN(void* p,
                               alloc(static_cast<size_t>(n) * ir::DataTypeSize(t.dtype)));
        call->SetData(true, s, i, p);
        if (const std::vector<int64_t>* lod = out_lods[s][i]; lod != nullptr) {
          FLEET_ASSIGN_OR_RETURN(void* l, alloc(lod->size() * sizeof(int64_t)));
          FLEET_RETURN_IF_ERROR(
              device.CopyToDevice(0, l, lod->data(), lod->size() * sizeof(int64_t)));
          call->SetLod(true, s, i, static_cast<const int64_t*>(l));
          if (lod == &derived) derived_lod = l;
        }
      }
    }
    if (scratch > 0) {
      FLEET_ASSIGN_OR_RETURN(void* p, alloc(scratch));
      call->SetScratch(p);
    }
    std::vector<double> us;
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (derived_lod != nullptr) {
        FLEET_RETURN_IF_ERROR(schema->derive_offsets(derive, derived));
        FLEET_RETURN_IF_ERROR(device.CopyToDevice(0, derived_lod, derived.data(),
                                                  derived.size() * sizeof(int64_t)));
      }
      FLEET_RETURN_IF_ERROR(call->Launch(static_cast<uint64_t>(i)));
      FLEET_RETURN_IF_ERROR(device.Synchronize(0));
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(us.begin(), us.end());
    auto pct = [&](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
    std::cout << json{{"op", type}, {"device", o.device}, {"plugin", call->kernel().component->plugin},
                      {"median_us", pct(0.5)}, {"p10_us", pct(0.1)}, {"p90_us", pct(0.9)},
                      {"iters", o.iters}}
                     .dump()
              << std::endl;
    return OkStatus();
  };
  status = run();
  call.reset();
  for (void* p : owned) (void)device.Free(0, p);
  return status;
}

}  // namespace
}  // namespace fleet

int main(int argc, char** argv) {
  fleet::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fleet_op_bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") o.device = next();
    else if (a == "--threads") o.threads = std::stoi(next());
    else if (a == "--iters") o.iters = std::max(1, std::stoi(next()));
    else if (a == "--warmup") o.warmup = std::max(0, std::stoi(next()));
    else if (a == "--plugin-dir") o.plugin_dir = next();
    else if (!a.empty() && a[0] != '-' && o.spec.empty()) o.spec = a;
    else {
      std::cerr << "usage: fleet_op_bench [--device D] [--threads N] [--iters N] [--warmup N] "
                   "[--plugin-dir DIR] SPEC_JSON\n";
      return 2;
    }
  }
  if (o.spec.empty()) {
    std::cerr << "fleet_op_bench: SPEC_JSON is missing\n";
    return 2;
  }
  fleet::Status s = fleet::Bench(o);
  if (!s.ok()) {
    std::cerr << "fleet_op_bench: " << s.ToString() << "\n";
    return 1;
  }
  return 0;
}
