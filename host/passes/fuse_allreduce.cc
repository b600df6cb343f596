// fuse_allreduce: buckets the c_allreduce_sum ops of "main" so one collective call reduces many
// small tensors (Paddle's fuse_all_reduce_op_pass with fuse_grad_size_in_MB). Options:
// bucket_mb (double, default 32.0, > 0): the most bytes (MiB, 2^20) one bucket may hold.
//
// Walking the global block in program order, each fusable c_allreduce_sum (X == Out, every var
// of a known dtype and fully known shape) joins the open bucket of its ring_id; a bucket holds
// ops of one ring_id, one dtype, equal attributes (op_role, use_calc_stream, ...) and at most
// bucket_mb * 2^20 bytes in all. An op that would overflow the open bucket (or does not match
// it) closes it and opens the next; a tensor larger than the limit is thus a bucket of its own.
// A bucket also closes when an op that is not part of it reads or writes one of its vars (so
// moving its allreduces later never changes what that op sees); c_sync_calc_stream ops do not
// count as readers. Then, for each closed bucket of two or more ops:
//   - its ops are removed and, where its LAST op was (every tensor of it is ready there):
//       c_sync_calc_stream(X=Out=<bucket vars>)                     {op_role of the members}
//       c_allreduce_sum(X=Out=<bucket vars, in program order>)      {attrs of the members}
//   - a c_sync_calc_stream op right before a run of allreduces is removed when every allreduce
//     of that run went into a fused bucket (the new sync takes its place).
// Buckets of one op, allreduces on vars with unknown dims and every other op are left as they
// are. Only the global block is rewritten.
//
// Where it differs from Paddle: Paddle first coalesces the grads into one contiguous buffer
// (coalesce_tensor) and all-reduces that; here c_allreduce_sum takes a list, so no buffer var
// is created. Paddle fuses within a dtype group too, but also caps the number of tensors per
// group (fuse_grad_size_in_num); there is no count cap here.
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "passes/collective_util.h"

