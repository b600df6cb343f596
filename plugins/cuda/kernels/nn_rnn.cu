// rnn and rnn_grad on cuDNN's RNN API (the v8 entry points cuDNN 9 keeps): LSTM, GRU and the
// simple RNNs, stacked and bidirectional, with per-sequence lengths through cuDNN's padded
// sequence-major layout. Paddle's rnn op was shaped after this API, so its gate order (LSTM
// i, f, c, o; GRU r, z, c), its two biases per gate and its GRU candidate (reset gate applied to
// W_hc h + b_hc) are cuDNN's, and every WeightList matrix is one of cuDNN's per-gate matrices.
//
// Weights: cuDNN wants them in one flat weight space; each launch copies WeightList into it
// (one copy per gate matrix and bias, at the addresses cudnnGetRNNWeightParams gives) and the
// gradient launch copies the weight-space gradient back out the same way.
//
// Reserve: cuDNN's reserve space has a size only cuDNN knows, so the op's Reserve output
// (sized by the host for the CPU's layout) is zero-filled here, and rnn_grad reruns the forward
// pass in training mode into its own scratch before the two backward calls. That costs one more
// forward pass per training step and keeps programs device-independent.
//
// Sequence lengths are data that cuDNN needs on the host (the data descriptors) and on the
// device: a launch with SequenceLength copies it to the host and waits for the stream, the one
// place an rnn launch synchronises.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/nn_groups.h"
#include "rnn_plan.h"

namespace fleet_cuda {
namespace nn {
namespace {

namespace fk = fleet::kernel;
using fk::RnnMode;
using fk::RnnPlan;

cudnnRNNMode_t CellMode(RnnMode m) {
  switch (m) {
    case RnnMode::kLstm:
      return CUDNN_LSTM;
    case RnnMode::kGru:
      return CUDNN_GRU;
    case RnnMode::kRnnTanh:
      return CUDNN_RNN_TANH;
    case RnnMode::kRnnRelu:
      break;
  }
  return CUDNN_RNN_RELU;
}

struct RnnState {
  RnnPlan p;
  bool grad = false;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnDropoutDescriptor_t dropout = nullptr;
  cudnnRNNDataDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnTensorDescriptor_t h_desc = nullptr, m_desc = nullptr, b_desc = nullptr;
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  // Scratch layout (byte offsets, each 256-aligned): the weight space; for rnn_grad also its
  // gradient, the reserve space, the recomputed output, a zero output gradient and a discarded
  // input gradient for ops without Out@GRAD / Input@GRAD; the workspace; the int32 lengths.
  size_t weights_at = 0, dweights_at = 0, reserve_at = 0, y_at = 0, dy_at = 0, dx_at = 0;
  size_t work_at = 0, lengths_at = 0, total = 0;
  std::vector<int> lengths;  // host copy: the data descriptors' lengths and the device's source

