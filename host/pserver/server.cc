// PsServer: setup from the pserver programs, and the transport handlers. The rounds and the
// exit are in server_loop.cc.
#include "pserver/server.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>

#include "pserver/server_internal.h"
#include "fleet/fleet_device.h"
#include "fleet/fleet_transport.h"
#include "support/text.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

// The room a sparse receive var starts with; the first larger send grows it.
constexpr int64_t kInitialSparseEntries = 1024;

bool IsSparse(const FleetTensor& t) {
  return t.struct_size >= FLEET_STRUCT_SIZE(FleetTensor, height) && t.height >= 0;
}

const ir::Attribute* Attr(const ir::Op& op, std::string_view name) { return op.FindAttr(name); }

int64_t IntAttr(const ir::Op& op, std::string_view name, int64_t fallback) {
  const ir::Attribute* a = Attr(op, name);
  if (a == nullptr) return fallback;
  return ir::AttrAsInt(*a).value_or(fallback);
}

std::vector<std::string> StringsAttr(const ir::Op& op, std::string_view name) {
  const ir::Attribute* a = Attr(op, name);
  if (a == nullptr) return {};
  if (const auto* v = std::get_if<std::vector<std::string>>(a)) return *v;
  return {};
}

// The standalone program of block `index`: block 0 holds the vars of block 0, of every
// ancestor and of the block itself (nearer blocks win), and the block's ops.
StatusOr<ir::Program> Standalone(const ir::Program& source, int32_t index) {
  std::vector<int32_t> chain;
  for (int32_t b = index; b >= 0; b = source.block(b).parent) {
    chain.push_back(b);
    if (chain.size() > static_cast<size_t>(source.num_blocks())) {
      return InvalidArgument("block " + std::to_string(index) + " has a cycle of parents");
    }
  }
  ir::Program p;
  ir::Block& g = p.global();
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    for (const auto& [name, var] : source.block(*it).vars) g.vars[name] = var;
  }
  g.ops = source.block(index).ops;
  for (const ir::Op& op : g.ops) {
    for (const auto& [name, attr] : op.attrs) {
      if (std::holds_alternative<ir::BlockRef>(attr)) {
        return Unimplemented("op " + op.type + " of block " + std::to_string(index) +
                             " refers to a sub-block (attribute " + name +
                             "); nested blocks on a parameter server are not supported");
      }
    }
  }
  return p;
}

// Finds the sync merge of `block`: sum(X=[<m>.trainer_<t> for every t]) -> (Out=[<m>]),
// optionally followed by scale(X=[<m>]) -> (Out=[<m>]).
void FindMerge(PsServer::Block& block, int32_t trainers) {
  const std::vector<ir::Op>& ops = block.program.global().ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::Op& op = ops[i];
    if (op.type != "sum" || op.Output("Out").size() != 1) continue;
    const std::string merged(op.OutputOne("Out"));
    const std::string prefix = merged + ".trainer_";
    std::vector<std::string> by_trainer(static_cast<size_t>(trainers));
    bool ok = op.Input("X").size() == static_cast<size_t>(trainers);
    for (const std::string& x : op.Input("X")) {
      if (!ok) break;
      if (x.rfind(prefix, 0) != 0) {
        ok = false;
        break;
      }
      const std::string digits = x.substr(prefix.size());
      char* end = nullptr;
      const long t = std::strtol(digits.c_str(), &end, 10);
      ok = !digits.empty() && *end == '\0' && t >= 0 && t < trainers &&
           by_trainer[static_cast<size_t>(t)].empty();
      if (ok) by_trainer[static_cast<size_t>(t)] = x;
    }
    if (!ok) continue;
    block.merge_op = static_cast<int64_t>(i);
    block.merge_inputs = std::move(by_trainer);
    if (i + 1 < ops.size() && ops[i + 1].type == "scale" && ops[i + 1].InputOne("X") == merged &&
        ops[i + 1].OutputOne("Out") == merged) {
      block.scale_op = static_cast<int64_t>(i + 1);
    }
    return;
  }
}

std::string Listed(const std::map<std::string, const exec::ScopeVar*, std::less<>>& vars) {
  std::string out;
  size_t n = 0;
  for (const auto& [name, v] : vars) {
    if (n++ == 8) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "nothing" : out;
}

// How long a handler waits for a phase: a little longer than the loop waits for a barrier, so
// that when both give up it is the loop's failure, which names the missing trainers, that the
// handler reports.
std::chrono::milliseconds HandlerWait(std::chrono::milliseconds timeout) {
  return timeout + std::min(timeout / 10, std::chrono::milliseconds(1000));
}

// Counts a handler call in in_flight_ for its duration.
class InFlight {
 public:
  InFlight(std::mutex& mu, std::condition_variable& cv, int64_t& count)
      : mu_(mu), cv_(cv), count_(count) {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
  }
  ~InFlight() {
    std::lock_guard<std::mutex> lock(mu_);
    --count_;
    cv_.notify_all();
  }

 private:
  std::mutex& mu_;
  std::condition_variable& cv_;
  int64_t& count_;
};

}  // namespace

