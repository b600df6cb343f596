// The program-file frontend: any text is parsed into programs or refused with a Status.
#include "frontend/frontend.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  (void)fleet::frontend::ParseProgramText(fleet::fuzz::AsText(data, size), "fuzz.fleet");
  return 0;
}
