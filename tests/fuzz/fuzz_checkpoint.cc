// A checkpoint step directory's manifest, as resume reads it.
#include "checkpoint/checkpoint.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  fleet::fuzz::WriteInput("manifest.json", data, size);
  (void)fleet::checkpoint::ReadCheckpointDir(fleet::fuzz::ScratchDir());
  return 0;
}
