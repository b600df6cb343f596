// fleet.toml: any text is a Config or a list of errors with positions.
#include "config/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  (void)fleet::ParseConfig(fleet::fuzz::AsText(data, size), "fuzz.toml", "/nonexistent", {});
  return 0;
}
