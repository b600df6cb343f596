// mul and matmul_v2 with their grads.
#include <algorithm>

#include "ops/math_internal.h"

namespace fleet::ops::math {
namespace {

Status InferMul(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const TensorInfo& y = c.Input("Y");
  const int64_t xnc = c.IntAttr("x_num_col_dims");
  const int64_t ync = c.IntAttr("y_num_col_dims");
  const auto xr = static_cast<int64_t>(x.dims.size());
  const auto yr = static_cast<int64_t>(y.dims.size());
  if (xnc < 1 || xnc >= xr) {
    return c.Error("x_num_col_dims " + std::to_string(xnc) + " must be in [1, rank(X)) for X " +
                   ir::ShapeText(x.dims));
  }
  if (ync < 1 || ync >= yr) {
    return c.Error("y_num_col_dims " + std::to_string(ync) + " must be in [1, rank(Y)) for Y " +
                   ir::ShapeText(y.dims));
  }
  const int64_t x_cols = ProductOrUnknown(x.dims, static_cast<size_t>(xnc), x.dims.size());
  const int64_t y_rows = ProductOrUnknown(y.dims, 0, static_cast<size_t>(ync));
  if (!DimsAgree(x_cols, y_rows)) {
    return c.Error("X " + ir::ShapeText(x.dims) + " flattened at x_num_col_dims=" +
                   std::to_string(xnc) + " has " + std::to_string(x_cols) + " columns but Y " +
                   ir::ShapeText(y.dims) + " flattened at y_num_col_dims=" + std::to_string(ync) +
                   " has " + std::to_string(y_rows) + " rows");
  }
  TensorInfo out{x.dtype, {}};
  out.dims.assign(x.dims.begin(), x.dims.begin() + xnc);
  out.dims.insert(out.dims.end(), y.dims.begin() + ync, y.dims.end());
  c.Output("Out") = out;
  return OkStatus();
}

// Broadcasts one pair of batch dims; false when they cannot broadcast.
bool BroadcastDim(int64_t a, int64_t b, int64_t* out) {
  if (a == 1) {
    *out = b;
  } else if (b == 1) {
    *out = a;
  } else if (a < 0) {
    *out = b;  // unknown vs known (> 1) or unknown: take what is known
  } else if (b < 0 || a == b) {
    *out = a;
  } else {
    return false;
  }
  return true;
}

Status InferMatmulV2(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const TensorInfo& y = c.Input("Y");
  if (x.dims.empty() || y.dims.empty()) {
    return c.Error("X " + ir::ShapeText(x.dims) + " and Y " + ir::ShapeText(y.dims) +
                   " must have rank >= 1");
  }
  const bool tx = c.BoolAttr("trans_x");
  const bool ty = c.BoolAttr("trans_y");
  const size_t xr = x.dims.size(), yr = y.dims.size();
  // Logical matrices: a 1-D X is a row vector, a 1-D Y a column vector; trans_* is ignored for
  // them, as in Paddle.
  int64_t m = 1, kx = x.dims[0];
  if (xr >= 2) {
    m = x.dims[xr - 2];
    kx = x.dims[xr - 1];
    if (tx) std::swap(m, kx);
  }
  int64_t ky = y.dims[0], n = 1;
  if (yr >= 2) {
    ky = y.dims[yr - 2];
    n = y.dims[yr - 1];
    if (ty) std::swap(ky, n);
  }
  if (!DimsAgree(kx, ky)) {
    return c.Error("contraction dims differ: X " + ir::ShapeText(x.dims) + (tx ? " (transposed)" : "") +
                   " has " + std::to_string(kx) + ", Y " + ir::ShapeText(y.dims) +
                   (ty ? " (transposed)" : "") + " has " + std::to_string(ky));
  }
  const size_t xb = xr >= 2 ? xr - 2 : 0, yb = yr >= 2 ? yr - 2 : 0;
  const size_t nb = std::max(xb, yb);
  TensorInfo out{x.dtype, std::vector<int64_t>(nb, 1)};
  for (size_t i = 0; i < nb; ++i) {
    // Right-aligned batch dims; a missing one is 1.
    const int64_t a = i + xb >= nb ? x.dims[i + xb - nb] : 1;
    const int64_t b = i + yb >= nb ? y.dims[i + yb - nb] : 1;
    if (!BroadcastDim(a, b, &out.dims[i])) {
      return c.Error("batch dims of X " + ir::ShapeText(x.dims) + " and Y " + ir::ShapeText(y.dims) +
                     " do not broadcast (" + std::to_string(a) + " vs " + std::to_string(b) +
                     ")");
    }
  }
  if (xr >= 2) out.dims.push_back(m);
  if (yr >= 2) out.dims.push_back(n);
  if (out.dims.empty()) out.dims.push_back(1);  // vector . vector: shape [1]
  c.Output("Out") = out;
  return OkStatus();
}

Status InferXYGrads(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(SameShapeAs(c, "X@GRAD", "X"));
  return SameShapeAs(c, "Y@GRAD", "Y");
}

GradFn XYGrad(std::string type) {
  return [type](const ir::Op& fwd) {
    return std::vector<ir::Op>{MakeGradOp(fwd, type, {"X", "Y"}, {}, {"Out"}, {"X", "Y"})};
  };
}

OpSchema GradSchema(std::string type, std::vector<AttrSpec> attrs) {
  OpSchema s;
  s.type = std::move(type);
  s.inputs = {{"X"}, {"Y"}, {"Out@GRAD"}};
  s.outputs = {{"X@GRAD", true}, {"Y@GRAD", true}};
  s.attrs = std::move(attrs);
  s.infer_shape = InferXYGrads;
  s.kernel_dtype_slot = "Out@GRAD";
  return s;
}

}  // namespace

void RegisterMatmulOps(OpRegistry& registry) {
  std::vector<AttrSpec> mul_attrs = {{"x_num_col_dims", int32_t{1}},
                                     {"y_num_col_dims", int32_t{1}}};
  {
    OpSchema s;
    s.type = "mul";
    s.summary = "Out = flatten(X, x_num_col_dims) . flatten(Y, y_num_col_dims)";
    s.inputs = {{"X"}, {"Y"}};
    s.outputs = {{"Out"}};
    s.attrs = mul_attrs;
    s.infer_shape = InferMul;
    // Out keeps X's first dim whatever x_num_col_dims, and each of its rows reads only the
    // same row of X: Out follows X's sequences. Y (the weight) stays dense.
    s.lod_share = {{"Out", "X"}};
    s.grad = XYGrad("mul_grad");
    RegisterBuiltin(registry, std::move(s));
  }
  {
    // Y@GRAD = X^T . Out@GRAD sums over rows, where the zero padding rows add nothing.
    OpSchema g = GradSchema("mul_grad", mul_attrs);
    g.lod_share = {{"X@GRAD", "X"}, {"", "Out@GRAD"}};
    RegisterBuiltin(registry, std::move(g));
  }

  std::vector<AttrSpec> mm_attrs = {{"trans_x", false}, {"trans_y", false}};
  {
    OpSchema s;
    s.type = "matmul_v2";
    s.summary = "batched matrix product with optional transposes and broadcast batch dims";
    s.inputs = {{"X"}, {"Y"}};
    s.outputs = {{"Out"}};
    s.attrs = mm_attrs;
    s.infer_shape = InferMatmulV2;
    s.grad = XYGrad("matmul_v2_grad");
    RegisterBuiltin(registry, std::move(s));
  }
  RegisterBuiltin(registry, GradSchema("matmul_v2_grad", mm_attrs));
}

}  // namespace fleet::ops::math
