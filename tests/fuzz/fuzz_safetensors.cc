// safetensors: the header's JSON, dtypes, shapes and offsets against the bytes there are.
#include "checkpoint/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  (void)fleet::checkpoint::ParseSafeTensors(std::span<const uint8_t>(data, size), "fuzz.safetensors");
  return 0;
}
