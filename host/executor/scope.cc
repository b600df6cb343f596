#include "executor/scope.h"

#include "support/host_memory.h"
#include "support/logging.h"

namespace fleet::exec {

Scope::~Scope() {
  if (Status s = WaitForStream(); !s.ok()) Log().warn("scope: {}", s.message());
  for (auto& [name, var] : vars_) {
    if (Status s = device_.Free(ordinal_, var.data); !s.ok()) {
      Log().warn("scope: freeing '{}': {}", name, s.message());
    }
  }
}

Status Scope::WaitForStream() const {
  return stream_ == nullptr ? OkStatus() : device_.StreamSynchronize(stream_);
}

const ScopeVar* Scope::Find(std::string_view name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

StatusOr<const ScopeVar*> Scope::GetOrCreate(const std::string& name, ir::DataType dtype,
                                             const std::vector<int64_t>& dims) {
  if (const ScopeVar* v = Find(name)) {
    if (v->dtype != dtype || v->dims != dims) {
      return InvalidArgument("persistable var '" + name + "' is " + ir::TypeShapeText(v->dtype, v->dims) +
                             " in the scope but the program needs " + ir::TypeShapeText(dtype, dims));
    }
    return v;
  }
  for (int64_t d : dims) {
    if (d < 0) {
      return InvalidArgument("persistable var '" + name + "' has an unknown dimension: " +
                             ir::ShapeText(dims));
    }
  }
  ScopeVar var;
  var.dtype = dtype;
  var.dims = dims;
  FLEET_ASSIGN_OR_RETURN(var.bytes, ir::TensorBytes(dtype, dims));
  auto what = [&] { return "persistable var '" + name + "' " + ir::TypeShapeText(dtype, dims); };
  if (std::string over = limit_.Exceeded(var.bytes); !over.empty()) {
    return ResourceExhausted(what() + " needs " + over);
  }
  auto data = device_.Alloc(ordinal_, var.bytes);
  if (!data.ok()) {
    return Status(data.status().code(), what() + " (" + BytesText(var.bytes) + "): " +
                                            data.status().message());
  }
  var.data = *data;
  // A var nobody initialised reads as zeros rather than as whatever the allocator left. On the
  // stream, so that it is ordered before the kernels that will write it.
  if (var.bytes > 0) {
    Status s = device_.Memset(ordinal_, var.data, 0, var.bytes, stream_);
    if (!s.ok()) {
      (void)device_.Free(ordinal_, var.data);
      return s;
    }
  }
  auto [it, inserted] = vars_.emplace(name, std::move(var));
  return &it->second;
}

StatusOr<HostTensor> Scope::Read(std::string_view name) const {
  const ScopeVar* v = Find(name);
  if (v == nullptr) return NotFound("the scope has no var '" + std::string(name) + "'");
  FLEET_RETURN_IF_ERROR(WaitForStream());
  HostTensor out;
  out.Reshape(v->dtype, v->dims);
  if (v->bytes > 0) {
    FLEET_RETURN_IF_ERROR(device_.CopyToHost(ordinal_, out.bytes.data(), v->data, v->bytes));
  }
  return out;
}

Status Scope::Write(const std::string& name, const HostTensor& value) {
  if (value.bytes.size() != static_cast<size_t>(value.numel()) * ir::DataTypeSize(value.dtype)) {
    return InvalidArgument("value for '" + name + "' holds " + std::to_string(value.bytes.size()) +
                           " bytes, not the size of " + ir::TypeShapeText(value.dtype, value.dims));
  }
  FLEET_ASSIGN_OR_RETURN(const ScopeVar* v, GetOrCreate(name, value.dtype, value.dims));
  if (v->bytes == 0) return OkStatus();
  FLEET_RETURN_IF_ERROR(WaitForStream());
  return device_.CopyToDevice(ordinal_, v->data, value.bytes.data(), v->bytes);
}

std::vector<std::string> Scope::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, var] : vars_) out.push_back(name);
  return out;
}

}  // namespace fleet::exec
