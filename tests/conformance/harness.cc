#include "harness.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <list>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "fleet/fleet_plugin.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"
#include "plugin/device.h"
#include "plugin/kernel.h"
#include "report/report.h"

namespace fleet::conformance {
namespace {

namespace fs = std::filesystem;

std::string DeviceUnderTest() {
  const char* d = std::getenv("FLEET_CONFORMANCE_DEVICE");
  return (d != nullptr && *d != '\0') ? std::string(d) : std::string("cpu");
}

ops::TensorInfo InfoOf(const HostTensor& t) { return {t.dtype, t.dims}; }

bool IsFloat(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64;
}

double ElementAsDouble(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case ir::DataType::kFloat32: return t.data<float>()[i];
    case ir::DataType::kFloat64: return t.data<double>()[i];
    case ir::DataType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case ir::DataType::kInt32: return t.data<int32_t>()[i];
    case ir::DataType::kBool:
    case ir::DataType::kUInt8: return t.data<uint8_t>()[i];
    default: return std::nan("");
  }
}

nlohmann::json AttrToJson(const ir::Attribute& a) {
  return std::visit(
      [](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ir::BlockRef>) {
          return v.index;
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          nlohmann::json arr = nlohmann::json::array();
          for (bool b : v) arr.push_back(b);
          return arr;
        } else {
          return v;
        }
      },
      a);
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

HostTensor RandomInts(std::vector<int64_t> dims, uint64_t seed, int64_t lo, int64_t hi) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return MakeTensor<int64_t>(std::move(dims), v);
}

HostTensor Cast(const HostTensor& t, ir::DataType dtype) {
  HostTensor out;
  out.dtype = dtype;
  out.dims = t.dims;
  const int64_t n = t.numel();
  out.bytes.resize(static_cast<size_t>(n) * ir::DataTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    double v = ElementAsDouble(t, i);
    if (dtype == ir::DataType::kFloat32) out.data<float>()[i] = static_cast<float>(v);
    if (dtype == ir::DataType::kFloat64) out.data<double>()[i] = v;
    if (dtype == ir::DataType::kInt64) out.data<int64_t>()[i] = static_cast<int64_t>(v);
    if (dtype == ir::DataType::kInt32) out.data<int32_t>()[i] = static_cast<int32_t>(v);
    if (dtype == ir::DataType::kBool) out.data<uint8_t>()[i] = v != 0;
  }
  return out;
}

OpRunner* OpRunner::Get(std::string* skip_reason, Status* error) {
  static OpRunner* runner = nullptr;
  static std::string skip;
  static Status failure;
  static bool initialised = false;
  if (!initialised) {
    initialised = true;
    auto r = std::unique_ptr<OpRunner>(new OpRunner());
    r->device_ = DeviceUnderTest();
    // FLEET_PLUGIN_PATH first (a third-party plugin under test), then this build's plugins: the
    // host's own search path for a run without a config.
    LoadOptions options;
    options.search_dirs = PluginSearchPath(Config{});
    options.search_dirs.emplace_back(FLEET_BUILD_PLUGIN_DIR);
    r->registry_ = std::make_unique<PluginRegistry>(options);
    // A device plugin is named after its device in the plugins shipped here ("cpu", "cuda");
    // a third-party one is found by loading everything and looking for the device component.
    auto loaded = r->registry_->Load(r->device_);
    if (!loaded.ok()) r->registry_->LoadAll();
    // The CPU plugin is the second reference of every other device (see Run).
    if (r->device_ != "cpu" && r->registry_->FindPlugin("cpu") == nullptr) {
      if (auto cpu = r->registry_->Load("cpu"); !cpu.ok()) failure = cpu.status();
    }
    const ComponentRecord* dev = r->registry_->Find(FLEET_COMPONENT_DEVICE, r->device_);
    if (dev == nullptr) {
      failure = NotFound("no plugin provides device '" + r->device_ + "'" +
                         (loaded.ok() ? "" : ": " + loaded.status().ToString()));
    } else {
      Device device(dev);
      auto count = device.Count();
      if (!count.ok() || *count == 0) {
        skip = "device '" + r->device_ + "' has no usable unit on this machine" +
               (count.ok() ? "" : ": " + count.status().ToString());
      } else {
        auto props = device.Props(0);
        r->bitwise_random_ = r->device_ == "cpu" ||
                             (props.ok() && (props->caps & FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS));
        runner = r.release();
      }
    }
  }
  *skip_reason = skip;
  *error = failure;
  return runner;
}

