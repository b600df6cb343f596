// Indexing ops: gather, index_select, gather_nd, scatter and one_hot_v2, with the gradient ops
// Paddle has for them.
//
// Index tensors are int32 or int64 and never differentiated. Their values are only known at run
// time, so an out-of-range index is the kernels' to report (naming the op, the position, the
// index and the bound); shape inference checks ranks, dtypes and the dims it can see.
#include <utility>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/tensor_ops_util.h"

namespace fleet::ops {
namespace {

using tensor_ops::NormalizeAxis;

std::string Str(int64_t v) { return std::to_string(v); }

bool IsIndexType(ir::DataType t) {
  return t == ir::DataType::kInt32 || t == ir::DataType::kInt64;
}

Status CheckIndexDtype(ShapeContext& c, const char* slot) {
  const TensorInfo& t = c.Input(slot);
  if (!IsIndexType(t.dtype)) {
    return c.Error(std::string(slot) + " must be int32 or int64, got " +
                   std::string(ir::DataTypeName(t.dtype)) + " " + ir::ShapeText(t.dims));
  }
  return OkStatus();
}

// A list of indices: rank 1, or [N, 1] as Paddle also accepts. Returns N (-1 when unknown).
StatusOr<int64_t> IndexListLength(ShapeContext& c, const char* slot) {
  FLEET_RETURN_IF_ERROR(CheckIndexDtype(c, slot));
  const TensorInfo& t = c.Input(slot);
  if (t.dims.size() == 1) return t.dims[0];
  if (t.dims.size() == 2 && t.dims[1] == 1) return t.dims[0];
  return c.Error(std::string(slot) + " must be 1-D (or [N, 1]), got " + ir::ShapeText(t.dims));
}

// gather (axis attribute) and index_select (dim attribute): Out is X with dim `axis` replaced by
// the number of indices.
Status InferTakeAlong(ShapeContext& c, const char* axis_attr) {
  const TensorInfo& x = c.Input("X");
  FLEET_ASSIGN_OR_RETURN(int64_t n, IndexListLength(c, "Index"));
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.IntAttr(axis_attr), rank, &axis)) {
    return c.Error(std::string(axis_attr) + " " + Str(c.IntAttr(axis_attr)) +
                   " is out of range for X of shape " + ir::ShapeText(x.dims));
  }
  std::vector<int64_t> dims = x.dims;
  dims[static_cast<size_t>(axis)] = n;
  c.Output("Out") = {x.dtype, std::move(dims)};
  return OkStatus();
}

Status InferGatherNd(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_RETURN_IF_ERROR(CheckIndexDtype(c, "Index"));
  const TensorInfo& index = c.Input("Index");
  if (index.dims.empty()) return c.Error("Index must have rank >= 1, got a scalar");
  const int64_t k = index.dims.back();
  if (k < 0) return c.Error("the last dim of Index " + ir::ShapeText(index.dims) + " is unknown");
  if (k > static_cast<int64_t>(x.dims.size())) {
    return c.Error("Index " + ir::ShapeText(index.dims) + " addresses " + Str(k) +
                   " dims but X " + ir::ShapeText(x.dims) + " has only " +
                   Str(static_cast<int64_t>(x.dims.size())));
  }
  std::vector<int64_t> dims(index.dims.begin(), index.dims.end() - 1);
  dims.insert(dims.end(), x.dims.begin() + k, x.dims.end());
  c.Output("Out") = {x.dtype, std::move(dims)};
  return OkStatus();
}

Status InferScatter(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const TensorInfo& up = c.Input("Updates");
  FLEET_ASSIGN_OR_RETURN(int64_t n, IndexListLength(c, "Ids"));
  if (x.dims.empty()) return c.Error("X must have rank >= 1, got a scalar");
  if (up.dtype != x.dtype) {
    return c.Error("Updates is " + std::string(ir::DataTypeName(up.dtype)) + " but X is " +
                   std::string(ir::DataTypeName(x.dtype)));
  }
  bool ok = up.dims.size() == x.dims.size() && !up.dims.empty() && DimsMatch(up.dims[0], n);
  for (size_t k = 1; ok && k < x.dims.size(); ++k) ok = DimsMatch(up.dims[k], x.dims[k]);
  if (!ok) {
    return c.Error("Updates " + ir::ShapeText(up.dims) + " must be [len(Ids)=" + Str(n) +
                   "] + X's dims after the first (X " + ir::ShapeText(x.dims) + ")");
  }
  c.Output("Out") = x;
  return OkStatus();
}

