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
};

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

  // Copies of a var's contents to and from the host. Write creates the var when it is absent
  // and requires the same dtype and shape when it is present.
  StatusOr<HostTensor> Read(std::string_view name) const;
  Status Write(const std::string& name, const HostTensor& value);

  // Names of every var, sorted.
  std::vector<std::string> Names() const;
  size_t size() const { return vars_.size(); }

 private:
  Status WaitForStream() const;

  const Device& device_;
  int32_t ordinal_;
  FleetStream* stream_ = nullptr;
  MemoryLimit limit_;
  std::map<std::string, ScopeVar, std::less<>> vars_;
};

}  // namespace fleet::exec
