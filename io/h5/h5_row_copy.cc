// See h5_row_copy.h.
#include "io/h5/h5_row_copy.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "io/h5/h5_error.h"

namespace tstat::io {
namespace {

constexpr int kMaxDepth = 8;  // as CheckReadableAs

// Adds the runs that copy `stored` at src to `mem` at dst; false when some
// shared part needs a conversion.
bool AddRuns(hid_t stored, std::size_t src, hid_t mem, std::size_t dst, int depth,
             std::vector<RowCopyPlan::Run>* runs) {
  if (depth > kMaxDepth) return false;
  if (H5Tget_class(mem) != H5T_COMPOUND) {
    if (H5Tequal(stored, mem) <= 0) return false;
    runs->push_back({src, dst, H5Tget_size(mem)});
    return true;
  }
  if (H5Tget_class(stored) != H5T_COMPOUND) return false;
  const int n = H5Tget_nmembers(mem);
  if (n < 0) return false;
  for (int i = 0; i < n; ++i) {
    char* name = H5Tget_member_name(mem, static_cast<unsigned>(i));
    if (name == nullptr) return false;
    const int s = H5Tget_member_index(stored, name);
    H5free_memory(name);
    if (s < 0) continue;  // stays as the background, as H5Tconvert leaves it
    H5Type mem_member(H5Tget_member_type(mem, static_cast<unsigned>(i)));
    H5Type stored_member(H5Tget_member_type(stored, static_cast<unsigned>(s)));
    if (!mem_member.valid() || !stored_member.valid()) return false;
    if (!AddRuns(stored_member.get(), src + H5Tget_member_offset(stored, static_cast<unsigned>(s)),
                 mem_member.get(), dst + H5Tget_member_offset(mem, static_cast<unsigned>(i)),
                 depth + 1, runs)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool RowCopyPlan::BuildWidening(hid_t stored, hid_t mem) {
  if (H5Tget_class(stored) != H5T_INTEGER || H5Tget_class(mem) != H5T_INTEGER) return false;
  const H5T_sign_t sign = H5Tget_sign(stored);
  if (sign == H5T_SGN_ERROR || sign != H5Tget_sign(mem)) return false;
  if (H5Tget_order(stored) != H5T_ORDER_LE || H5Tget_order(mem) != H5T_ORDER_LE) return false;
  // Precision and offset as a plain integer of its size (no padding bits).
  for (hid_t t : {stored, mem}) {
    if (H5Tget_offset(t) != 0 || H5Tget_precision(t) != 8 * H5Tget_size(t)) return false;
  }
  const std::size_t from = stored_size_, to = mem_size_;
  if (from >= to || to > 8 || (from != 1 && from != 2 && from != 4)) return false;
  widen_ = true;
  widen_signed_ = sign == H5T_SGN_2;
  return true;
}

namespace {

template <class From, class To>
void Widen(const unsigned char* src, std::size_t rows, unsigned char* dst) {
  for (std::size_t i = 0; i < rows; ++i) {
    From v;
    std::memcpy(&v, src + i * sizeof(From), sizeof(From));
    const To w = static_cast<To>(v);
    std::memcpy(dst + i * sizeof(To), &w, sizeof(To));
  }
}

template <class From>
void WidenTo(std::size_t to, bool is_signed, const unsigned char* src, std::size_t rows,
             unsigned char* dst) {
  using S = std::make_signed_t<From>;
  switch (to) {
    case 2:
      is_signed ? Widen<S, std::int16_t>(src, rows, dst)
                : Widen<From, std::uint16_t>(src, rows, dst);
      break;
    case 4:
      is_signed ? Widen<S, std::int32_t>(src, rows, dst)
                : Widen<From, std::uint32_t>(src, rows, dst);
      break;
    default:
      is_signed ? Widen<S, std::int64_t>(src, rows, dst)
                : Widen<From, std::uint64_t>(src, rows, dst);
      break;
  }
}

}  // namespace

std::optional<RowCopyPlan> RowCopyPlan::Build(hid_t stored, hid_t mem) {
  RowCopyPlan plan;
  plan.stored_size_ = H5Tget_size(stored);
  plan.mem_size_ = H5Tget_size(mem);
  if (plan.BuildWidening(stored, mem)) {
    TakeH5ErrorStack();
    return plan;
  }
  std::vector<Run> runs;
  const bool copyable =
      plan.stored_size_ > 0 && plan.mem_size_ > 0 && AddRuns(stored, 0, mem, 0, 0, &runs);
  TakeH5ErrorStack();  // H5Tget_member_index reports the members it lacks
  if (!copyable) return std::nullopt;
  for (const Run& r : runs) {
    // A crafted stored type may place a member outside its compound.
    if (r.bytes == 0 || r.src > plan.stored_size_ || r.bytes > plan.stored_size_ - r.src ||
        r.dst > plan.mem_size_ || r.bytes > plan.mem_size_ - r.dst) {
      return std::nullopt;
    }
    if (!plan.runs_.empty() && plan.runs_.back().src + plan.runs_.back().bytes == r.src &&
        plan.runs_.back().dst + plan.runs_.back().bytes == r.dst) {
      plan.runs_.back().bytes += r.bytes;
    } else {
      plan.runs_.push_back(r);
    }
  }
  return plan;
}

namespace {

// memcpy of a run of a row: fixed-size copies the compiler inlines (a
// library call per member run of every row showed in `tstat check`'s
// profile). Overlapping moves cover sizes between the fixed ones.
inline void CopyRun(unsigned char* dst, const unsigned char* src, std::size_t n) {
  if (n >= 32) {
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) std::memcpy(dst + i, src + i, 32);
    if (i < n) std::memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

}  // namespace

void RowCopyPlan::Apply(const unsigned char* src, std::size_t rows, unsigned char* dst) const {
  if (widen_) {
    switch (stored_size_) {
      case 1:
        WidenTo<std::uint8_t>(mem_size_, widen_signed_, src, rows, dst);
        break;
      case 2:
        WidenTo<std::uint16_t>(mem_size_, widen_signed_, src, rows, dst);
        break;
      default:
        WidenTo<std::uint32_t>(mem_size_, widen_signed_, src, rows, dst);
        break;
    }
    return;
  }
  if (runs_.size() == 1 && runs_[0].bytes == stored_size_ && stored_size_ == mem_size_) {
    std::memcpy(dst, src, rows * stored_size_);  // the same bytes
    return;
  }
  for (std::size_t i = 0; i < rows; ++i) {
    for (const Run& r : runs_) CopyRun(dst + r.dst, src + r.src, r.bytes);
    src += stored_size_;
    dst += mem_size_;
  }
}

}  // namespace tstat::io
