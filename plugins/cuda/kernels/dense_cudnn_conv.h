// cuDNN's 2-D convolution as conv2d and conv2d_transpose both use it: the geometry, the
// descriptors, whether cuDNN can express the host's windows, and the choice of algorithm for
// each of cuDNN's three directions. conv2d runs them as forward / data grad / filter grad;
// conv2d_transpose runs the same convolution the other way round (its forward is cuDNN's data
// gradient, its Input@GRAD cuDNN's forward). Included by dense_conv.cu and dense_deconv.cu.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <string>

#include "kernels/kernel_util.h"

namespace fleet_cuda::cudnn_conv {

// The convolution x [n, c, h, w] * w [o, cg, kh, kw] -> y [n, o, oh, ow] in groups.
struct ConvGeom {
  int64_t n = 0, c = 0, h = 0, w = 0;  // x
  int64_t o = 0, kh = 0, kw = 0;       // filter [o, c / groups, kh, kw]
  int64_t oh = 0, ow = 0;              // y
  int64_t groups = 1, cg = 0, og = 0;  // channels per group: x, y
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0};
  int64_t pad_end[2] = {0, 0};
};

// The four descriptors, destroyed with the object. A kernel state derives from it.
struct Descriptors {
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;

  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (conv_desc != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc);
    if (w_desc != nullptr) cudnnDestroyFilterDescriptor(w_desc);
    if (y_desc != nullptr) cudnnDestroyTensorDescriptor(y_desc);
    if (x_desc != nullptr) cudnnDestroyTensorDescriptor(x_desc);
  }
};

// Whether cuDNN's symmetric padding by pad_begin maps x onto exactly y's size, with every size
// within cuDNN's int parameters (trailing y rows no tap reaches would be the host's business).
inline bool DnnExpressible(const ConvGeom& g) {
  const int64_t in[2] = {g.h, g.w}, k[2] = {g.kh, g.kw}, out[2] = {g.oh, g.ow};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = (k[i] - 1) * g.dilation[i] + 1;
    const int64_t padded = in[i] + 2 * g.pad_begin[i] - span;
    if (padded < 0 || padded / g.stride[i] + 1 != out[i]) return false;
    if (!FitsInt(g.pad_begin[i]) || !FitsInt(g.stride[i]) || !FitsInt(g.dilation[i])) {
      return false;
    }
  }
  for (int64_t v : {g.n, g.c, g.h, g.w, g.o, g.cg, g.kh, g.kw, g.oh, g.ow, g.groups}) {
    if (v <= 0 || !FitsInt(v)) return false;
  }
  return true;
}

// Creates the descriptors (an error only when cuDNN cannot allocate them) and describes the
// convolution; *ok is false when cuDNN refuses the description, which leaves the direct path.
template <typename T>
FleetStatus* MakeDescriptors(const FleetKernelContext* kc, const ConvGeom& g, Descriptors& d,
                             bool* ok) {
  *ok = false;
  const std::string what = std::string(kc->op_type) + ": creating cuDNN descriptors";
  if (FleetStatus* e = DnnStatus(cudnnCreateTensorDescriptor(&d.x_desc), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateTensorDescriptor(&d.y_desc), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateFilterDescriptor(&d.w_desc), what)) return e;
  if (FleetStatus* e = DnnStatus(cudnnCreateConvolutionDescriptor(&d.conv_desc), what)) {
    return e;
  }
  const auto I = [](int64_t v) { return static_cast<int>(v); };
  const cudnnDataType_t type = DnnTraits<T>::kType;
  if (cudnnSetTensor4dDescriptor(d.x_desc, CUDNN_TENSOR_NCHW, type, I(g.n), I(g.c), I(g.h),
                                 I(g.w)) != CUDNN_STATUS_SUCCESS ||
      cudnnSetTensor4dDescriptor(d.y_desc, CUDNN_TENSOR_NCHW, type, I(g.n), I(g.o), I(g.oh),
                                 I(g.ow)) != CUDNN_STATUS_SUCCESS ||
      cudnnSetFilter4dDescriptor(d.w_desc, type, CUDNN_TENSOR_NCHW, I(g.o), I(g.cg), I(g.kh),
                                 I(g.kw)) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolution2dDescriptor(d.conv_desc, I(g.pad_begin[0]), I(g.pad_begin[1]),
                                      I(g.stride[0]), I(g.stride[1]), I(g.dilation[0]),
                                      I(g.dilation[1]), CUDNN_CROSS_CORRELATION,
                                      type) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolutionGroupCount(d.conv_desc, I(g.groups)) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolutionMathType(d.conv_desc, DnnTraits<T>::kMath) != CUDNN_STATUS_SUCCESS) {
    return nullptr;
  }
  int n = 0, c = 0, h = 0, w = 0;
  if (cudnnGetConvolution2dForwardOutputDim(d.conv_desc, d.x_desc, d.w_desc, &n, &c, &h, &w) !=
          CUDNN_STATUS_SUCCESS ||
      n != g.n || c != g.o || h != g.oh || w != g.ow) {
    return nullptr;
  }
  *ok = true;
  return nullptr;
}

