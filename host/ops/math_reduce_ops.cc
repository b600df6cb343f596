// sum (of several tensors), mean, reduce_sum, reduce_mean and their grads.
//
// Scalar-like results have shape [1] (Paddle 1.x/2.0-2.4; later Paddle returns 0-D tensors):
// `mean`, and reduce_* over every dim without keep_dim.
#include <algorithm>

#include "ops/math_internal.h"

namespace fleet::ops::math {
namespace {

// Sparse gradients meeting (a table looked up twice): SelectedRows inputs alone give their
// entries one after another; with a dense input among them, Out is dense.
Status InferSelectedRowsSum(ShapeContext& c) {
  const size_t n = c.InputCount("X");
  int64_t height = -1, entries = 0;
  bool all_sparse = true;
  std::vector<int64_t> row_dims;
  ir::DataType dtype = c.Input("X", 0).dtype;
  for (size_t i = 0; i < n; ++i) {
    const TensorInfo& t = c.Input("X", i);
    const int64_t h = t.selected_rows() ? t.height : (t.dims.empty() ? -1 : t.dims[0]);
    std::vector<int64_t> rest(t.dims.begin() + (t.dims.empty() ? 0 : 1), t.dims.end());
    if (i == 0) row_dims = rest;
    if (t.dtype != dtype || t.dims.empty() || rest.size() != row_dims.size() ||
        (height >= 0 && h >= 0 && h != height) || t.lod_level != 0) {
      return c.Error("X[" + std::to_string(i) + "] is " + std::string(ir::DataTypeName(t.dtype)) +
                     ir::ShapeText(DeclaredShape(t)) + " but X[0] is " +
                     std::string(ir::DataTypeName(dtype)) +
                     ir::ShapeText(DeclaredShape(c.Input("X", 0))) +
                     "; all inputs must match (sparse gradients of one table)");
    }
    for (size_t d = 0; d < rest.size(); ++d) {
      if (!DimsAgree(rest[d], row_dims[d])) {
        return c.Error("X[" + std::to_string(i) + "] has rows of " + ir::ShapeText(rest) +
                       " but X[0] of " + ir::ShapeText(row_dims));
      }
    }
    if (h >= 0) height = h;
    all_sparse = all_sparse && t.selected_rows();
    entries = entries < 0 || t.dims[0] < 0 ? -1 : entries + t.dims[0];
  }
  TensorInfo out{dtype, {all_sparse ? entries : height}};
  out.dims.insert(out.dims.end(), row_dims.begin(), row_dims.end());
  if (all_sparse) out.height = height;
  c.Output("Out") = out;
  return OkStatus();
}

Status InferSum(ShapeContext& c) {
  const size_t n = c.InputCount("X");
  if (n == 0) return c.Error("X needs at least one tensor");
  for (size_t i = 0; i < n; ++i) {
    if (c.Input("X", i).selected_rows()) return InferSelectedRowsSum(c);
  }
  TensorInfo out = c.Input("X", 0);
  for (size_t i = 1; i < n; ++i) {
    const TensorInfo& t = c.Input("X", i);
    bool ok = t.dtype == out.dtype && t.dims.size() == out.dims.size();
    for (size_t d = 0; ok && d < t.dims.size(); ++d) {
      ok = DimsAgree(t.dims[d], out.dims[d]);
      if (ok && out.dims[d] < 0) out.dims[d] = t.dims[d];
    }
    if (!ok) {
      return c.Error("X[" + std::to_string(i) + "] is " +
                     std::string(ir::DataTypeName(t.dtype)) + ir::ShapeText(t.dims) +
                     " but X[0] is " + std::string(ir::DataTypeName(c.Input("X", 0).dtype)) +
                     ir::ShapeText(c.Input("X", 0).dims) + "; all inputs must match");
    }
    // Out takes X[0]'s sequences (lod_share), which only mean something for rows of the same
    // kind: all sequences, or all dense.
    if (t.lod_level != out.lod_level) {
      const size_t seq = t.lod_level != 0 ? i : 0, dense = seq == 0 ? i : 0;
      const std::vector<std::string>& names = c.op().Input("X");
      return c.Error("X[" + std::to_string(seq) + "] '" + names[seq] + "' holds sequences but X[" +
                     std::to_string(dense) + "] '" + names[dense] +
                     "' is dense; sum adds sequence tensors only to sequence tensors");
    }
  }
  c.Output("Out") = out;
  return OkStatus();
}

Status InferMean(ShapeContext& c) {
  c.Output("Out") = TensorInfo{c.Input("X").dtype, {1}};
  return OkStatus();
}

// Which dims of `rank` a reduce op reduces, from dim / reduce_all.
Status ReducedDims(const ShapeContext& c, size_t rank, std::vector<bool>* reduced) {
  reduced->assign(rank, false);
  std::vector<int64_t> dims = c.IntsAttr("dim");
  if (c.BoolAttr("reduce_all") || dims.empty()) {
    reduced->assign(rank, true);
    return OkStatus();
  }
  const auto r = static_cast<int64_t>(rank);
  for (int64_t d : dims) {
    const int64_t k = d < 0 ? d + r : d;
    if (k < 0 || k >= r) {
      return c.Error("dim " + std::to_string(d) + " is out of range for X " +
                     ir::ShapeText(c.Input("X").dims));
    }
    (*reduced)[static_cast<size_t>(k)] = true;
  }
  return OkStatus();
}

Status InferReduce(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  std::vector<bool> reduced;
  FLEET_RETURN_IF_ERROR(ReducedDims(c, x.dims.size(), &reduced));
  const bool keep = c.BoolAttr("keep_dim");
  TensorInfo out{x.dtype, {}};
  for (size_t i = 0; i < x.dims.size(); ++i) {
    if (!reduced[i]) {
      out.dims.push_back(x.dims[i]);
    } else if (keep) {
      out.dims.push_back(1);
    }
  }
  if (out.dims.empty()) out.dims.push_back(1);
  c.Output("Out") = out;
  return OkStatus();
}

Status InferReduceGrad(ShapeContext& c) {
  std::vector<bool> reduced;
  FLEET_RETURN_IF_ERROR(ReducedDims(c, c.Input("X").dims.size(), &reduced));
  return SameShapeAs(c, "X@GRAD", "X");
}

}  // namespace

Status InferReduceShape(ShapeContext& c) { return InferReduce(c); }

void RegisterReduceOps(OpRegistry& registry) {
  {
    OpSchema s;
    s.type = "sum";
    s.summary = "Out = X[0] + X[1] + ... (same shapes); Out may be one of the X";
    s.inputs = {{"X", false, true}};
    s.outputs = {{"Out"}};
    s.infer_shape = InferSum;
    // Gradients of a sequence var used twice meet here: Out follows X[0] (InferSum wants all
    // inputs to hold sequences, or none).
    s.lod_share = {{"Out", "X"}};
    s.selected_rows_inputs = {"X"};
    // As in Paddle: each input's gradient is a copy of Out@GRAD, made by a scale op of 1.
    s.grad = [](const ir::Op& fwd) {
      std::vector<ir::Op> ops;
      for (const auto& x : fwd.Input("X")) {
        ir::Op g;
        g.type = "scale";
        g.inputs["X"] = {ir::GradVarName(fwd.OutputOne("Out"))};
        g.outputs["Out"] = {ir::GradVarName(x)};
        g.attrs = {{"scale", 1.0f}, {"bias", 0.0f}, {"bias_after_scale", true}};
        ops.push_back(std::move(g));
      }
      return ops;
    };
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "mean";
    s.summary = "Out[0] = mean of all elements of X; Out has shape [1]";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.infer_shape = InferMean;
    s.grad = [](const ir::Op& fwd) {
      return std::vector<ir::Op>{MakeGradOp(fwd, "mean_grad", {"X"}, {}, {"Out"}, {"X"})};
    };
    RegisterBuiltin(registry, std::move(s));
    OpSchema g;
    g.type = "mean_grad";
    g.summary = "X@GRAD = Out@GRAD[0] / numel(X) everywhere";
    g.inputs = {{"X"}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD"}};
    g.infer_shape = [](ShapeContext& c) { return SameShapeAs(c, "X@GRAD", "X"); };
    g.kernel_dtype_slot = "Out@GRAD";
    RegisterBuiltin(registry, std::move(g));
  }
  for (const char* name : {"reduce_sum", "reduce_mean"}) {
    const std::string type = name;
    const std::string grad_type = type + "_grad";
    std::vector<AttrSpec> attrs = {{"dim", std::vector<int32_t>{0}},
                                   {"keep_dim", false},
                                   {"reduce_all", false}};
    OpSchema s;
    s.type = type;
    s.summary = type == "reduce_sum" ? "sum over `dim` (every dim with reduce_all)"
                                     : "mean over `dim` (every dim with reduce_all)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = attrs;
    s.infer_shape = InferReduce;
    s.grad = [grad_type](const ir::Op& fwd) {
      return std::vector<ir::Op>{MakeGradOp(fwd, grad_type, {"X"}, {}, {"Out"}, {"X"})};
    };
    RegisterBuiltin(registry, std::move(s));
    OpSchema g;
    g.type = grad_type;
    g.summary = "Out@GRAD broadcast back over the reduced dims" +
                std::string(type == "reduce_mean" ? ", divided by their size" : "");
    g.inputs = {{"X"}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD"}};
    g.attrs = attrs;
    g.infer_shape = InferReduceGrad;
    g.kernel_dtype_slot = "Out@GRAD";
    RegisterBuiltin(registry, std::move(g));
  }
}

}  // namespace fleet::ops::math
