#include "plugin/component_check.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace fleet {
namespace {

bool ValidName(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* p = name; *p != '\0'; ++p) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// The vtable size each kind must have at least (through its last required slot in 1.0), and the
// host's full size, which the copy is padded to.
struct KindLayout {
  size_t required;
  size_t full;
};

KindLayout LayoutOf(int32_t kind) {
  switch (kind) {
    case FLEET_COMPONENT_DEVICE:
      return {FLEET_STRUCT_SIZE(FleetDeviceVTable, synchronize), sizeof(FleetDeviceVTable)};
    case FLEET_COMPONENT_KERNELS:
      return {FLEET_STRUCT_SIZE(FleetKernelsVTable, kernels), sizeof(FleetKernelsVTable)};
    case FLEET_COMPONENT_COMMUNICATOR:
      return {FLEET_STRUCT_SIZE(FleetCommVTable, barrier), sizeof(FleetCommVTable)};
    case FLEET_COMPONENT_PASS:
      return {FLEET_STRUCT_SIZE(FleetPassVTable, run), sizeof(FleetPassVTable)};
    case FLEET_COMPONENT_TRANSPORT:
      return {FLEET_STRUCT_SIZE(FleetTransportVTable, client_close), sizeof(FleetTransportVTable)};
    case FLEET_COMPONENT_OP_SCHEMA:
      return {FLEET_STRUCT_SIZE(FleetOpSchemaVTable, grad_op_type), sizeof(FleetOpSchemaVTable)};
    default:
      return {0, 0};
  }
}

// The name of the first required slot that is NULL, or nullptr when all are set.
const char* FirstNullSlot(std::initializer_list<std::pair<const char*, const void*>> slots) {
  for (const auto& [name, ptr] : slots) {
    if (ptr == nullptr) return name;
  }
  return nullptr;
}

#define FLEET_SLOT(t, m) std::pair<const char*, const void*>{#m, reinterpret_cast<const void*>((t)->m)}

const char* MissingRequiredSlot(int32_t kind, const void* table) {
  switch (kind) {
    case FLEET_COMPONENT_DEVICE: {
      auto* t = static_cast<const FleetDeviceVTable*>(table);
      return FirstNullSlot({FLEET_SLOT(t, count), FLEET_SLOT(t, props), FLEET_SLOT(t, alloc),
                               FLEET_SLOT(t, free), FLEET_SLOT(t, stream_create),
                               FLEET_SLOT(t, stream_destroy), FLEET_SLOT(t, stream_synchronize),
                               FLEET_SLOT(t, copy_h2d), FLEET_SLOT(t, copy_d2h),
                               FLEET_SLOT(t, copy_d2d), FLEET_SLOT(t, memset),
                               FLEET_SLOT(t, event_create), FLEET_SLOT(t, event_destroy),
                               FLEET_SLOT(t, event_record), FLEET_SLOT(t, stream_wait_event),
                               FLEET_SLOT(t, event_synchronize), FLEET_SLOT(t, synchronize)});
    }
    case FLEET_COMPONENT_COMMUNICATOR: {
      auto* t = static_cast<const FleetCommVTable*>(table);
      return FirstNullSlot({FLEET_SLOT(t, create), FLEET_SLOT(t, destroy), FLEET_SLOT(t, abort),
                               FLEET_SLOT(t, all_reduce), FLEET_SLOT(t, broadcast),
                               FLEET_SLOT(t, all_gather), FLEET_SLOT(t, reduce_scatter),
                               FLEET_SLOT(t, reduce), FLEET_SLOT(t, all_to_all),
                               FLEET_SLOT(t, send), FLEET_SLOT(t, recv), FLEET_SLOT(t, barrier)});
    }
    case FLEET_COMPONENT_PASS: {
      auto* t = static_cast<const FleetPassVTable*>(table);
      return FirstNullSlot({FLEET_SLOT(t, run)});
    }
    case FLEET_COMPONENT_TRANSPORT: {
      auto* t = static_cast<const FleetTransportVTable*>(table);
      return FirstNullSlot(
          {FLEET_SLOT(t, server_start), FLEET_SLOT(t, server_endpoint),
              FLEET_SLOT(t, server_stop), FLEET_SLOT(t, server_destroy),
              FLEET_SLOT(t, client_connect), FLEET_SLOT(t, client_send), FLEET_SLOT(t, client_get),
              FLEET_SLOT(t, client_barrier), FLEET_SLOT(t, client_complete),
              FLEET_SLOT(t, client_close)});
    }
    case FLEET_COMPONENT_OP_SCHEMA: {
      auto* t = static_cast<const FleetOpSchemaVTable*>(table);
      return FirstNullSlot({FLEET_SLOT(t, infer_shape)});
    }
    default:
      return nullptr;
  }
}

#undef FLEET_SLOT

// Each kernel definition is versioned on its own.
Status CheckKernels(const FleetKernelsVTable* t, const std::string& where) {
  if (t->count > 0 && t->kernels == nullptr) {
    return InvalidArgument(where + ": kernels is NULL but count is " + std::to_string(t->count));
  }
  for (size_t i = 0; i < t->count; ++i) {
    const FleetKernelDef* def = t->kernels[i];
    std::string at = where + ": kernel #" + std::to_string(i);
    if (def == nullptr) return InvalidArgument(at + " is NULL");
    if (def->struct_size < FLEET_STRUCT_SIZE(FleetKernelDef, launch) ||
        def->struct_size > kMaxStructSize) {
      return InvalidArgument(at + " has impossible struct_size " +
                             std::to_string(def->struct_size));
    }
    if (def->op_type == nullptr || def->device == nullptr || def->launch == nullptr) {
      return InvalidArgument(at + " lacks op_type, device or launch");
    }
  }
  return OkStatus();
}

}  // namespace