bool IsRandomOp(const ir::Op& op) {
  const ops::OpSchema* schema = ops::BuiltinOps().Find(op.type);
  if (schema == nullptr) return false;
  for (const ops::AttrSpec& a : schema->attrs) {
    if (a.name == "seed") return true;
  }
  return false;
}

Status OpRunner::Run(const ir::Op& op, VarMap& vars, uint64_t seed, const LodMap& lods,
                     SparseMap* sparse) {
  VarMap on_cpu;
  SparseMap sparse_on_cpu;
  if (device_ != "cpu") on_cpu = vars;
  if (device_ != "cpu" && sparse != nullptr) sparse_on_cpu = *sparse;
  Status run = RunOn(device_, op, vars, seed, lods, sparse);
  // A call the host refused before choosing a kernel (a bad attribute, a shape error) never
  // reached the plugin, so it is not one of the plugin's rows.
  if (last_dtype_ != ir::DataType::kInvalid) {
    const bool not_provided = run.code() == Code::kUnimplemented &&
                              run.message().rfind(kNotProvidedPrefix, 0) == 0;
    ReportRun(op.type, std::string(ir::DataTypeName(last_dtype_)),
              run.ok() ? kRunOk : (not_provided ? kRunNotProvided : kRunError),
              run.ok() ? "" : run.ToString());
  }
  FLEET_RETURN_IF_ERROR(run);
  if (device_ == "cpu") return OkStatus();
  // Another device is checked against the references like the CPU and, op by op, against the
  // CPU plugin's result on the same inputs, so a test that compares loosely with NumPy still
  // catches a kernel that drifts from the CPU's. A random op's values are compared only where
  // the device declares the CPU's streams (fleet_kernels.h); otherwise its test checks the
  // distribution.
  if (IsRandomOp(op) && !bitwise_random_) return OkStatus();
  // An op that reads saved state (rnn_grad's Reserve) cannot run on the CPU with state the
  // device wrote, as the layouts differ; its result is checked against finite differences.
  if (op.inputs.count("Reserve") != 0) return OkStatus();
  FLEET_RETURN_IF_ERROR(
      RunOn("cpu", op, on_cpu, seed, lods, sparse != nullptr ? &sparse_on_cpu : nullptr)
          .WithContext("the same op on cpu"));
  for (const auto& [slot, names] : op.outputs) {
    if (slot == "XShape") continue;  // never written by either kernel: only its shape counts
    // rnn's saved state belongs to the device that wrote it (rnn_plan.h): the CPU keeps gates
    // there, the CUDA plugin recomputes them; its gradient is compared instead.
    if (slot == "Reserve" || slot == "DropoutState") continue;
    // sequence_pool writes MaxIndex for MAX alone; for another pool type it is undefined.
    if (slot == "MaxIndex" && op.type == "sequence_pool") {
      auto type = op.attrs.find("pooltype");
      if (type == op.attrs.end() || !std::holds_alternative<std::string>(type->second) ||
          std::get<std::string>(type->second) != "MAX") {
        continue;
      }
    }
    for (const std::string& name : names) {
      const HostTensor& got = vars[name];
      const HostTensor& want = on_cpu[name];
      const bool f32 = got.dtype == ir::DataType::kFloat32;
      const bool f64 = got.dtype == ir::DataType::kFloat64;
      auto close = AllClose(got, want, f64 ? 1e-9 : (f32 ? 1e-4 : 0.0),
                            f64 ? 1e-12 : (f32 ? 1e-5 : 0.0));
      if (!close) {
        return Internal(op.type + ": output " + slot + " '" + name + "' on " + device_ +
                        " differs from cpu: " + close.message());
      }
      if (sparse != nullptr && sparse->count(name) != 0 &&
          (*sparse)[name].rows != sparse_on_cpu[name].rows) {
        return Internal(op.type + ": the rows of sparse output " + slot + " '" + name +
                        "' on " + device_ + " differ from cpu's");
      }
    }
  }
  return OkStatus();
}

