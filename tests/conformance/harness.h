// The device-kernel conformance harness: runs single ops through a device plugin's kernels using
// nothing but the plugin ABI (via the host's loader and its kernel/device wrappers), and checks
// them against NumPy references and central finite differences.
//
// The device under test is FLEET_CONFORMANCE_DEVICE (default "cpu"), loaded from the build's
// plugin directory or FLEET_PLUGIN_PATH; the same suite therefore checks the CUDA plugin and
// third-party devices. A device with no usable unit (a GPU plugin on a machine without a GPU)
// makes every test skip with a message.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/npy.h"
#include "ir/program.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet::conformance {

// A tensor in host memory (the harness copies to and from the device).
using HostTensor = data::NpyArray;
using ir::MakeOp;
// Tensors by var name: the op's inputs before a run, its inputs and outputs after.
using VarMap = std::map<std::string, HostTensor>;
// Sequence offsets (FleetTensor.lod) of the sequence inputs, by var name; an output that holds
// sequences carries those of the op's first sequence input, as in the executor.
using LodMap = std::map<std::string, std::vector<int64_t>>;

// An op from its type, slots and attributes.
template <typename T>
ir::DataType DataTypeOf();
template <>
inline ir::DataType DataTypeOf<float>() { return ir::DataType::kFloat32; }
template <>
inline ir::DataType DataTypeOf<double>() { return ir::DataType::kFloat64; }
template <>
inline ir::DataType DataTypeOf<int64_t>() { return ir::DataType::kInt64; }
template <>
inline ir::DataType DataTypeOf<int32_t>() { return ir::DataType::kInt32; }
template <>
inline ir::DataType DataTypeOf<bool>() { return ir::DataType::kBool; }
template <>
inline ir::DataType DataTypeOf<uint8_t>() { return ir::DataType::kUInt8; }

