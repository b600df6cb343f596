// Variable slicing and placement for the pserver pass (Paddle's slice_variable and its
// PSDispatchers, distribute_transpiler.py / ps_dispatcher.py).
//
// Pure functions of their arguments: no state, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace fleet::passes::pserver {

// Paddle's slice_variable for one variable of shape `shape` cut for `slice_count` servers with
// blocks of at least `min_block_size` elements: the size of each block along dim 0 (rows for
// rank >= 2, elements for rank 1). Blocks are whole rows; there may be fewer blocks than
// servers. A scalar (rank 0) is one block of 1. INVALID_ARGUMENT when a dim is unknown or
// negative, or when slice_count or min_block_size is < 1; `what` names the variable.
StatusOr<std::vector<int64_t>> SliceRows(const std::vector<int64_t>& shape, int32_t slice_count,
                                         int64_t min_block_size, std::string_view what);

// "<var>.block<i>": the name of block i of a variable cut into several.
std::string BlockName(std::string_view var, size_t i);

// How blocks are placed on servers.
enum class SplitMethod {
  kRoundRobin,  // block k of the flattened list goes to server k mod n (Paddle's RoundRobin)
  kHashName,    // Fnv1a64(name) mod n: stable across processes, unlike Paddle's HashName
};

// "round_robin" / "hash_name"; INVALID_ARGUMENT naming the option otherwise.
StatusOr<SplitMethod> ParseSplitMethod(std::string_view name);

// The 64-bit FNV-1a hash of `text` (offset basis 14695981039346656037, prime 1099511628211).
uint64_t Fnv1a64(std::string_view text);

// The server of each name of `blocks` (flattened, in order) among `num_servers` (>= 1).
std::vector<int32_t> Dispatch(const std::vector<std::string>& blocks, int32_t num_servers,
                              SplitMethod method);

}  // namespace fleet::passes::pserver