std::string PsSeconds(std::chrono::milliseconds ms) {
  char buf[32];
  if (ms.count() % 1000 == 0) {
    std::snprintf(buf, sizeof(buf), "%lld s", static_cast<long long>(ms.count() / 1000));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  }
  return buf;
}

StatusOr<std::unique_ptr<PsServer>> PsServer::Create(const PluginRegistry& registry,
                                                     const std::string& device,
                                                     const ir::Program& pserver,
                                                     const ir::Program& startup,
                                                     PsServerOptions options) {
  std::unique_ptr<PsServer> server(new PsServer());
  server->options_ = std::move(options);
  FLEET_RETURN_IF_ERROR(server->Setup(registry, device, pserver, startup));
  return server;
}

PsServer::~PsServer() = default;

Status PsServer::Setup(const PluginRegistry& registry, const std::string& device,
                       const ir::Program& pserver, const ir::Program& startup) {
  const ir::Block& global = pserver.global();
  const ir::Op* ls = nullptr;
  int count = 0;
  for (const ir::Op& op : global.ops) {
    if (op.type == "listen_and_serv") {
      ls = &op;
      ++count;
    }
  }
  if (count != 1) {
    return InvalidArgument("a pserver program holds exactly one listen_and_serv op in block 0; "
                           "this one has " + std::to_string(count));
  }
  if (const ir::Attribute* ep = Attr(*ls, "endpoint")) {
    if (const auto* text = std::get_if<std::string>(ep)) endpoint_ = *text;
  }
  pserver_id_ = IntAttr(*ls, "pserver_id", 0);
  label_ = "pserver " + std::to_string(pserver_id_) + " (" + endpoint_ + ")";
  const int64_t fanin = IntAttr(*ls, "Fanin", 1);
  if (fanin < 1) return InvalidArgument(label_ + ": listen_and_serv Fanin is " +
                                        std::to_string(fanin) + "; it must be >= 1");
  trainers_ = static_cast<int32_t>(fanin);
  const int64_t mode = IntAttr(*ls, "distributed_mode", 0);
  // GEO-SGD's deltas are applied on arrival, as async gradients are.
  if (mode != 0 && mode != 1 && mode != 3) {
    return Unimplemented(label_ + ": distributed_mode " + std::to_string(mode) +
                         " is not supported (0 = sync, 1 = async, 3 = geo)");
  }
  sync_ = mode == 0;
  std::vector<int64_t> ids;
  if (const ir::Attribute* a = Attr(*ls, "optimize_blocks")) {
    ids = ir::AttrAsInts(*a).value_or(std::vector<int64_t>{});
  }
  num_blocks_ = ids.size();
  const int64_t lr = IntAttr(*ls, "lr_decay_block_id", -1);
  if (lr >= 0 && std::find(ids.begin(), ids.end(), lr) == ids.end()) ids.insert(ids.begin(), lr);
  for (int64_t id : ids) {
    if (id < 1 || id >= pserver.num_blocks()) {
      return InvalidArgument(label_ + ": listen_and_serv names block " + std::to_string(id) +
                             " but the program has blocks 0.." +
                             std::to_string(pserver.num_blocks() - 1));
    }
  }

  exec::ExecutorOptions eo;
  eo.num_threads = options_.num_threads;
  eo.seed = options_.seed;
  eo.device_ordinal = options_.device_ordinal;
  FLEET_ASSIGN_OR_RETURN(executor_, exec::Executor::Create(registry, device, eo));
  auto props = executor_->device().Props(options_.device_ordinal);
  host_memory_ = props.ok() && (props->caps & FLEET_DEVICE_CAP_HOST_MEMORY) != 0;
  {
    std::vector<exec::HostTensor> none;
    auto prepared = executor_->Prepare(startup, {}, {});
    if (!prepared.ok()) return prepared.status().WithContext(label_ + ": startup program");
    FLEET_RETURN_IF_ERROR(executor_->Run(**prepared, {}, none).WithContext(
        label_ + ": startup program"));
  }
  FLEET_RETURN_IF_ERROR(SetupGrowable(*ls, startup));
  exec::Scope& scope = executor_->scope();
  for (const std::string& x : ls->Input("X")) {
    const ir::Var* v = global.FindVar(x);
    if (v == nullptr) {
      return InvalidArgument(label_ + ": listen_and_serv receives '" + x +
                             "', which block 0 does not declare");
    }
    if (ir::KnownNumel(v->shape) < 0) {
      return InvalidArgument(label_ + ": receive var '" + x + "' has an unknown dimension: " +
                             ir::ShapeText(v->shape));
    }
    if (v->selected_rows) {
      std::vector<int64_t> room = v->shape;
      room[0] = kInitialSparseEntries;
      auto sv = scope.EnsureSelectedRows(x, v->dtype, room, v->shape[0]);
      if (!sv.ok()) return sv.status().WithContext(label_ + ": receive var '" + x + "'");
      auto receive = std::make_unique<SparseReceive>();
      receive->shape = v->shape;
      sparse_.emplace(x, std::move(receive));
      continue;
    }
    auto sv = scope.GetOrCreate(x, v->dtype, v->shape);
    if (!sv.ok()) return sv.status().WithContext(label_ + ": receive var '" + x + "'");
  }

  for (int64_t id : ids) {
    auto block = std::make_unique<Block>();
    block->index = static_cast<int32_t>(id);
    block->parent = pserver.block(block->index).parent;
    block->label = (id == lr ? "LR block " : "optimize block ") + std::to_string(id);
    auto program = Standalone(pserver, block->index);
    if (!program.ok()) return program.status().WithContext(label_);
    block->program = std::move(*program);
    DeclareGrowable(*block);
    auto prepared = executor_->Prepare(block->program, {}, {});
    if (!prepared.ok()) return prepared.status().WithContext(label_ + ": " + block->label);
    block->prepared = std::move(*prepared);
    if (sync_ && trainers_ > 1) FindMerge(*block, trainers_);
    for (const ir::Op& op : block->program.global().ops) {
      for (const auto& [slot, names] : op.inputs) {
        for (const std::string& in : names) {
          auto s = sparse_.find(in);
          if (s != sparse_.end()) s->second->reader = block.get();
        }
      }
      for (const std::string& p : op.Input("Param")) {
        if (growable_.count(p) != 0) continue;  // saved by id (SaveGrowableParams)
        if (std::find(params_.begin(), params_.end(), p) == params_.end()) params_.push_back(p);
      }
      for (const std::string& out : op.OutputVars()) {
        const ir::Var* v = block->program.global().FindVar(out);
        if (v != nullptr && v->persistable) writer_.emplace(out, block.get());
      }
    }
    if (id == lr) lr_block_ = block.get();
    if (groups_.empty() || groups_.back().front()->parent != block->parent) groups_.emplace_back();
    groups_.back().push_back(block.get());
    blocks_.push_back(std::move(block));
  }
  // GEO blocks add deltas rather than run an optimizer: what they write are the parameters.
  if (mode == 3) {
    for (const auto& [name, block] : writer_) params_.push_back(name);
  }
  BindGrowable();
  for (const auto& [name, g] : growable_) {
    if (g->writer == nullptr) {
      return InvalidArgument(label_ + ": growable table '" + name + "' has no optimize block "
                             "that updates it");
    }
  }
  for (const std::string& entry : StringsAttr(*ls, "grad_to_block_id")) {
    const size_t colon = entry.rfind(':');
    char* end = nullptr;
    const long id = colon == std::string::npos ? -1 : std::strtol(entry.c_str() + colon + 1, &end,
                                                                  10);
    Block* target = nullptr;
    for (auto& b : blocks_) {
      if (id >= 0 && *end == '\0' && b->index == id) target = b.get();
    }
    if (target == nullptr) {
      return InvalidArgument(label_ + ": grad_to_block_id entry '" + entry +
                             "' does not name an optimize block as \"<grad>:<block index>\"");
    }
    block_of_grad_.emplace(entry.substr(0, colon), target);
  }

  // Every var exists now; later lookups must not touch the scope's map while rounds run.
  for (const std::string& name : scope.Names()) vars_.emplace(name, scope.Find(name));
  for (const std::string& x : ls->Input("X")) receive_.emplace(x, vars_.at(x));

  live_.assign(static_cast<size_t>(trainers_), true);
  num_live_ = trainers_;
  batch_.assign(static_cast<size_t>(trainers_), false);
  fetch_.assign(static_cast<size_t>(trainers_), false);
  last_heard_.assign(static_cast<size_t>(trainers_), Clock::now());

  // Async: the LR block is bound to no gradient; it runs once, before any update can arrive.
  if (!sync_ && lr_block_ != nullptr) {
    FLEET_RETURN_IF_ERROR(RunBlock(*lr_block_, nullptr).WithContext(label_));
  }
  return OkStatus();
}

