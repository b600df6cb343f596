// The collectives and point-to-point calls: argument checks, the mapping of Fleet dtypes and
// reductions onto NCCL's, and the handling of inputs that overlap their outputs.
#include <cstdint>
#include <limits>

#include "communicator.h"

namespace fleet_nccl {
namespace {

constexpr const char* kSupportedDtypes =
    "float32, float64, float16, bfloat16, int32, int64, int8, uint8";

std::string DtypeName(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL: return "bool";
    case FLEET_DTYPE_INT8: return "int8";
    case FLEET_DTYPE_UINT8: return "uint8";
    case FLEET_DTYPE_INT16: return "int16";
    case FLEET_DTYPE_INT32: return "int32";
    case FLEET_DTYPE_INT64: return "int64";
    case FLEET_DTYPE_FLOAT16: return "float16";
    case FLEET_DTYPE_BFLOAT16: return "bfloat16";
    case FLEET_DTYPE_FLOAT32: return "float32";
    case FLEET_DTYPE_FLOAT64: return "float64";
    default: return "dtype " + std::to_string(dtype);
  }
}

// NCCL's type and the element size in bytes; size 0 for a dtype NCCL does not carry.
struct NcclDtype {
  ncclDataType_t type;
  size_t size;
};

NcclDtype ToNccl(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_INT8: return {ncclInt8, 1};
    case FLEET_DTYPE_UINT8: return {ncclUint8, 1};
    case FLEET_DTYPE_INT32: return {ncclInt32, 4};
    case FLEET_DTYPE_INT64: return {ncclInt64, 8};
    case FLEET_DTYPE_FLOAT16: return {ncclFloat16, 2};
    case FLEET_DTYPE_BFLOAT16: return {ncclBfloat16, 2};
    case FLEET_DTYPE_FLOAT32: return {ncclFloat32, 4};
    case FLEET_DTYPE_FLOAT64: return {ncclFloat64, 8};
    default: return {ncclInt8, 0};
  }
}

bool Overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a);
  const auto pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

void* Offset(void* base, size_t bytes) { return static_cast<char*>(base) + bytes; }

}  // namespace

int32_t Communicator::CudaDeviceType() const {
  if (cuda_device_type_ < 0 && FLEET_CAN_CALL(params_.host, FleetHostApi, device_type_id)) {
    cuda_device_type_ = params_.host->device_type_id(params_.host->host_ctx, "cuda");
  }
  return cuda_device_type_;
}

Communicator::Buffer Communicator::View(const char* op, const char* name,
                                        const FleetTensor* t) const {
  const std::string n(name);
  if (t == nullptr) Invalid(op, n + " is NULL");
  if (!FLEET_HAS_FIELD(t, FleetTensor, device_ordinal)) {
    Invalid(op, n + " has struct_size " + std::to_string(t->struct_size) +
                    ", too small for a FleetTensor");
  }
  const NcclDtype dtype = ToNccl(t->dtype);
  if (dtype.size == 0) {
    Invalid(op, n + " has dtype " + DtypeName(t->dtype) + ", which nccl " + op +
                    " does not support (" + kSupportedDtypes + ")");
  }
  if (t->ndim < 0 || (t->ndim > 0 && t->dims == nullptr)) {
    Invalid(op, n + " has an invalid shape (ndim " + std::to_string(t->ndim) + ")");
  }
  size_t numel = 1;
  for (int32_t d = 0; d < t->ndim; ++d) {
    if (t->dims[d] < 0) Invalid(op, n + " has a negative dimension");
    const auto dim = static_cast<size_t>(t->dims[d]);
    if (dim != 0 && numel > std::numeric_limits<size_t>::max() / dtype.size / dim) {
      Invalid(op, n + " has more elements than fit in memory");
    }
    numel *= dim;
  }
  if (t->strides != nullptr) {
    int64_t expected = 1;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
      if (t->dims[d] != 1 && t->strides[d] != expected) {
        Invalid(op, n + " is not dense row-major; the communicator needs contiguous memory");
      }
      expected *= t->dims[d];
    }
  }
  const int32_t cuda = CudaDeviceType();
  if (cuda < 0 || t->device_type != cuda) {
    const std::string device = t->device_type == FLEET_DEVICE_TYPE_HOST
                                   ? std::string("host memory (device type 0)")
                                   : "device type " + std::to_string(t->device_type);
    Invalid(op, n + " lives in " + device + "; the nccl communicator needs tensors on the cuda "
                    "device" +
                    (cuda < 0 ? std::string(" (the host has no 'cuda' device registered)")
                              : " (device type " + std::to_string(cuda) + ")"));
  }
  if (t->device_ordinal != params_.ordinal) {
    Invalid(op, n + " is on cuda:" + std::to_string(t->device_ordinal) +
                    ", but this communicator runs on cuda:" + std::to_string(params_.ordinal));
  }
  if (numel != 0 && t->data == nullptr) Invalid(op, n + " has NULL data");
  Buffer b;
  b.data = t->data;
  b.dtype = t->dtype;
  b.type = dtype.type;
  b.numel = numel;
  b.bytes = numel * dtype.size;
  return b;
}

