// Name rules and the registry.
#include "host/session/tensor_registry.h"

#include <cstdint>
#include <exception>
#include <string>

#include "io/format/stored_string_limits.h"
#include "kernels/request_check.h"

namespace tstat::host {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t Utf8Length(const std::string& s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n;
  std::uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

}  // namespace

static_assert(kMaxTensorNameBytes == io::kTensorNameChars,
              "a segment stores names up to io::kTensorNameChars bytes");

Status CheckTensorName(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("tensor name is empty");
  if (name.size() > kMaxTensorNameBytes) {
    return Status::InvalidArgument("tensor name has " + std::to_string(name.size()) +
                                   " bytes, at most " + std::to_string(kMaxTensorNameBytes) +
                                   " are allowed");
  }
  for (std::size_t i = 0; i < name.size();) {
    if (name[i] == '\0') {
      return Status::InvalidArgument("tensor name contains a NUL byte at offset " +
                                     std::to_string(i));
    }
    const std::size_t n = Utf8Length(name, i);
    if (n == 0) {
      return Status::InvalidArgument("tensor name is not valid UTF-8 (byte offset " +
                                     std::to_string(i) + ")");
    }
    i += n;
  }
  return Status::OK();
}

Status CheckViewShape(const TensorView& view) {
  if (!IsValidDType(view.dtype)) {
    return Status::InvalidArgument("invalid dtype " + std::to_string(static_cast<int>(view.dtype)));
  }
  if (view.space != MemorySpace::kHost && view.space != MemorySpace::kCuda) {
    return Status::InvalidArgument("invalid memory space " +
                                   std::to_string(static_cast<int>(view.space)));
  }
  // The engine reduces at most kMaxNumel elements (bytes stay far from
  // overflow); a larger tensor is refused here, not dropped at every step.
  const auto too_large = [](std::int64_t n) {
    return Status::InvalidArgument("numel " + std::to_string(n) + " is more than " +
                                   std::to_string(kernels::kMaxNumel) +
                                   " (2^50), the most one tensor may have");
  };
  if (view.shape.empty()) {
    if (view.numel < 0) {
      return Status::InvalidArgument("numel is negative (" + std::to_string(view.numel) + ")");
    }
    if (view.numel > kernels::kMaxNumel) return too_large(view.numel);
    return Status::OK();
  }
  std::int64_t n = 1;
  for (std::size_t i = 0; i < view.shape.size(); ++i) {
    const std::int64_t d = view.shape[i];
    if (d < 0) {
      return Status::InvalidArgument("shape[" + std::to_string(i) + "] is negative (" +
                                     std::to_string(d) + ")");
    }
    if (d != 0 && n > INT64_MAX / d) return Status::InvalidArgument("shape overflows int64");
    n *= d;
  }
  if (n != view.numel) {
    return Status::InvalidArgument("shape has " + std::to_string(n) + " elements but numel is " +
                                   std::to_string(view.numel));
  }
  if (n > kernels::kMaxNumel) return too_large(n);
  return Status::OK();
}

Status ResolveView(const RegisteredTensor& t, TensorView* v) {
  if (!t.view_fn) {
    *v = t.view;
    return Status::OK();
  }
  TensorView got = t.view;  // pre-filled: a callback may set data only
  Status s;
  try {
    s = t.view_fn(&got);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("view callback threw: ") + e.what());
  } catch (...) {
    return Status::InvalidArgument("view callback threw");
  }
  if (!s.ok()) return s.WithContext("view callback");
  if (got.data == nullptr) {
    v->data = nullptr;
    return Status::OK();
  }
  if (got.dtype != t.info.dtype) {
    return Status::InvalidArgument(std::string("dtype mismatch: the view callback returned ") +
                                   DTypeName(got.dtype) + ", the tensor was registered as " +
                                   DTypeName(t.info.dtype));
  }
  if (got.space != t.info.space ||
      (got.space == MemorySpace::kCuda && got.device != t.view.device)) {
    return Status::InvalidArgument("memory space mismatch: the view callback moved the tensor");
  }
  if (!got.shape.empty()) {  // a new shape: numel follows it (bad shapes fail below)
    std::int64_t n = 1;
    for (std::int64_t d : got.shape) {
      if (d < 0 || (d != 0 && n > INT64_MAX / d)) {
        n = -1;
        break;
      }
      n *= d;
    }
    got.numel = n;
  }
  TSTAT_RETURN_IF_ERROR(host::CheckViewShape(got).WithContext("view callback"));
  *v = std::move(got);
  return Status::OK();
}

std::uint64_t NameHash(const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Result<RegisteredTensor*> TensorRegistry::Add(RegisteredTensor t) {
  if (by_name_.count(t.info.name)) {
    return Status::InvalidArgument("duplicate tensor name \"" + t.info.name +
                                   "\": already registered");
  }
  t.info.id = static_cast<std::uint32_t>(tensors_.size());
  by_name_.emplace(t.info.name, t.info.id);
  tensors_.push_back(std::make_unique<RegisteredTensor>(std::move(t)));
  return tensors_.back().get();
}

RegisteredTensor* TensorRegistry::Find(const std::string& name) {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : tensors_[it->second].get();
}

const RegisteredTensor* TensorRegistry::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : tensors_[it->second].get();
}

std::vector<TensorInfo> TensorRegistry::TakeUndeclared() {
  std::vector<TensorInfo> out;
  for (; declared_ < tensors_.size(); ++declared_) out.push_back(tensors_[declared_]->info);
  return out;
}

}  // namespace tstat::host
