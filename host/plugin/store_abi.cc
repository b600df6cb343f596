#include "plugin/store_abi.h"

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/host_api.h"

namespace fleet {
namespace {

Store* StoreOf(void* ctx) { return static_cast<Store*>(ctx); }

std::string KeyOf(const char* key) { return key != nullptr ? key : ""; }

FleetStatus* SetSlot(void* ctx, const char* key, const void* value, size_t len) {
  if (value == nullptr && len != 0) {
    return MakeFleetStatus(InvalidArgument("store set: value is NULL with a length of " +
                                           std::to_string(len)));
  }
  std::string_view bytes(static_cast<const char*>(value), value != nullptr ? len : 0);
  return MakeFleetStatus(StoreOf(ctx)->Set(KeyOf(key), bytes));
}

FleetStatus* GetSlot(void* ctx, const char* key, int64_t timeout_ms,
                     void* (*alloc)(void*, size_t), void* alloc_ctx, size_t* len) {
  if (alloc == nullptr || len == nullptr) {
    return MakeFleetStatus(InvalidArgument("store get: alloc and len must be non-NULL"));
  }
  auto value = StoreOf(ctx)->Get(KeyOf(key), std::chrono::milliseconds(timeout_ms));
  if (!value.ok()) return MakeFleetStatus(value.status());
  void* buffer = alloc(alloc_ctx, value->size());
  if (buffer == nullptr && !value->empty()) {
    return MakeFleetStatus(
        Status(Code::kResourceExhausted, "store get: alloc returned NULL for " +
                                             std::to_string(value->size()) + " bytes"));
  }
  if (!value->empty()) std::memcpy(buffer, value->data(), value->size());
  *len = value->size();
  return nullptr;
}

FleetStatus* AddSlot(void* ctx, const char* key, int64_t delta, int64_t* result) {
  auto sum = StoreOf(ctx)->Add(KeyOf(key), delta);
  if (!sum.ok()) return MakeFleetStatus(sum.status());
  if (result != nullptr) *result = *sum;
  return nullptr;
}

FleetStatus* WaitSlot(void* ctx, const char* const* keys, size_t n, int64_t timeout_ms) {
  if (keys == nullptr && n != 0) {
    return MakeFleetStatus(InvalidArgument("store wait: keys is NULL"));
  }
  std::vector<std::string> list;
  list.reserve(n);
  for (size_t i = 0; i < n; ++i) list.push_back(KeyOf(keys[i]));
  return MakeFleetStatus(StoreOf(ctx)->Wait(list, std::chrono::milliseconds(timeout_ms)));
}

}  // namespace

AbiStore::AbiStore(Store* base, std::string_view scope) : view_(base) {
  if (!scope.empty()) {
    scoped_ = std::make_unique<ScopedStore>(base, scope);
    view_ = scoped_.get();
  }
  table_.struct_size = FLEET_STRUCT_SIZE(FleetStore, wait);
  table_.ctx = view_;
  table_.set = SetSlot;
  table_.get = GetSlot;
  table_.add = AddSlot;
  table_.wait = WaitSlot;
}

}  // namespace fleet
