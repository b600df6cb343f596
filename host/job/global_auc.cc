#include "job/global_auc.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "fleet/fleet_comm.h"

namespace fleet {
namespace {

// Names no program file can write (the language has no '@'), so they never meet a var of the
// scope while the one-op program is prepared.
constexpr char kPredict[] = "global_auc@predict";
constexpr char kLabel[] = "global_auc@label";
constexpr char kPos[] = "global_auc@stat_pos";
constexpr char kNeg[] = "global_auc@stat_neg";
constexpr char kPosOut[] = "global_auc@stat_pos_out";
constexpr char kNegOut[] = "global_auc@stat_neg_out";
constexpr char kAuc[] = "global_auc@auc";

const ir::Op* AucOpOf(const ir::Program& main, const std::string& var) {
  for (const ir::Op& op : main.global().ops) {
    if (op.type == "auc" && op.OutputOne("AUC") == var) return &op;
  }
  return nullptr;
}

StatusOr<int64_t> IntAttrOf(const ir::Op& op, const char* name, int64_t fallback,
                            const std::string& what) {
  const ir::Attribute* a = op.FindAttr(name);
  if (a == nullptr) return fallback;
  std::optional<int64_t> v = ir::AttrAsInt(*a);
  if (!v) return InvalidArgument(what + ": its auc op's " + name + " is not an integer");
  return *v;
}

// The one-op program: the auc op on fed histograms of `buckets` buckets, no window.
std::unique_ptr<ir::Program> OneOpProgram(int64_t num_thresholds, int64_t buckets) {
  auto p = std::make_unique<ir::Program>();
  ir::Block& b = p->global();
  auto add = [&](const char* name, ir::DataType dtype, std::vector<int64_t> shape) {
    ir::Var v;
    v.name = name;
    v.dtype = dtype;
    v.shape = std::move(shape);
    v.stop_gradient = true;
    b.vars[v.name] = std::move(v);
  };
  add(kPredict, ir::DataType::kFloat32, {-1, 2});
  add(kLabel, ir::DataType::kInt64, {-1, 1});
  for (const char* s : {kPos, kNeg, kPosOut, kNegOut}) add(s, ir::DataType::kInt64, {buckets});
  add(kAuc, ir::DataType::kFloat64, {1});
  b.ops.push_back(ir::MakeOp(
      "auc", {{"Predict", {kPredict}}, {"Label", {kLabel}}, {"StatPos", {kPos}},
              {"StatNeg", {kNeg}}},
      {{"AUC", {kAuc}}, {"StatPosOut", {kPosOut}}, {"StatNegOut", {kNegOut}}},
      {{"curve", std::string("ROC")},
       {"num_thresholds", static_cast<int32_t>(num_thresholds)},
       {"slide_steps", int32_t{0}}}));
  return p;
}

}  // namespace

StatusOr<std::unique_ptr<GlobalAuc>> GlobalAuc::Create(exec::Executor& executor,
                                                       const ir::Program& main,
                                                       const std::vector<ReportedVar>& reported) {
  std::unique_ptr<GlobalAuc> g(new GlobalAuc(executor));
  size_t total = 0;
  for (size_t i = 0; i < reported.size(); ++i) {
    const ir::Op* op = AucOpOf(main, reported[i].var);
    if (op == nullptr) continue;
    Entry e;
    e.index = i;
    e.what = reported[i].what;
    e.stat_pos = std::string(op->OutputOne("StatPosOut"));
    e.stat_neg = std::string(op->OutputOne("StatNegOut"));
    if (e.stat_pos.empty()) e.stat_pos = std::string(op->InputOne("StatPos"));
    if (e.stat_neg.empty()) e.stat_neg = std::string(op->InputOne("StatNeg"));
    // The schema's defaults, for an op written without the attribute.
    FLEET_ASSIGN_OR_RETURN(const int64_t thresholds,
                           IntAttrOf(*op, "num_thresholds", (2 << 12) - 1, e.what));
    FLEET_ASSIGN_OR_RETURN(const int64_t steps, IntAttrOf(*op, "slide_steps", 1, e.what));
    // Shape inference of main checked both bounds already; this guards the int32 below.
    if (thresholds < 1 || thresholds > std::numeric_limits<int32_t>::max() - 1 || steps < 0) {
      return InvalidArgument(e.what + ": its auc op has num_thresholds " +
                             std::to_string(thresholds) + " and slide_steps " +
                             std::to_string(steps));
    }
    e.buckets = thresholds + 1;
    e.offset = steps * e.buckets;  // the window's sum histogram (metric_formulas.h layout)
    e.program = OneOpProgram(thresholds, e.buckets);
    const exec::FeedShapes shapes = {{kPredict, {0, 2}},
                                     {kLabel, {0, 1}},
                                     {kPos, {e.buckets}},
                                     {kNeg, {e.buckets}}};
    auto prepared = executor.Prepare(*e.program, shapes, {kAuc});
    if (!prepared.ok()) {
      return prepared.status().WithContext(e.what + ": the global AUC's auc op");
    }
    e.prepared = std::move(*prepared);
    e.feeds[kPredict].Reshape(ir::DataType::kFloat32, {0, 2});
    e.feeds[kLabel].Reshape(ir::DataType::kInt64, {0, 1});
    e.feeds[kPos].Reshape(ir::DataType::kInt64, {e.buckets});
    e.feeds[kNeg].Reshape(ir::DataType::kInt64, {e.buckets});
    total += 2 * static_cast<size_t>(e.buckets);
    g->entries_.push_back(std::move(e));
  }
  g->sums_.resize(total);
  return g;
}

bool GlobalAuc::Covers(size_t index) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const Entry& e) { return e.index == index; });
}

