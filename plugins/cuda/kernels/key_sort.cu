// The radix sort behind key_sort.h, on CUB (part of the CUDA Toolkit).
#include "kernels/key_sort.h"

#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <string>

#include "kernels/nn_groups.h"

namespace fleet_cuda {
namespace {

size_t KeyBytes(int64_t n) {
  return nn::AlignScratch(static_cast<size_t>(n) * sizeof(uint32_t));
}

}  // namespace

size_t SortScratch(const SortPlan& s) {
  return nn::kFlagBytes + 4 * KeyBytes(s.n) + nn::AlignScratch(s.sort_bytes);
}

FleetStatus* PlanSort(const FleetKernelContext* kc, int64_t n, int64_t rows, SortPlan* s) {
  if (n < 0 || n > INT_MAX || rows < 0 || rows >= static_cast<int64_t>(UINT32_MAX)) {
    return InvalidArgument(nn::OpName(kc) + ": at most " + std::to_string(INT_MAX) +
                           " indices and " + std::to_string(UINT32_MAX - 1) + " rows, got " +
                           std::to_string(n) + " and " + std::to_string(rows));
  }
  s->n = n;
  s->rows = rows;
  s->end_bit = 1;
  while (s->end_bit < 32 && (uint64_t{1} << s->end_bit) <= static_cast<uint64_t>(rows)) {
    ++s->end_bit;
  }
  s->sort_bytes = 0;
  if (n == 0) return nullptr;
  // The size query picks the sort's tuning for the device, so it runs on the op's device.
  if (FleetStatus* st = CudaStatus(cudaSetDevice(kc->device_ordinal),
                                   nn::OpName(kc) + ": cudaSetDevice")) {
    return st;
  }
  return CudaStatus(cub::DeviceRadixSort::SortPairs(
                        nullptr, s->sort_bytes, static_cast<const uint32_t*>(nullptr),
                        static_cast<uint32_t*>(nullptr), static_cast<const uint32_t*>(nullptr),
                        static_cast<uint32_t*>(nullptr), static_cast<int>(n), 0, s->end_bit),
                    nn::OpName(kc) + ": sizing the index sort");
}

SortBuffers BuffersOf(const FleetKernelContext* kc, const SortPlan& s) {
  char* base = static_cast<char*>(kc->scratch) + nn::kFlagBytes;
  const size_t kb = KeyBytes(s.n);
  return {reinterpret_cast<uint32_t*>(base), reinterpret_cast<uint32_t*>(base + kb),
          reinterpret_cast<uint32_t*>(base + 2 * kb), reinterpret_cast<uint32_t*>(base + 3 * kb),
          base + 4 * kb};
}

FleetStatus* SortKeys(const FleetKernelContext* kc, const SortPlan& s, const SortBuffers& b,
                      FleetStream* stream) {
  if (s.n == 0) return nullptr;
  size_t bytes = s.sort_bytes;
  return CudaStatus(cub::DeviceRadixSort::SortPairs(
                        b.temp, bytes, static_cast<const uint32_t*>(b.keys_in), b.keys_out,
                        static_cast<const uint32_t*>(b.pos_in), b.pos_out, static_cast<int>(s.n),
                        0, s.end_bit, stream->native),
                    nn::OpName(kc) + ": sorting the indices");
}

}  // namespace fleet_cuda
