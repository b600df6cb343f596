// Paddle's cuDNN-style `rnn` op (LSTM, GRU, RNN_TANH, RNN_RELU; stacked layers, bidirectional,
// optional per-sequence lengths) and its gradient op.
//
// Layout, as in Paddle 2.x:
//   Input [T, B, input_size], time-major;
//   PreState: LSTM [init_h, init_c], else [init_h]; each [num_layers * D, B, hidden_size] with
//     row layer * D + direction (D = 2 when is_bidirec);
//   WeightList: per (layer, direction) in that order, weight_ih [G * H, I_l] then
//     weight_hh [G * H, H], all of them first; then bias_ih [G * H] and bias_hh [G * H] in the
//     same order. G is 4 (LSTM gates i, f, c, o), 3 (GRU gates r, z, c) or 1; I_l is input_size
//     for layer 0 and D * H above it (the directions' outputs concatenated);
//   SequenceLength [B] int32/int64 (optional): steps at or past a sequence's length leave the
//     state unchanged and output zeros; the reverse direction starts at the sequence's last step.
//   Out [T, B, D * H]; State like PreState, the state after each sequence's last step.
//   Reserve [T, B, num_layers * D * H * (G + 3)]: what the device keeps for the gradient. Its
//     contents belong to the device that ran the forward op (the CPU keeps every layer's outputs
//     and activated gates there; the CUDA plugin recomputes instead).
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

bool IsFloat(ir::DataType t) { return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64; }

std::vector<AttrSpec> RnnAttrs() {
  return {{"dropout_prob", 0.0f},     {"is_bidirec", false}, {"input_size", int32_t{10}},
          {"hidden_size", int32_t{100}}, {"num_layers", int32_t{1}}, {"mode", std::string("LSTM")},
          {"seed", int32_t{-1}},         {"is_test", false}};
}

struct RnnShape {
  ir::DataType dtype = ir::DataType::kInvalid;
  int64_t gates = 0, layers = 0, dirs = 0, seq = -1, batch = -1, input = 0, hidden = 0;
  size_t states = 0;  // PreState / State entries
  std::vector<int64_t> StateDims() const { return {layers * dirs, batch, hidden}; }
  std::vector<int64_t> OutDims() const { return {seq, batch, dirs * hidden}; }
  std::vector<int64_t> ReserveDims() const {
    return {seq, batch, layers * dirs * hidden * (gates + 3)};
  }
};

std::string Dims(const std::vector<int64_t>& d) { return ir::ShapeText(d); }

bool ShapeMatches(const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!DimsMatch(got[i], want[i])) return false;
  }
  return true;
}

Status ExpectShape(const ShapeContext& c, const TensorInfo& t, const std::string& what,
                   const std::vector<int64_t>& want, ir::DataType dtype) {
  if (t.dtype != dtype) {
    return c.Error(what + " must be " + std::string(ir::DataTypeName(dtype)) + " like Input");
  }
  if (!ShapeMatches(t.dims, want)) {
    return c.Error(what + " must be " + Dims(want) + ", got " + Dims(t.dims));
  }
  return OkStatus();
}