bool IsKnownComponentKind(int32_t kind) { return LayoutOf(kind).full != 0; }

Status CheckComponent(const FleetComponent& c, ComponentRecord* out) {
  std::string name = c.name != nullptr ? c.name : "";
  std::string where = ComponentKindName(c.kind) + " '" + name + "'";
  if (!ValidName(c.name)) {
    return InvalidArgument(where + ": name must be non-empty and use only letters, digits, '_', "
                           "'-' and '.'");
  }
  if (c.vtable == nullptr) return InvalidArgument(where + ": vtable is NULL");
  KindLayout layout = LayoutOf(c.kind);
  size_t size = *static_cast<const size_t*>(c.vtable);
  if (size < layout.required || size > kMaxStructSize) {
    return InvalidArgument(where + ": vtable struct_size " + std::to_string(size) +
                           " is impossible (ABI 1.0 needs at least " +
                           std::to_string(layout.required) + ")");
  }
  out->kind = c.kind;
  out->name = name;
  out->summary = c.summary != nullptr ? c.summary : "";
  out->ctx = c.ctx;
  out->vtable_size = size;
  // Copy what both sides know; the rest stays zero, so newer slots read as NULL.
  size_t words = (layout.full + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  out->vtable_copy.assign(words, std::max_align_t{});
  std::memcpy(out->vtable_copy.data(), c.vtable, std::min(size, layout.full));
  const void* copy = out->vtable_copy.data();
  if (const char* slot = MissingRequiredSlot(c.kind, copy)) {
    return InvalidArgument(where + ": required slot '" + slot + "' is NULL");
  }
  if (c.kind == FLEET_COMPONENT_KERNELS) {
    FLEET_RETURN_IF_ERROR(CheckKernels(static_cast<const FleetKernelsVTable*>(copy), where));
  }
  if (c.kind == FLEET_COMPONENT_COMMUNICATOR) {
    auto* t = static_cast<const FleetCommVTable*>(copy);
    if (t->num_devices > 0 && t->devices == nullptr) {
      return InvalidArgument(where + ": devices is NULL but num_devices is " +
                             std::to_string(t->num_devices));
    }
  }
  return OkStatus();
}

}  // namespace fleet
