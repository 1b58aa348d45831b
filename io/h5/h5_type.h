// Checked wrappers of the HDF5 datatype module (H5T).
//
// CompoundBuilder describes a C++ row struct to HDF5 member by member (name,
// offsetof, member type); the file type of a table is the packed copy of that
// memory type (no padding on disk). Strings are fixed-length and NUL-padded:
// a name -- "a/b", "..", quotes, newlines, 1 KB -- is stored as data,
// verbatim, in a member as wide as the longest one of its table. Segments
// hold no variable-length data (format_version 3): libhdf5 reads those from
// its global heap without checking what a crafted file puts there.
// Callers hold the HDF5 lock (h5_lock.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

class CompoundBuilder {
 public:
  // `size`: sizeof the row struct.
  explicit CompoundBuilder(std::size_t size);
  // Adds member `name` of `type` at byte `offset`. Errors are kept and
  // reported by Build().
  CompoundBuilder& Add(const char* name, std::size_t offset, hid_t type);
  Result<H5Type> Build();

 private:
  H5Type type_;
  bool failed_ = false;
  std::string failed_member_;
};

// Variable-length UTF-8 string; the memory form is a `char*`. Only for
// reading legacy segments (format_version 1 and 2).
Result<H5Type> VlenStringType();
// Fixed-length string of `chars` bytes (at least 1), NUL-padded
// (unterminated when full); the memory form is a char array.
Result<H5Type> FixedStringType(std::size_t chars);
// The same, declared UTF-8 (h5dump and h5py show the character set).
Result<H5Type> FixedUtf8StringType(std::size_t chars);
// A fixed-length string of `chars` bytes in the character set of string type
// `stored` (HDF5 converts between widths, not between character sets).
Result<H5Type> FixedStringTypeLike(hid_t stored, std::size_t chars);
// Variable-length sequence of int64; the memory form is an hvl_t.
Result<H5Type> VlenInt64Type();
// A copy of `type` without padding (the on-disk form of a row struct).
Result<H5Type> PackedCopy(hid_t type);
// The packed copy of compound `type` in which each string member named in
// `widths` is `width` bytes wide instead (a memory row holds the longest
// string allowed; the file holds the longest one written).
struct StringWidth {
  const char* member;
  std::size_t width;
};
Result<H5Type> PackedCopyWithStringWidths(hid_t type, const std::vector<StringWidth>& widths);

}  // namespace tstat::io
