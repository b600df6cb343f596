// .npy: magic, version, the header dict (descr, fortran_order, shape) and the data size.
#include "data/npy.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  (void)fleet::data::ReadNpy(fleet::fuzz::WriteInput("input.npy", data, size));
  return 0;
}
