// host/support: what every other folder uses: Status and StatusOr, logging (spdlog), durable
// files (written whole or not at all), small text helpers, child-process isolation (isolate.h)
// and the job secret below the config (secret.h).
// Depends on: nothing else in host/.
//
// Status and StatusOr: how the host reports errors. Every fallible host function returns one of
// these; exceptions do not leave a module. Codes are the canonical set of the plugin ABI
// (FLEET_CODE_*), so a plugin's status converts without loss.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fleet {

enum class Code : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: message" — what the CLI prints.
  std::string ToString() const;

  // Returns a copy whose message is "context: message"; OK stays OK.
  Status WithContext(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}
inline Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {Code::kResourceExhausted, std::move(m)};
}
inline Status OutOfRange(std::string m) { return {Code::kOutOfRange, std::move(m)}; }
inline Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
inline Status DataLoss(std::string m) { return {Code::kDataLoss, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }

// A value or the error that prevented it. Constructing from an OK status is a bug.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }
  StatusOr(T value) : value_(std::move(value)) {}

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace fleet

#define FLEET_STATUS_CONCAT_INNER(a, b) a##b
#define FLEET_STATUS_CONCAT(a, b) FLEET_STATUS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function if it is not OK.
#define FLEET_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::fleet::Status fleet_status_ = (expr);          \
    if (!fleet_status_.ok()) return fleet_status_;   \
  } while (0)

// `FLEET_ASSIGN_OR_RETURN(auto x, Compute());` declares x from a StatusOr or returns its error.
#define FLEET_ASSIGN_OR_RETURN(lhs, expr) \
  FLEET_ASSIGN_OR_RETURN_IMPL(FLEET_STATUS_CONCAT(fleet_statusor_, __LINE__), lhs, expr)
#define FLEET_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