namespace fleet::passes {
namespace {

constexpr std::string_view kFuseAllReduce = "fuse_allreduce";

struct Bucket {
  std::vector<size_t> ops;       // indices of its allreduce ops, in program order
  std::vector<std::string> vars; // every var reduced, in program order
  std::set<std::string> var_set;
  ir::DataType dtype = ir::DataType::kInvalid;
  ir::AttrMap attrs;             // attrs of its first op (every member has these)
  int64_t bytes = 0;
};

// Bytes an allreduce moves, with the dtype of its vars; nullopt when it cannot be fused (X and
// Out differ, a var is unknown, of unknown size, or the vars differ in dtype).
std::optional<std::pair<int64_t, ir::DataType>> FusableSize(const ir::Program& program,
                                                            const ir::Op& op) {
  const std::vector<std::string>& x = op.Input("X");
  if (x.empty() || x != op.Output("Out")) return std::nullopt;
  int64_t bytes = 0;
  ir::DataType dtype = ir::DataType::kInvalid;
  for (const std::string& name : x) {
    const ir::Var* v = program.FindVarRecursive(0, name);
    if (v == nullptr || ir::DataTypeSize(v->dtype) == 0) return std::nullopt;
    if (dtype != ir::DataType::kInvalid && v->dtype != dtype) return std::nullopt;
    dtype = v->dtype;
    const int64_t numel = ir::KnownNumel(v->shape);
    if (numel < 0) return std::nullopt;
    bytes += numel * static_cast<int64_t>(ir::DataTypeSize(v->dtype));
  }
  return std::make_pair(bytes, dtype);
}

bool Touches(const ir::Op& op, const std::set<std::string>& vars) {
  for (const std::string& v : op.InputVars()) {
    if (vars.count(v) != 0) return true;
  }
  for (const std::string& v : op.OutputVars()) {
    if (vars.count(v) != 0) return true;
  }
  return false;
}

}  // namespace

Status RunFuseAllReduce(ProgramSet& programs, const PassContextInfo& /*ctx*/,
                        const ir::AttrMap& options) {
  FLEET_ASSIGN_OR_RETURN(double bucket_mb, DoubleOption(options, "bucket_mb", kFuseAllReduce));
  if (!(bucket_mb > 0.0) || !std::isfinite(bucket_mb)) {
    return InvalidArgument(std::string(kFuseAllReduce) +
                           ": option 'bucket_mb' must be a positive number of MiB, got " +
                           std::to_string(bucket_mb));
  }
  const double limit = bucket_mb * 1024.0 * 1024.0;
  FLEET_ASSIGN_OR_RETURN(ir::Program * main, FindProgram(programs, "main", kFuseAllReduce));
  ir::Block& block = main->global();

  std::map<int64_t, Bucket> open;  // by ring_id
  std::vector<Bucket> fused;
  auto close_bucket = [&](std::map<int64_t, Bucket>::iterator it) {
    if (it->second.ops.size() >= 2) fused.push_back(std::move(it->second));
    return open.erase(it);
  };
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    if (op.type == "c_sync_calc_stream") continue;
    std::optional<std::pair<int64_t, ir::DataType>> size;
    if (op.type == "c_allreduce_sum") size = FusableSize(*main, op);
    // Any other op (or an allreduce on a var of an open bucket) closes the buckets it touches.
    for (auto it = open.begin(); it != open.end();) {
      it = Touches(op, it->second.var_set) ? close_bucket(it) : std::next(it);
    }
    if (!size) continue;
    const ir::Attribute* ring_attr = op.FindAttr("ring_id");
    const int64_t ring = ring_attr != nullptr ? ir::AttrAsInt(*ring_attr).value_or(0) : 0;
    auto it = open.find(ring);
    if (it != open.end()) {
      const Bucket& b = it->second;
      if (b.dtype != size->second || b.attrs != op.attrs ||
          static_cast<double>(b.bytes + size->first) > limit) {
        close_bucket(it);
      }
    }
    Bucket& b = open[ring];
    if (b.ops.empty()) {
      b.dtype = size->second;
      b.attrs = op.attrs;
    }
    b.ops.push_back(i);
    b.bytes += size->first;
    for (const std::string& v : op.Input("X")) {
      b.vars.push_back(v);
      b.var_set.insert(v);
    }
  }
  while (!open.empty()) close_bucket(open.begin());
  if (fused.empty()) return OkStatus();

  // The rewrite: members out, the fused pair in at each bucket's last member.
  std::vector<bool> drop(block.ops.size(), false);
  std::map<size_t, const Bucket*> fused_at;
  for (const Bucket& b : fused) {
    for (size_t idx : b.ops) drop[idx] = true;
    fused_at[b.ops.back()] = &b;
  }
  // A sync guards the run of allreduces right after it; it goes when all of them were fused.
  std::vector<bool> drop_sync(block.ops.size(), false);
  for (size_t i = 0; i < block.ops.size(); ++i) {
    if (block.ops[i].type != "c_sync_calc_stream") continue;
    size_t j = i + 1;
    bool all_fused = true;
    for (; j < block.ops.size() && block.ops[j].type == "c_allreduce_sum"; ++j) {
      all_fused = all_fused && drop[j];
    }
    drop_sync[i] = j > i + 1 && all_fused;
  }
  std::vector<ir::Op> ops;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    auto at = fused_at.find(i);
    if (at != fused_at.end()) {
      const Bucket& b = *at->second;
      ir::AttrMap sync_attrs;
      auto role = b.attrs.find(std::string(ir::op_role::kAttr));
      if (role != b.attrs.end()) sync_attrs.insert(*role);
      ops.push_back(ir::MakeOp("c_sync_calc_stream", {{"X", b.vars}}, {{"Out", b.vars}},
                               std::move(sync_attrs)));
      ops.push_back(ir::MakeOp("c_allreduce_sum", {{"X", b.vars}}, {{"Out", b.vars}}, b.attrs));
      continue;
    }
    if (drop[i] || drop_sync[i]) continue;
    ops.push_back(std::move(block.ops[i]));
  }
  block.ops = std::move(ops);
  return OkStatus();
}

}  // namespace fleet::passes