std::string PsServer::Describe() const {
  return std::string(sync_ ? "sync" : "async") + ", " + std::to_string(trainers_) +
         (trainers_ == 1 ? " trainer, " : " trainers, ") + std::to_string(num_blocks_) +
         (num_blocks_ == 1 ? " block" : " blocks");
}

int64_t PsServer::rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return phase_ == Phase::kGet ? round_ : round_ - 1;
}

StatusOr<exec::HostTensor> PsServer::Read(const std::string& name) const {
  return executor_->scope().Read(name);
}

Status PsServer::CheckTrainer(int32_t trainer_id) const {
  if (trainer_id >= 0 && trainer_id < trainers_) return OkStatus();
  return InvalidArgument(label_ + ": trainer id " + std::to_string(trainer_id) +
                         " is out of range; this server serves " + std::to_string(trainers_) +
                         " trainers (listen_and_serv Fanin)");
}

Status PsServer::Failure() const { return failed_ ? failure_ : OkStatus(); }

void PsServer::Touch(int32_t trainer_id) {
  last_heard_[static_cast<size_t>(trainer_id)] = Clock::now();
}

Status PsServer::FailLocked(const Status& why) {
  if (!failed_) {
    failed_ = true;
    failure_ = why.message().rfind(label_, 0) == 0 ? why : why.WithContext(label_);
    cv_.notify_all();
  }
  return failure_;
}

