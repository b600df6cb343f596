#include "kernel_context.h"

namespace fleet::kernel {
namespace {

const FleetTensorSlot* FindSlot(size_t count, const FleetTensorSlot* const* slots,
                                std::string_view name) {
  for (size_t i = 0; i < count; ++i) {
    if (slots[i] != nullptr && slots[i]->name != nullptr && name == slots[i]->name) {
      return slots[i];
    }
  }
  return nullptr;
}

const FleetTensor* At(const FleetTensorSlot* slot, size_t i) {
  if (slot == nullptr || i >= slot->count) return nullptr;
  return slot->tensors[i];
}

}  // namespace

const FleetTensor* Input(const FleetKernelContext* kc, std::string_view slot, size_t i) {
  return At(FindSlot(kc->num_inputs, kc->inputs, slot), i);
}

const FleetTensor* Output(const FleetKernelContext* kc, std::string_view slot, size_t i) {
  return At(FindSlot(kc->num_outputs, kc->outputs, slot), i);
}

size_t InputCount(const FleetKernelContext* kc, std::string_view slot) {
  const FleetTensorSlot* s = FindSlot(kc->num_inputs, kc->inputs, slot);
  return s == nullptr ? 0 : s->count;
}

size_t OutputCount(const FleetKernelContext* kc, std::string_view slot) {
  const FleetTensorSlot* s = FindSlot(kc->num_outputs, kc->outputs, slot);
  return s == nullptr ? 0 : s->count;
}

const FleetAttr* FindAttr(const FleetKernelContext* kc, std::string_view name) {
  for (size_t i = 0; i < kc->num_attrs; ++i) {
    const FleetAttr* a = kc->attrs[i];
    if (a != nullptr && a->name != nullptr && name == a->name) return a;
  }
  return nullptr;
}

int64_t IntAttr(const FleetKernelContext* kc, std::string_view name, int64_t fallback) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr) return fallback;
  switch (a->type) {
    case FLEET_ATTR_INT:
    case FLEET_ATTR_INT64:
    case FLEET_ATTR_BOOL:
    case FLEET_ATTR_BLOCK:
      return a->i;
    case FLEET_ATTR_FLOAT:
    case FLEET_ATTR_DOUBLE:
      return static_cast<int64_t>(a->f);
    default:
      return fallback;
  }
}

double FloatAttr(const FleetKernelContext* kc, std::string_view name, double fallback) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr) return fallback;
  switch (a->type) {
    case FLEET_ATTR_FLOAT:
    case FLEET_ATTR_DOUBLE:
      return a->f;
    case FLEET_ATTR_INT:
    case FLEET_ATTR_INT64:
      return static_cast<double>(a->i);
    default:
      return fallback;
  }
}

bool BoolAttr(const FleetKernelContext* kc, std::string_view name, bool fallback) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr) return fallback;
  if (a->type == FLEET_ATTR_BOOL || a->type == FLEET_ATTR_INT || a->type == FLEET_ATTR_INT64) {
    return a->i != 0;
  }
  return fallback;
}

std::string_view StringAttr(const FleetKernelContext* kc, std::string_view name) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr || a->type != FLEET_ATTR_STRING || a->s == nullptr) return {};
  return std::string_view(a->s, a->s_len);
}

std::vector<int64_t> IntsAttr(const FleetKernelContext* kc, std::string_view name) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr) return {};
  if (a->type == FLEET_ATTR_INTS || a->type == FLEET_ATTR_INT64S || a->type == FLEET_ATTR_BOOLS) {
    return std::vector<int64_t>(a->ints, a->ints + a->count);
  }
  return {};
}

std::vector<double> FloatsAttr(const FleetKernelContext* kc, std::string_view name) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr) return {};
  if (a->type == FLEET_ATTR_FLOATS || a->type == FLEET_ATTR_DOUBLES) {
    return std::vector<double>(a->floats, a->floats + a->count);
  }
  if (a->type == FLEET_ATTR_INTS || a->type == FLEET_ATTR_INT64S) {
    return std::vector<double>(a->ints, a->ints + a->count);
  }
  return {};
}

int64_t Numel(const FleetTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->dims[i];
  return n;
}

std::vector<int64_t> Dims(const FleetTensor* t) {
  return std::vector<int64_t>(t->dims, t->dims + t->ndim);
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string DimsText(const FleetTensor* t) { return DimsText(Dims(t)); }

}  // namespace fleet::kernel
