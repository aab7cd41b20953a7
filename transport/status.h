// Status values for softfab's C++ layers: an error number and a static message.
//
// Codes are errno values (EINVAL, ENOMEM, EAGAIN, ...) plus the few fabric-only
// codes below, so the conversion at each public boundary is mechanical:
// verbs-style calls return the code, fabric-style calls return its negation. A
// Status never allocates (the message is a string literal), so it is cheap
// enough for the data path.
#ifndef SOFTFAB_TRANSPORT_STATUS_H_
#define SOFTFAB_TRANSPORT_STATUS_H_

#include <cerrno>
#include <optional>
#include <utility>

namespace softfab {

// Fabric-only error numbers, equal to libfabric's values so logs read the same.
// FI_ETRUNC: the message was larger than the buffer.
inline constexpr int kErrTruncated = 265;
// FI_ENOMSG: a peek found nothing.
inline constexpr int kErrNoMessage = ENOMSG;
// FI_EOPBADSTATE: the object is not in a state for this call.
inline constexpr int kErrOpBadState = 258;

class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  // `code` is a positive errno-style value; `message` must be a string literal
  // (not owned).
  constexpr Status(int code, const char* message)
      : code_(code), message_(message) {}

  static constexpr Status Ok() { return Status(); }

  constexpr bool ok() const { return code_ == 0; }
  constexpr int code() const { return code_; }
  constexpr const char* message() const { return message_ ? message_ : ""; }

  friend constexpr bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_;
  }

 private:
  int code_ = 0;
  const char* message_ = nullptr;
};

inline constexpr Status InvalidArgument(const char* message) {
  return Status(EINVAL, message);
}
inline constexpr Status NoMemory(const char* message) {
  return Status(ENOMEM, message);
}
inline constexpr Status TryAgain(const char* message) {
  return Status(EAGAIN, message);
}
inline constexpr Status NotFound(const char* message) {
  return Status(ENOENT, message);
}
inline constexpr Status NotSupported(const char* message) {
  return Status(ENOSYS, message);
}
inline constexpr Status Busy(const char* message) {
  return Status(EBUSY, message);
}

// A value or the Status that explains its absence. Holding an OK status without
// a value is impossible by construction.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Implicit by design, so a function can `return value;` or `return status;`.
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT
  StatusOr(Status status) : status_(status) {      // NOLINT
    if (status_.ok()) {
      status_ = Status(EINVAL, "StatusOr built from an OK status");
    }
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace softfab

#endif  // SOFTFAB_TRANSPORT_STATUS_H_