namespace {

// A small numeric tensor's values as doubles (what value-dependent shape functions read);
// empty for larger or non-numeric tensors, as the executor tracks only small constants.
std::vector<double> ValuesOf(const HostTensor& t) {
  std::vector<double> out;
  if (t.numel() == 0 || t.numel() > ops::kMaxTrackedValues) return out;
  switch (t.dtype) {
    case ir::DataType::kFloat32: for (float v : Values<float>(t)) out.push_back(v); break;
    case ir::DataType::kFloat64: out = Values<double>(t); break;
    case ir::DataType::kInt32: for (int32_t v : Values<int32_t>(t)) out.push_back(v); break;
    case ir::DataType::kInt64:
      for (int64_t v : Values<int64_t>(t)) out.push_back(static_cast<double>(v));
      break;
    default: break;
  }
  return out;
}

}  // namespace

Status OpRunner::RunOn(const std::string& device_name, const ir::Op& op, VarMap& vars,
                       uint64_t seed, const LodMap& lods, SparseMap* sparse) {
  auto sparse_of = [&](const std::string& name) -> SparseRows* {
    if (sparse == nullptr) return nullptr;
    auto it = sparse->find(name);
    return it == sparse->end() ? nullptr : &it->second;
  };
  last_dtype_ = ir::DataType::kInvalid;
  const ops::OpSchema* schema = ops::BuiltinOps().Find(op.type);
  if (schema == nullptr) return NotFound("no schema for op '" + op.type + "'");
  FLEET_RETURN_IF_ERROR(ops::CheckOpSlots(*schema, op));

  ops::ShapeContext shapes(*schema, op);
  shapes.values_tracked = true;  // the harness holds every input's values
  std::vector<SlotShapes> in_slots, out_slots;
  std::vector<std::vector<const HostTensor*>> in_tensors;
  std::vector<std::vector<const std::vector<int64_t>*>> in_lods;
  const std::vector<int64_t>* first_lod = nullptr;  // what sequence outputs carry
  for (const auto& spec : schema->inputs) {
    const auto& names = op.Input(spec.name);
    if (names.empty()) continue;
    SlotShapes slot{spec.name, {}};
    std::vector<const HostTensor*> ts;
    std::vector<const std::vector<int64_t>*> lod_ptrs;
    for (const auto& n : names) {
      auto it = vars.find(n);
      if (it == vars.end()) return NotFound(op.type + ": input var '" + n + "' has no value");
      ops::TensorInfo info = InfoOf(it->second);
      if (const SparseRows* rows = sparse_of(n)) {
        if (info.dims.empty() || static_cast<int64_t>(rows->rows.size()) != info.dims[0]) {
          return InvalidArgument(op.type + ": sparse input '" + n + "' needs one row per entry");
        }
        info.height = rows->height;
      }
      auto lod = lods.find(n);
      if (lod != lods.end()) {
        info.lod_level = 1;
        info.sequences = static_cast<int64_t>(lod->second.size()) - 1;
        if (first_lod == nullptr) first_lod = &lod->second;
      }
      shapes.inputs[spec.name].push_back(info);
      shapes.input_values[spec.name].push_back(ValuesOf(it->second));
      slot.tensors.push_back({it->second.dtype, it->second.dims,
                              lod != lods.end() ? info.sequences + 1 : 0, info.height});
      ts.push_back(&it->second);
      lod_ptrs.push_back(lod != lods.end() ? &lod->second : nullptr);
    }
    in_slots.push_back(std::move(slot));
    in_tensors.push_back(std::move(ts));
    in_lods.push_back(std::move(lod_ptrs));
  }
  for (const auto& [slot, names] : op.outputs) {
    shapes.outputs[slot].resize(names.size());
  }
  FLEET_RETURN_IF_ERROR(schema->infer_shape(shapes));
  FLEET_RETURN_IF_ERROR(ops::ApplyLodRules(*schema, shapes));

  // The offsets of each sequence output, by the executor's rules: made by the op
  // (derive_lod), those of the input lod_share pairs it with, or the first sequence input's.
  std::vector<const std::vector<int64_t>*> out_lods;  // per output tensor, in slot order
  std::list<std::vector<int64_t>> derived;            // what the op made
  auto OutputOffsets = [&](const std::string& slot,
                           size_t k) -> StatusOr<const std::vector<int64_t>*> {
    if (slot == schema->derive_lod) {
      ops::LodDeriveInputs in;
      in.op = &op;
      const ops::TensorInfo& info = shapes.outputs[slot][k];
      in.capacity = info.dims.empty() ? 0 : info.dims[0];
      in.sequences = info.sequences;
      for (size_t s = 0; s < in_slots.size(); ++s) in.offsets[in_slots[s].name] = in_lods[s];
      for (const std::string& read : schema->derive_reads) {
        for (const std::string& n : op.Input(read)) {
          const HostTensor& t = vars.at(n);
          std::vector<int64_t> values(static_cast<size_t>(t.numel()));
          for (size_t e = 0; e < values.size(); ++e) {
            values[e] = t.dtype == ir::DataType::kInt64
                            ? reinterpret_cast<const int64_t*>(t.bytes.data())[e]
                            : reinterpret_cast<const int32_t*>(t.bytes.data())[e];
          }
          in.values[read].push_back(std::move(values));
        }
      }
      derived.emplace_back();
      FLEET_RETURN_IF_ERROR(schema->derive_offsets(in, derived.back()));
      return &derived.back();
    }
    for (const auto& [out_slot, in_slot] : schema->lod_share) {
      if (out_slot != slot) continue;
      for (size_t s = 0; s < in_slots.size(); ++s) {
        if (in_slots[s].name != in_slot || in_lods[s].empty()) continue;
        return in_lods[s][k < in_lods[s].size() ? k : 0];
      }
    }
    return first_lod;
  };
  for (const auto& spec : schema->outputs) {
    auto it = shapes.outputs.find(spec.name);
    if (it == shapes.outputs.end() || it->second.empty()) continue;
    SlotShapes slot{spec.name, {}};
    for (size_t k = 0; k < it->second.size(); ++k) {
      const ops::TensorInfo& info = it->second[k];
      for (int64_t d : info.dims) {
        if (d < 0) {
          return Internal(op.type + ": output " + spec.name + " has unknown shape " +
                          DimsText(info.dims) + " after inference from known inputs");
        }
      }
      out_lods.push_back(nullptr);
      if (info.lod_level != 0) {
        FLEET_ASSIGN_OR_RETURN(out_lods.back(), OutputOffsets(spec.name, k));
      }
      const int64_t lod_count =
          out_lods.back() != nullptr ? static_cast<int64_t>(out_lods.back()->size()) : 0;
      slot.tensors.push_back({info.dtype, info.dims, lod_count, info.height});
    }
    out_slots.push_back(std::move(slot));
  }

  // The executor's rule, over the input tensors and the inferred outputs.
  const ir::DataType dtype = ops::KernelDtype(*schema, op, [&](const std::string& var) {
    if (auto it = vars.find(var); it != vars.end()) return it->second.dtype;
    for (const auto& [slot, names] : op.outputs) {
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == var && i < shapes.outputs[slot].size()) {
          return shapes.outputs[slot][i].dtype;
        }
      }
    }
    return ir::DataType::kInvalid;
  });
  last_dtype_ = dtype;

  const ComponentRecord* dev_rec = registry_->Find(FLEET_COMPONENT_DEVICE, device_name);
  if (dev_rec == nullptr) return NotFound("no device component '" + device_name + "'");
  Device device(dev_rec);
  KernelCallArgs args;
  args.op_type = op.type;
  args.inputs = in_slots;
  args.outputs = out_slots;
  args.attrs = ops::AttrsWithDefaults(*schema, op);
  args.device_type = device.type_id();
  args.device_ordinal = 0;
  args.num_threads = 2;
  args.seed = seed;

  // A device without a kernel for this op and dtype (or whose kernels all refuse these
  // attributes) does not provide it: a partial plugin, not a broken one.
  StatusOr<std::unique_ptr<KernelCall>> chosen =
      ChooseKernel(*registry_, device_name, dtype, args, schema->sequence_kernel);
  if (!chosen.ok()) {
    if (chosen.status().code() != Code::kNotFound) return chosen.status();
    return Unimplemented(std::string(kNotProvidedPrefix) + chosen.status().message());
  }
  std::unique_ptr<KernelCall> call = std::move(*chosen);
  FLEET_ASSIGN_OR_RETURN(size_t scratch_bytes, call->Prepare());

  std::vector<void*> allocations;
  auto cleanup = [&]() {
    for (void* p : allocations) (void)device.Free(0, p);
  };
  auto alloc = [&](size_t bytes) -> StatusOr<void*> {
    auto p = device.Alloc(0, bytes == 0 ? 1 : bytes);
    if (p.ok()) allocations.push_back(*p);
    return p;
  };

  Status status;
  // Offsets go to device memory, as the executor hands them.
  auto device_lod = [&](const std::vector<int64_t>& lod) -> StatusOr<const int64_t*> {
    const size_t bytes = lod.size() * sizeof(int64_t);
    FLEET_ASSIGN_OR_RETURN(void* p, alloc(bytes));
    if (bytes > 0) FLEET_RETURN_IF_ERROR(device.CopyToDevice(0, p, lod.data(), bytes));
    return static_cast<const int64_t*>(p);
  };
  for (size_t s = 0; s < in_slots.size() && status.ok(); ++s) {
    for (size_t i = 0; i < in_tensors[s].size() && status.ok(); ++i) {
      const HostTensor& t = *in_tensors[s][i];
      auto p = alloc(t.bytes.size());
      if (!p.ok()) { status = p.status(); break; }
      if (!t.bytes.empty()) status = device.CopyToDevice(0, *p, t.bytes.data(), t.bytes.size());
      call->SetData(false, s, i, *p);
      if (const SparseRows* rows = sparse_of(op.Input(in_slots[s].name)[i]);
          rows != nullptr && status.ok()) {
        const size_t bytes = rows->rows.size() * sizeof(int64_t);
        auto r = alloc(bytes);
        if (!r.ok()) { status = r.status(); break; }
        if (bytes > 0) status = device.CopyToDevice(0, *r, rows->rows.data(), bytes);
        call->SetRows(false, s, i, static_cast<int64_t*>(*r));
      }
      if (in_lods[s][i] != nullptr && status.ok()) {
        auto lod = device_lod(*in_lods[s][i]);
        if (!lod.ok()) { status = lod.status(); break; }
        call->SetLod(false, s, i, *lod);
      }
    }
  }
  std::vector<std::vector<void*>> out_ptrs(out_slots.size());
  std::vector<std::vector<int64_t*>> out_rows(out_slots.size());
  for (size_t s = 0, out_index = 0; s < out_slots.size() && status.ok();
       out_index += out_slots[s].tensors.size(), ++s) {
    for (size_t i = 0; i < out_slots[s].tensors.size() && status.ok(); ++i) {
      const TensorShape& shape = out_slots[s].tensors[i];
      int64_t n = 1;
      for (int64_t d : shape.dims) n *= d;
      auto p = alloc(static_cast<size_t>(n) * ir::DataTypeSize(shape.dtype));
      if (!p.ok()) { status = p.status(); break; }
      out_ptrs[s].push_back(*p);
      call->SetData(true, s, i, *p);
      out_rows[s].push_back(nullptr);
      if (shape.height >= 0) {
        if (sparse == nullptr) {
          status = InvalidArgument(op.type + ": output " + out_slots[s].name +
                                   " is sparse; pass a SparseMap to receive its rows");
          break;
        }
        auto r = alloc(static_cast<size_t>(shape.dims[0]) * sizeof(int64_t));
        if (!r.ok()) { status = r.status(); break; }
        out_rows[s].back() = static_cast<int64_t*>(*r);
        call->SetRows(true, s, i, out_rows[s].back());
      }
      if (const std::vector<int64_t>* lod = out_lods[out_index + i]; lod != nullptr) {
        auto d = device_lod(*lod);
        if (!d.ok()) { status = d.status(); break; }
        call->SetLod(true, s, i, *d);
      }
    }
  }
  if (status.ok() && scratch_bytes > 0) {
    auto p = alloc(scratch_bytes);
    if (p.ok()) call->SetScratch(*p);
    else status = p.status();
  }
  if (status.ok()) status = call->Launch(/*launch_index=*/0);
  if (status.ok()) status = device.Synchronize(0);
  for (size_t s = 0, out_index = 0; s < out_slots.size() && status.ok();
       out_index += out_slots[s].tensors.size(), ++s) {
    const auto& names = op.Output(out_slots[s].name);
    for (size_t i = 0; i < out_ptrs[s].size() && status.ok(); ++i) {
      HostTensor t;
      t.dtype = out_slots[s].tensors[i].dtype;
      t.dims = out_slots[s].tensors[i].dims;
      t.bytes.resize(static_cast<size_t>(t.numel()) * ir::DataTypeSize(t.dtype));
      if (!t.bytes.empty()) {
        status = device.CopyToHost(0, t.bytes.data(), out_ptrs[s][i], t.bytes.size());
      }
      if (out_rows[s][i] != nullptr && status.ok()) {
        SparseRows& rows = (*sparse)[names[i]];
        rows.height = out_slots[s].tensors[i].height;
        rows.rows.assign(static_cast<size_t>(t.dims[0]), 0);
        if (!rows.rows.empty()) {
          status = device.CopyToHost(0, rows.rows.data(), out_rows[s][i],
                                     rows.rows.size() * sizeof(int64_t));
        }
      }
      if (const std::vector<int64_t>* lod = out_lods[out_index + i]; lod != nullptr) {
        vars[names[i] + ".lod"] = MakeTensor<int64_t>({static_cast<int64_t>(lod->size())}, *lod);
        // The rows past the last offset are padding, which the host zeroes after the launch
        // (fleet_abi.h), so no kernel writes them.
        if (!t.dims.empty() && t.dims[0] > 0 && !lod->empty() && lod->back() < t.dims[0]) {
          const size_t row = t.bytes.size() / static_cast<size_t>(t.dims[0]);
          std::fill(t.bytes.begin() + static_cast<ptrdiff_t>(row * lod->back()), t.bytes.end(),
                    uint8_t{0});
        }
      }
      vars[names[i]] = std::move(t);
    }
  }
  call.reset();
  cleanup();
  return status;
}

