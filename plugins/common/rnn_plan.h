// The rnn op (host/ops/nn_rnn_ops.cc) as both device plugins see it: the attributes read once,
// every tensor's shape checked against them, and where each weight lives in WeightList and each
// saved value in the CPU's Reserve rows. Plain C++17, so CUDA sources include it.
//
// Contract: PlanRnn reads shapes and attributes only (never data) and is called at prepare and
// again at launch; its errors name the op, the slot and the shapes. Sequence lengths are data:
// CheckSequenceLength words the error for a value outside [1, T], which each plugin reports
// before it writes any output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "fleet/fleet_kernels.h"
#include "plan_status.h"

namespace fleet::kernel {

enum class RnnMode { kLstm, kGru, kRnnTanh, kRnnRelu };

struct RnnPlan {
  RnnMode mode = RnnMode::kLstm;
  int64_t gates = 4;   // G: LSTM i, f, c, o; GRU r, z, c; 1 for the simple RNNs
  int64_t layers = 1;
  int64_t dirs = 1;    // 2 when is_bidirec
  int64_t seq = 0;     // T
  int64_t batch = 0;   // B
  int64_t input = 0;   // input_size
  int64_t hidden = 0;  // H
  bool has_lengths = false;

  int64_t Cells() const { return layers * dirs; }
  int64_t States() const { return mode == RnnMode::kLstm ? 2 : 1; }
  int64_t LayerInput(int64_t layer) const { return layer == 0 ? input : dirs * hidden; }
  int64_t GateWidth() const { return gates * hidden; }

  // WeightList positions of (layer, dir): every weight_ih, weight_hh pair first, then every
  // bias_ih, bias_hh pair, cells in (layer, dir) order.
  size_t WeightIh(int64_t layer, int64_t dir) const {
    return static_cast<size_t>(2 * (layer * dirs + dir));
  }
  size_t WeightHh(int64_t layer, int64_t dir) const { return WeightIh(layer, dir) + 1; }
  size_t BiasIh(int64_t layer, int64_t dir) const {
    return static_cast<size_t>(2 * Cells()) + WeightIh(layer, dir);
  }
  size_t BiasHh(int64_t layer, int64_t dir) const { return BiasIh(layer, dir) + 1; }

  // A Reserve row [T, B, width] (one per step and sequence) holds, per layer: the layer's output
  // (D * H, the next layer's input), then per direction the G activated gates and two more
  // H-wide values: LSTM the new cell state c and tanh(c); GRU W_hc h + b_hc (the recurrent part
  // of the candidate, before the reset gate scales it) and an unused slot.
  int64_t LayerStride() const { return dirs * hidden * (gates + 3); }
  int64_t ReserveWidth() const { return layers * LayerStride(); }
  int64_t OutputOffset(int64_t layer) const { return layer * LayerStride(); }
  int64_t GatesOffset(int64_t layer, int64_t dir) const {
    return OutputOffset(layer) + dirs * hidden + dir * (gates + 2) * hidden;
  }
  int64_t ExtraOffset(int64_t layer, int64_t dir) const {
    return GatesOffset(layer, dir) + gates * hidden;
  }
  int64_t Extra2Offset(int64_t layer, int64_t dir) const {
    return ExtraOffset(layer, dir) + hidden;
  }
};

// Reads rnn's attributes and checks Input, PreState, WeightList, SequenceLength, Out, State and
// Reserve (for rnn_grad also Out@GRAD, State@GRAD and the @GRAD outputs that are present).
PlanStatus PlanRnn(const FleetKernelContext* kc, bool grad, RnnPlan* plan);

// The error for SequenceLength[b] = `length` outside [1, T]; empty when it is inside.
std::string CheckSequenceLength(const FleetKernelContext* kc, const RnnPlan& plan, int64_t b,
                                int64_t length);

}  // namespace fleet::kernel