// Checks attributes and every input of rnn (and the forward inputs rnn_grad repeats).
StatusOr<RnnShape> CheckRnn(const ShapeContext& c) {
  RnnShape s;
  const std::string mode = c.StringAttr("mode");
  if (mode == "LSTM") {
    s.gates = 4;
  } else if (mode == "GRU") {
    s.gates = 3;
  } else if (mode == "RNN_TANH" || mode == "RNN_RELU") {
    s.gates = 1;
  } else {
    return c.Error("mode must be LSTM, GRU, RNN_TANH or RNN_RELU, got '" + mode + "'");
  }
  s.states = mode == "LSTM" ? 2 : 1;
  s.layers = c.IntAttr("num_layers");
  s.hidden = c.IntAttr("hidden_size");
  s.input = c.IntAttr("input_size");
  s.dirs = c.BoolAttr("is_bidirec") ? 2 : 1;
  if (s.layers < 1) return c.Error("num_layers must be at least 1, got " + std::to_string(s.layers));
  if (s.hidden < 1) {
    return c.Error("hidden_size must be at least 1, got " + std::to_string(s.hidden));
  }
  if (s.input < 1) return c.Error("input_size must be at least 1, got " + std::to_string(s.input));
  const double dropout = c.FloatAttr("dropout_prob");
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    return c.Error("dropout_prob must be in [0, 1), got " + std::to_string(dropout));
  }
  if (dropout > 0.0 && s.layers > 1 && !c.BoolAttr("is_test")) {
    return c.Error("dropout_prob > 0 between stacked layers is not supported; stack one-layer "
                   "rnn ops with dropout ops between them");
  }

  const TensorInfo& x = c.Input("Input");
  if (!IsFloat(x.dtype)) return c.Error("Input must be float32 or float64");
  if (x.dims.size() != 3 || !DimsMatch(x.dims[2], s.input)) {
    return c.Error("Input must be [T, B, input_size] = [T, B, " + std::to_string(s.input) +
                   "], got " + Dims(x.dims));
  }
  s.dtype = x.dtype;
  s.seq = x.dims[0];
  s.batch = x.dims[1];

  if (c.InputCount("PreState") != s.states) {
    return c.Error("PreState must hold " + std::to_string(s.states) + " tensor(s) for mode " +
                   mode + " (" + (s.states == 2 ? "init_h, init_c" : "init_h") + "), got " +
                   std::to_string(c.InputCount("PreState")));
  }
  for (size_t i = 0; i < s.states; ++i) {
    FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("PreState", i),
                                      "PreState[" + std::to_string(i) + "]", s.StateDims(),
                                      s.dtype));
  }

  const size_t cells = static_cast<size_t>(s.layers * s.dirs);
  if (c.InputCount("WeightList") != 4 * cells) {
    return c.Error("WeightList must hold 4 * num_layers * D = " + std::to_string(4 * cells) +
                   " tensors (every weight_ih, weight_hh, then every bias_ih, bias_hh), got " +
                   std::to_string(c.InputCount("WeightList")));
  }
  const int64_t rows = s.gates * s.hidden;
  for (size_t cell = 0; cell < cells; ++cell) {
    const int64_t layer_input = cell < static_cast<size_t>(s.dirs) ? s.input : s.dirs * s.hidden;
    const std::string at = " of layer " + std::to_string(cell / s.dirs) + " direction " +
                           std::to_string(cell % s.dirs);
    const size_t w = 2 * cell, b = 2 * cells + 2 * cell;
    auto name = [](size_t i) { return "WeightList[" + std::to_string(i) + "]"; };
    FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("WeightList", w), name(w) + " (weight_ih" + at + ")",
                                      {rows, layer_input}, s.dtype));
    FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("WeightList", w + 1),
                                      name(w + 1) + " (weight_hh" + at + ")", {rows, s.hidden},
                                      s.dtype));
    FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("WeightList", b), name(b) + " (bias_ih" + at + ")",
                                      {rows}, s.dtype));
    FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("WeightList", b + 1),
                                      name(b + 1) + " (bias_hh" + at + ")", {rows}, s.dtype));
  }

  if (c.HasInput("SequenceLength")) {
    const TensorInfo& len = c.Input("SequenceLength");
    if (len.dtype != ir::DataType::kInt32 && len.dtype != ir::DataType::kInt64) {
      return c.Error("SequenceLength must be int32 or int64");
    }
    if (len.dims.size() != 1 || !DimsMatch(len.dims[0], s.batch)) {
      return c.Error("SequenceLength must be [B] with B of Input, got " + Dims(len.dims));
    }
  }
  return s;
}

