// The scope: persistable variables (parameters, optimizer accumulators, the learning rate, ...)
// living in device memory across runs and across programs. The startup program fills it, the
// main program reads and updates it in place.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "executor/memory_plan.h"
#include "executor/tensor.h"
#include "ir/program.h"
#include "plugin/device.h"
#include "support/status.h"

namespace fleet::exec {

struct ScopeVar {
  ir::DataType dtype = ir::DataType::kInvalid;
  std::vector<int64_t> dims;
  void* data = nullptr;  // device memory owned by the scope
  size_t bytes = 0;
  // >= 0: a SelectedRows var (a sparse gradient a parameter server receives) standing for a
  // dense [height, dims[1:]...] tensor: dims[0] entries, their values at `data`, their row
  // indices at data + SelectedRowsOffset(dtype, dims); -1 for any other var.
  int64_t height = -1;
};

// Where a SelectedRows tensor's row indices start in its buffer: after its values (dims[0]
// slices), rounded up to 8 bytes. The buffer is that plus dims[0] int64s.
size_t SelectedRowsOffset(ir::DataType dtype, const std::vector<int64_t>& dims);

class Scope {
 public:
  // `device` must outlive the scope.
  Scope(const Device& device, int32_t ordinal) : device_(device), ordinal_(ordinal) {}
  ~Scope();  // frees every var
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // The stream kernels touching the scope's vars run on (the executor's); Read, Write, new vars
  // and the destructor wait for it first, so host copies never race queued kernels. NULL (the
  // default) for devices whose work is synchronous.
  void SetStream(FleetStream* stream) { stream_ = stream; }

  // New vars larger than `limit` are refused (RESOURCE_EXHAUSTED naming the var) before any
  // allocation; the default is no limit.
  void SetMemoryLimit(MemoryLimit limit) { limit_ = std::move(limit); }

  const ScopeVar* Find(std::string_view name) const;

  // The var `name` with this dtype and shape (all dims known), allocated and zero-filled when it
  // does not exist yet. An existing var of another dtype or shape is an error naming both; a new
  // one beyond the memory limit, or one the device cannot allocate, RESOURCE_EXHAUSTED naming
  // the var, its dtype and shape and the bytes.
  StatusOr<const ScopeVar*> GetOrCreate(const std::string& name, ir::DataType dtype,
                                        const std::vector<int64_t>& dims);

  // A SelectedRows var named `name` (see ScopeVar::height) with room for at least dims[0]
  // entries of a [height, dims[1:]...] tensor. An absent var is made with every entry empty
  // (rows -1, values zero). One of another dtype, slice shape or height is an error naming
  // both. One with less room is given new memory of dims[0] entries, every entry empty: what
  // it held is gone, and data pointers taken before (prepared programs reading it) are stale.
  // One with enough room is left as it is. Errors as GetOrCreate's.
  StatusOr<const ScopeVar*> EnsureSelectedRows(const std::string& name, ir::DataType dtype,
                                               const std::vector<int64_t>& dims, int64_t height);

  // Gives var `name` `rows` rows (a growable table's vars, pserver/growable_table.h). A dense
  // var [r, ...] gets new memory of [rows, ...] holding its first min(r, rows) rows, the rest
  // zero; a SelectedRows var gets height `rows`, its entries unchanged. Data pointers taken
  // before (prepared programs) are stale. An absent var is NOT_FOUND; a new size beyond the
  // memory limit, or one the device cannot allocate, RESOURCE_EXHAUSTED naming the var, and the
  // var is left as it was.
  Status Regrow(const std::string& name, int64_t rows);

  // Copies of a var's contents to and from the host. Write creates the var when it is absent
  // and requires the same dtype and shape when it is present. Read refuses a SelectedRows var
  // (it has no dense value to copy).
  StatusOr<HostTensor> Read(std::string_view name) const;
  Status Write(const std::string& name, const HostTensor& value);

  // Names of every var, sorted.
  std::vector<std::string> Names() const;
  size_t size() const { return vars_.size(); }

 private:
  Status WaitForStream() const;
  // Device memory of `bytes` for var `name` (described by `what`), within the memory limit.
  StatusOr<void*> Allocate(size_t bytes, const std::string& what);

  const Device& device_;
  int32_t ordinal_;
  FleetStream* stream_ = nullptr;
  MemoryLimit limit_;
  std::map<std::string, ScopeVar, std::less<>> vars_;
};

}  // namespace fleet::exec
