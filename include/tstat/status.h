// Status and Result<T>: errors as values across every module boundary.
//
// A Status is either OK or carries a code and a message that names the cause
// (the argument, the tensor, the file). Library code never throws across a
// public API, never calls exit()/abort(), and never prints: it returns these.
// Thread safety: values are immutable once built; copying is cheap.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace tstat {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,    // the caller passed something wrong; message names it
  kNotSupported = 2,       // valid request this build/backend cannot serve
  kCudaError = 3,          // a CUDA runtime call failed
  kIoError = 4,            // a file or disk operation failed
  kResourceExhausted = 5,  // a memory/queue/disk cap was reached
  kNotFound = 6,           // no such tensor/step/file
  kCorruption = 7,         // stored data is damaged
  kFailedPrecondition = 8, // call out of order (e.g. steps going backwards)
  kUnavailable = 9,        // not yet available (a live run's future step)
  kInternal = 10,          // a bug in tstat
  kStepUnavailable = 11,   // a step that was not saved (the run is past it)
};

// Returns a stable lower-case name ("invalid_argument", ...).
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status CudaError(std::string m) { return {StatusCode::kCudaError, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status StepUnavailable(std::string m) { return {StatusCode::kStepUnavailable, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: n must be ..." or "ok".
  std::string ToString() const;

  // Returns a copy whose message is prefixed by `context: `.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotSupported: return "not_supported";
    case StatusCode::kCudaError: return "cuda_error";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kStepUnavailable: return "step_unavailable";
  }
  return "unknown";
}

inline std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

// Result<T>: a value or a non-OK Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}    // NOLINT: must not be OK
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tstat

#define TSTAT_STATUS_CONCAT_INNER(a, b) a##b
#define TSTAT_STATUS_CONCAT(a, b) TSTAT_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define TSTAT_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::tstat::Status tstat_status_tmp_ = (expr);     \
    if (!tstat_status_tmp_.ok()) return tstat_status_tmp_; \
  } while (0)

// `TSTAT_ASSIGN_OR_RETURN(auto x, MakeX())`: unwraps a Result or returns its Status.
#define TSTAT_ASSIGN_OR_RETURN(lhs, rexpr)                                   \
  auto TSTAT_STATUS_CONCAT(tstat_result_, __LINE__) = (rexpr);               \
  if (!TSTAT_STATUS_CONCAT(tstat_result_, __LINE__).ok())                    \
    return TSTAT_STATUS_CONCAT(tstat_result_, __LINE__).status();            \
  lhs = std::move(TSTAT_STATUS_CONCAT(tstat_result_, __LINE__)).value()