void RegisterRnn(OpRegistry& registry) {
  OpSchema s;
  s.type = "rnn";
  s.summary = "stacked, optionally bidirectional LSTM / GRU / simple RNN over a time-major "
              "[T, B, I] input with cuDNN's weight layout and gate order";
  s.inputs = {{"Input"},
              {"PreState", false, true},
              {"WeightList", false, true},
              {"SequenceLength", true, false, true}};
  s.outputs = {{"Out"}, {"State", false, true}, {"Reserve"}, {"DropoutState", true}};
  s.attrs = RnnAttrs();
  s.kernel_dtype_slot = "Input";
  s.infer_shape = [](ShapeContext& c) {
    FLEET_ASSIGN_OR_RETURN(RnnShape sh, CheckRnn(c));
    if (c.OutputCount("State") != sh.states) {
      return c.Error("State must hold " + std::to_string(sh.states) + " tensor(s), like PreState");
    }
    c.Output("Out") = TensorInfo{sh.dtype, sh.OutDims()};
    for (size_t i = 0; i < sh.states; ++i) c.Output("State", i) = TensorInfo{sh.dtype, sh.StateDims()};
    c.Output("Reserve") = TensorInfo{sh.dtype, sh.ReserveDims()};
    // Paddle's dropout mask between layers; kept for program compatibility, never written.
    if (c.HasOutput("DropoutState")) c.Output("DropoutState") = TensorInfo{ir::DataType::kUInt8, {1}};
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "rnn_grad",
                                      {"Input", "PreState", "WeightList", "SequenceLength", "Out",
                                       "Reserve"},
                                      {"Out", "State"}, {"Input", "PreState", "WeightList"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "rnn_grad";
  g.inputs = {{"Input"},
              {"PreState", false, true},
              {"WeightList", false, true},
              {"SequenceLength", true, false, true},
              {"Out"},
              {"Reserve"},
              {"Out@GRAD", true},
              {"State@GRAD", true, true}};
  g.outputs = {{"Input@GRAD", true}, {"PreState@GRAD", true, true}, {"WeightList@GRAD", true, true}};
  g.attrs = RnnAttrs();
  g.kernel_dtype_slot = "Input";
  g.infer_shape = [](ShapeContext& c) {
    FLEET_ASSIGN_OR_RETURN(RnnShape sh, CheckRnn(c));
    FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("Out"), "Out", sh.OutDims(), sh.dtype));
    FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("Reserve"), "Reserve", sh.ReserveDims(), sh.dtype));
    if (c.HasInput("Out@GRAD")) {
      FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("Out@GRAD"), "Out@GRAD", sh.OutDims(), sh.dtype));
    }
    if (c.HasInput("State@GRAD")) {
      if (c.InputCount("State@GRAD") != sh.states) {
        return c.Error("State@GRAD must hold " + std::to_string(sh.states) + " tensor(s)");
      }
      for (size_t i = 0; i < sh.states; ++i) {
        FLEET_RETURN_IF_ERROR(ExpectShape(c, c.Input("State@GRAD", i),
                                          "State@GRAD[" + std::to_string(i) + "]", sh.StateDims(),
                                          sh.dtype));
      }
    }
    if (c.HasOutput("Input@GRAD")) c.Output("Input@GRAD") = c.Input("Input");
    if (c.HasOutput("PreState@GRAD")) {
      if (c.OutputCount("PreState@GRAD") != sh.states) {
        return c.Error("PreState@GRAD must hold " + std::to_string(sh.states) + " tensor(s)");
      }
      for (size_t i = 0; i < sh.states; ++i) c.Output("PreState@GRAD", i) = c.Input("PreState", i);
    }
    if (c.HasOutput("WeightList@GRAD")) {
      if (c.OutputCount("WeightList@GRAD") != c.InputCount("WeightList")) {
        return c.Error("WeightList@GRAD must hold one tensor per WeightList entry");
      }
      for (size_t i = 0; i < c.InputCount("WeightList"); ++i) {
        c.Output("WeightList@GRAD", i) = c.Input("WeightList", i);
      }
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnRnnOps(OpRegistry& registry) { RegisterRnn(registry); }

}  // namespace fleet::ops