void PsServer::Fail(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  (void)FailLocked(why);
}

void PsServer::WaitHandlersIdle(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, limit, [&] { return in_flight_ == 0; });
}

StatusOr<const exec::ScopeVar*> PsServer::ReceiveVar(int32_t trainer_id, std::string_view name,
                                                     const FleetTensor& shape) const {
  FLEET_RETURN_IF_ERROR(CheckTrainer(trainer_id));
  auto it = receive_.find(name);
  if (it == receive_.end()) {
    return NotFound(label_ + ": trainer " + std::to_string(trainer_id) + " sent '" +
                    std::string(name) + "', which this server does not receive (it receives " +
                    Listed(receive_) + ")");
  }
  const exec::ScopeVar& var = *it->second;
  std::vector<int64_t> dims(shape.dims, shape.dims + shape.ndim);
  // A sparse send and its var are compared as the dense tensors they stand for: the number of
  // entries is the send's own. The declared shape, not the var's, which another trainer's send
  // may be growing right now.
  auto receive = sparse_.find(name);
  const bool sparse_var = receive != sparse_.end();
  std::vector<int64_t> want = sparse_var ? receive->second->shape : var.dims;
  // A growable table's gradient travels keyed by id.
  if (sparse_var && receive->second->growable != nullptr) want[0] = ir::kGrowableHeight;
  const bool sparse = IsSparse(shape);
  if (sparse && !dims.empty()) dims[0] = shape.height;
  if (shape.dtype != static_cast<int32_t>(var.dtype) || dims != want || sparse != sparse_var) {
    return InvalidArgument(label_ + ": trainer " + std::to_string(trainer_id) + " sent '" +
                           std::string(name) + "' as " + (sparse ? "sparse " : "") +
                           ir::TypeShapeText(static_cast<ir::DataType>(shape.dtype), dims) +
                           " but the server's var is " + (sparse_var ? "sparse " : "") +
                           ir::TypeShapeText(var.dtype, want));
  }
  return &var;
}

Status PsServer::OnSendBegin(int32_t trainer_id, std::string_view name,
                             const FleetTensor& shape) {
  InFlight guard(mu_, cv_, in_flight_);
  return ReceiveVar(trainer_id, name, shape).status();
}

