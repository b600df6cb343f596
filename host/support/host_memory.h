// How much memory this process can hope to get, for inputs that size allocations (a batch that
// fleet.toml sizes, the tensors of a program): they are checked against it before anything is
// allocated, so an impossible size is refused with the key or var that asked for it instead of
// ending in a failed allocation (or the kernel's OOM killer, with overcommit) far from the cause.
#pragma once

#include <cstdint>
#include <string>

namespace fleet {

// The machine's physical memory, lowered by the address-space and data-segment limits
// (ulimit -v, ulimit -d) where they are set. Read once.
uint64_t HostMemoryBytes();

// The address-space limit (ulimit -v), or UINT64_MAX when there is none. Read once.
uint64_t AddressSpaceLimitBytes();

// The stack a new thread gets by default (what thread pools such as OpenMP's reserve per
// thread unless told otherwise): glibc's default attribute, which follows ulimit -s.
uint64_t DefaultThreadStackBytes();

// "274877906944 bytes (256.0 GiB)", for messages: the exact count and a readable one.
std::string BytesText(uint64_t bytes);

}  // namespace fleet
