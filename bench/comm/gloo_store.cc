#include "comm/gloo_store.h"

#include <stdexcept>
#include <string_view>

namespace fleet::bench {
namespace {

void Check(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.ToString());
}

}  // namespace

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  Check(base_->Set(key, std::string_view(data.data(), data.size())));
}

std::vector<char> GlooStore::get(const std::string& key) {
  StatusOr<std::string> value = base_->Get(key, timeout_);
  Check(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  Check(base_->Wait(keys, timeout));
}

}  // namespace fleet::bench