Status PsServer::OnSend(int32_t trainer_id, std::string_view name, const FleetTensor& tensor) {
  InFlight guard(mu_, cv_, in_flight_);
  FLEET_ASSIGN_OR_RETURN(const exec::ScopeVar* found, ReceiveVar(trainer_id, name, tensor));
  const exec::ScopeVar& var = *found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return failure_;
    if (!live_[static_cast<size_t>(trainer_id)]) {
      return FailedPrecondition(label_ + ": trainer " + std::to_string(trainer_id) + " sent '" +
                                std::string(name) + "' after it completed");
    }
    Touch(trainer_id);
  }
  std::function<Status()> write = [&]() -> Status {
    if (var.bytes == 0) return OkStatus();
    if (host_memory_) {
      std::memcpy(var.data, tensor.data, var.bytes);
      return OkStatus();
    }
    // The server's optimize blocks run on the executor's stream: let them finish first.
    FLEET_RETURN_IF_ERROR(executor_->Synchronize());
    return executor_->device().CopyToDevice(options_.device_ordinal, var.data, tensor.data,
                                            var.bytes);
  };
  if (sparse_.count(name) != 0) {
    write = [&]() { return WriteSparse(trainer_id, name, var, tensor); };
  }
  // Sync: the trainer's own receive var is read only by the round's merge, which cannot start
  // before this trainer's batch barrier, which it sends after every send returned. A send out
  // of that order (a late retry, a peer that breaks the protocol) waits for the update to end,
  // and holds the next one off while it writes: a sparse var may get new memory.
  if (sync_) {
    FLEET_RETURN_IF_ERROR(BeginBetweenUpdates(
        "trainer " + std::to_string(trainer_id) + "'s send of '" + std::string(name) + "'"));
    Status s = write();
    EndBetweenUpdates();
    return s.WithContext(label_ + ": receiving '" + std::string(name) + "'");
  }
  auto b = block_of_grad_.find(name);
  if (b == block_of_grad_.end()) return write();
  std::lock_guard<std::mutex> lock(b->second->mu);
  FLEET_RETURN_IF_ERROR(write().WithContext(label_ + ": receiving '" + std::string(name) + "'"));
  Status s = RunBlock(*b->second, nullptr);
  if (!s.ok()) {
    Fail(s.WithContext(b->second->label + " (update for '" + std::string(name) + "')"));
    std::lock_guard<std::mutex> l(mu_);
    return failure_;
  }
  return OkStatus();
}

Status PsServer::WriteSparse(int32_t trainer_id, std::string_view name,
                            const exec::ScopeVar& var, const FleetTensor& tensor) {
  if (!host_memory_) {
    return Unimplemented("sparse gradients are received into host memory only");
  }
  SparseReceive& receive = *sparse_.find(name)->second;
  std::lock_guard<std::mutex> hold(receive.mu);
  const int64_t entries = tensor.ndim > 0 ? tensor.dims[0] : 0;
  if (entries > 0 && (tensor.rows == nullptr || tensor.data == nullptr)) {
    return InvalidArgument("trainer " + std::to_string(trainer_id) + " sent '" +
                           std::string(name) + "' without its rows");
  }
  const int64_t height = receive.growable != nullptr ? ir::kGrowableHeight : receive.shape[0];
  for (int64_t i = 0; i < entries; ++i) {
    const int64_t row = tensor.rows[i];
    if (row < -1 || row >= height) {
      return InvalidArgument("trainer " + std::to_string(trainer_id) + " sent '" +
                             std::string(name) + "' with entry " + std::to_string(i) +
                             " in row " + std::to_string(row) + ", outside its " +
                             std::to_string(height) + " rows");
    }
  }
  // A growable table's rows become slots: its lock covers the var's memory from here on.
  std::unique_lock<std::mutex> table_lock;
  if (receive.growable != nullptr) table_lock = std::unique_lock<std::mutex>(receive.growable->mu);
  if (entries > var.dims[0]) {
    std::lock_guard<std::mutex> lock(grow_mu_);  // the scope's allocations, one at a time
    std::vector<int64_t> room = var.dims;
    room[0] = std::max(entries, var.dims[0] * 2);
    FLEET_RETURN_IF_ERROR(
        executor_->scope().EnsureSelectedRows(std::string(name), var.dtype, room, var.height)
            .status());
    receive.used = 0;  // new memory: every entry is empty already
    if (receive.reader != nullptr) receive.reader->stale = true;
  }
  size_t slice = ir::DataTypeSize(var.dtype);
  for (size_t d = 1; d < var.dims.size(); ++d) slice *= static_cast<size_t>(var.dims[d]);
  auto* values = static_cast<uint8_t*>(var.data);
  auto* rows = reinterpret_cast<int64_t*>(values + exec::SelectedRowsOffset(var.dtype, var.dims));
  const auto n = static_cast<size_t>(entries);
  if (n > 0) {
    std::memcpy(values, tensor.data, n * slice);
    std::memcpy(rows, tensor.rows, n * sizeof(int64_t));
  }
  if (receive.growable != nullptr && n > 0) {
    std::vector<int64_t>& ids = receive.ids;  // of the entries that are not empty
    std::vector<int64_t>& slots = receive.slots;
    ids.clear();
    for (size_t i = 0; i < n; ++i) {
      if (rows[i] >= 0) ids.push_back(rows[i]);
    }
    slots.resize(ids.size());
    FLEET_RETURN_IF_ERROR(ResolveRows(*receive.growable, ids.data(),
                                      static_cast<int64_t>(ids.size()), /*lookup=*/false,
                                      slots.data()));
    for (size_t i = 0, k = 0; i < n; ++i) {
      if (rows[i] >= 0) rows[i] = slots[k++];
    }
  }
  // An empty entry's slice is zero (fleet_abi.h), whatever the trainer sent in it; so is one
  // of an id without a row in a growable table.
  for (size_t i = 0; i < n; ++i) {
    if (rows[i] < 0) std::memset(values + i * slice, 0, slice);
  }
  // The last send's entries past this one's are emptied, so the var holds this send alone.
  const auto used = static_cast<size_t>(receive.used);
  if (used > n) {
    std::memset(values + n * slice, 0, (used - n) * slice);
    std::fill(rows + n, rows + used, int64_t{-1});
  }
  receive.used = entries;
  return OkStatus();
}

