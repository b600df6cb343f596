// What every CPU kernel file shares: reading the kernel context, reporting errors, the oneDNN
// engine and stream, and the list kernels are registered into.
//
// Each group of kernels lives in its own file and adds its FleetKernelDefs to the list through
// Add(); plugin.cc publishes the list as one kernels component. Definitions have static storage
// for the life of the process, as the ABI requires.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <dnnl.hpp>

#include "fleet/fleet_plugin.h"
#include "kernel_context.h"
#include "plan_status.h"

namespace fleet_cpu {

using KernelList = std::vector<const FleetKernelDef*>;

using SupportsFn = FleetStatus* (*)(void*, const FleetKernelContext*);
using PrepareFn = FleetStatus* (*)(void*, const FleetKernelContext*, void**, size_t*);
using LaunchFn = FleetStatus* (*)(void*, const FleetKernelContext*, void*);
using ReleaseFn = void (*)(void*, void*);

// Appends a kernel for `op_type` on "cpu" with `dtype` (FLEET_DTYPE_*) and FLEET_KERNEL_FLAG_*
// `flags` to `list`.
void Add(KernelList& list, const char* op_type, int32_t dtype, LaunchFn launch,
         PrepareFn prepare = nullptr, ReleaseFn release = nullptr, SupportsFn supports = nullptr,
         uint32_t flags = 0);

// Groups, one file each.
void AddMathKernels(KernelList& list);       // math_kernels.cc (+ any files it splits into)
void AddNnKernels(KernelList& list);         // nn_kernels.cc
void AddTensorKernels(KernelList& list);     // tensor_kernels.cc
void AddOptimizerKernels(KernelList& list);  // optimizer_kernels.cc
void AddOptimizerExtKernels(KernelList& list);  // optimizer_ext_kernels.cc (from the above)
// sparse_kernels.cc: the SelectedRows kernels; added last, after the dense kernels of their ops.
void AddSparseKernels(KernelList& list);

// The whole list, built once.
const KernelList& AllKernels();

// ---- reading the context (plugins/common/kernel_context.h) ------------------------------
using fleet::kernel::BoolAttr;
using fleet::kernel::Dims;
using fleet::kernel::DimsText;
using fleet::kernel::FindAttr;
using fleet::kernel::FloatAttr;
using fleet::kernel::FloatsAttr;
using fleet::kernel::Input;
using fleet::kernel::InputCount;
using fleet::kernel::IntAttr;
using fleet::kernel::IntsAttr;
using fleet::kernel::Numel;
using fleet::kernel::Output;
using fleet::kernel::OutputCount;
using fleet::kernel::StringAttr;

template <typename T>
T* Data(const FleetTensor* t) {
  return static_cast<T*>(t->data);
}

// Threads a kernel may use (kc->num_threads, or the hardware's count when 0).
int Threads(const FleetKernelContext* kc);

// ---- errors -------------------------------------------------------------------------------
FleetStatus* Error(int32_t code, const std::string& message);
inline FleetStatus* InvalidArgument(const std::string& m) {
  return Error(FLEET_CODE_INVALID_ARGUMENT, m);
}
inline FleetStatus* Unimplemented(const std::string& m) {
  return Error(FLEET_CODE_UNIMPLEMENTED, m);
}
// A planner's status (plugins/common/plan_status.h) as this plugin's status; NULL when ok.
inline FleetStatus* FromPlan(const fleet::kernel::PlanStatus& planned) {
  return fleet::kernel::ToFleetStatus(planned, Error);
}

// Sets the OpenMP thread count (used by oneDNN and by ParallelFor) for this launch.
void UseThreads(const FleetKernelContext* kc);

// Runs `body` (returning FleetStatus*), turning any exception — dnnl::error, std::bad_alloc —
// into an INTERNAL status, since none may cross the ABI.

// Also applies the context's thread count (UseThreads), so no kernel body runs an OpenMP
// region with the default team size.
template <typename F>
FleetStatus* Guard(const FleetKernelContext* kc, F&& body) {
  UseThreads(kc);
  try {
    return body();
  } catch (const std::exception& e) {
    return Error(FLEET_CODE_INTERNAL,
                 std::string(kc != nullptr ? kc->op_type : "kernel") + ": " + e.what());
  } catch (...) {
    return Error(FLEET_CODE_INTERNAL, std::string(kc != nullptr ? kc->op_type : "kernel") +
                                          ": unknown exception");
  }
}

// ---- parallel loops -----------------------------------------------------------------------
// The plugin's parallel loops go through ParallelFor, so that a small one never forks (the
// float64 reference convolutions keep OpenMP loops of their own: each item is a whole plane).
// Starting and joining an OpenMP team costs microseconds on an idle machine; on a loaded one
// (other ranks, other jobs) a team member that is not scheduled keeps the others spinning at the
// join for whole time slices, which made a CTR model of many small ops run 30x slower than on
// one thread. Below kParallelWork elements of work a loop therefore runs on the calling thread.
inline constexpr int64_t kParallelWork = int64_t{1} << 14;

// The grain, in items, of a loop whose items each cost about `work` elements.
inline int64_t GrainFor(int64_t work) {
  return std::max<int64_t>(1, kParallelWork / std::max<int64_t>(1, work));
}

// Splits [0, n) into contiguous chunks run on the kernel's threads, or runs f(0, n) inline when n
// is below two grains. `f(begin, end)` must not throw.
template <typename F>
void ParallelFor(const FleetKernelContext* kc, int64_t n, int64_t grain, F&& f) {
  const int threads = Threads(kc);
  grain = std::max<int64_t>(1, grain);
  if (threads <= 1 || n < 2 * grain) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  UseThreads(kc);
  const int64_t chunks = std::min<int64_t>(threads, n / grain);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(n * c / chunks, n * (c + 1) / chunks);
}

// Runs f(i) for every i in [0, n), items costing about `work` elements each.
template <typename F>
void ParallelForEach(const FleetKernelContext* kc, int64_t n, int64_t work, F&& f) {
  ParallelFor(kc, n, GrainFor(work), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

// ---- oneDNN -------------------------------------------------------------------------------
// One CPU engine for the plugin; a stream per thread (created on first use, then reused, so a
// launch in steady state creates nothing).
const dnnl::engine& DnnlEngine();
dnnl::stream& DnnlStream();
// The oneDNN data type of a FLEET_DTYPE_* (f32 for float32; undef for types oneDNN lacks).
dnnl::memory::data_type DnnlType(int32_t fleet_dtype);

}  // namespace fleet_cpu

