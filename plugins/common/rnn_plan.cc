// PlanRnn: the rnn op's shape checks, worded once for both plugins. The host's shape function
// checks the same things before a program runs; these catch hand-built contexts and a plugin
// reached around the host.
#include "rnn_plan.h"

#include <vector>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

std::string Entry(const char* slot, size_t i) {
  return std::string(slot) + "[" + std::to_string(i) + "]";
}

// `t` (named `what`) must be present with dims `want` and the Input's dtype.
PlanStatus Expect(const FleetKernelContext* kc, const FleetTensor* t, const std::string& what,
                  const std::vector<int64_t>& want, int32_t dtype) {
  if (t == nullptr) return PlanInvalid(OpName(kc) + ": " + what + " is missing");
  if (t->dtype != dtype) {
    return PlanInvalid(OpName(kc) + ": " + what + " must have Input's dtype");
  }
  if (Dims(t) != want) {
    return PlanInvalid(OpName(kc) + ": " + what + " is " + DimsText(Dims(t)) + ", expected " +
                       DimsText(want));
  }
  return PlanOk();
}

// Every entry of a duplicable slot: `count` tensors with the dims `want(i)` gives.
template <typename Want>
PlanStatus ExpectList(const FleetKernelContext* kc, bool input, const char* slot, size_t count,
                      bool optional_entries, Want&& want, int32_t dtype) {
  const size_t have = input ? InputCount(kc, slot) : OutputCount(kc, slot);
  if (have != count) {
    return PlanInvalid(OpName(kc) + ": " + slot + " holds " + std::to_string(have) +
                       " tensors, expected " + std::to_string(count));
  }
  for (size_t i = 0; i < count; ++i) {
    const FleetTensor* t = input ? Input(kc, slot, i) : Output(kc, slot, i);
    if (t == nullptr && optional_entries) continue;
    PlanStatus st = Expect(kc, t, Entry(slot, i), want(i), dtype);
    if (!st.ok()) return st;
  }
  return PlanOk();
}

}  // namespace