  RnnState() = default;
  RnnState(const RnnState&) = delete;
  RnnState& operator=(const RnnState&) = delete;
  ~RnnState() {
    if (b_desc != nullptr) cudnnDestroyTensorDescriptor(b_desc);
    if (m_desc != nullptr) cudnnDestroyTensorDescriptor(m_desc);
    if (h_desc != nullptr) cudnnDestroyTensorDescriptor(h_desc);
    if (y_desc != nullptr) cudnnDestroyRNNDataDescriptor(y_desc);
    if (x_desc != nullptr) cudnnDestroyRNNDataDescriptor(x_desc);
    if (dropout != nullptr) cudnnDestroyDropoutDescriptor(dropout);
    if (rnn != nullptr) cudnnDestroyRNNDescriptor(rnn);
  }
};

FleetStatus* PlanOf(const FleetKernelContext* kc, bool grad, RnnPlan* p) {
  return fk::ToFleetStatus(fk::PlanRnn(kc, grad, p), Error);
}

// The data descriptors for the current lengths.
template <typename T>
FleetStatus* SetDataDescriptors(const FleetKernelContext* kc, RnnState& st) {
  static const T kZero = T(0);  // cuDNN's fill for padded output steps
  const RnnPlan& p = st.p;
  const int seq = static_cast<int>(p.seq), batch = static_cast<int>(p.batch);
  const std::string what = OpName(kc) + ": cudnnSetRNNDataDescriptor";
  if (FleetStatus* e = DnnStatus(
          cudnnSetRNNDataDescriptor(st.x_desc, DnnTraits<T>::kType,
                                    CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, seq, batch,
                                    static_cast<int>(p.input), st.lengths.data(),
                                    const_cast<T*>(&kZero)),
          what)) {
    return e;
  }
  return DnnStatus(cudnnSetRNNDataDescriptor(st.y_desc, DnnTraits<T>::kType,
                                             CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, seq, batch,
                                             static_cast<int>(p.dirs * p.hidden),
                                             st.lengths.data(), const_cast<T*>(&kZero)),
                   what);
}

template <typename T>
FleetStatus* Prepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch_bytes) {
  auto st = std::make_unique<RnnState>();
  st->grad = std::string(kc->op_type) == "rnn_grad";
  if (FleetStatus* e = PlanOf(kc, st->grad, &st->p)) return e;
  const RnnPlan& p = st->p;
  for (int64_t v : {p.seq, p.batch, p.input, p.dirs * p.hidden, p.layers, p.Cells() * p.batch}) {
    if (!FitsInt(v)) return InvalidArgument(OpName(kc) + ": a dimension exceeds cuDNN's int range");
  }
  const std::string what = OpName(kc) + ": cuDNN RNN descriptors";
  if (FleetStatus* e = DnnStatus(cudnnCreateRNNDescriptor(&st->rnn), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateDropoutDescriptor(&st->dropout), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateRNNDataDescriptor(&st->x_desc), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateRNNDataDescriptor(&st->y_desc), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateTensorDescriptor(&st->h_desc), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateTensorDescriptor(&st->m_desc), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateTensorDescriptor(&st->b_desc), what)) return e;
  const int hdims[3] = {static_cast<int>(p.Cells()), static_cast<int>(p.batch),
                        static_cast<int>(p.hidden)};
  const int hstrides[3] = {static_cast<int>(p.batch * p.hidden), static_cast<int>(p.hidden), 1};
  if (FleetStatus* e = DnnStatus(
          cudnnSetTensorNdDescriptor(st->h_desc, DnnTraits<T>::kType, 3, hdims, hstrides), what)) {
    return e;
  }
  st->lengths.assign(static_cast<size_t>(p.batch), static_cast<int>(p.seq));
  if (FleetStatus* e = SetDataDescriptors<T>(kc, *st)) return e;

  // The handle is consulted here only for sizes; each launch takes its own stream's handle.
  FleetStatus* e = Run(kc, [&](FleetStream* s) -> FleetStatus* {
    cudnnHandle_t h = Dnn(s);
    if (FleetStatus* e = DnnStatus(cudnnSetDropoutDescriptor(st->dropout, h, 0.0f, nullptr, 0, 0),
                                   what)) {
      return e;
    }
    if (FleetStatus* e = DnnStatus(
            cudnnSetRNNDescriptor_v8(
                st->rnn, CUDNN_RNN_ALGO_STANDARD, CellMode(p.mode), CUDNN_RNN_DOUBLE_BIAS,
                p.dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                DnnTraits<T>::kType, DnnTraits<T>::kType, DnnTraits<T>::kMath,
                static_cast<int32_t>(p.input), static_cast<int32_t>(p.hidden),
                static_cast<int32_t>(p.hidden), static_cast<int32_t>(p.layers), st->dropout,
                CUDNN_RNN_PADDED_IO_ENABLED),
            what)) {
      return e;
    }
    if (FleetStatus* e =
            DnnStatus(cudnnGetRNNWeightSpaceSize(h, st->rnn, &st->weight_bytes), what)) {
      return e;
    }
    return DnnStatus(cudnnGetRNNTempSpaceSizes(
                         h, st->rnn, st->grad ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                         st->x_desc, &st->work_bytes, &st->reserve_bytes),
                     what);
  });
  if (e != nullptr) return e;

  const size_t out_bytes = static_cast<size_t>(p.seq * p.batch * p.dirs * p.hidden) * sizeof(T);
  const size_t in_bytes = static_cast<size_t>(p.seq * p.batch * p.input) * sizeof(T);
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += AlignScratch(bytes);
    return here;
  };
  st->weights_at = take(st->weight_bytes);
  if (st->grad) {
    st->dweights_at = take(st->weight_bytes);
    st->reserve_at = take(st->reserve_bytes);
    st->y_at = take(out_bytes);
    st->dy_at = take(out_bytes);
    st->dx_at = take(in_bytes);
  }
  st->work_at = take(st->work_bytes);
  st->lengths_at = take(static_cast<size_t>(p.batch) * sizeof(int32_t));
  st->total = at;
  *scratch_bytes = at;
  *state = st.release();
  return nullptr;
}

// Reads SequenceLength (or takes T for every sequence), checks it, sets the data descriptors
// and enqueues the device copy cuDNN reads.
template <typename T>
FleetStatus* Lengths(const FleetKernelContext* kc, RnnState& st, FleetStream* s, int32_t* dev) {
  const RnnPlan& p = st.p;
  const FleetTensor* len = Input(kc, "SequenceLength");
  if (len != nullptr) {
    const size_t elem = len->dtype == FLEET_DTYPE_INT32 ? 4 : 8;
    std::vector<unsigned char> raw(static_cast<size_t>(p.batch) * elem);
    if (FleetStatus* e = CudaStatus(cudaMemcpyAsync(raw.data(), len->data, raw.size(),
                                                    cudaMemcpyDeviceToHost, s->native),
                                    OpName(kc) + ": reading SequenceLength")) {
      return e;
    }
    if (FleetStatus* e = CudaStatus(cudaStreamSynchronize(s->native), OpName(kc) + ": running")) {
      return e;
    }
    for (int64_t b = 0; b < p.batch; ++b) {
      int64_t v = 0;
      if (elem == 4) {
        v = reinterpret_cast<const int32_t*>(raw.data())[b];
      } else {
        v = reinterpret_cast<const int64_t*>(raw.data())[b];
      }
      const std::string bad = fk::CheckSequenceLength(kc, p, b, v);
      if (!bad.empty()) return InvalidArgument(bad);
      st.lengths[static_cast<size_t>(b)] = static_cast<int>(v);
    }
  }
  if (FleetStatus* e = SetDataDescriptors<T>(kc, st)) return e;
  // The host vector lives in the kernel state, so it outlasts the asynchronous copy.
  return CudaStatus(cudaMemcpyAsync(dev, st.lengths.data(), st.lengths.size() * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, s->native),
                    OpName(kc) + ": copying the sequence lengths");
}

// Copies between WeightList (or its gradient) and cuDNN's weight space: to_space packs, else
// unpacks into the entries of `slot` that are present.
template <typename T>
FleetStatus* MoveWeights(const FleetKernelContext* kc, const RnnState& st, cudnnHandle_t h,
                         FleetStream* s, void* space, bool to_space, bool outputs,
                         const char* slot) {
  const RnnPlan& p = st.p;
  const std::string what = OpName(kc) + ": cudnnGetRNNWeightParams";
  const int64_t H = p.hidden;
  for (int64_t layer = 0; layer < p.layers; ++layer) {
    for (int64_t dir = 0; dir < p.dirs; ++dir) {
      const int32_t pseudo = static_cast<int32_t>(layer * p.dirs + dir);
      for (int64_t lin = 0; lin < 2 * p.gates; ++lin) {
        // Gate matrices 0..G-1 multiply the input, G..2G-1 the hidden state; each has the
        // matching bias (bias_ih, bias_hh).
        const bool rec = lin >= p.gates;
        const int64_t gate = rec ? lin - p.gates : lin;
        const int64_t cols = rec ? H : p.LayerInput(layer);
        const size_t w = rec ? p.WeightHh(layer, dir) : p.WeightIh(layer, dir);
        const size_t b = rec ? p.BiasHh(layer, dir) : p.BiasIh(layer, dir);
        void* m_addr = nullptr;
        void* b_addr = nullptr;
        if (FleetStatus* e = DnnStatus(
                cudnnGetRNNWeightParams(h, st.rnn, pseudo, st.weight_bytes, space,
                                        static_cast<int32_t>(lin), st.m_desc, &m_addr, st.b_desc,
                                        &b_addr),
                what)) {
          return e;
        }
        const FleetTensor* wt = outputs ? Output(kc, slot, w) : Input(kc, slot, w);
        const FleetTensor* bt = outputs ? Output(kc, slot, b) : Input(kc, slot, b);
        const std::pair<const FleetTensor*, void*> moves[2] = {{wt, m_addr}, {bt, b_addr}};
        const int64_t counts[2] = {H * cols, H};
        const int64_t offsets[2] = {gate * H * cols, gate * H};
        for (int k = 0; k < 2; ++k) {
          if (moves[k].first == nullptr || moves[k].second == nullptr) continue;
          T* tensor = Data<T>(moves[k].first) + offsets[k];
          T* cudnn = static_cast<T*>(moves[k].second);
          const size_t bytes = static_cast<size_t>(counts[k]) * sizeof(T);
          if (FleetStatus* e = CudaStatus(
                  cudaMemcpyAsync(to_space ? cudnn : tensor, to_space ? tensor : cudnn, bytes,
                                  cudaMemcpyDeviceToDevice, s->native),
                  OpName(kc) + ": copying weights")) {
            return e;
          }
        }
      }
    }
  }
  return nullptr;
}

RnnState* StateOf(const FleetKernelContext* kc, void* state, FleetStatus** error) {
  auto* st = static_cast<RnnState*>(state);
  *error = nullptr;
  if (st == nullptr) {
    *error = InvalidArgument(OpName(kc) + ": launched without prepare");
  } else if (st->total > 0 && kc->scratch == nullptr) {
    *error = MissingScratch(kc, st->total);
  }
  return st;
}

// A launch must see the shapes its prepare planned the descriptors and scratch for.
FleetStatus* SamePlan(const FleetKernelContext* kc, const RnnPlan& prepared, const RnnPlan& now) {
  if (prepared.seq == now.seq && prepared.batch == now.batch && prepared.input == now.input &&
      prepared.hidden == now.hidden && prepared.layers == now.layers &&
      prepared.dirs == now.dirs && prepared.mode == now.mode) {
    return nullptr;
  }
  return InvalidArgument(OpName(kc) + ": launched with shapes other than those it was prepared "
                         "for");
}

// A state slot's tensor data, or nullptr.
const void* StateData(const FleetKernelContext* kc, const char* slot, size_t i, bool output) {
  const FleetTensor* t = output ? Output(kc, slot, i) : Input(kc, slot, i);
  return t != nullptr ? t->data : nullptr;
}

template <typename T>
FleetStatus* RnnLaunch(void*, const FleetKernelContext* kc, void* state) {
  FleetStatus* error = nullptr;
  RnnState* st = StateOf(kc, state, &error);
  if (error != nullptr) return error;
  RnnPlan now;
  if (FleetStatus* e = PlanOf(kc, false, &now)) return e;
  if (FleetStatus* e = SamePlan(kc, st->p, now)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    char* scratch = static_cast<char*>(kc->scratch);
    auto* dev_lengths = reinterpret_cast<int32_t*>(scratch + st->lengths_at);
    if (FleetStatus* e = Lengths<T>(kc, *st, s, dev_lengths)) return e;
    cudnnHandle_t h = Dnn(s);
    void* weights = scratch + st->weights_at;
    if (FleetStatus* e = MoveWeights<T>(kc, *st, h, s, weights, true, false, "WeightList")) {
      return e;
    }
    const bool lstm = st->p.mode == RnnMode::kLstm;
    if (FleetStatus* e = DnnStatus(
            cudnnRNNForward(h, st->rnn, CUDNN_FWD_MODE_INFERENCE, dev_lengths, st->x_desc,
                            Input(kc, "Input")->data, st->y_desc, Output(kc, "Out")->data,
                            st->h_desc, StateData(kc, "PreState", 0, false),
                            const_cast<void*>(StateData(kc, "State", 0, true)), st->h_desc,
                            lstm ? StateData(kc, "PreState", 1, false) : nullptr,
                            lstm ? const_cast<void*>(StateData(kc, "State", 1, true)) : nullptr,
                            st->weight_bytes, weights, st->work_bytes, scratch + st->work_at, 0,
                            nullptr),
            OpName(kc) + ": cudnnRNNForward")) {
      return e;
    }
    const FleetTensor* reserve = Output(kc, "Reserve");
    return CudaStatus(cudaMemsetAsync(reserve->data, 0,
                                      static_cast<size_t>(Numel(reserve)) * sizeof(T), s->native),
                      OpName(kc) + ": clearing Reserve");
  });
}

