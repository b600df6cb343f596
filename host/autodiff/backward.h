// host/autodiff: append_backward, the gradient ops of a program's loss.
// Depends on: ir/, ops/, support/.
//
// append_backward: differentiates a program's loss with respect to its trainable parameters,
// appending Paddle-style gradient ops to the same block.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/program.h"
#include "ops/op_registry.h"
#include "support/status.h"

namespace fleet::autodiff {

struct ParamGrad {
  std::string param;  // "fc_0.w_0"
  std::string grad;   // "fc_0.w_0@GRAD"
};

struct BackwardOptions {
  std::set<std::string> no_grad_set;  // vars whose gradient is never computed or propagated
  // Whether a grad op whose forward op asks for a sparse gradient (is_sparse: an embedding)
  // makes one (a SelectedRows var, ir::Var::selected_rows); false makes every gradient dense,
  // for jobs whose ops or kernels do not take sparse ones.
  bool sparse_gradients = true;
};

// Appends to the global block of `main`: a fill_constant seeding "<loss>@GRAD" with 1 (the loss
// must be a scalar or a one-element tensor), then the grad ops of every op on a path from a
// trainable parameter to the loss, in reverse order, with gradient vars declared (shapes from
// the ops' shape functions). Where a var feeds several ops its partial gradients are renamed
// and accumulated with `sum`. Returns (param, grad) for every trainable parameter that reaches
// the loss, in parameter-name order. A forward op on the path without a gradient rule is an
// error naming the op (its index and type) and the var that needed a gradient.
//
// Conventions of the emitted ops: a grad op's gradient outputs for vars that need no gradient
// (stop_gradient, the no-grad set, no_grad slots, vars not depending on a parameter) are
// removed; a slot left empty is removed, and in a duplicable slot where only some entries are
// pruned those entries become ir::kEmptyVarName ("@EMPTY@", never declared; ir/program.h) so
// positions still match the forward slot. A gradient read by a grad op but never produced (a
// forward output that does not reach the loss) is made by fill_zeros_like(X=out) -> out@GRAD.
// A gradient written several times is renamed per write to "<x>@GRAD@RENAME@block<b>@<k>" (k
// from 0) and summed into "<x>@GRAD" right after the last writer. Gradient vars are declared
// (not persistable) with the forward var's dtype and shape; other outputs of grad ops through
// their schemas' shape functions, and so are the sparse gradients (and the sums of them). On
// error the program is unchanged.
StatusOr<std::vector<ParamGrad>> AppendBackward(ir::Program& main, const std::string& loss,
                                                const BackwardOptions& options = {},
                                                const ops::OpRegistry& registry = ops::BuiltinOps());

}  // namespace fleet::autodiff