PlanStatus PlanRnn(const FleetKernelContext* kc, bool grad, RnnPlan* plan) {
  RnnPlan p;
  const std::string mode(StringAttr(kc, "mode"));
  if (mode == "LSTM") {
    p.mode = RnnMode::kLstm;
    p.gates = 4;
  } else if (mode == "GRU") {
    p.mode = RnnMode::kGru;
    p.gates = 3;
  } else if (mode == "RNN_TANH" || mode == "RNN_RELU") {
    p.mode = mode == "RNN_TANH" ? RnnMode::kRnnTanh : RnnMode::kRnnRelu;
    p.gates = 1;
  } else {
    return PlanInvalid(OpName(kc) + ": mode must be LSTM, GRU, RNN_TANH or RNN_RELU, got '" +
                       mode + "'");
  }
  p.layers = IntAttr(kc, "num_layers", 1);
  p.hidden = IntAttr(kc, "hidden_size", 0);
  p.input = IntAttr(kc, "input_size", 0);
  p.dirs = BoolAttr(kc, "is_bidirec") ? 2 : 1;
  if (p.layers < 1 || p.hidden < 1 || p.input < 1) {
    return PlanInvalid(OpName(kc) + ": num_layers, hidden_size and input_size must be positive");
  }
  if (FloatAttr(kc, "dropout_prob") > 0.0 && p.layers > 1 && !BoolAttr(kc, "is_test")) {
    return PlanUnimplemented(OpName(kc) + ": dropout_prob > 0 between stacked layers is not "
                             "supported");
  }
  const FleetTensor* x = Input(kc, "Input");
  if (x == nullptr) return PlanInvalid(OpName(kc) + ": Input is missing");
  if (x->dtype != FLEET_DTYPE_FLOAT32 && x->dtype != FLEET_DTYPE_FLOAT64) {
    return PlanInvalid(OpName(kc) + ": Input must be float32 or float64");
  }
  if (x->ndim != 3 || x->dims[2] != p.input || x->dims[0] < 1 || x->dims[1] < 1) {
    return PlanInvalid(OpName(kc) + ": Input must be [T, B, input_size] with T, B >= 1 and " +
                       "input_size " + std::to_string(p.input) + ", got " + DimsText(Dims(x)));
  }
  const int32_t dt = x->dtype;
  p.seq = x->dims[0];
  p.batch = x->dims[1];
  const std::vector<int64_t> state = {p.Cells(), p.batch, p.hidden};
  const std::vector<int64_t> out = {p.seq, p.batch, p.dirs * p.hidden};
  const std::vector<int64_t> reserve = {p.seq, p.batch, p.ReserveWidth()};
  auto state_dims = [&](size_t) { return state; };
  auto weight_dims = [&](size_t i) -> std::vector<int64_t> {
    const int64_t cell = static_cast<int64_t>(i / 2) % p.Cells();
    const int64_t layer = cell / p.dirs;
    if (i >= static_cast<size_t>(2 * p.Cells())) return {p.GateWidth()};
    return {p.GateWidth(), i % 2 == 0 ? p.LayerInput(layer) : p.hidden};
  };
  const size_t states = static_cast<size_t>(p.States());
  const size_t weights = static_cast<size_t>(4 * p.Cells());
  PlanStatus st = ExpectList(kc, true, "PreState", states, false, state_dims, dt);
  if (st.ok()) st = ExpectList(kc, true, "WeightList", weights, false, weight_dims, dt);
  if (!st.ok()) return st;
  if (const FleetTensor* len = Input(kc, "SequenceLength")) {
    if ((len->dtype != FLEET_DTYPE_INT32 && len->dtype != FLEET_DTYPE_INT64) || len->ndim != 1 ||
        len->dims[0] != p.batch) {
      return PlanInvalid(OpName(kc) + ": SequenceLength must be int32 or int64 [B] = [" +
                         std::to_string(p.batch) + "], got " + DimsText(Dims(len)));
    }
    p.has_lengths = true;
  }
  if (!grad) {
    st = Expect(kc, Output(kc, "Out"), "Out", out, dt);
    if (st.ok()) st = ExpectList(kc, false, "State", states, false, state_dims, dt);
    if (st.ok()) st = Expect(kc, Output(kc, "Reserve"), "Reserve", reserve, dt);
  } else {
    st = Expect(kc, Input(kc, "Out"), "Out", out, dt);
    if (st.ok()) st = Expect(kc, Input(kc, "Reserve"), "Reserve", reserve, dt);
    if (st.ok() && Input(kc, "Out@GRAD") != nullptr) {
      st = Expect(kc, Input(kc, "Out@GRAD"), "Out@GRAD", out, dt);
    }
    if (st.ok() && InputCount(kc, "State@GRAD") > 0) {
      st = ExpectList(kc, true, "State@GRAD", states, true, state_dims, dt);
    }
    if (st.ok() && Output(kc, "Input@GRAD") != nullptr) {
      st = Expect(kc, Output(kc, "Input@GRAD"), "Input@GRAD", Dims(x), dt);
    }
    if (st.ok() && OutputCount(kc, "PreState@GRAD") > 0) {
      st = ExpectList(kc, false, "PreState@GRAD", states, true, state_dims, dt);
    }
    if (st.ok() && OutputCount(kc, "WeightList@GRAD") > 0) {
      st = ExpectList(kc, false, "WeightList@GRAD", weights, true, weight_dims, dt);
    }
  }
  if (!st.ok()) return st;
  *plan = p;
  return PlanOk();
}

std::string CheckSequenceLength(const FleetKernelContext* kc, const RnnPlan& plan, int64_t b,
                                int64_t length) {
  if (length >= 1 && length <= plan.seq) return "";
  return OpName(kc) + ": SequenceLength[" + std::to_string(b) + "] = " + std::to_string(length) +
         " is outside [1, " + std::to_string(plan.seq) + "] (T of Input)";
}

}  // namespace fleet::kernel