Status PsServer::OnGet(int32_t trainer_id, std::string_view name, FleetTensor& out,
                       void** token_out) {
  InFlight guard(mu_, cv_, in_flight_);
  FLEET_RETURN_IF_ERROR(CheckTrainer(trainer_id));
  auto it = vars_.find(name);
  if (it == vars_.end()) {
    return NotFound(label_ + ": trainer " + std::to_string(trainer_id) + " asked for '" +
                    std::string(name) + "', which this server does not hold");
  }
  const exec::ScopeVar& var = *it->second;
  if (sparse_.count(name) != 0) {
    return FailedPrecondition(label_ + ": trainer " + std::to_string(trainer_id) + " asked for '" +
                              std::string(name) + "', a sparse gradient this server receives; "
                              "it cannot be fetched");
  }
  auto token = std::make_unique<GetToken>();
  token->dims = var.dims;
  const void* data = var.data;
  auto copy = [&]() -> Status {
    token->copy.resize(var.bytes);
    if (var.bytes == 0) return OkStatus();
    if (host_memory_) {
      std::memcpy(token->copy.data(), var.data, var.bytes);
    } else {
      FLEET_RETURN_IF_ERROR(executor_->Synchronize());
      FLEET_RETURN_IF_ERROR(executor_->device().CopyToHost(
          options_.device_ordinal, token->copy.data(), var.data, var.bytes));
    }
    data = token->copy.data();
    return OkStatus();
  };
  if (sync_) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = Clock::now() + HandlerWait(options_.timeout);
    if (!cv_.wait_until(lock, deadline, [&] { return failed_ || phase_ == Phase::kGet; })) {
      return DeadlineExceeded(label_ + ": trainer " + std::to_string(trainer_id) + "'s get of '" +
                              std::string(name) + "' waited " +
                              PsSeconds(HandlerWait(options_.timeout)) +
                              " for the update of round " + std::to_string(round_));
    }
    if (failed_) return failure_;
    // The parameters do not change until every live trainer sent its FETCH barrier, which it
    // does after its gets; the count keeps the next round from starting under a slow reader.
    ++outstanding_gets_;
    token->counted = true;
    lock.unlock();
    if (!host_memory_) {
      Status s = copy();
      if (!s.ok()) {
        OnGetDone(token.release());
        return s.WithContext(label_ + ": reading '" + std::string(name) + "'");
      }
    }
  } else {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_) return failure_;
      Touch(trainer_id);
    }
    auto w = writer_.find(name);
    std::unique_lock<std::mutex> lock;
    if (w != writer_.end()) lock = std::unique_lock<std::mutex>(w->second->mu);
    FLEET_RETURN_IF_ERROR(copy().WithContext(label_ + ": reading '" + std::string(name) + "'"));
  }
  out = FleetTensor{};
  out.struct_size = sizeof(FleetTensor);
  out.data = const_cast<void*>(data);
  out.dtype = static_cast<int32_t>(var.dtype);
  out.ndim = static_cast<int32_t>(token->dims.size());
  out.dims = token->dims.data();
  out.strides = nullptr;
  out.device_type = FLEET_DEVICE_TYPE_HOST;
  out.device_ordinal = 0;
  out.height = -1;  // dense (a zero would make it a SelectedRows tensor, fleet_abi.h)
  *token_out = token.release();
  return OkStatus();
}

