#include "dist/communicator.h"

#include <utility>

#include "plugin/host_api.h"

namespace fleet {

Communicator::Communicator(const ComponentRecord& component, Store* store,
                           const std::string& scope, CommunicatorOptions options)
    : component_(component),
      vtable_(component.table<FleetCommVTable>()),
      store_(store, scope),
      options_(std::move(options)) {}

StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const ComponentRecord& component,
                                                             Store* store,
                                                             const std::string& scope,
                                                             const CommunicatorOptions& options) {
  if (component.kind != FLEET_COMPONENT_COMMUNICATOR) {
    return InvalidArgument("component '" + component.name + "' is not a communicator");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument(options.label + ": rank " + std::to_string(options.rank) +
                           " is outside a world of " + std::to_string(options.world_size));
  }
  std::unique_ptr<Communicator> c(new Communicator(component, store, scope, options));
  const FleetCommVTable* vt = c->vtable_;
  if (vt->create == nullptr || vt->destroy == nullptr) {
    return FailedPrecondition("communicator '" + component.name + "' (plugin '" +
                              component.plugin + "') lacks create or destroy");
  }

  // Options as typed attributes; their storage lives until create returns (the ABI's rule).
  std::vector<FleetAttr> attrs(options.options.size());
  std::vector<const FleetAttr*> attr_ptrs;
  for (size_t i = 0; i < options.options.size(); ++i) {
    FleetAttr& a = attrs[i];
    a.struct_size = sizeof(FleetAttr);
    a.name = options.options[i].first.c_str();
    a.type = FLEET_ATTR_STRING;
    a.s = options.options[i].second.c_str();
    a.s_len = options.options[i].second.size();
    attr_ptrs.push_back(&a);
  }
  FleetCommConfig config{};
  config.struct_size = sizeof(FleetCommConfig);
  config.rank = options.rank;
  config.world_size = options.world_size;
  config.store = c->store_.table();
  config.timeout_ms = options.timeout.count();
  config.device = options.device.c_str();
  config.device_ordinal = options.device_ordinal;
  config.num_options = attr_ptrs.size();
  config.options = attr_ptrs.empty() ? nullptr : attr_ptrs.data();
  FLEET_RETURN_IF_ERROR(c->Check(vt->create(component.ctx, &config, &c->comm_), "create"));
  if (c->comm_ == nullptr) {
    return Internal(options.label + ": communicator '" + component.name +
                    "' returned OK from create but no communicator");
  }
  return c;
}

Communicator::~Communicator() {
  if (comm_ != nullptr) {
    Status s = TakeStatus(vtable_->destroy(component_.ctx, comm_), "destroy");
    (void)s;  // nothing useful to do with a failing destroy at teardown
  }
}

Status Communicator::Check(FleetStatus* status, const char* op) const {
  if (status == nullptr) return OkStatus();
  return TakeStatus(status, options_.label + " (" + component_.name + ", rank " +
                                std::to_string(options_.rank) + " of " +
                                std::to_string(options_.world_size) + ") " + op);
}

Status Communicator::AllReduce(const FleetTensor& in, const FleetTensor& out, int32_t op) {
  return Check(vtable_->all_reduce(component_.ctx, comm_, &in, &out, op, nullptr), "all_reduce");
}

Status Communicator::Broadcast(const FleetTensor& buf, int32_t root) {
  return Check(vtable_->broadcast(component_.ctx, comm_, &buf, root, nullptr), "broadcast");
}

Status Communicator::AllGather(const FleetTensor& in, const FleetTensor& out) {
  return Check(vtable_->all_gather(component_.ctx, comm_, &in, &out, nullptr), "all_gather");
}

Status Communicator::ReduceScatter(const FleetTensor& in, const FleetTensor& out, int32_t op) {
  return Check(vtable_->reduce_scatter(component_.ctx, comm_, &in, &out, op, nullptr),
               "reduce_scatter");
}

Status Communicator::Barrier() {
  return Check(vtable_->barrier(component_.ctx, comm_), "barrier");
}

void Communicator::Abort() {
  aborted_.store(true);
  if (comm_ != nullptr && vtable_->abort != nullptr) vtable_->abort(component_.ctx, comm_);
}

}  // namespace fleet