// Whether cuDNN's heuristics list `algo` as supported (and deterministic when asked).
template <typename Perf, typename Algo>
bool Listed(const Perf* perf, int count, Algo algo, bool deterministic) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].algo != algo || perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!deterministic || perf[i].determinism == CUDNN_DETERMINISTIC) return true;
  }
  return false;
}

// Each direction takes the first of its preferred algorithms that the heuristics list (when
// they answer at all) and whose workspace size cuDNN reports, and returns true; false leaves it
// on the direct kernels. Forward prefers the implicit GEMMs; the two gradients take the
// deterministic algorithm 1 only.
inline bool ChooseForward(const Descriptors& d, cudnnHandle_t h, cudnnConvolutionFwdAlgo_t* out,
                          size_t* ws) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  const bool listed = cudnnGetConvolutionForwardAlgorithm_v7(
                          h, d.x_desc, d.w_desc, d.conv_desc, d.y_desc,
                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf) == CUDNN_STATUS_SUCCESS;
  for (cudnnConvolutionFwdAlgo_t algo : {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                         CUDNN_CONVOLUTION_FWD_ALGO_GEMM}) {
    if (listed && !Listed(perf, count, algo, false)) continue;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, d.x_desc, d.w_desc, d.conv_desc, d.y_desc,
                                                algo, ws) != CUDNN_STATUS_SUCCESS) {
      continue;
    }
    *out = algo;
    return true;
  }
  return false;
}

inline bool ChooseBackwardData(const Descriptors& d, cudnnHandle_t h,
                               cudnnConvolutionBwdDataAlgo_t* out, size_t* ws) {
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  const bool listed =
      cudnnGetConvolutionBackwardDataAlgorithm_v7(
          h, d.w_desc, d.y_desc, d.conv_desc, d.x_desc, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
          &count, perf) == CUDNN_STATUS_SUCCESS;
  const cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  if (listed && !Listed(perf, count, algo, true)) return false;
  if (cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w_desc, d.y_desc, d.conv_desc, d.x_desc,
                                                   algo, ws) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  *out = algo;
  return true;
}

inline bool ChooseBackwardFilter(const Descriptors& d, cudnnHandle_t h,
                                 cudnnConvolutionBwdFilterAlgo_t* out, size_t* ws) {
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int count = 0;
  const bool listed =
      cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          h, d.x_desc, d.y_desc, d.conv_desc, d.w_desc,
          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf) == CUDNN_STATUS_SUCCESS;
  const cudnnConvolutionBwdFilterAlgo_t algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  if (listed && !Listed(perf, count, algo, true)) return false;
  if (cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x_desc, d.y_desc, d.conv_desc,
                                                     d.w_desc, algo, ws) !=
      CUDNN_STATUS_SUCCESS) {
    return false;
  }
  *out = algo;
  return true;
}

// A cuDNN call that this library or GPU does not support for the shapes: the launch falls back
// to the direct kernels instead of failing.
inline bool Unsupported(cudnnStatus_t s) {
  return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
}

}  // namespace fleet_cuda::cudnn_conv