Status PsServer::BeginBetweenUpdates(const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + HandlerWait(options_.timeout);
  if (!cv_.wait_until(lock, deadline, [&] { return failed_ || !updating_; })) {
    return DeadlineExceeded(label_ + ": " + what + " waited " +
                            PsSeconds(HandlerWait(options_.timeout)) +
                            " for the update of round " + std::to_string(round_));
  }
  if (failed_) return failure_;
  ++outstanding_gets_;
  return OkStatus();
}

void PsServer::EndBetweenUpdates() {
  std::lock_guard<std::mutex> lock(mu_);
  --outstanding_gets_;
  cv_.notify_all();
}

Status PsServer::OnPrefetch(int32_t trainer_id, std::string_view name, const int64_t* ids,
                            int64_t num_ids, FleetTensor& out, void** token_out) {
  InFlight guard(mu_, cv_, in_flight_);
  FLEET_RETURN_IF_ERROR(CheckTrainer(trainer_id));
  const std::string who = label_ + ": trainer " + std::to_string(trainer_id);
  // "<block>@READ": a growable table read without making rows (an evaluation).
  const bool read_only = name.ends_with(kGrowableReadView);
  if (read_only) name.remove_suffix(kGrowableReadView.size());
  if (read_only && growable_.count(name) == 0) {
    return NotFound(who + " asked to read rows of '" + std::string(name) + "', which is not a "
                    "growable table this server holds");
  }
  auto it = vars_.find(name);
  auto w = writer_.find(name);
  if (it == vars_.end() || w == writer_.end() || sparse_.count(name) != 0) {
    return NotFound(who + " asked for rows of '" + std::string(name) + "', which is not a "
                    "table this server holds");
  }
  const exec::ScopeVar& var = *it->second;
  if (!host_memory_) {
    return Unimplemented(who + " asked for rows of '" + std::string(name) + "'; a server "
                         "serves rows from host memory only");
  }
  if (auto g = growable_.find(name); g != growable_.end() && num_ids >= 0) {
    // Rows by id; the table's lock orders this against the sends that make rows.
    const size_t row_bytes = static_cast<size_t>(g->second->width) *
                             ir::DataTypeSize(g->second->dtype);
    if (static_cast<uint64_t>(num_ids) > kMaxPrefetchBytes / std::max<size_t>(row_bytes, 1)) {
      return ResourceExhausted(who + " asked for " + std::to_string(num_ids) + " rows of '" +
                               std::string(name) + "', more than " +
                               std::to_string(kMaxPrefetchBytes >> 20) + " MiB in one reply");
    }
    auto token = std::make_unique<GetToken>();
    auto fetch = [&] {
      return PrefetchGrowable(trainer_id, *g->second, ids, num_ids, read_only, token->copy,
                              token->dims);
    };
    if (sync_) {
      FLEET_RETURN_IF_ERROR(BeginBetweenUpdates("trainer " + std::to_string(trainer_id) +
                                                "'s prefetch of '" + std::string(name) + "'"));
      Status s = fetch();
      EndBetweenUpdates();
      FLEET_RETURN_IF_ERROR(s);
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (failed_) return failure_;
        Touch(trainer_id);
      }
      std::lock_guard<std::mutex> lock(w->second->mu);
      FLEET_RETURN_IF_ERROR(fetch());
    }
    out = FleetTensor{};
    out.struct_size = sizeof(FleetTensor);
    out.data = token->copy.data();
    out.dtype = static_cast<int32_t>(g->second->dtype);
    out.ndim = 2;
    out.dims = token->dims.data();
    out.device_type = FLEET_DEVICE_TYPE_HOST;
    out.height = -1;
    *token_out = token.release();
    return OkStatus();
  }
  if (var.dims.empty() || var.dims[0] <= 0 || num_ids < 0) {
    return InvalidArgument(who + " asked for rows of '" + std::string(name) + "', which has "
                           "none");
  }
  const int64_t height = var.dims[0];
  const size_t row_bytes = var.bytes / static_cast<size_t>(height);
  // What the reply would take, bounded before anything is allocated for it.
  if (static_cast<uint64_t>(num_ids) > kMaxPrefetchBytes / std::max<size_t>(row_bytes, 1)) {
    return ResourceExhausted(who + " asked for " + std::to_string(num_ids) + " rows of '" +
                             std::string(name) + "', more than " +
                             std::to_string(kMaxPrefetchBytes >> 20) + " MiB in one reply");
  }
  for (int64_t i = 0; i < num_ids; ++i) {
    if (ids[i] < 0 || ids[i] >= height) {
      return InvalidArgument(who + " asked for row " + std::to_string(ids[i]) + " of '" +
                             std::string(name) + "', which holds " + std::to_string(height) +
                             " rows (id " + std::to_string(i) + " of the request)");
    }
  }
  auto token = std::make_unique<GetToken>();
  token->dims = var.dims;
  token->dims[0] = num_ids;
  token->copy.resize(static_cast<size_t>(num_ids) * row_bytes);
  auto gather = [&] {
    const uint8_t* src = static_cast<const uint8_t*>(var.data);
    for (int64_t i = 0; i < num_ids; ++i) {
      std::memcpy(token->copy.data() + static_cast<size_t>(i) * row_bytes,
                  src + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
    }
  };
  if (sync_) {
    // The rows change only while a round's blocks run.
    FLEET_RETURN_IF_ERROR(BeginBetweenUpdates("trainer " + std::to_string(trainer_id) +
                                              "'s prefetch of '" + std::string(name) + "'"));
    gather();
    EndBetweenUpdates();
  } else {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_) return failure_;
      Touch(trainer_id);
    }
    std::lock_guard<std::mutex> lock(w->second->mu);
    gather();
  }
  out = FleetTensor{};
  out.struct_size = sizeof(FleetTensor);
  out.data = token->copy.data();
  out.dtype = static_cast<int32_t>(var.dtype);
  out.ndim = static_cast<int32_t>(token->dims.size());
  out.dims = token->dims.data();
  out.device_type = FLEET_DEVICE_TYPE_HOST;
  out.height = -1;
  *token_out = token.release();
  return OkStatus();
}

