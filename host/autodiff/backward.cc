// append_backward, following Paddle's backward.py on a single block:
//
//  1. Forward sweep: the vars that depend on a trainable parameter (not stop_gradient, not in
//     the no-grad set, of a floating-point dtype), through differentiable input slots.
//  2. Backward sweep from the loss's op: the ops that write a var the loss needs and read a var
//     that depends on a parameter form the path; their dependent inputs need gradients.
//  3. The grad rule of each path op, in reverse order. Gradient outputs for vars that need none
//     are pruned; a gradient read but never produced (an output that does not reach the loss)
//     is made by fill_zeros_like.
//  4. A gradient written by several grad ops is renamed per write to
//     "<x>@GRAD@RENAME@block<b>@<k>" and summed into "<x>@GRAD" after its last writer.
//  5. Gradient vars are declared with their forward var's dtype and shape; other grad-op
//     outputs (temporaries of a grad rule) through the grad op's shape function.
#include "autodiff/backward.h"

#include <map>

#include "ops/shape_inference.h"

namespace fleet::autodiff {
namespace {

// Pruned entries of a duplicable gradient slot become ir::kEmptyVarName, which keeps positions
// aligned with the forward slot. A slot whose entries are all pruned, and a single-var slot that
// is pruned, is removed from the op instead.
using ir::kEmptyVarName;

std::string OpLabel(size_t index, const ir::Op& op) {
  return "op #" + std::to_string(index) + " (" + op.type + ")";
}

// The forward var of a gradient name: "x@GRAD" and "x@GRAD@RENAME@block0@1" give "x"; a name
// without "@GRAD" gives "".
std::string ForwardOfGrad(std::string_view name) {
  size_t pos = name.find(ir::kGradSuffix);
  if (pos == std::string_view::npos || pos == 0) return "";
  return std::string(name.substr(0, pos));
}

bool IsFloat(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64 ||
         t == ir::DataType::kFloat16 || t == ir::DataType::kBFloat16;
}

bool IsNoGradInput(const ops::OpSchema* schema, const std::string& slot) {
  if (schema == nullptr) return false;
  const ops::SlotSpec* spec = schema->FindInput(slot);
  return spec != nullptr && spec->no_grad;
}

ir::Op FillConstant(const std::string& out, const std::vector<int64_t>& shape, float value,
                    ir::DataType dtype) {
  ir::Op op;
  op.type = "fill_constant";
  op.outputs["Out"] = {out};
  op.attrs["shape"] = shape;
  op.attrs["value"] = value;
  op.attrs["dtype"] = static_cast<int32_t>(dtype);
  return op;
}

// Steps 4: renames repeated gradient writes and inserts the accumulating sums.
std::vector<ir::Op> AccumulateRepeatedGrads(std::vector<ir::Op> grad_ops, int32_t block) {
  std::map<std::string, int> writers;
  for (const auto& op : grad_ops) {
    for (const auto& [slot, names] : op.outputs) {
      for (const auto& n : names) {
        if (n != kEmptyVarName) ++writers[n];
      }
    }
  }
  std::map<std::string, int> seen;
  std::map<std::string, std::vector<std::string>> parts;
  std::vector<ir::Op> out;
  out.reserve(grad_ops.size());
  for (auto& op : grad_ops) {
    std::vector<std::string> complete;
    for (auto& [slot, names] : op.outputs) {
      for (auto& n : names) {
        if (n == kEmptyVarName || writers[n] < 2) continue;
        int k = seen[n]++;
        std::string renamed =
            n + "@RENAME@block" + std::to_string(block) + "@" + std::to_string(k);
        parts[n].push_back(renamed);
        if (seen[n] == writers[n]) complete.push_back(n);
        n = std::move(renamed);
      }
    }
    out.push_back(std::move(op));
    for (const auto& name : complete) {
      ir::Op sum;
      sum.type = "sum";
      sum.inputs["X"] = parts[name];
      sum.outputs["Out"] = {name};
      out.push_back(std::move(sum));
    }
  }
  return out;
}

// Whether `op` may write a sparse gradient: it was asked to (is_sparse), or it reads one (the
// sum of a table's gradients).
bool WritesSelectedRows(const ir::Op& op, const ir::Block& block) {
  if (const ir::Attribute* a = op.FindAttr("is_sparse")) {
    if (auto b = ir::AttrAsBool(*a); b && *b) return true;
  }
  for (const auto& n : op.InputVars()) {
    const ir::Var* v = block.FindVar(n);
    if (v != nullptr && v->selected_rows) return true;
  }
  return false;
}

}  // namespace

StatusOr<std::vector<ParamGrad>> AppendBackward(ir::Program& main, const std::string& loss,
                                                const BackwardOptions& options,
                                                const ops::OpRegistry& registry) {
  ir::Block& block = main.global();
  const std::string where = "append_backward: ";

  // ---- the loss ----
  const ir::Var* loss_var = block.FindVar(loss);
  if (loss_var == nullptr) {
    return NotFound(where + "loss '" + loss + "' is not declared in the main program");
  }
  if (!IsFloat(loss_var->dtype)) {
    return InvalidArgument(where + "loss '" + loss + "' is " +
                           std::string(ir::DataTypeName(loss_var->dtype)) +
                           "; only a floating-point loss can be differentiated");
  }
  std::vector<int64_t> seed_shape = loss_var->shape;
  int64_t numel = 1;
  for (auto& d : seed_shape) {
    if (d < 0) d = 1;
    numel *= d;
  }
  if (numel != 1) {
    std::string dims;
    for (size_t i = 0; i < loss_var->shape.size(); ++i) {
      dims += (i ? ", " : "") + std::to_string(loss_var->shape[i]);
    }
    return InvalidArgument(where + "loss '" + loss + "' must hold one element, but has shape [" +
                           dims + "]; reduce it first (mean, reduce_sum)");
  }
  const std::string loss_grad = ir::GradVarName(loss);
  if (block.FindVar(loss_grad) != nullptr) {
    return AlreadyExists(where + "'" + loss_grad +
                         "' already exists; was the backward pass appended twice?");
  }
  const std::vector<ir::Op>& ops = block.ops;
  int64_t loss_op = -1;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const auto& n : ops[i].OutputVars()) {
      if (n == loss) loss_op = static_cast<int64_t>(i);
    }
  }
  if (loss_op < 0) {
    return InvalidArgument(where + "no op of the main program computes '" + loss + "'");
  }

  auto blocked = [&](const std::string& name) {
    if (options.no_grad_set.count(name) != 0) return true;
    const ir::Var* v = block.FindVar(name);
    return v != nullptr && v->stop_gradient;
  };

  // ---- 1. forward sweep ----
  std::set<std::string> depends;
  for (const auto& [name, var] : block.vars) {
    if (var.param.has_value() && var.param->trainable && !blocked(name)) depends.insert(name);
  }
  std::vector<bool> reached(ops.size(), false);
  for (size_t i = 0; i <= static_cast<size_t>(loss_op); ++i) {
    const ops::OpSchema* schema = registry.Find(ops[i].type);
    bool any = false;
    for (const auto& [slot, names] : ops[i].inputs) {
      if (IsNoGradInput(schema, slot)) continue;
      for (const auto& n : names) any = any || depends.count(n) != 0;
    }
    if (!any) continue;
    reached[i] = true;
    for (const auto& n : ops[i].OutputVars()) {
      // Only floating-point vars carry gradients: a bool or integer result (a comparison,
      // arg_max, argsort's Indices) stops the flow, as in Paddle, where those ops have no grad.
      const ir::Var* v = block.FindVar(n);
      const bool integral = v != nullptr && v->dtype != ir::DataType::kInvalid &&
                            !IsFloat(v->dtype);
      if (!blocked(n) && !integral) depends.insert(n);
    }
  }

  // ---- 2. backward sweep ----
  std::set<std::string> needed;
  std::vector<size_t> path;  // forward op indices, last op first
  if (depends.count(loss) != 0) needed.insert(loss);
  for (int64_t i = loss_op; i >= 0; --i) {
    const ir::Op& op = ops[static_cast<size_t>(i)];
    if (!reached[static_cast<size_t>(i)]) continue;
    bool writes_needed = false;
    for (const auto& n : op.OutputVars()) writes_needed = writes_needed || needed.count(n) != 0;
    if (!writes_needed) continue;
    path.push_back(static_cast<size_t>(i));
    const ops::OpSchema* schema = registry.Find(op.type);
    for (const auto& [slot, names] : op.inputs) {
      if (IsNoGradInput(schema, slot)) continue;
      for (const auto& n : names) {
        if (depends.count(n) != 0) needed.insert(n);
      }
    }
  }

  // ---- 3. grad ops ----
  std::vector<ir::Op> grad_ops;
  grad_ops.push_back(FillConstant(loss_grad, seed_shape, 1.0f, loss_var->dtype));
  std::set<std::string> produced = {loss_grad};
  for (size_t idx : path) {
    const ir::Op& fwd = ops[idx];
    const ops::OpSchema* schema = registry.Find(fwd.type);
    if (schema == nullptr) {
      return NotFound(where + OpLabel(idx, fwd) + " has an unknown op type");
    }
    if (!schema->grad) {
      std::string var;
      for (const auto& [slot, names] : fwd.inputs) {
        if (IsNoGradInput(schema, slot)) continue;
        for (const auto& n : names) {
          if (var.empty() && needed.count(n) != 0) var = n;
        }
      }
      return InvalidArgument(where + OpLabel(idx, fwd) + " has no gradient rule, but its input '" +
                             var + "' needs a gradient (it depends on a trainable parameter and "
                             "reaches the loss '" + loss + "')");
    }
    std::set<std::string> fwd_outputs;
    for (const auto& n : fwd.OutputVars()) fwd_outputs.insert(n);
    for (ir::Op& g : schema->grad(fwd)) {
      if (!options.sparse_gradients) {
        if (auto it = g.attrs.find("is_sparse"); it != g.attrs.end()) it->second = false;
      }
      // Prune gradients nobody needs.
      for (auto it = g.outputs.begin(); it != g.outputs.end();) {
        std::string_view fwd_slot = ir::ForwardVarName(it->first);
        bool slot_no_grad = !fwd_slot.empty() && IsNoGradInput(schema, std::string(fwd_slot));
        bool kept = false;
        for (auto& n : it->second) {
          std::string fv = ForwardOfGrad(n);
          if (fv.empty()) {  // a temporary of the grad rule
            kept = true;
          } else if (slot_no_grad || needed.count(fv) == 0) {
            n = std::string(kEmptyVarName);
          } else {
            kept = true;
          }
        }
        it = kept ? std::next(it) : g.outputs.erase(it);
      }
      if (g.outputs.empty()) continue;
      // Gradients of forward outputs that never reach the loss are zeros.
      for (const auto& [slot, names] : g.inputs) {
        for (const auto& n : names) {
          std::string fv = ForwardOfGrad(n);
          if (fv.empty() || n != ir::GradVarName(fv) || produced.count(n) != 0) continue;
          if (fwd_outputs.count(fv) == 0) continue;
          ir::Op zeros;
          zeros.type = "fill_zeros_like";
          zeros.inputs["X"] = {fv};
          zeros.outputs["Out"] = {n};
          grad_ops.push_back(std::move(zeros));
          produced.insert(n);
        }
      }
      for (const auto& n : g.OutputVars()) produced.insert(n);
      grad_ops.push_back(std::move(g));
    }
  }

  // ---- 4. accumulation ----
  std::vector<ir::Op> emitted = AccumulateRepeatedGrads(std::move(grad_ops), block.index);

  // ---- 5. declarations (on a copy, so a failure leaves `main` as it was) ----
  ir::Program result_program = main;
  ir::Block& out_block = result_program.global();
  for (const ir::Op& op : emitted) {
    // A sparse gradient is declared by its op's shape function: its type is the op's choice.
    bool needs_inference = WritesSelectedRows(op, out_block);
    for (const auto& n : op.OutputVars()) {
      if (needs_inference) break;
      if (out_block.FindVar(n) != nullptr) continue;
      std::string fv = ForwardOfGrad(n);
      const ir::Var* fvar =
          fv.empty() ? nullptr : result_program.FindVarRecursive(block.index, fv);
      if (fvar == nullptr) {
        needs_inference = true;
        continue;
      }
      ir::Var gv;
      gv.name = n;
      gv.dtype = fvar->dtype;
      gv.shape = fvar->shape;
      FLEET_RETURN_IF_ERROR(out_block.AddVar(std::move(gv)).status());
    }
    if (needs_inference) {
      Status s = ops::InferAndDeclareOutputs(registry, result_program, block.index, op);
      if (!s.ok()) return s.WithContext(where + "declaring the outputs of grad op " + op.type);
    }
  }
  // Roles for transpile passes: every appended op is Backward, the seed also Loss, and the op
  // that last writes a parameter's gradient names the pair in op_role_var (Paddle's
  // convention, which grad_allreduce keys on).
  std::map<std::string, size_t> last_writer;
  for (size_t i = 0; i < emitted.size(); ++i) {
    emitted[i].attrs[std::string(ir::op_role::kAttr)] =
        i == 0 ? (ir::op_role::kBackward | ir::op_role::kLoss) : ir::op_role::kBackward;
    for (const auto& n : emitted[i].OutputVars()) last_writer[n] = i;
  }
  std::map<size_t, std::vector<std::string>> role_vars;
  for (const auto& [name, var] : out_block.vars) {
    if (!var.param.has_value() || !var.param->trainable) continue;
    auto it = last_writer.find(ir::GradVarName(name));
    if (it == last_writer.end()) continue;
    role_vars[it->second].push_back(name);
    role_vars[it->second].push_back(it->first);
  }
  for (auto& [i, vars] : role_vars) {
    emitted[i].attrs[std::string(ir::op_role::kVarAttr)] = std::move(vars);
  }
  for (auto& op : emitted) out_block.ops.push_back(std::move(op));
  const int32_t block_index = block.index;
  main = std::move(result_program);  // `block` and `ops` dangle from here on

  std::vector<ParamGrad> result;
  for (const auto& [name, var] : main.block(block_index).vars) {
    if (!var.param.has_value() || !var.param->trainable || needed.count(name) == 0) continue;
    std::string grad = ir::GradVarName(name);
    if (produced.count(grad) != 0) result.push_back({name, grad});
  }
  return result;
}

}  // namespace fleet::autodiff