StatusOr<std::map<std::string, std::vector<HostTensor>>> NumpyReference(
    const std::string& function, const ir::Op& op, const VarMap& vars) {
  char tmpl[] = "/tmp/fleet-ref-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Internal("mkdtemp failed");
  fs::path dir(tmpl);
  nlohmann::json manifest;
  manifest["function"] = function;
  manifest["attrs"] = nlohmann::json::object();
  // Every attribute the kernel sees, schema defaults included, so references need not repeat
  // the defaults.
  const ops::OpSchema* schema = ops::BuiltinOps().Find(op.type);
  const ir::AttrMap attrs = schema ? ops::AttrsWithDefaults(*schema, op) : op.attrs;
  for (const auto& [name, value] : attrs) manifest["attrs"][name] = AttrToJson(value);
  manifest["inputs"] = nlohmann::json::object();
  for (const auto& [slot, names] : op.inputs) {
    nlohmann::json files = nlohmann::json::array();
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = vars.find(names[i]);
      if (it == vars.end()) return NotFound("reference input '" + names[i] + "' has no value");
      std::string file = "in_" + slot + "_" + std::to_string(i) + ".npy";
      FLEET_RETURN_IF_ERROR(data::WriteNpy(dir / file, it->second));
      files.push_back(file);
    }
    manifest["inputs"][slot] = files;
  }
  {
    std::ofstream m(dir / "manifest.json");
    m << manifest.dump();
  }
  // The installed kit's references are elsewhere than the build's (fleet-conformance says where).
  const char* ref_env = std::getenv("FLEET_CONFORMANCE_REF_DIR");
  const std::string ref_dir =
      (ref_env != nullptr && *ref_env != '\0') ? ref_env : FLEET_CONFORMANCE_REF_DIR;
  if (ref_dir.find('\'') != std::string::npos) {
    return InvalidArgument("FLEET_CONFORMANCE_REF_DIR must not contain a quote");
  }
  std::string cmd = "timeout 120 '" FLEET_PYTHON3 "' '" + ref_dir + "/run_reference.py' '" +
                    dir.string() + "' > '" + (dir / "log.txt").string() + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::map<std::string, std::vector<HostTensor>> out;
  Status status;
  if (rc != 0) {
    std::ifstream log(dir / "log.txt");
    std::stringstream ss;
    ss << log.rdbuf();
    status = Internal("reference '" + function + "' failed (exit " + std::to_string(rc) +
                      "):\n" + ss.str());
  } else {
    std::ifstream r(dir / "outputs.json");
    nlohmann::json outputs = nlohmann::json::parse(r, nullptr, false);
    if (outputs.is_discarded()) status = Internal("reference wrote no outputs.json");
    else {
      for (auto& [slot, files] : outputs.items()) {
        for (const auto& f : files) {
          auto t = data::ReadNpy(dir / f.get<std::string>());
          if (!t.ok()) { status = t.status(); break; }
          out[slot].push_back(std::move(*t));
        }
      }
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!status.ok()) return status;
  return out;
}

