// Reading a FleetKernelContext from C++: slots, tensors and typed attributes. Shared by Fleet's
// own device plugins (cpu, cuda); nothing here is part of the ABI. Compiles as C++17 so CUDA
// sources can include it.
//
// Every function is a pure read of the context and is safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/fleet_kernels.h"

namespace fleet::kernel {

// Tensor `i` of a slot, or nullptr when the slot is absent, shorter, or the entry is NULL.
const FleetTensor* Input(const FleetKernelContext* kc, std::string_view slot, size_t i = 0);
const FleetTensor* Output(const FleetKernelContext* kc, std::string_view slot, size_t i = 0);
size_t InputCount(const FleetKernelContext* kc, std::string_view slot);
size_t OutputCount(const FleetKernelContext* kc, std::string_view slot);
const FleetAttr* FindAttr(const FleetKernelContext* kc, std::string_view name);

// Typed reads with a fallback for an absent attribute (the host fills in schema defaults, so
// fallbacks only matter for hand-built contexts).
int64_t IntAttr(const FleetKernelContext* kc, std::string_view name, int64_t fallback = 0);
double FloatAttr(const FleetKernelContext* kc, std::string_view name, double fallback = 0.0);
bool BoolAttr(const FleetKernelContext* kc, std::string_view name, bool fallback = false);
std::string_view StringAttr(const FleetKernelContext* kc, std::string_view name);
std::vector<int64_t> IntsAttr(const FleetKernelContext* kc, std::string_view name);
std::vector<double> FloatsAttr(const FleetKernelContext* kc, std::string_view name);

int64_t Numel(const FleetTensor* t);
std::vector<int64_t> Dims(const FleetTensor* t);

// Dims as messages write them: "[2, 3]".
std::string DimsText(const std::vector<int64_t>& dims);
std::string DimsText(const FleetTensor* t);

}  // namespace fleet::kernel
