// Paddle's conv2d_transpose as both plugins plan it. A transposed convolution is the data
// gradient of the convolution that maps its Output back to its Input with the same filter, so
// the plan names everything after that convolution: its input is the op's Output, its output
// is the op's Input. The forward pass is then a convolution data gradient, Input@GRAD a
// convolution forward of Output@GRAD, and Filter@GRAD a convolution filter gradient with the
// op's Output@GRAD as the convolution's input and the op's Input as its output gradient.
//
// Contract: reads attributes (it allocates, so it belongs in prepare). The window comes from
// ResolveWindow2d over the op's Input spatial dims, as Paddle resolves SAME/VALID for
// conv2d_transpose. The Output size (output_size / output_padding) is taken from the tensor
// the host allocated: every index below is range-checked against it, so any size the host's
// shape function accepts is planned correctly. Plain C++17: CUDA sources include this header.
#pragma once

#include <cstdint>
#include <string>

#include "kernel_context.h"
#include "window_plan.h"

namespace fleet::kernel {

struct Deconv2dGeom {
  int64_t n = 0, c = 0, h = 0, w = 0;  // the op's Output: c = groups * Filter dim 1
  int64_t o = 0, kh = 0, kw = 0;       // Filter [o, c / groups, kh, kw]; o = Input channels
  int64_t oh = 0, ow = 0;              // the op's Input spatial dims
  int64_t groups = 1, cg = 0, og = 0;  // channels per group of Output and of Input
  Window2d win;
};

// `x` is Input, `f` Filter, `y` the tensor carrying the Output shape (Output, or Output@GRAD
// in the grad op, named by `y_slot`).
inline PlanStatus PlanDeconv2d(const FleetKernelContext* kc, const FleetTensor* x,
                               const FleetTensor* f, const FleetTensor* y, const char* y_slot,
                               bool count_in_messages, Deconv2dGeom* g) {
  const struct {
    const FleetTensor* t;
    const char* slot;
  } args[3] = {{x, "Input"}, {f, "Filter"}, {y, y_slot}};
  for (const auto& a : args) {
    if (a.t == nullptr || a.t->ndim != 4) {
      return PlanInvalid(OpName(kc) + ": " + a.slot + " must be a 4-D tensor");
    }
  }
  g->n = y->dims[0], g->c = y->dims[1], g->h = y->dims[2], g->w = y->dims[3];
  g->o = f->dims[0], g->kh = f->dims[2], g->kw = f->dims[3];
  g->oh = x->dims[2], g->ow = x->dims[3];
  g->groups = IntAttr(kc, "groups", 1);
  if (g->groups < 1 || x->dims[1] != g->o || g->o % g->groups != 0 ||
      f->dims[1] * g->groups != g->c || x->dims[0] != g->n || g->h < 1 || g->w < 1) {
    return PlanInvalid(OpName(kc) + ": Input, Filter and " + y_slot +
                       " shapes do not agree with groups=" + std::to_string(g->groups));
  }
  g->cg = g->c / g->groups;
  g->og = g->o / g->groups;
  const int64_t in_hw[2] = {g->oh, g->ow}, k[2] = {g->kh, g->kw};
  return ResolveWindow2d(kc, in_hw, k, /*with_dilation=*/true, count_in_messages, &g->win);
}

}  // namespace fleet::kernel