Status InferOneHot(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(CheckIndexDtype(c, "X"));
  const TensorInfo& x = c.Input("X");
  const int64_t depth = c.IntAttr("depth");
  if (depth <= 0) return c.Error("depth must be positive, got " + Str(depth));
  const int64_t dtype = c.IntAttr("dtype");
  if (dtype != FLEET_DTYPE_FLOAT32 && dtype != FLEET_DTYPE_FLOAT64) {
    return c.Error("dtype must be float32 or float64, got " + Str(dtype));
  }
  std::vector<int64_t> dims = x.dims;
  dims.push_back(depth);
  c.Output("Out") = {static_cast<ir::DataType>(dtype), std::move(dims)};
  return OkStatus();
}

// Registers `type` reading X and an index slot, and "<type>_grad" reading X (for its shape),
// the index and Out@GRAD, writing X@GRAD.
void RegisterTake(OpRegistry& registry, const std::string& type, const char* index_slot,
                  std::vector<AttrSpec> attrs, ShapeFn infer, const std::string& summary) {
  OpSchema s;
  s.type = type;
  s.summary = summary;
  s.inputs = {{"X"}, {index_slot, false, false, true}};
  s.outputs = {{"Out"}};
  s.attrs = attrs;
  s.kernel_dtype_slot = "X";
  s.infer_shape = infer;
  const std::string slot = index_slot;
  s.grad = [type, slot](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, type + "_grad", {"X", slot}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = type + "_grad";
  g.summary = "X@GRAD = zeros with each Out@GRAD slice added where it was taken from";
  g.inputs = {{"X", false, false, true}, {index_slot, false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = std::move(attrs);
  g.kernel_dtype_slot = "Out@GRAD";
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("X@GRAD")) {
      c.Output("X@GRAD") = {c.Input("Out@GRAD").dtype, c.Input("X").dims};
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

void RegisterScatter(OpRegistry& registry) {
  OpSchema s;
  s.type = "scatter";
  s.summary = "Out = X with row Ids[i] replaced by Updates[i] (overwrite; the last wins) or "
              "set to the sum of its Updates rows (overwrite = false)";
  s.inputs = {{"X"}, {"Ids", false, false, true}, {"Updates"}};
  s.outputs = {{"Out"}};
  s.attrs = {{"overwrite", true}};
  s.kernel_dtype_slot = "X";
  s.infer_shape = InferScatter;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        GradOp(fwd, "scatter_grad", {"Ids", "Updates"}, {"Out"}, {"X", "Updates"})};
  };
  RegisterBuiltin(registry, std::move(s));

  // As in Paddle, Updates@GRAD gathers Out@GRAD at Ids in both modes, so a row overwritten by
  // a later duplicate still receives its gradient.
  OpSchema g;
  g.type = "scatter_grad";
  g.summary = "X@GRAD = Out@GRAD with the rows at Ids zeroed; Updates@GRAD = Out@GRAD[Ids]";
  g.inputs = {{"Ids", false, false, true}, {"Updates", false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"Updates@GRAD", true}};
  g.attrs = {{"overwrite", true}};
  g.kernel_dtype_slot = "Out@GRAD";
  g.infer_shape = [](ShapeContext& c) {
    const TensorInfo& dout = c.Input("Out@GRAD");
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = dout;
    if (c.HasOutput("Updates@GRAD")) {
      c.Output("Updates@GRAD") = {dout.dtype, c.Input("Updates").dims};
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

void RegisterOneHot(OpRegistry& registry) {
  OpSchema s;
  s.type = "one_hot_v2";
  s.summary = "Out[..., k] = 1 where k == X[...], else 0 (Out has one more dim, of size depth)";
  s.inputs = {{"X", false, false, true}};
  s.outputs = {{"Out"}};
  s.attrs = {{"depth", int32_t{-1}},
             {"dtype", int32_t{FLEET_DTYPE_FLOAT32}},
             {"allow_out_of_range", false}};
  s.kernel_dtype_slot = "X";
  s.infer_shape = InferOneHot;
  RegisterBuiltin(registry, std::move(s));
}

}  // namespace

namespace tensor_ops {

void RegisterTensorIndexOps(OpRegistry& registry) {
  RegisterTake(registry, "gather", "Index", {{"axis", int32_t{0}}, {"overwrite", true}},
               [](ShapeContext& c) { return InferTakeAlong(c, "axis"); },
               "Out = X with dim axis indexed by Index (Out dim axis = len(Index))");
  RegisterTake(registry, "index_select", "Index", {{"dim", int32_t{0}}},
               [](ShapeContext& c) { return InferTakeAlong(c, "dim"); },
               "Out = X with dim `dim` indexed by Index");
  RegisterTake(registry, "gather_nd", "Index", {}, InferGatherNd,
               "Out[i...] = X[Index[i..., :]] (Index's last dim addresses X's leading dims)");
  RegisterScatter(registry);
  RegisterOneHot(registry);
}

}  // namespace tensor_ops
}  // namespace fleet::ops
