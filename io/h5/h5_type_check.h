// CheckReadableAs: may data stored with one HDF5 datatype be read into
// another without trusting anything unchecked? Run before every read of a
// segment (datasets and attributes), because a crafted file whose types
// differ from the format's (a fixed-length string where a variable-length
// one belongs, a string member where a number belongs, a huge or deeply
// nested compound) can make HDF5's conversion misbehave instead of failing.
//
// Accepted: numbers (integer or float) as numbers; strings of the same kind
// (variable-length or fixed); variable-length sequences and arrays (of the
// same shape) of compatible elements; compounds member by member, by name
// (a member the file lacks reads as zero, one the memory type lacks is
// ignored, unless it holds variable-length data; every stored member must
// lie inside its compound); any other
// class only when the types are equal. Stored elements
// larger than 1 MiB and nesting deeper than 8 levels are refused.
// Callers hold the HDF5 lock (h5_lock.h).
#pragma once

#include <string>

#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

// Whether `type` holds variable-length data (a sequence or a string) at any
// depth; a type HDF5 cannot describe, or nested past 8 levels, counts as yes.
bool HasVariableLengthParts(hid_t type);

// OK, or kCorruption "<what>: stored as <class>, not readable as <class>".
Status CheckReadableAs(hid_t stored, hid_t wanted, const std::string& what);

}  // namespace tstat::io
