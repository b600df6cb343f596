// dropout, lookup_table_v2 and lookup_table (embedding), accuracy and top_k_v2, with gradient
// ops where Paddle has them.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

std::vector<AttrSpec> DropoutAttrs() {
  return {{"dropout_prob", 0.5f},
          {"is_test", false},
          {"fix_seed", false},
          {"seed", int32_t{0}},
          {"dropout_implementation", std::string("downgrade_in_infer")}};
}

Status CheckDropoutAttrs(const ShapeContext& c) {
  double p = c.FloatAttr("dropout_prob");
  if (!(p >= 0.0 && p <= 1.0)) {
    return c.Error("dropout_prob must be in [0, 1], got " + std::to_string(p));
  }
  std::string impl = c.StringAttr("dropout_implementation");
  if (impl != "downgrade_in_infer" && impl != "upscale_in_train") {
    return c.Error("dropout_implementation must be 'downgrade_in_infer' or 'upscale_in_train', "
                   "got '" + impl + "'");
  }
  return OkStatus();
}

void RegisterDropout(OpRegistry& registry) {
  OpSchema s;
  s.type = "dropout";
  s.summary = "Out = X * Mask (scaled per dropout_implementation); Mask is uint8 keep flags";
  s.inputs = {{"X"}, {"Seed", true, false, true}};
  s.outputs = {{"Out"}, {"Mask", true}};
  s.attrs = DropoutAttrs();
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckDropoutAttrs(c));
    if (c.HasInput("Seed")) {
      const TensorInfo& seed = c.Input("Seed");
      if (seed.dtype != ir::DataType::kInt32 && seed.dtype != ir::DataType::kInt64) {
        return c.Error("Seed must be an int32 or int64 tensor");
      }
    }
    c.Output("Out") = c.Input("X");
    if (c.HasOutput("Mask")) c.Output("Mask") = TensorInfo{ir::DataType::kUInt8, c.Input("X").dims};
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "dropout_grad", {"Mask"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "dropout_grad";
  g.inputs = {{"Mask"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = DropoutAttrs();
  g.kernel_dtype_slot = "Out@GRAD";
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckDropoutAttrs(c));
    const TensorInfo& dy = c.Input("Out@GRAD");
    const TensorInfo& mask = c.Input("Mask");
    if (mask.dtype != ir::DataType::kUInt8 || mask.dims.size() != dy.dims.size()) {
      return c.Error("Mask must be uint8 of Out@GRAD's shape " + ir::ShapeText(dy.dims));
    }
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = dy;
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

std::vector<AttrSpec> LookupAttrs() {
  return {{"padding_idx", int64_t{-1}},
          {"is_sparse", false},
          {"is_distributed", false},
          {"remote_prefetch", false},
          // A table of unbounded rows (embedding size [-1, dim]): W is the one-row prototype its
          // initializer draws each row from, and the rows, keyed by any id, live on the
          // parameter servers (pserver/growable_table.h); only the pserver pass can run it.
          {"growable", false}};
}

// lookup_table_v2 (fluid.embedding): Out = Ids.dims + [dim]. lookup_table (v1,
// fluid.layers.embedding): Ids' last dim is 1 and Out replaces it with dim, so ids [N, 1] give
// rows [N, dim], one per id: what sequence models write before sequence_pool. The two read and
// write the same bytes, so devices register one kernel for both.
void RegisterLookupTable(OpRegistry& registry, const std::string& type) {
  const bool v1 = type == "lookup_table";
  OpSchema s;
  s.type = type;
  s.summary = v1 ? "Out[i, :] = W[Ids[i, 0], :] (Ids [..., 1]); rows of padding_idx are zero"
                 : "Out[..., :] = W[Ids[...], :]; rows of padding_idx are zero";
  s.inputs = {{"W"}, {"Ids", false, false, true}};
  s.outputs = {{"Out"}};
  s.attrs = LookupAttrs();
  s.kernel_dtype_slot = "W";
  s.lod_share = {{"Out", "Ids"}};  // one row of Out per id, in the ids' sequences
  s.infer_shape = [v1](ShapeContext& c) {
    const TensorInfo& w = c.Input("W");
    const TensorInfo& ids = c.Input("Ids");
    if (w.dims.size() != 2) return c.Error("W must be 2-D [vocab, dim], got " + ir::ShapeText(w.dims));
    if (ids.dtype != ir::DataType::kInt64 && ids.dtype != ir::DataType::kInt32) {
      return c.Error("Ids must be int64, got " + std::string(ir::DataTypeName(ids.dtype)));
    }
    if (v1 && (ids.dims.empty() || ids.dims.back() != 1)) {
      return c.Error("Ids must end in a dim of 1 ([N, 1]), got " + ir::ShapeText(ids.dims));
    }
    int64_t pad = c.IntAttr("padding_idx");
    if (pad < -1 || (w.dims[0] >= 0 && pad >= w.dims[0])) {
      return c.Error("padding_idx " + std::to_string(pad) + " is outside the vocabulary of " +
                     std::to_string(w.dims[0]) + " rows (-1 = none)");
    }
    TensorInfo out{w.dtype, ids.dims};
    if (v1) out.dims.pop_back();
    out.dims.push_back(w.dims[1]);
    c.Output("Out") = out;
    return OkStatus();
  };
  const std::string grad_type = type + "_grad";
  s.grad = [grad_type](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, grad_type, {"W", "Ids"}, {"Out"}, {"W"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = grad_type;
  // W is absent when the table lives on the parameter servers (distributed_lookup_table):
  // the sparse gradient then takes its height from table_height and its width from Out@GRAD.
  g.inputs = {{"W", true}, {"Ids", false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"W@GRAD", true}};
  g.attrs = LookupAttrs();
  g.attrs.push_back({"table_height", int64_t{-1}});
  g.kernel_dtype_slot = "Out@GRAD";
  // Padding rows hold id 0 and a zero gradient, so they add nothing to W@GRAD.
  g.lod_share = {{"", "Ids"}, {"", "Out@GRAD"}};
  // With is_sparse, W@GRAD is SelectedRows: one entry per id (rows = the ids, values = the rows
  // of Out@GRAD), so a step touches only the rows its batch looked up.
  g.infer_shape = [](ShapeContext& c) {
    if (!c.HasOutput("W@GRAD")) return OkStatus();
    if (!c.HasInput("W")) {
      const int64_t height = c.IntAttr("table_height");
      const TensorInfo& dout = c.Input("Out@GRAD");
      if (!c.BoolAttr("is_sparse") || height < 1 || dout.dims.empty()) {
        return c.Error("without W, the gradient must be sparse (is_sparse) with the table's "
                       "rows in table_height (>= 1), got is_sparse " +
                       std::string(c.BoolAttr("is_sparse") ? "true" : "false") +
                       " and table_height " + std::to_string(height));
      }
      const TensorInfo& ids = c.Input("Ids");
      TensorInfo dw{dout.dtype, {ProductOrUnknown(ids.dims, 0, ids.dims.size()),
                                 dout.dims.back()}};
      dw.height = height;
      c.Output("W@GRAD") = dw;
      return OkStatus();
    }
    const TensorInfo& w = c.Input("W");
    if (!c.BoolAttr("is_sparse")) {
      c.Output("W@GRAD") = w;
      return OkStatus();
    }
    if (w.dims.size() != 2) {
      return c.Error("W must be 2-D [vocab, dim], got " + ir::ShapeText(w.dims));
    }
    const TensorInfo& ids = c.Input("Ids");
    TensorInfo dw{w.dtype, {ProductOrUnknown(ids.dims, 0, ids.dims.size()), w.dims[1]}};
    dw.height = w.dims[0] < 0 ? 0 : w.dims[0];
    c.Output("W@GRAD") = dw;
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

void RegisterAccuracy(OpRegistry& registry) {
  OpSchema s;
  s.type = "accuracy";
  s.summary = "fraction of rows whose Label is among the top-k Indices";
  s.inputs = {{"Out", false, false, true},
              {"Indices", false, false, true},
              {"Label", false, false, true}};
  s.outputs = {{"Accuracy"}, {"Correct", true}, {"Total", true}};
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& idx = c.Input("Indices");
    const TensorInfo& label = c.Input("Label");
    if (idx.dims.size() != 2) {
      return c.Error("Indices must be [N, k], got " + ir::ShapeText(idx.dims));
    }
    if (idx.dtype != ir::DataType::kInt64 || label.dtype != ir::DataType::kInt64) {
      return c.Error("Indices and Label must be int64");
    }
    if (label.dims.size() != 2 || !DimsMatch(label.dims[1], 1) ||
        !DimsMatch(label.dims[0], idx.dims[0])) {
      return c.Error("Label must be [N, 1] with N of Indices " + ir::ShapeText(idx.dims) +
                     ", got " + ir::ShapeText(label.dims));
    }
    c.Output("Accuracy") = TensorInfo{ir::DataType::kFloat32, {1}};
    if (c.HasOutput("Correct")) c.Output("Correct") = TensorInfo{ir::DataType::kInt32, {1}};
    if (c.HasOutput("Total")) c.Output("Total") = TensorInfo{ir::DataType::kInt32, {1}};
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

std::vector<AttrSpec> TopKAttrs() {
  return {{"k", int32_t{1}}, {"axis", int32_t{-1}}, {"largest", true}, {"sorted", true}};
}

StatusOr<size_t> TopKAxis(const ShapeContext& c, const TensorInfo& x) {
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.IntAttr("axis");
  if (r == 0 || axis < -r || axis >= r) {
    return c.Error("axis " + std::to_string(axis) + " is out of range for X " +
                   ir::ShapeText(x.dims));
  }
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

void RegisterTopK(OpRegistry& registry) {
  OpSchema s;
  s.type = "top_k_v2";
  s.summary = "the k largest (or smallest) values along axis, with their int64 indices";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}, {"Indices"}};
  s.attrs = TopKAttrs();
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    FLEET_ASSIGN_OR_RETURN(size_t axis, TopKAxis(c, x));
    int64_t k = c.IntAttr("k");
    if (k < 1 || (x.dims[axis] >= 0 && k > x.dims[axis])) {
      return c.Error("k = " + std::to_string(k) + " must be in [1, " +
                     std::to_string(x.dims[axis]) + "] for X " + ir::ShapeText(x.dims));
    }
    TensorInfo out = x;
    out.dims[axis] = k;
    c.Output("Out") = out;
    out.dtype = ir::DataType::kInt64;
    c.Output("Indices") = out;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "top_k_v2_grad", {"X", "Indices"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "top_k_v2_grad";
  g.inputs = {{"X"}, {"Indices", false, false, true}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = TopKAttrs();
  g.infer_shape = [](ShapeContext& c) {
    FLEET_ASSIGN_OR_RETURN(size_t axis, TopKAxis(c, c.Input("X")));
    (void)axis;
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnMiscOps(OpRegistry& registry) {
  RegisterDropout(registry);
  RegisterLookupTable(registry, "lookup_table_v2");
  RegisterLookupTable(registry, "lookup_table");
  RegisterAccuracy(registry);
  RegisterTopK(registry);
}

}  // namespace fleet::ops
