#include "store_adapter.h"

#include <algorithm>

namespace fleet_gloo {
namespace {

void* AllocInto(void* ctx, size_t len) {
  auto* out = static_cast<std::vector<char>*>(ctx);
  out->resize(len);
  // A zero-length value still needs a non-NULL answer.
  return out->empty() ? static_cast<void*>(out) : static_cast<void*>(out->data());
}

}  // namespace

void StoreAdapter::Check(FleetStatus* status, const std::string& what) const {
  if (status == nullptr) return;
  const int32_t code = host_->status_code(status);
  std::string message = what + ": " + host_->status_message(status);
  host_->status_free(status);
  throw CommError(code, message);
}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  const std::string full = prefix_ + key;
  Check(store_->set(store_->ctx, full.c_str(), data.data(), data.size()),
        "store set '" + full + "'");
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  const std::string full = prefix_ + key;
  std::vector<char> value;
  size_t len = 0;
  Check(store_->get(store_->ctx, full.c_str(), timeout_.count(), &AllocInto, &value, &len),
        "store get '" + full + "'");
  value.resize(len);
  return value;
}

void StoreAdapter::wait(const std::vector<std::string>& keys,
                        const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  std::vector<const char*> ptrs;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  for (const auto& k : full) ptrs.push_back(k.c_str());
  // Gloo passes its own default (30 s) where the caller gave none; never wait past ours.
  const int64_t ms = std::min<int64_t>(timeout.count() > 0 ? timeout.count() : timeout_.count(),
                                       timeout_.count());
  Check(store_->wait(store_->ctx, ptrs.data(), ptrs.size(), ms), "store wait");
}

bool StoreAdapter::Exists(const std::string& key) {
  const std::string full = prefix_ + key;
  const char* ptr = full.c_str();
  FleetStatus* s = store_->wait(store_->ctx, &ptr, 1, 1);
  if (s != nullptr && host_->status_code(s) == FLEET_CODE_DEADLINE_EXCEEDED) {
    host_->status_free(s);
    return false;
  }
  Check(s, "store wait '" + full + "'");
  return true;
}

}  // namespace fleet_gloo
