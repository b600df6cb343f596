// The arithmetic of Paddle's two large-vocabulary losses, hierarchical_sigmoid and nce, written
// once for the CPU and the CUDA plugin (see host_device.h).
//
// hierarchical_sigmoid, default tree (Paddle's MatrixBitCode "SimpleCode"): the classes are the
// leaves of a complete binary tree stored as a heap. For label c the leaf is c' = c +
// num_classes; position j = 0 .. length-1 of its path (j = 0 nearest the leaf) is the inner
// node (c' >> (j + 1)) - 1, i.e. the row of W and Bias, with the bit (c' >> j) & 1, and
// length = FindLastSet(c') - 1 = floor(log2 c'). PreOut has FindLastSet(num_classes - 1)
// columns, the longest path; columns past a row's length stay 0 before the softrelu, so (as in
// Paddle) every such column adds log 2 to Out and nothing to a gradient.
//   pre[i][j] = clip(Bias[node] + <X[i], W[node]>, -40, 40)
//   Out[i]    = sum_j softrelu(pre[i][j]) - sum_{j < length, bit = 1} pre[i][j]
//   PreOut    = softrelu(pre) = log(1 + exp(pre))
//   dpre[i][j] = (sigmoid(pre) - bit) * dOut[i] for j < length, computed from PreOut as
//                1 - exp(-PreOut) - bit; like Paddle, the clip is not differentiated.
//
// nce (Paddle's nce op): row i scores SampleLabels[i] = its num_true labels, then the negatives
// (custom_neg_classes, or num_neg_samples draws); o = sigmoid(Bias[l] + <Input[i], Weight[l]>)
// is SampleLogits, b = Q(l) * num_neg_samples with Q the sampler's probability, and
//   Cost[i] = SampleWeight[i] * (sum_true -log(o / (o + b)) + sum_neg -log(b / (o + b))).
// Samplers over [0, num_total_classes): 0 uniform, Q = 1 / num_total_classes; 1 log-uniform,
// Q(l) = log((l + 2) / (l + 1)) / log(num_total_classes), a draw u in [0, 1) gives
// (int64(exp(u * log(num_total_classes))) - 1) mod (num_total_classes - 1), Paddle's inverse
// transform. A draw is a pure function of (key, row * num_neg_samples + k) from random_draws.h,
// so both plugins draw the same negatives for the same key.
#pragma once

#include <cmath>
#include <cstdint>

#include "host_device.h"
#include "random_draws.h"

