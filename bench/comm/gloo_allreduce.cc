// The "gloo" contender: the plugin's all-reduce without the plugin. It makes the Gloo call that
// plugins/comm_gloo/communicator.cc makes for a float32 SUM with in == out: a TCP device bound to
// the hostname option, a rendezvous::Context with the communicator's timeout joined by
// connectFullMesh, then per call AllreduceOptions with the output only (in place), the RING
// algorithm, an element-wise sum, a fresh tag and the timeout. The reduce function is Gloo's own
// gloo::sum<float>, the same plain loop as the plugin's (Gloo is built without AVX here).
#include <exception>
#include <memory>
#include <string>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include "comm/allreduce_impl.h"
#include "comm/gloo_store.h"

namespace fleet::bench {
namespace {

class GlooAllReduce final : public AllReduceImpl {
 public:
  GlooAllReduce(std::shared_ptr<gloo::rendezvous::Context> context,
                std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  Status AllReduce(float* data, size_t count) override {
    try {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(data, count);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(++tag_);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
      return OkStatus();
    } catch (const std::exception& e) {
      return Internal(std::string("gloo allreduce: ") + e.what());
    }
  }

  Status Barrier() override {
    try {
      gloo::BarrierOptions opts(context_);
      opts.setTag(++tag_);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
      return OkStatus();
    } catch (const std::exception& e) {
      return Internal(std::string("gloo barrier: ") + e.what());
    }
  }

 private:
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<AllReduceImpl>> CreateGlooAllReduce(Store* store,
                                                            const GroupOptions& options) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    ScopedStore scoped(store, "bench/gloo");
    GlooStore gloo_store(&scoped, options.timeout);
    auto context =
        std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(gloo_store, device);
    return std::unique_ptr<AllReduceImpl>(new GlooAllReduce(std::move(context), options.timeout));
  } catch (const std::exception& e) {
    return Unavailable("joining the gloo group (rank " + std::to_string(options.rank) + " of " +
                       std::to_string(options.world_size) + "): " + e.what());
  }
}

}  // namespace fleet::bench
