// The TCP store's request decoder, fed the input as a stream of requests.
#include "fuzz_util.h"
#include "rendezvous/tcp_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  std::string in(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < 64 && !in.empty(); ++i) {
    fleet::tcp_store::Request req;
    size_t consumed = 0;
    std::string error;
    if (fleet::tcp_store::ParseRequest(in, &req, &consumed, &error) !=
        fleet::tcp_store::Parse::kDone) {
      break;
    }
    in.erase(0, consumed);
  }
  return 0;
}