template <typename T>
HostTensor MakeTensor(std::vector<int64_t> dims, const std::vector<T>& values) {
  HostTensor t;
  t.dtype = DataTypeOf<T>();
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

template <typename T>
std::vector<T> Values(const HostTensor& t) {
  std::vector<T> out(t.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

// Uniform values in [lo, hi) of dtype T from a seeded generator.
template <typename T>
HostTensor RandomTensor(std::vector<int64_t> dims, uint64_t seed, double lo = -1.0,
                        double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(dist(gen));
  return MakeTensor<T>(std::move(dims), v);
}

// Integer values in [lo, hi) (labels, indices).
HostTensor RandomInts(std::vector<int64_t> dims, uint64_t seed, int64_t lo, int64_t hi);

// Converts a tensor to another dtype: float32 / float64, int64 / int32 (truncating), or bool
// (non-zero is true).
HostTensor Cast(const HostTensor& t, ir::DataType dtype);

// SelectedRows tensors (FleetTensor.rows, ABI 1.6) by var name: the rows and height of an
// input listed here go to the kernel with its values (the VarMap entry, [entries, ...]); an
// output the op makes sparse comes back here with its rows, its values in the VarMap.
struct SparseRows {
  int64_t height = 0;
  std::vector<int64_t> rows;
};
using SparseMap = std::map<std::string, SparseRows>;

class OpRunner {
 public:
  // The runner for this test binary's device; nullptr with `skip_reason` set when the device
  // has no unit here; a load failure is a test failure (reported through `error`).
  static OpRunner* Get(std::string* skip_reason, Status* error);

  const std::string& device() const { return device_; }
  // Whether the device's random kernels promise the CPU plugin's exact streams
  // (FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS, or the CPU itself). Without it the random-op tests
  // check distributions only and skip their stream-exact cases, saying so.
  bool bitwise_random() const { return bitwise_random_; }

  // Runs `op`: looks its schema up, infers output shapes from the input tensors in `vars`,
  // chooses the device's kernel, copies inputs in, prepares and launches, copies outputs back
  // into `vars` (by var name), and a sequence output's offsets as the int64 var "<name>.lod".
  // `seed` is the per-op seed random kernels see.
  // On a device other than the CPU the op also runs on the CPU plugin with the same inputs and
  // seed, and every output must agree with the CPU's (float32 within 1e-4 relative, float64
  // within 1e-9, other dtypes exactly), or Run fails naming the output; random ops (a "seed"
  // attribute) are compared only on a device with bitwise_random(). With `sparse`, the inputs
  // it lists are SelectedRows tensors and it receives the rows of sparse outputs, which must
  // equal the CPU's exactly.
  // A device without a kernel for the op and dtype fails with UNIMPLEMENTED and a message
  // starting with kNotProvidedPrefix (report/report.h). Every call is reported (ReportRun).
  Status Run(const ir::Op& op, VarMap& vars, uint64_t seed = 1234, const LodMap& lods = {},
             SparseMap* sparse = nullptr);

 private:
  OpRunner() = default;
  Status RunOn(const std::string& device, const ir::Op& op, VarMap& vars, uint64_t seed,
               const LodMap& lods, SparseMap* sparse);
  std::string device_;
  bool bitwise_random_ = false;
  ir::DataType last_dtype_ = ir::DataType::kInvalid;  // kernel dtype of the last RunOn
  std::unique_ptr<PluginRegistry> registry_;
};

// Whether `op` is a random op: its schema has a "seed" attribute (fleet_kernels.h).
bool IsRandomOp(const ir::Op& op);

// Skips the rest of the current test unless the device promises the CPU's random streams.
#define FLEET_CONFORMANCE_REQUIRE_BITWISE_RANDOM(runner)                                       \
  do {                                                                                         \
    if (!(runner)->bitwise_random()) {                                                         \
      GTEST_SKIP() << "stream-exact level: device '" << (runner)->device()                     \
                   << "' does not declare FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS, so its random " \
                      "numbers are not compared bit for bit with the CPU plugin's";            \
    }                                                                                          \
  } while (0)

// Runs reference `function` of tests/conformance/ref/*.py over NumPy: each input slot of `op`
// (its vars taken from `vars`) is passed as a list of arrays, with the op's attributes; returns
// output slots -> arrays.
StatusOr<std::map<std::string, std::vector<HostTensor>>> NumpyReference(
    const std::string& function, const ir::Op& op, const VarMap& vars);

// Compares element-wise with |a - b| <= atol + rtol * |b|; failures name the first mismatches.
::testing::AssertionResult AllClose(const HostTensor& actual, const HostTensor& expected,
                                    double rtol, double atol);

struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-8;
  // Forward input slots to check; empty = every float input slot whose schema is not no_grad.
  std::vector<std::string> inputs;
  // Forward output slots the scalar loss is built from; empty = every float output slot.
  std::vector<std::string> outputs;
  uint64_t seed = 99;
};

// Checks the op's gradient rule and its kernels against central finite differences: with
// L = sum_k <w_k, out_k> for random weights w_k, the grad ops the schema's grad rule emits, fed
// out@GRAD = w, must give dL/dx for every checked input; the numeric derivative perturbs each
// input element by ±eps and reruns the forward kernel. `vars` holds float64 inputs.
::testing::AssertionResult CheckGradients(OpRunner& runner, const ir::Op& forward,
                                          const VarMap& vars, const GradCheckOptions& options);

// ---- checks the op suites share -------------------------------------------------------------

// Every float tensor of `vars` cast to `dtype`; other tensors as they are.
VarMap CastAll(const VarMap& vars, ir::DataType dtype);

// Runs `op` on `vars64` (float64 inputs) in float64 and in float32 and compares every output the
// NumPy reference `ref` (default: the op type) returns, computed once in float64 from the same
// inputs: within 1e-10 relative in float64, within the given tolerances in float32.
void ExpectFloatsMatchNumpy(OpRunner& runner, const ir::Op& op, const VarMap& vars64,
                        double rtol32 = 1e-5, double atol32 = 1e-5, std::string ref = "");

// The grad ops the schema emits for `fwd`, fed random output grads drawn from `seed`, run once
// in float64 and once in float32, must agree (the float64 ones are checked against finite
// differences by CheckGradients).
void ExpectFloat32GradsMatchFloat64(OpRunner& runner, const ir::Op& fwd, const VarMap& vars64,
                                    double rtol = 1e-4, double atol = 1e-5, uint64_t seed = 500);

// Runs `op` on `vars` as they are and compares the outputs of `slots` with the NumPy reference
// named after the op.
::testing::AssertionResult MatchesNumpy(OpRunner& runner, const ir::Op& op, VarMap vars,
                                        const std::vector<std::string>& slots, double rtol,
                                        double atol);

// Fetches the runner or skips / fails the current test.
#define FLEET_CONFORMANCE_RUNNER(var)                                   \
  ::fleet::conformance::OpRunner* var = nullptr;                        \
  do {                                                                  \
    std::string fleet_skip_;                                            \
    ::fleet::Status fleet_err_;                                         \
    var = ::fleet::conformance::OpRunner::Get(&fleet_skip_, &fleet_err_); \
    ASSERT_TRUE(fleet_err_.ok()) << fleet_err_.ToString();              \
    if (var == nullptr) GTEST_SKIP() << fleet_skip_;                    \
  } while (0)

}  // namespace fleet::conformance
