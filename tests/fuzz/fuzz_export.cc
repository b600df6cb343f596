// An exported model's model.json (program text, feeds, fetches, parameter files, checksums),
// as `fleet-host infer` reads it.
#include "checkpoint/export.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  fleet::fuzz::WriteInput("model.json", data, size);
  (void)fleet::checkpoint::ReadExport(fleet::fuzz::ScratchDir());
  return 0;
}
