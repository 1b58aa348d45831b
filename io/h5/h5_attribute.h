// Checked wrappers of the HDF5 attribute module (H5A): scalar attributes of
// type string (fixed-length UTF-8, as long as the value), int64 and double.
//
// Callers hold the HDF5 lock (h5_lock.h). Errors name the file and attribute;
// a missing or mistyped attribute on read is kCorruption.
#pragma once

#include <cstdint>
#include <string>

#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

Status WriteStringAttribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path);
Status WriteInt64Attribute(hid_t object, const char* name, std::int64_t value,
                           const std::string& path);
Status WriteDoubleAttribute(hid_t object, const char* name, double value, const std::string& path);

// Strings up to kMaxStringAttributeBytes; a variable-length one (segments
// before format_version 3) only with `allow_variable_length`.
inline constexpr std::size_t kMaxStringAttributeBytes = 64 * 1024;
Result<std::string> ReadStringAttribute(hid_t object, const char* name, const std::string& path,
                                        bool allow_variable_length = false);
Result<std::int64_t> ReadInt64Attribute(hid_t object, const char* name, const std::string& path);
Result<double> ReadDoubleAttribute(hid_t object, const char* name, const std::string& path);

}  // namespace tstat::io
