// Checked wrappers of the HDF5 datatype module (H5T).
//
// CompoundBuilder describes a C++ row struct to HDF5 member by member (name,
// offsetof, member type); the file type of a table is the packed copy of that
// memory type (no padding on disk). Strings are variable-length UTF-8, so any
// name -- "a/b", "..", quotes, newlines, 4 KB -- is stored as data, verbatim.
// Callers hold the HDF5 lock (h5_lock.h).
#pragma once

#include <cstddef>
#include <string>

#include "io/h5_handle.h"
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

// Variable-length UTF-8 string; the memory form is a `char*`.
Result<H5Type> VlenStringType();
// Fixed-length string of `chars` bytes, NUL-padded (unterminated when full);
// the memory form is a char array.
Result<H5Type> FixedStringType(std::size_t chars);
// Variable-length sequence of int64; the memory form is an hvl_t.
Result<H5Type> VlenInt64Type();
// A copy of `type` without padding (the on-disk form of a row struct).
Result<H5Type> PackedCopy(hid_t type);

}  // namespace tstat::io
