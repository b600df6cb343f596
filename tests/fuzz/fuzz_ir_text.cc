// The text IR parser (programs and program sets) and, for what parses, the verifier.
#include "fuzz_util.h"
#include "ir/text.h"
#include "ops/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  auto set = fleet::ir::ParseProgramSet(fleet::fuzz::AsText(data, size), "fuzz.ir");
  if (set.ok()) {
    for (const auto& [name, program] : *set) (void)fleet::ir::VerifyProgram(program);
  }
  return 0;
}
