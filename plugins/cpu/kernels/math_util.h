// Shared pieces of the math kernels (math_*.cc): strided iteration over broadcast shapes
// without heap allocation, a plain GEMM for float64 and fallbacks, and the oneDNN helpers the
// float32 fast paths use. Not part of the plugin's interface.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <dnnl.hpp>

#include "broadcast_plan.h"
#include "kernels/kernel_util.h"

namespace fleet_cpu::math {

// Kernel groups, one file each; AddMathKernels (math_kernels.cc) calls them.
void AddMatmulKernels(KernelList& list);       // math_matmul_kernels.cc
void AddElementwiseKernels(KernelList& list);  // math_elementwise_kernels.cc
void AddReduceKernels(KernelList& list);       // math_reduce_kernels.cc
void AddActivationKernels(KernelList& list);   // math_activation_kernels.cc
void AddUnaryKernels(KernelList& list);        // math_unary_kernels.cc
void AddCompareKernels(KernelList& list);      // math_compare_kernels.cc
void AddReduceExtKernels(KernelList& list);    // math_reduce_ext_kernels.cc

// The broadcast plan (StridePlan, Coalesce, Paddle's axis rule) is shared with the CUDA plugin
// (plugins/common/broadcast_plan.h), so both accept the same shapes.
using fleet::kernel::Coalesce;
using fleet::kernel::StridePlan;
inline constexpr int kMaxRank = fleet::kernel::kMaxStrideRank;

// INVALID_ARGUMENT naming the first of the listed input / output slots the op lacks, else
// nullptr. Kernels check before touching tensors, so a malformed op gets an error, not a crash.
FleetStatus* RequireSlots(const FleetKernelContext* kc, std::initializer_list<const char*> inputs,
                          std::initializer_list<const char*> outputs);

// Calls f(n, o, a, b, sa, sb) for each innermost row: `n` elements whose row-major index starts
// at `o`, with offsets starting at `a`/`b` and advancing by `sa`/`sb`.
template <typename F>
void VisitRows(const StridePlan& p, F&& f) {
  if (p.rank == 0) {
    f(int64_t{1}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  const int last = p.rank - 1;
  const int64_t n = p.dims[last];
  int64_t outer = 1;
  for (int d = 0; d < last; ++d) outer *= p.dims[d];
  if (n == 0 || outer == 0) return;
  int64_t idx[kMaxRank] = {};
  int64_t o = 0, a = 0, b = 0;
  for (int64_t r = 0; r < outer; ++r) {
    f(n, o, a, b, p.sa[last], p.sb[last]);
    o += n;
    for (int d = last - 1; d >= 0; --d) {
      a += p.sa[d];
      b += p.sb[d];
      if (++idx[d] < p.dims[d]) break;
      a -= p.sa[d] * p.dims[d];
      b -= p.sb[d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

// C[m, n] (+)= sum_k A[m, k] * B[k, n] with arbitrary element strides; the reference path for
// float64 and for float32 shapes the oneDNN path does not take.
template <typename T>
void Gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t am, int64_t ak, const T* b,
          int64_t bk, int64_t bn, T* c, int64_t cm, int64_t cn, bool accumulate) {
  if (!accumulate) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * cm + j * cn] = T(0);
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * am + p * ak];
      const T* brow = b + p * bk;
      T* crow = c + i * cm;
      for (int64_t j = 0; j < n; ++j) crow[j * cn] += av * brow[j * bn];
    }
  }
}

// One oneDNN primitive with its memory objects, created at prepare. Launches point the memory
// objects at the step's data (set_data_handle) and execute through the C API with the argument
// array built here, since the C++ execute() copies its argument map into a fresh vector.
struct DnnlCall {
  dnnl::primitive prim;
  std::vector<int> arg_ids;
  std::vector<dnnl::memory> memories;
  std::vector<dnnl_exec_arg_t> c_args;
  bool valid = false;

  // Registers argument `arg` with descriptor `md` (no data yet).
  void Bind(int arg, const dnnl::memory::desc& md) {
    arg_ids.push_back(arg);
    memories.push_back(dnnl::memory(md, DnnlEngine(), DNNL_MEMORY_NONE));
    c_args.clear();
    for (size_t i = 0; i < arg_ids.size(); ++i) c_args.push_back({arg_ids[i], memories[i].get()});
  }
  bool Has(int arg) const {
    for (int a : arg_ids) {
      if (a == arg) return true;
    }
    return false;
  }
  void Set(int arg, const void* data) {
    for (size_t i = 0; i < arg_ids.size(); ++i) {
      if (arg_ids[i] == arg) memories[i].set_data_handle(const_cast<void*>(data));
    }
  }
  // Executes on this thread's stream and waits; throws dnnl::error (Guard reports it).
  void Run() {
    dnnl::stream& s = DnnlStream();
    dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), s.get(),
                                                   static_cast<int>(c_args.size()),
                                                   c_args.data()),
                            "could not execute a primitive");
    s.wait();
  }
};

// Primitive attributes asking for a user-provided scratchpad, which comes from the host's
// scratch memory (so no launch allocates).
inline dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace fleet_cpu::math