void PsServer::OnGetDone(void* token) {
  std::unique_ptr<GetToken> t(static_cast<GetToken*>(token));
  if (t == nullptr || !t->counted) return;
  std::lock_guard<std::mutex> lock(mu_);
  --outstanding_gets_;
  cv_.notify_all();
}

Status PsServer::OnBarrier(int32_t trainer_id, int32_t kind) {
  InFlight guard(mu_, cv_, in_flight_);
  FLEET_RETURN_IF_ERROR(CheckTrainer(trainer_id));
  if (kind != FLEET_BARRIER_BATCH && kind != FLEET_BARRIER_FETCH) {
    return InvalidArgument(label_ + ": trainer " + std::to_string(trainer_id) +
                           " sent a barrier of unknown kind " + std::to_string(kind));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_) return failure_;
  const auto t = static_cast<size_t>(trainer_id);
  if (!sync_) {
    Touch(trainer_id);
    return OkStatus();
  }
  const bool batch = kind == FLEET_BARRIER_BATCH;
  const char* what = batch ? "batch barrier" : "fetch barrier";
  if (!live_[t]) {
    return FailedPrecondition(label_ + ": trainer " + std::to_string(trainer_id) + " sent a " +
                              what + " after it completed");
  }
  // A BATCH barrier counts for the round whose gradients are being collected: one that comes
  // while the last round's parameters are still being fetched waits for that round to end.
  const Phase want = batch ? Phase::kSend : Phase::kGet;
  const auto deadline = Clock::now() + HandlerWait(options_.timeout);
  if (!cv_.wait_until(lock, deadline, [&] { return failed_ || phase_ == want; })) {
    return DeadlineExceeded(label_ + ": trainer " + std::to_string(trainer_id) + "'s " + what +
                            " waited " + PsSeconds(HandlerWait(options_.timeout)) + " for the " +
                            (batch ? "next round to begin" : "round's update") + " (round " +
                            std::to_string(round_) + "; another trainer dead or stuck?)");
  }
  if (failed_) return failure_;
  (batch ? batch_ : fetch_)[t] = true;
  cv_.notify_all();
  return OkStatus();
}

Status PsServer::OnComplete(int32_t trainer_id) {
  InFlight guard(mu_, cv_, in_flight_);
  FLEET_RETURN_IF_ERROR(CheckTrainer(trainer_id));
  std::lock_guard<std::mutex> lock(mu_);
  const auto t = static_cast<size_t>(trainer_id);
  if (live_[t]) {
    live_[t] = false;
    --num_live_;
    cv_.notify_all();
  }
  return OkStatus();
}

Status PsServer::OnAbort(int32_t trainer_id, std::string_view reason) {
  InFlight guard(mu_, cv_, in_flight_);
  FLEET_RETURN_IF_ERROR(CheckTrainer(trainer_id));
  // Every trainer's work depends on every other's in a round, and an asynchronous server
  // would wait out its silence deadline: either way the job cannot go on without it.
  std::string why = label_ + ": trainer " + std::to_string(trainer_id) + " failed";
  why += reason.empty() ? std::string(" (it gave no reason)")
                        : ": " + QuoteForMessage(reason, 1024);
  Fail(Aborted(why));
  return OkStatus();
}

}  // namespace fleet