template <typename T>
FleetStatus* RnnGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  FleetStatus* error = nullptr;
  RnnState* st = StateOf(kc, state, &error);
  if (error != nullptr) return error;
  RnnPlan now;
  if (FleetStatus* e = PlanOf(kc, true, &now)) return e;
  if (FleetStatus* e = SamePlan(kc, st->p, now)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    const RnnPlan& p = st->p;
    const bool lstm = p.mode == RnnMode::kLstm;
    char* scratch = static_cast<char*>(kc->scratch);
    auto* dev_lengths = reinterpret_cast<int32_t*>(scratch + st->lengths_at);
    if (FleetStatus* e = Lengths<T>(kc, *st, s, dev_lengths)) return e;
    cudnnHandle_t h = Dnn(s);
    void* weights = scratch + st->weights_at;
    void* dweights = scratch + st->dweights_at;
    void* reserve = scratch + st->reserve_at;
    void* work = scratch + st->work_at;
    void* y = scratch + st->y_at;
    if (FleetStatus* e = MoveWeights<T>(kc, *st, h, s, weights, true, false, "WeightList")) {
      return e;
    }
    const void* x = Input(kc, "Input")->data;
    const void* hx = StateData(kc, "PreState", 0, false);
    const void* cx = lstm ? StateData(kc, "PreState", 1, false) : nullptr;
    // The forward pass again, in training mode, for cuDNN's reserve space.
    if (FleetStatus* e = DnnStatus(
            cudnnRNNForward(h, st->rnn, CUDNN_FWD_MODE_TRAINING, dev_lengths, st->x_desc, x,
                            st->y_desc, y, st->h_desc, hx, nullptr, st->h_desc, cx, nullptr,
                            st->weight_bytes, weights, st->work_bytes, work, st->reserve_bytes,
                            reserve),
            OpName(kc) + ": cudnnRNNForward (training)")) {
      return e;
    }
    const size_t out_bytes = static_cast<size_t>(p.seq * p.batch * p.dirs * p.hidden) * sizeof(T);
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    void* dy = scratch + st->dy_at;
    if (dout != nullptr) {
      dy = dout->data;
    } else if (FleetStatus* e = CudaStatus(cudaMemsetAsync(dy, 0, out_bytes, s->native),
                                           OpName(kc) + ": zero Out@GRAD")) {
      return e;
    }
    const FleetTensor* dinput = Output(kc, "Input@GRAD");
    void* dx = dinput != nullptr ? dinput->data : scratch + st->dx_at;
    if (FleetStatus* e = DnnStatus(
            cudnnRNNBackwardData_v8(
                h, st->rnn, dev_lengths, st->y_desc, y, dy, st->x_desc, dx, st->h_desc, hx,
                StateData(kc, "State@GRAD", 0, false),
                const_cast<void*>(StateData(kc, "PreState@GRAD", 0, true)), st->h_desc, cx,
                lstm ? StateData(kc, "State@GRAD", 1, false) : nullptr,
                lstm ? const_cast<void*>(StateData(kc, "PreState@GRAD", 1, true)) : nullptr,
                st->weight_bytes, weights, st->work_bytes, work, st->reserve_bytes, reserve),
            OpName(kc) + ": cudnnRNNBackwardData_v8")) {
      return e;
    }
    if (OutputCount(kc, "WeightList@GRAD") == 0) return nullptr;
    // cuDNN only adds weight gradients into the space.
    if (FleetStatus* e = CudaStatus(cudaMemsetAsync(dweights, 0, st->weight_bytes, s->native),
                                    OpName(kc) + ": clearing the weight gradient")) {
      return e;
    }
    if (FleetStatus* e = DnnStatus(
            cudnnRNNBackwardWeights_v8(h, st->rnn, CUDNN_WGRAD_MODE_ADD, dev_lengths, st->x_desc,
                                       x, st->h_desc, hx, st->y_desc, y, st->weight_bytes,
                                       dweights, st->work_bytes, work, st->reserve_bytes,
                                       reserve),
            OpName(kc) + ": cudnnRNNBackwardWeights_v8")) {
      return e;
    }
    return MoveWeights<T>(kc, *st, h, s, dweights, false, true, "WeightList@GRAD");
  });
}

}  // namespace
}  // namespace nn

void AddNnRnnKernels(KernelList& list) {
  using nn::DeleteState;
  using nn::RnnState;
  Add(list, "rnn", FLEET_DTYPE_FLOAT32, nn::RnnLaunch<float>, nn::Prepare<float>,
      DeleteState<RnnState>);
  Add(list, "rnn", FLEET_DTYPE_FLOAT64, nn::RnnLaunch<double>, nn::Prepare<double>,
      DeleteState<RnnState>);
  Add(list, "rnn_grad", FLEET_DTYPE_FLOAT32, nn::RnnGradLaunch<float>, nn::Prepare<float>,
      DeleteState<RnnState>);
  Add(list, "rnn_grad", FLEET_DTYPE_FLOAT64, nn::RnnGradLaunch<double>, nn::Prepare<double>,
      DeleteState<RnnState>);
}

}  // namespace fleet_cuda
