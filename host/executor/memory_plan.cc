#include "executor/memory_plan.h"

#include <algorithm>
#include <cstdint>

#include "support/host_memory.h"

namespace fleet::exec {

namespace {

// a + b, or SIZE_MAX when that overflows: sums of sizes that came from input saturate, and the
// executor refuses an arena of SIZE_MAX bytes instead of allocating a wrapped-around one.
size_t SaturatingAdd(size_t a, size_t b) {
  size_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}

}  // namespace

std::string MemoryLimit::Exceeded(uint64_t need) const {
  if (need <= bytes) return {};
  return (need == SIZE_MAX ? std::string("over 2^64 bytes") : BytesText(need)) +
         ", more than the " + BytesText(bytes) + " of memory of " + device;
}

MemoryPlan PlanMemory(const std::vector<VarLifetime>& vars, size_t alignment) {
  auto round_up = [&](size_t n) {
    n = std::max<size_t>(n, 1);
    return SaturatingAdd(n, alignment - 1) & ~(alignment - 1);
  };
  MemoryPlan plan;
  if (vars.empty()) return plan;
  int begin = vars.front().first, end = vars.front().last;
  for (const VarLifetime& v : vars) {
    begin = std::min(begin, v.first);
    end = std::max(end, v.last);
    plan.unshared_bytes = SaturatingAdd(plan.unshared_bytes, round_up(v.bytes));
  }
  std::vector<int> free_buffers;
  for (int t = begin; t <= end; ++t) {
    // Place the vars born at t while the vars that die at t still hold their buffers.
    for (const VarLifetime& v : vars) {
      if (v.first != t) continue;
      size_t need = round_up(v.bytes);
      int chosen = -1;
      for (int b : free_buffers) {
        size_t have = plan.buffer_bytes[static_cast<size_t>(b)];
        if (have >= need &&
            (chosen < 0 || have < plan.buffer_bytes[static_cast<size_t>(chosen)])) {
          chosen = b;
        }
      }
      if (chosen < 0) {
        for (int b : free_buffers) {
          if (chosen < 0 ||
              plan.buffer_bytes[static_cast<size_t>(b)] >
                  plan.buffer_bytes[static_cast<size_t>(chosen)]) {
            chosen = b;
          }
        }
      }
      if (chosen < 0) {
        chosen = static_cast<int>(plan.buffer_bytes.size());
        plan.buffer_bytes.push_back(need);
      } else {
        free_buffers.erase(std::find(free_buffers.begin(), free_buffers.end(), chosen));
        size_t& size = plan.buffer_bytes[static_cast<size_t>(chosen)];
        size = std::max(size, need);
      }
      plan.buffer_of[v.name] = chosen;
    }
    for (const VarLifetime& v : vars) {
      if (v.last == t) free_buffers.push_back(plan.buffer_of[v.name]);
    }
  }
  size_t offset = 0;
  for (size_t bytes : plan.buffer_bytes) {
    plan.buffer_offsets.push_back(offset);
    offset = SaturatingAdd(offset, bytes);
  }
  plan.arena_bytes = offset;
  return plan;
}

}  // namespace fleet::exec