::testing::AssertionResult AllClose(const HostTensor& actual, const HostTensor& expected,
                                    double rtol, double atol) {
  if (actual.dims != expected.dims) {
    return ::testing::AssertionFailure() << "shape " << DimsText(actual.dims) << " != expected "
                                         << DimsText(expected.dims);
  }
  const int64_t n = actual.numel();
  int bad = 0;
  std::stringstream msg;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double a = ElementAsDouble(actual, i), e = ElementAsDouble(expected, i);
    double err = std::fabs(a - e);
    bool ok = err <= atol + rtol * std::fabs(e) || (std::isnan(a) && std::isnan(e)) ||
              (std::isinf(a) && a == e);
    if (!ok) {
      worst = std::max(worst, err);
      if (bad < 5) msg << "\n  [" << i << "] " << a << " vs expected " << e;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " elements differ (worst "
                                       << worst << ", rtol " << rtol << ", atol " << atol << ")"
                                       << msg.str();
}

namespace {

// L = sum over weighted outputs of <w, out>.
StatusOr<double> Objective(OpRunner& runner, const ir::Op& op, VarMap env,
                           const std::vector<std::string>& outs, const VarMap& weights,
                           uint64_t seed) {
  // The same seed as the analytic pass, so random ops (dropout) draw the same mask.
  FLEET_RETURN_IF_ERROR(runner.Run(op, env, seed));
  double total = 0;
  for (const auto& o : outs) {
    const HostTensor& t = env.at(o);
    const HostTensor& w = weights.at(o);
    for (int64_t i = 0; i < t.numel(); ++i) total += ElementAsDouble(t, i) * ElementAsDouble(w, i);
  }
  return total;
}

}  // namespace

::testing::AssertionResult CheckGradients(OpRunner& runner, const ir::Op& forward,
                                          const VarMap& vars, const GradCheckOptions& options) {
  const ops::OpSchema* schema = ops::BuiltinOps().Find(forward.type);
  if (schema == nullptr) return ::testing::AssertionFailure() << "no schema for " << forward.type;
  if (!schema->grad) {
    return ::testing::AssertionFailure() << forward.type << " has no gradient rule";
  }
  VarMap env = vars;
  if (Status s = runner.Run(forward, env, options.seed); !s.ok()) {
    return ::testing::AssertionFailure() << "forward: " << s.ToString();
  }

  std::vector<std::string> out_slots = options.outputs;
  if (out_slots.empty()) {
    for (const auto& [slot, names] : forward.outputs) {
      if (!names.empty() && IsFloat(env.at(names[0]).dtype)) out_slots.push_back(slot);
    }
  }
  std::vector<std::string> outs;
  VarMap weights;
  uint64_t wseed = options.seed;
  for (const auto& slot : out_slots) {
    for (const auto& name : forward.Output(slot)) {
      outs.push_back(name);
      weights[name] = RandomTensor<double>(env.at(name).dims, ++wseed, -1.0, 1.0);
      env[ir::GradVarName(name)] = weights[name];
    }
  }

  // Analytic: run the grad ops. A gradient input of an output that is not in the objective is
  // zero.
  for (const ir::Op& g : schema->grad(forward)) {
    for (const auto& name : g.InputVars()) {
      if (env.count(name)) continue;
      std::string_view fwd = ir::ForwardVarName(name);
      if (fwd.empty() || !env.count(std::string(fwd))) {
        return ::testing::AssertionFailure() << g.type << " reads '" << name
                                             << "', which the forward op does not provide";
      }
      HostTensor zeros = env.at(std::string(fwd));
      std::fill(zeros.bytes.begin(), zeros.bytes.end(), 0);
      env[name] = zeros;
    }
    if (Status s = runner.Run(g, env, options.seed); !s.ok()) {
      return ::testing::AssertionFailure() << g.type << ": " << s.ToString();
    }
  }

  std::vector<std::string> in_slots = options.inputs;
  if (in_slots.empty()) {
    for (const auto& spec : schema->inputs) {
      const auto& names = forward.Input(spec.name);
      if (spec.no_grad || names.empty()) continue;
      if (IsFloat(vars.at(names[0]).dtype)) in_slots.push_back(spec.name);
    }
  }
  for (const auto& slot : in_slots) {
    for (const auto& name : forward.Input(slot)) {
      auto g = env.find(ir::GradVarName(name));
      if (g == env.end()) {
        return ::testing::AssertionFailure() << "the grad rule of " << forward.type
                                             << " gives no gradient for " << slot << " ("
                                             << name << ")";
      }
      const HostTensor& x = vars.at(name);
      if (x.dtype != ir::DataType::kFloat64) {
        return ::testing::AssertionFailure() << "gradient checks need float64 inputs; " << name
                                             << " is " << ir::DataTypeName(x.dtype);
      }
      HostTensor numeric = x;
      for (int64_t i = 0; i < x.numel(); ++i) {
        VarMap plus = vars, minus = vars;
        plus[name].data<double>()[i] += options.eps;
        minus[name].data<double>()[i] -= options.eps;
        auto lp = Objective(runner, forward, plus, outs, weights, options.seed);
        auto lm = Objective(runner, forward, minus, outs, weights, options.seed);
        if (!lp.ok() || !lm.ok()) {
          return ::testing::AssertionFailure()
                 << "forward during differencing: "
                 << (lp.ok() ? lm.status() : lp.status()).ToString();
        }
        numeric.data<double>()[i] = (*lp - *lm) / (2 * options.eps);
      }
      auto r = AllClose(g->second, numeric, options.rtol, options.atol);
      if (!r) return ::testing::AssertionFailure() << "d/d" << slot << " (" << name << "): "
                                                   << r.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- checks the op suites share -------------------------------------------------------------

VarMap CastAll(const VarMap& vars, ir::DataType dtype) {
  VarMap out;
  for (const auto& [name, t] : vars) {
    const bool is_float = t.dtype == ir::DataType::kFloat32 || t.dtype == ir::DataType::kFloat64;
    out[name] = is_float ? Cast(t, dtype) : t;
  }
  return out;
}

void ExpectFloatsMatchNumpy(OpRunner& runner, const ir::Op& op, const VarMap& vars64, double rtol32,
                        double atol32, std::string ref) {
  if (ref.empty()) ref = op.type;
  auto expected = NumpyReference(ref, op, vars64);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  for (ir::DataType dtype : {ir::DataType::kFloat64, ir::DataType::kFloat32}) {
    SCOPED_TRACE(std::string(ir::DataTypeName(dtype)));
    VarMap vars = CastAll(vars64, dtype);
    Status s = runner.Run(op, vars);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& [slot, tensors] : *expected) {
      const auto& names = op.Output(slot);
      ASSERT_EQ(names.size(), tensors.size()) << slot;
      for (size_t i = 0; i < names.size(); ++i) {
        const bool f32 = dtype == ir::DataType::kFloat32;
        EXPECT_TRUE(AllClose(vars.at(names[i]), tensors[i], f32 ? rtol32 : 1e-10,
                             f32 ? atol32 : 1e-12))
            << op.type << " " << slot << "[" << i << "]";
      }
    }
  }
}

void ExpectFloat32GradsMatchFloat64(OpRunner& runner, const ir::Op& fwd, const VarMap& vars64,
                                    double rtol, double atol, uint64_t seed) {
  VarMap env64 = vars64;
  Status s = runner.Run(fwd, env64);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const auto& [slot, names] : fwd.outputs) {
    for (const auto& n : names) {
      env64[ir::GradVarName(n)] = RandomTensor<double>(env64.at(n).dims, ++seed);
    }
  }
  VarMap env32 = CastAll(env64, ir::DataType::kFloat32);
  const ops::OpSchema* schema = ops::BuiltinOps().Find(fwd.type);
  ASSERT_NE(schema, nullptr);
  for (const ir::Op& g : schema->grad(fwd)) {
    SCOPED_TRACE(g.type);
    s = runner.Run(g, env64);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = runner.Run(g, env32);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& name : g.OutputVars()) {
      EXPECT_TRUE(AllClose(env32.at(name), env64.at(name), rtol, atol)) << name;
    }
  }
}

::testing::AssertionResult MatchesNumpy(OpRunner& runner, const ir::Op& op, VarMap vars,
                                        const std::vector<std::string>& slots, double rtol,
                                        double atol) {
  VarMap inputs = vars;
  if (Status s = runner.Run(op, vars); !s.ok()) {
    return ::testing::AssertionFailure() << "run: " << s.ToString();
  }
  auto ref = NumpyReference(op.type, op, inputs);
  if (!ref.ok()) return ::testing::AssertionFailure() << ref.status().ToString();
  for (const auto& slot : slots) {
    if (!ref->count(slot)) return ::testing::AssertionFailure() << "reference lacks " << slot;
    const auto& names = op.Output(slot);
    for (size_t i = 0; i < names.size(); ++i) {
      auto r = AllClose(vars.at(names[i]), ref->at(slot)[i], rtol, atol);
      if (!r) return ::testing::AssertionFailure() << slot << ": " << r.message();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fleet::conformance