Status GlobalAuc::Add(const exec::Scope& scope,
                      const std::map<std::string, exec::HostTensor>* stats) {
  // The histograms from `stats`, or read from the scope (on a GPU, after the step's kernels).
  size_t at = 0;
  exec::HostTensor read;
  for (const Entry& e : entries_) {
    for (const std::string* var : {&e.stat_pos, &e.stat_neg}) {
      const exec::HostTensor* found = nullptr;
      if (stats != nullptr) {
        auto it = stats->find(*var);
        if (it == stats->end()) return Internal(e.what + ": no statistics '" + *var + "'");
        found = &it->second;
      } else {
        FLEET_ASSIGN_OR_RETURN(read, scope.Read(*var));
        found = &read;
      }
      const exec::HostTensor& t = *found;
      if (t.dtype != ir::DataType::kInt64 || t.numel() < e.offset + e.buckets) {
        return Internal(e.what + ": the auc statistics '" + *var + "' are " +
                        ir::TypeShapeText(t.dtype, t.dims) + ", not the int64 histograms of " +
                        std::to_string(e.buckets) + " buckets its op was prepared with");
      }
      const int64_t* counts = t.data<int64_t>() + e.offset;
      for (int64_t b = 0; b < e.buckets; ++b) sums_[at + static_cast<size_t>(b)] += counts[b];
      at += static_cast<size_t>(e.buckets);
    }
  }
  return OkStatus();
}

Status GlobalAuc::FromSums(std::vector<double>& metrics) {
  size_t at = 0;
  for (Entry& e : entries_) {
    const size_t bytes = static_cast<size_t>(e.buckets) * sizeof(int64_t);
    std::memcpy(e.feeds[kPos].bytes.data(), sums_.data() + at, bytes);
    at += static_cast<size_t>(e.buckets);
    std::memcpy(e.feeds[kNeg].bytes.data(), sums_.data() + at, bytes);
    at += static_cast<size_t>(e.buckets);
    if (Status s = executor_.Run(*e.prepared, e.feeds, fetched_); !s.ok()) {
      return s.WithContext(e.what + ": the global AUC's auc op");
    }
    FLEET_ASSIGN_OR_RETURN(metrics[e.index], ScalarValue(fetched_[0], e.what));
  }
  return OkStatus();
}

Status GlobalAuc::Compute(Communicator& world, std::vector<double>& metrics,
                          const std::map<std::string, exec::HostTensor>* stats) {
  if (entries_.empty()) return OkStatus();
  std::fill(sums_.begin(), sums_.end(), int64_t{0});
  FLEET_RETURN_IF_ERROR(Add(executor_.scope(), stats));
  FLEET_RETURN_IF_ERROR(world
                            .AllReduceHost(sums_.data(), FLEET_DTYPE_INT64,
                                           static_cast<int64_t>(sums_.size()), FLEET_REDUCE_SUM)
                            .WithContext("the global AUC's statistics"));
  return FromSums(metrics);
}

Status GlobalAuc::ComputeOverDevices(const std::vector<const exec::Scope*>& scopes,
                                     std::vector<double>& metrics) {
  if (entries_.empty()) return OkStatus();
  std::fill(sums_.begin(), sums_.end(), int64_t{0});
  for (const exec::Scope* scope : scopes) FLEET_RETURN_IF_ERROR(Add(*scope, nullptr));
  return FromSums(metrics);
}

}  // namespace fleet
