// Helpers of the sequence ops' conformance tests (sequence_test.cc, sequence_offset_test.cc):
// offsets as a tensor for NumPy, sequence tensors with and without their padding rows, and the
// finite-difference check of an op's gradient over sequence inputs.
#pragma once

#include <cmath>

#include "harness.h"
#include "ops/op_registry.h"

namespace fleet::conformance {

inline HostTensor Offsets(const std::vector<int64_t>& lod) {
  return MakeTensor<int64_t>({static_cast<int64_t>(lod.size())}, lod);
}

// The first `rows` rows of `t` (a sequence tensor without its padding rows).
inline HostTensor FirstRows(const HostTensor& t, int64_t rows) {
  HostTensor r = t;
  if (t.dims.empty() || t.dims[0] == 0) return r;
  const size_t row_bytes = t.bytes.size() / static_cast<size_t>(t.dims[0]);
  r.dims[0] = rows;
  r.bytes.resize(row_bytes * static_cast<size_t>(rows));
  return r;
}

// `t` with `extra` zero rows appended: a sequence tensor whose capacity exceeds its rows, as the
// executor prepares them.
inline HostTensor WithPadding(const HostTensor& t, int64_t extra) {
  HostTensor r = t;
  const size_t row_bytes = t.dims[0] > 0 ? t.bytes.size() / static_cast<size_t>(t.dims[0]) : 0;
  r.dims[0] += extra;
  r.bytes.resize(r.bytes.size() + row_bytes * static_cast<size_t>(extra), 0);
  return r;
}

// With L = sum(w * out) (w zero on the padding rows of a sequence output, which the host
// zeroes), the schema's grad ops fed out@GRAD = w must give dL/d(in_var), measured by
// perturbing every element of in_var's rows before `in_rows` (its padding stays zero).
inline ::testing::AssertionResult GradMatchesFiniteDifferences(OpRunner& runner, const ir::Op& fwd,
                                                        VarMap vars, const LodMap& lods,
                                                        const LodMap& grad_lods,
                                                        const std::string& in_var,
                                                        const std::string& out_var,
                                                        int64_t in_rows, int64_t out_rows) {
  if (Status s = runner.Run(fwd, vars, 1, lods); !s.ok()) {
    return ::testing::AssertionFailure() << "forward: " << s.ToString();
  }
  std::vector<double> w = Values<double>(RandomTensor<double>(vars.at(out_var).dims, 4321));
  const std::vector<int64_t> out_dims = vars.at(out_var).dims;
  const size_t out_row = out_dims[0] > 0 ? w.size() / static_cast<size_t>(out_dims[0]) : 0;
  const size_t counted = out_row * static_cast<size_t>(out_rows);  // what the padding leaves
  std::fill(w.begin() + static_cast<std::ptrdiff_t>(counted), w.end(), 0.0);
  auto loss = [&](const HostTensor& x) -> double {
    VarMap v = vars;
    v[in_var] = x;
    EXPECT_TRUE(runner.Run(fwd, v, 1, lods).ok());
    const std::vector<double> out = Values<double>(v.at(out_var));
    double sum = 0;
    for (size_t i = 0; i < counted; ++i) sum += out[i] * w[i];
    return sum;
  };
  vars[ir::GradVarName(out_var)] = MakeTensor<double>(out_dims, w);
  for (const ir::Op& g : ops::BuiltinOps().Find(fwd.type)->grad(fwd)) {
    if (Status s = runner.Run(g, vars, 1, grad_lods); !s.ok()) {
      return ::testing::AssertionFailure() << g.type << ": " << s.ToString();
    }
  }
  const std::vector<double> analytic = Values<double>(vars.at(ir::GradVarName(in_var)));
  const HostTensor& xt = vars.at(in_var);
  std::vector<double> x = Values<double>(xt);
  const size_t in_row = xt.dims[0] > 0 ? x.size() / static_cast<size_t>(xt.dims[0]) : 0;
  for (size_t i = 0; i < in_row * static_cast<size_t>(in_rows); ++i) {
    const double eps = 1e-6, saved = x[i];
    x[i] = saved + eps;
    const double up = loss(MakeTensor<double>(xt.dims, x));
    x[i] = saved - eps;
    const double down = loss(MakeTensor<double>(xt.dims, x));
    x[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    if (std::fabs(analytic[i] - numeric) > 1e-6 * (1 + std::fabs(numeric))) {
      return ::testing::AssertionFailure()
             << in_var << "@GRAD element " << i << ": " << analytic[i] << " vs finite "
             << "differences " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

// Offsets with an empty sequence, a batch of one sequence, and one whose first sequence is empty.

}  // namespace fleet::conformance
