// Collective ops (Paddle's paddle/fluid/operators/collective/): the ops transpile passes insert
// to make a program data-parallel. They have no device kernels: the executor runs them through
// the communicator of their ring (collective/collective_runtime.h), on whatever device the tensors
// live. None is differentiable; they are inserted after the backward pass.
//
// c_allreduce_* take several tensors in X (Out in the same order) where Paddle takes one: one
// op then reduces a whole bucket of gradients in one call, which is how the fuse pass buckets
// small gradients without a coalesce_tensor op. One tensor is the Paddle op exactly.
#include <string>

#include "ops/op_registry.h"

namespace fleet::ops {
namespace {

// Every schema here is marked collective before it is registered.
void Register(OpRegistry& registry, OpSchema schema) {
  schema.collective = true;
  RegisterBuiltin(registry, std::move(schema));
}

Status CheckRing(const ShapeContext& c) {
  if (c.IntAttr("ring_id") < 0) {
    return c.Error("ring_id must be >= 0, not " + std::to_string(c.IntAttr("ring_id")));
  }
  return OkStatus();
}

// Out[i] takes X[i]'s type and shape; both slots hold the same number of vars.
Status ForwardAll(ShapeContext& c) {
  const size_t n = c.InputCount("X");
  if (c.OutputCount("Out") != n) {
    return c.Error("X holds " + std::to_string(n) + " vars but Out holds " +
                   std::to_string(c.OutputCount("Out")));
  }
  for (size_t i = 0; i < n; ++i) c.Output("Out", i) = c.Input("X", i);
  return OkStatus();
}

void RegisterAllReduce(OpRegistry& registry, const std::string& type, const std::string& what) {
  OpSchema s;
  s.type = type;
  s.summary = "Out[i] = the " + what + " of X[i] over every rank of ring ring_id";
  s.inputs = {{"X", false, true}};
  s.outputs = {{"Out", false, true}};
  s.attrs = {{"ring_id", int32_t{0}}, {"use_calc_stream", false}};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckRing(c));
    return ForwardAll(c);
  };
  Register(registry, std::move(s));
}

void RegisterCommInit(OpRegistry& registry) {
  OpSchema s;
  s.type = "c_comm_init";
  s.summary =
      "joins ring ring_id as rank `rank` of `nranks` (rendezvous through the job's store; "
      "Paddle's c_gen_nccl_id + c_comm_init in one op)";
  s.attrs = {{"ring_id", int32_t{0}}, {"nranks", int32_t{1}}, {"rank", int32_t{0}}};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckRing(c));
    const int64_t nranks = c.IntAttr("nranks"), rank = c.IntAttr("rank");
    if (nranks < 1) return c.Error("nranks must be >= 1, not " + std::to_string(nranks));
    if (rank < 0 || rank >= nranks) {
      return c.Error("rank must be in [0, " + std::to_string(nranks) + "), not " +
                     std::to_string(rank));
    }
    return OkStatus();
  };
  Register(registry, std::move(s));
}

void RegisterBroadcast(OpRegistry& registry) {
  OpSchema s;
  s.type = "c_broadcast";
  s.summary = "Out = X of rank `root` on every rank of ring ring_id";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = {{"ring_id", int32_t{0}}, {"root", int32_t{0}}, {"use_calc_stream", false}};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckRing(c));
    if (c.IntAttr("root") < 0) {
      return c.Error("root must be >= 0, not " + std::to_string(c.IntAttr("root")));
    }
    return ForwardAll(c);
  };
  Register(registry, std::move(s));
}

// c_allgather concatenates along dim 0 (nranks blocks); c_reducescatter splits dim 0 into
// nranks blocks and keeps this rank's reduced block. c_allgather of a sparse gradient gathers its
// entries, rows and slices (Paddle's exchange of SelectedRows): the sum over ranks. Its
// sparse_exchange says how: "gather" moves every rank's rows and slices; "dense" gathers only the
// rows and all-reduces the table-sized sum, then gives each gathered row's first entry the summed
// slice and its repeats zeros (the same rows, the same sum); "auto" (default) takes "dense" where
// that moves fewer bytes, when nranks times the entries exceed twice the height (a ring all-reduce
// sends each byte twice). The runtime states its choice (collective_runtime.cc).
void RegisterGatherScatter(OpRegistry& registry, bool gather) {
  OpSchema s;
  s.type = gather ? "c_allgather" : "c_reducescatter";
  s.summary = gather ? "Out = concat over ranks of X along dim 0"
                     : "Out = block `rank` (of nranks along dim 0) of the sum of X over ranks";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = {{"ring_id", int32_t{0}}, {"nranks", int32_t{1}}, {"use_calc_stream", false}};
  if (gather) {
    s.attrs.push_back({"sparse_exchange", std::string("auto")});
    s.selected_rows_inputs = {"X"};
  }
  s.infer_shape = [gather](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckRing(c));
    if (gather) {
      const std::string how = c.StringAttr("sparse_exchange");
      if (how != "auto" && how != "gather" && how != "dense") {
        return c.Error("sparse_exchange must be \"auto\", \"gather\" or \"dense\", not \"" +
                       how + "\"");
      }
    }
    const int64_t nranks = c.IntAttr("nranks");
    if (nranks < 1) return c.Error("nranks must be >= 1, not " + std::to_string(nranks));
    TensorInfo out = c.Input("X");
    if (out.dims.empty()) return c.Error("X must have at least one dimension");
    int64_t& d0 = out.dims[0];
    if (d0 >= 0) {
      if (gather) {
        d0 *= nranks;
      } else if (d0 % nranks != 0) {
        return c.Error("dim 0 of X (" + std::to_string(d0) + ") is not divisible by nranks (" +
                       std::to_string(nranks) + ")");
      } else {
        d0 /= nranks;
      }
    }
    c.Output("Out") = out;
    return OkStatus();
  };
  Register(registry, std::move(s));
}

void RegisterSync(OpRegistry& registry, bool comm) {
  OpSchema s;
  s.type = comm ? "c_sync_comm_stream" : "c_sync_calc_stream";
  s.summary = comm ? "waits until the collectives of ring ring_id enqueued so far are done"
                   : "waits until the kernels enqueued so far are done (before a collective "
                     "reads their results)";
  s.inputs = {{"X", false, true}};
  s.outputs = {{"Out", false, true}};
  s.selected_rows_inputs = {"X"};  // in place: they move no data
  if (comm) s.attrs = {{"ring_id", int32_t{0}}};
  s.infer_shape = [comm](ShapeContext& c) {
    if (comm) FLEET_RETURN_IF_ERROR(CheckRing(c));
    return ForwardAll(c);
  };
  Register(registry, std::move(s));
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& registry) {
  RegisterCommInit(registry);
  RegisterBroadcast(registry);
  RegisterAllReduce(registry, "c_allreduce_sum", "sum");
  RegisterAllReduce(registry, "c_allreduce_max", "maximum");
  RegisterAllReduce(registry, "c_allreduce_min", "minimum");
  RegisterAllReduce(registry, "c_allreduce_prod", "product");
  RegisterGatherScatter(registry, true);
  RegisterGatherScatter(registry, false);
  RegisterSync(registry, false);
  RegisterSync(registry, true);
}

}  // namespace fleet::ops
