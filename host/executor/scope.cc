#include "executor/scope.h"

#include <algorithm>
#include <cstdint>
#include <new>

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
    if (v->height >= 0) {
      return InvalidArgument("'" + name + "' is a sparse gradient the server receives, not a "
                             "dense " + ir::TypeShapeText(dtype, dims));
    }
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
  FLEET_ASSIGN_OR_RETURN(var.data, Allocate(var.bytes, "persistable var '" + name + "' " +
                                                           ir::TypeShapeText(dtype, dims)));
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

Status Scope::Regrow(const std::string& name, int64_t rows) {
  auto it = vars_.find(name);
  if (it == vars_.end()) return NotFound("scope: no var '" + name + "' to regrow");
  ScopeVar& v = it->second;
  if (rows < 0 || v.dims.empty()) {
    return InvalidArgument("scope: cannot give '" + name + "' " + std::to_string(rows) + " rows");
  }
  if (v.height >= 0) {
    v.height = rows;
    return OkStatus();
  }
  std::vector<int64_t> dims = v.dims;
  dims[0] = rows;
  const std::string what = "var '" + name + "' " + ir::TypeShapeText(v.dtype, dims);
  FLEET_ASSIGN_OR_RETURN(const size_t bytes, ir::TensorBytes(v.dtype, dims));
  FLEET_ASSIGN_OR_RETURN(void* data, Allocate(bytes, what));
  const size_t keep = std::min(bytes, v.bytes);
  // The kept rows go through the host (the device interface copies only between host and
  // device), synchronously, before the new rows are zeroed on the stream.
  Status s = WaitForStream();
  if (s.ok() && keep > 0) {
    try {
      std::vector<uint8_t> staging(keep);
      s = device_.CopyToHost(ordinal_, staging.data(), v.data, keep, nullptr);
      if (s.ok()) s = device_.CopyToDevice(ordinal_, data, staging.data(), keep, nullptr);
    } catch (const std::bad_alloc&) {
      s = ResourceExhausted("no host memory for " + BytesText(keep) + " of staging");
    }
  }
  if (s.ok() && bytes > keep) {
    s = device_.Memset(ordinal_, static_cast<uint8_t*>(data) + keep, 0, bytes - keep, stream_);
  }
  if (!s.ok()) {
    (void)device_.Free(ordinal_, data);
    return s.WithContext("scope: regrowing " + what);
  }
  if (Status f = device_.Free(ordinal_, v.data); !f.ok()) {
    Log().warn("scope: freeing '{}': {}", name, f.message());
  }
  v.data = data;
  v.dims = std::move(dims);
  v.bytes = bytes;
  return OkStatus();
}

StatusOr<void*> Scope::Allocate(size_t bytes, const std::string& what) {
  if (std::string over = limit_.Exceeded(bytes); !over.empty()) {
    return ResourceExhausted(what + " needs " + over);
  }
  auto data = device_.Alloc(ordinal_, bytes);
  if (!data.ok()) {
    return Status(data.status().code(),
                  what + " (" + BytesText(bytes) + "): " + data.status().message());
  }
  return *data;
}

size_t SelectedRowsOffset(ir::DataType dtype, const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  const size_t values = n * ir::DataTypeSize(dtype);
  return (values + alignof(int64_t) - 1) / alignof(int64_t) * alignof(int64_t);
}

StatusOr<const ScopeVar*> Scope::EnsureSelectedRows(const std::string& name,
                                                    ir::DataType dtype,
                                                    const std::vector<int64_t>& dims,
                                                    int64_t height) {
  const std::string what = "sparse var '" + name + "' " + ir::TypeShapeText(dtype, dims) +
                           " of height " + std::to_string(height);
  if (dims.empty() || height < 0 || std::any_of(dims.begin(), dims.end(),
                                                [](int64_t d) { return d < 0; })) {
    return InvalidArgument(what + ": needs a known [entries, ...] shape and a height >= 0");
  }
  auto it = vars_.find(name);
  if (it != vars_.end()) {
    ScopeVar& v = it->second;
    if (v.dtype != dtype || v.height != height || v.dims.size() != dims.size() ||
        !std::equal(dims.begin() + 1, dims.end(), v.dims.begin() + 1)) {
      return InvalidArgument("sparse var '" + name + "' is " + ir::TypeShapeText(v.dtype, v.dims) +
                             " of height " + std::to_string(v.height) +
                             " in the scope but is asked for as " +
                             ir::TypeShapeText(dtype, dims) + " of height " +
                             std::to_string(height));
    }
    if (v.dims[0] >= dims[0]) return &v;
  }
  FLEET_ASSIGN_OR_RETURN(const size_t values, ir::TensorBytes(dtype, dims));
  (void)values;  // checked for overflow; the layout is SelectedRowsOffset's
  const size_t offset = SelectedRowsOffset(dtype, dims);
  const size_t bytes = offset + static_cast<size_t>(dims[0]) * sizeof(int64_t);
  FLEET_ASSIGN_OR_RETURN(void* data, Allocate(bytes, what));
  // Values zero, rows -1 (every byte 0xff): each entry empty.
  Status s = device_.Memset(ordinal_, data, 0, offset, stream_);
  if (s.ok() && bytes > offset) {
    s = device_.Memset(ordinal_, static_cast<uint8_t*>(data) + offset, 0xff, bytes - offset,
                       stream_);
  }
  if (!s.ok()) {
    (void)device_.Free(ordinal_, data);
    return s;
  }
  if (it == vars_.end()) it = vars_.emplace(name, ScopeVar{}).first;
  ScopeVar& v = it->second;
  if (v.data != nullptr) {
    FLEET_RETURN_IF_ERROR(WaitForStream());
    if (Status f = device_.Free(ordinal_, v.data); !f.ok()) {
      Log().warn("scope: freeing '{}': {}", name, f.message());
    }
  }
  // dtype and height are written only for a new var: another thread may read them (they never
  // change) while this one grows the var.
  if (v.height < 0) {
    v.dtype = dtype;
    v.height = height;
  }
  v.dims = dims;
  v.data = data;
  v.bytes = bytes;
  return &v;
}

StatusOr<HostTensor> Scope::Read(std::string_view name) const {
  const ScopeVar* v = Find(name);
  if (v == nullptr) return NotFound("the scope has no var '" + std::string(name) + "'");
  if (v->height >= 0) {
    return FailedPrecondition("'" + std::string(name) + "' is a sparse gradient the server "
                              "receives; it has no dense value to read");
  }
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