namespace fleet::kernel {

// ---- hierarchical_sigmoid -------------------------------------------------------------------

// 1-based position of the highest set bit; 0 for 0.
FLEET_HOST_DEVICE inline int FindLastSet(uint64_t x) {
  int n = 0;
  while (x != 0) {
    ++n;
    x >>= 1;
  }
  return n;
}

// Columns of PreOut: the longest path of the default tree.
FLEET_HOST_DEVICE inline int HsigmoidCodeWidth(int64_t num_classes) {
  return FindLastSet(static_cast<uint64_t>(num_classes - 1));
}

FLEET_HOST_DEVICE inline uint64_t HsigmoidLeaf(int64_t label, int64_t num_classes) {
  return static_cast<uint64_t>(label + num_classes);
}

FLEET_HOST_DEVICE inline int HsigmoidPathLength(uint64_t leaf) { return FindLastSet(leaf) - 1; }

// The W / Bias row of path position j.
FLEET_HOST_DEVICE inline int64_t HsigmoidNode(uint64_t leaf, int j) {
  return static_cast<int64_t>(leaf >> (j + 1)) - 1;
}

FLEET_HOST_DEVICE inline bool HsigmoidBit(uint64_t leaf, int j) { return ((leaf >> j) & 1) != 0; }

// The path position at which `leaf`'s path passes inner node `node`, or -1: node r is heap
// node r + 1, whose subtree holds leaf iff leaf >> (depth difference) == r + 1.
FLEET_HOST_DEVICE inline int HsigmoidPositionOf(uint64_t leaf, int64_t node) {
  const int j = FindLastSet(leaf) - FindLastSet(static_cast<uint64_t>(node + 1)) - 1;
  if (j < 0) return -1;
  return (leaf >> (j + 1)) == static_cast<uint64_t>(node + 1) ? j : -1;
}

template <typename T>
FLEET_HOST_DEVICE inline T HsigmoidClip(T v) {
  return v < T(-40) ? T(-40) : (v > T(40) ? T(40) : v);
}

// log(1 + exp(v)) for a clipped v, so exp cannot overflow.
template <typename T>
FLEET_HOST_DEVICE inline T SoftRelu(T v) {
  return log(T(1) + exp(v));
}

// dOut/dpre of one path position from its PreOut value.
template <typename T>
FLEET_HOST_DEVICE inline T HsigmoidPreGrad(T pre_out, bool bit, T dout) {
  return (T(1) - exp(-pre_out) - (bit ? T(1) : T(0))) * dout;
}

// One row of the forward: writes the `width` PreOut values of row x (length dim) and returns
// Out. `bias` may be null. The label must be in [0, num_classes).
template <typename T>
FLEET_HOST_DEVICE inline T HsigmoidForwardRow(const T* x, const T* w, const T* bias, int64_t dim,
                                              int64_t label, int64_t num_classes, int width,
                                              T* pre_out) {
  const uint64_t leaf = HsigmoidLeaf(label, num_classes);
  const int length = HsigmoidPathLength(leaf);
  T picked = T(0);
  T soft = T(0);
  for (int j = 0; j < width; ++j) {
    T v = T(0);
    if (j < length) {
      const int64_t node = HsigmoidNode(leaf, j);
      if (bias != nullptr) v = bias[node];
      const T* row = w + node * dim;
      T dot = T(0);
      for (int64_t d = 0; d < dim; ++d) dot += x[d] * row[d];
      v = HsigmoidClip(v + dot);
      if (HsigmoidBit(leaf, j)) picked += v;
    }
    const T s = SoftRelu(v);
    pre_out[j] = s;
    soft += s;
  }
  return soft - picked;
}

// ---- nce --------------------------------------------------------------------------------------

enum NceSampler : int { kNceUniform = 0, kNceLogUniform = 1, kNceCustom = 2 };

// The key of an nce launch: a nonzero `seed` attribute draws the same negatives every launch
// (Paddle rebuilds its sampler from the seed each run); seed 0 draws fresh ones per launch
// from the op's host seed.
FLEET_HOST_DEVICE inline uint64_t NceKey(int64_t seed_attr, uint64_t op_seed, uint64_t step) {
  return seed_attr != 0 ? DropoutKeyOfSeed(static_cast<uint64_t>(seed_attr) ^ 0x6e6365ULL)
                        : DropoutKeyOfStep(op_seed ^ 0x6e6365ULL, step);
}

// Negative draw number `i` (row * num_neg_samples + k) for key `key`.
FLEET_HOST_DEVICE inline int64_t NceSample(int sampler, uint64_t key, int64_t i,
                                           int64_t num_total) {
  const double u = DropoutUniform(key, i);
  if (sampler == kNceLogUniform) {
    const int64_t v = static_cast<int64_t>(exp(u * log(static_cast<double>(num_total)))) - 1;
    return v % (num_total - 1);
  }
  const int64_t v = static_cast<int64_t>(u * static_cast<double>(num_total));
  return v < num_total ? v : num_total - 1;
}

// b = Q(label) * num_neg_samples.
template <typename T>
FLEET_HOST_DEVICE inline T NceNoise(int sampler, int64_t label, int64_t num_total,
                                    int64_t num_neg) {
  if (sampler == kNceLogUniform) {
    const T q = log((static_cast<T>(label) + T(2)) / (static_cast<T>(label) + T(1))) /
                log(static_cast<T>(num_total));
    return q * static_cast<T>(num_neg);
  }
  return static_cast<T>(num_neg) / static_cast<T>(num_total);
}

template <typename T>
FLEET_HOST_DEVICE inline T Sigmoid(T v) {
  return T(1) / (T(1) + exp(-v));
}

// The cost of one scored sample with probability o.
template <typename T>
FLEET_HOST_DEVICE inline T NceCost(T o, T b, bool is_true) {
  return is_true ? -log(o / (o + b)) : -log(b / (o + b));
}

// dCost/dlogit of one scored sample, times the row's weight and Cost@GRAD.
template <typename T>
FLEET_HOST_DEVICE inline T NceLogitGrad(T o, T b, bool is_true, T scale) {
  return is_true ? scale * (b / (o + b)) * (o - T(1)) : scale * (o * (T(1) - o) / (o + b));
}

// One row of the forward over its `cols` SampleLabels (all in [0, num_total)): writes the
// row's SampleLogits and returns its unweighted cost. `bias` may be null.
template <typename T>
FLEET_HOST_DEVICE inline T NceForwardRow(const T* x, const T* w, const T* bias, int64_t dim,
                                         const int64_t* labels, int64_t cols, int64_t num_true,
                                         int sampler, int64_t num_total, int64_t num_neg,
                                         T* logits) {
  T cost = T(0);
  for (int64_t k = 0; k < cols; ++k) {
    const int64_t l = labels[k];
    T v = bias != nullptr ? bias[l] : T(0);
    const T* row = w + l * dim;
    T dot = T(0);
    for (int64_t d = 0; d < dim; ++d) dot += x[d] * row[d];
    const T o = Sigmoid(v + dot);
    logits[k] = o;
    cost += NceCost(o, NceNoise<T>(sampler, l, num_total, num_neg), k < num_true);
  }
  return cost;
}

}  // namespace fleet::kernel