ncclRedOp_t Communicator::RedOp(const char* op, int32_t reduce_op) const {
  switch (reduce_op) {
    case FLEET_REDUCE_SUM: return ncclSum;
    case FLEET_REDUCE_PROD: return ncclProd;
    case FLEET_REDUCE_MAX: return ncclMax;
    case FLEET_REDUCE_MIN: return ncclMin;
    case FLEET_REDUCE_AVG: return ncclAvg;  // integers: the sum divided, truncating
    default:
      Invalid(op, "reduction " + std::to_string(reduce_op) +
                      " is not one of sum (0), prod (1), max (2), min (3), avg (4)");
  }
}

void Communicator::CheckRoot(const char* op, int32_t root) const {
  if (root < 0 || root >= params_.size) {
    Invalid(op, "root " + std::to_string(root) + " is out of range [0, " +
                    std::to_string(params_.size) + ")");
  }
}

void Communicator::CheckPeer(const char* op, int32_t peer) const {
  if (peer < 0 || peer >= params_.size) {
    Invalid(op, "peer " + std::to_string(peer) + " is out of range [0, " +
                    std::to_string(params_.size) + ")");
  }
  if (peer == params_.rank) Invalid(op, "peer " + std::to_string(peer) + " is this rank");
}

void Communicator::AllReduce(const FleetTensor* in_t, const FleetTensor* out_t, int32_t op,
                             FleetStream* stream) {
  const char* name = "all_reduce";
  auto lock = Enter(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  if (in.dtype != out.dtype || in.numel != out.numel) {
    Invalid(name, "in (" + DtypeName(in.dtype) + ", " + std::to_string(in.numel) +
                      " elements) and out (" + DtypeName(out.dtype) + ", " +
                      std::to_string(out.numel) + " elements) differ");
  }
  const ncclRedOp_t red = RedOp(name, op);
  const auto deadline = Begin(name);
  if (in.numel == 0) return;
  Scratch scratch;
  Launch(name, -1, stream, deadline, [&] {
    // NCCL reduces in place when in == out; a partial overlap needs a copy of the input.
    const void* src = in.data;
    if (in.data != out.data && Overlaps(in.data, in.bytes, out.data, out.bytes)) {
      scratch = CopyToScratch(name, in);
      src = scratch.get();
    }
    return ncclAllReduce(src, out.data, in.numel, in.type, red, shared_->nccl, stream_);
  });
}

void Communicator::Broadcast(const FleetTensor* buf_t, int32_t root, FleetStream* stream) {
  const char* name = "broadcast";
  auto lock = Enter(name);
  const Buffer buf = View(name, "buf", buf_t);
  CheckRoot(name, root);
  const auto deadline = Begin(name);
  if (buf.numel == 0) return;
  Launch(name, -1, stream, deadline, [&] {
    return ncclBroadcast(buf.data, buf.data, buf.numel, buf.type, root, shared_->nccl, stream_);
  });
}

void Communicator::AllGather(const FleetTensor* in_t, const FleetTensor* out_t,
                             FleetStream* stream) {
  const char* name = "all_gather";
  auto lock = Enter(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  const auto size = static_cast<size_t>(params_.size);
  if (in.dtype != out.dtype || out.numel != in.numel * size) {
    Invalid(name, "out must hold world_size * numel(in) = " + std::to_string(in.numel * size) +
                      " elements of " + DtypeName(in.dtype) + ", got " +
                      std::to_string(out.numel) + " of " + DtypeName(out.dtype));
  }
  const auto deadline = Begin(name);
  if (in.numel == 0) return;
  const void* own_block = Offset(out.data, in.bytes * static_cast<size_t>(params_.rank));
  Scratch scratch;
  Launch(name, -1, stream, deadline, [&] {
    // In place (in is this rank's block of out) NCCL handles; any other overlap would have
    // the input overwritten while it is sent.
    const void* src = in.data;
    if (src != own_block && Overlaps(in.data, in.bytes, out.data, out.bytes)) {
      scratch = CopyToScratch(name, in);
      src = scratch.get();
    }
    return ncclAllGather(src, out.data, in.numel, in.type, shared_->nccl, stream_);
  });
}

void Communicator::ReduceScatter(const FleetTensor* in_t, const FleetTensor* out_t, int32_t op,
                                 FleetStream* stream) {
  const char* name = "reduce_scatter";
  auto lock = Enter(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  const auto size = static_cast<size_t>(params_.size);
  if (in.dtype != out.dtype || in.numel != out.numel * size) {
    Invalid(name, "in must hold world_size * numel(out) = " + std::to_string(out.numel * size) +
                      " elements of " + DtypeName(out.dtype) + ", got " +
                      std::to_string(in.numel) + " of " + DtypeName(in.dtype));
  }
  const ncclRedOp_t red = RedOp(name, op);
  const auto deadline = Begin(name);
  if (out.numel == 0) return;
  const void* own_block = Offset(in.data, out.bytes * static_cast<size_t>(params_.rank));
  Scratch scratch;
  Launch(name, -1, stream, deadline, [&] {
    // In place (out is this rank's block of in) NCCL handles; other overlaps read a copy.
    const void* src = in.data;
    if (out.data != own_block && Overlaps(in.data, in.bytes, out.data, out.bytes)) {
      scratch = CopyToScratch(name, in);
      src = scratch.get();
    }
    return ncclReduceScatter(src, out.data, out.numel, in.type, red, shared_->nccl, stream_);
  });
}

void Communicator::Reduce(const FleetTensor* in_t, const FleetTensor* out_t, int32_t op,
                          int32_t root, FleetStream* stream) {
  const char* name = "reduce";
  auto lock = Enter(name);
  const Buffer in = View(name, "in", in_t);
  CheckRoot(name, root);
  const bool is_root = params_.rank == root;
  Buffer out;
  if (is_root) {
    out = View(name, "out", out_t);
    if (in.dtype != out.dtype || in.numel != out.numel) {
      Invalid(name, "in (" + DtypeName(in.dtype) + ", " + std::to_string(in.numel) +
                        " elements) and out (" + DtypeName(out.dtype) + ", " +
                        std::to_string(out.numel) + " elements) differ");
    }
  }
  const ncclRedOp_t red = RedOp(name, op);
  const auto deadline = Begin(name);
  if (in.numel == 0) return;
  Scratch scratch;
  Launch(name, -1, stream, deadline, [&] {
    const void* src = in.data;
    if (is_root && in.data != out.data && Overlaps(in.data, in.bytes, out.data, out.bytes)) {
      scratch = CopyToScratch(name, in);
      src = scratch.get();
    }
    // NCCL reads recvbuff only on the root, so other ranks' out (maybe NULL) stays untouched.
    return ncclReduce(src, is_root ? out.data : nullptr, in.numel, in.type, red, root,
                      shared_->nccl, stream_);
  });
}

void Communicator::AllToAll(const FleetTensor* in_t, const FleetTensor* out_t,
                            FleetStream* stream) {
  const char* name = "all_to_all";
  auto lock = Enter(name);
  const Buffer in = View(name, "in", in_t);
  const Buffer out = View(name, "out", out_t);
  const auto size = static_cast<size_t>(params_.size);
  if (in.dtype != out.dtype || in.numel != out.numel || in.numel % size != 0) {
    Invalid(name, "in and out must have the same dtype and a number of elements divisible by "
                  "the world size " + std::to_string(size) + ", got in " +
                      std::to_string(in.numel) + " of " + DtypeName(in.dtype) + ", out " +
                      std::to_string(out.numel) + " of " + DtypeName(out.dtype));
  }
  const auto deadline = Begin(name);
  if (in.numel == 0) return;
  const size_t count = in.numel / size;
  const size_t block_bytes = in.bytes / size;
  Scratch scratch;
  Launch(name, -1, stream, deadline, [&] {
    // Blocks of out are received while blocks of in are still being sent, so an input that
    // overlaps the output (in place included) is sent from a copy.
    const void* src = in.data;
    if (Overlaps(in.data, in.bytes, out.data, out.bytes)) {
      scratch = CopyToScratch(name, in);
      src = scratch.get();
    }
    // Nothing may throw between ncclGroupStart and ncclGroupEnd: an unbalanced group would
    // poison every later NCCL call on this thread.
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    for (size_t peer = 0; peer < size; ++peer) {
      const void* send = static_cast<const char*>(src) + block_bytes * peer;
      void* recv = Offset(out.data, block_bytes * peer);
      const int p = static_cast<int>(peer);
      const ncclResult_t s = ncclSend(send, count, in.type, p, shared_->nccl, stream_);
      if (first == ncclSuccess) first = s;
      const ncclResult_t r = ncclRecv(recv, count, in.type, p, shared_->nccl, stream_);
      if (first == ncclSuccess) first = r;
    }
    const ncclResult_t end = ncclGroupEnd();
    return (first == ncclSuccess || first == ncclInProgress) ? end : first;
  });
}

void Communicator::Send(const FleetTensor* buf_t, int32_t peer, FleetStream* stream) {
  const char* name = "send";
  auto lock = Enter(name);
  const Buffer buf = View(name, "buf", buf_t);
  CheckPeer(name, peer);
  const auto deadline = Begin(name);
  if (buf.numel == 0) return;
  Launch(name, peer, stream, deadline, [&] {
    return ncclSend(buf.data, buf.numel, buf.type, peer, shared_->nccl, stream_);
  });
}

void Communicator::Recv(const FleetTensor* buf_t, int32_t peer, FleetStream* stream) {
  const char* name = "recv";
  auto lock = Enter(name);
  const Buffer buf = View(name, "buf", buf_t);
  CheckPeer(name, peer);
  const auto deadline = Begin(name);
  if (buf.numel == 0) return;
  Launch(name, peer, stream, deadline, [&] {
    return ncclRecv(buf.data, buf.numel, buf.type, peer, shared_->nccl, stream_);
  });
}

}  // namespace fleet_nccl
