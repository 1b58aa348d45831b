// See h5_attribute.h.
#include "io/h5/h5_attribute.h"

#include <algorithm>
#include <cstring>

#include "io/h5/h5_error.h"
#include "io/h5/h5_type.h"
#include "io/h5/h5_type_check.h"

namespace tstat::io {
namespace {

Status WriteScalar(hid_t object, const char* name, hid_t type, const void* value,
                   const std::string& path) {
  H5Space space(H5Screate(H5S_SCALAR));
  H5Attr attr(space.valid() ? H5Acreate2(object, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT)
                            : -1);
  if (!attr.valid() || H5Awrite(attr.get(), type, value) < 0) {
    return H5Failure(StatusCode::kIoError, path + ": writing attribute '" + name + "' failed");
  }
  return Status::OK();
}

// The scalar attribute `name` and its stored type.
Status OpenScalar(hid_t object, const char* name, const std::string& path, H5Attr* attr,
                  H5Type* stored) {
  *attr = H5Attr(H5Aopen(object, name, H5P_DEFAULT));
  if (!attr->valid()) {
    return H5Failure(StatusCode::kCorruption, path + ": missing attribute '" + name + "'");
  }
  H5Space space(H5Aget_space(attr->get()));
  if (!space.valid() || H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) {
    TakeH5ErrorStack();
    return Status::Corruption(path + ": attribute '" + name + "' is not a scalar");
  }
  *stored = H5Type(H5Aget_type(attr->get()));
  if (!stored->valid()) {
    return H5Failure(StatusCode::kCorruption, path + ": attribute '" + name + "' has no type");
  }
  return Status::OK();
}

// Reads the opened attribute `name` (stored as `stored`) as `type`.
Status ReadOpened(const H5Attr& attr, const H5Type& stored, const char* name, hid_t type,
                  void* value, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(
      CheckReadableAs(stored.get(), type, path + ": attribute '" + std::string(name) + "'"));
  if (H5Aread(attr.get(), type, value) < 0) {
    return H5Failure(StatusCode::kCorruption, path + ": reading attribute '" + name + "' failed");
  }
  return Status::OK();
}

Status ReadScalar(hid_t object, const char* name, hid_t type, void* value,
                  const std::string& path) {
  H5Attr attr;
  H5Type stored;
  TSTAT_RETURN_IF_ERROR(OpenScalar(object, name, path, &attr, &stored));
  return ReadOpened(attr, stored, name, type, value, path);
}

}  // namespace

Status WriteStringAttribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path) {
  if (value.size() > kMaxStringAttributeBytes) {
    return Status::InvalidArgument(path + ": attribute '" + name + "' of " +
                                   std::to_string(value.size()) + " bytes (at most " +
                                   std::to_string(kMaxStringAttributeBytes) + ")");
  }
  // HDF5 strings have at least one byte; "" is stored as one NUL.
  TSTAT_ASSIGN_OR_RETURN(H5Type type, FixedUtf8StringType(std::max<std::size_t>(value.size(), 1)));
  std::string padded = value;
  padded.resize(std::max<std::size_t>(value.size(), 1), '\0');
  return WriteScalar(object, name, type.get(), padded.data(), path);
}

Status WriteInt64Attribute(hid_t object, const char* name, std::int64_t value,
                           const std::string& path) {
  return WriteScalar(object, name, H5T_NATIVE_INT64, &value, path);
}

Status WriteDoubleAttribute(hid_t object, const char* name, double value, const std::string& path) {
  return WriteScalar(object, name, H5T_NATIVE_DOUBLE, &value, path);
}

Result<std::string> ReadStringAttribute(hid_t object, const char* name, const std::string& path,
                                        bool allow_variable_length) {
  const std::string what = path + ": attribute '" + name + "'";
  H5Attr attr;
  H5Type stored;
  TSTAT_RETURN_IF_ERROR(OpenScalar(object, name, path, &attr, &stored));
  if (H5Tget_class(stored.get()) != H5T_STRING) {
    TakeH5ErrorStack();
    return Status::Corruption(what + " is not a string");
  }
  if (H5Tis_variable_str(stored.get()) > 0) {
    if (!allow_variable_length) {
      return Status::Corruption(what +
                                " is a variable-length string (format_version 3 stores "
                                "none; libhdf5 reads them from the global heap unchecked)");
    }
    TSTAT_ASSIGN_OR_RETURN(H5Type type, VlenStringType());
    char* pointer = nullptr;
    TSTAT_RETURN_IF_ERROR(ReadOpened(attr, stored, name, type.get(), &pointer, path));
    std::string value = pointer ? pointer : "";
    H5Space space(H5Screate(H5S_SCALAR));
    H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, &pointer);
    return value;
  }
  const std::size_t chars = H5Tget_size(stored.get());
  if (chars == 0 || chars > kMaxStringAttributeBytes) {
    TakeH5ErrorStack();
    return Status::Corruption(what + " is a string of " + std::to_string(chars) +
                              " bytes (at most " + std::to_string(kMaxStringAttributeBytes) +
                              " are read)");
  }
  TSTAT_ASSIGN_OR_RETURN(H5Type type, FixedStringTypeLike(stored.get(), chars));
  std::string value(chars, '\0');
  TSTAT_RETURN_IF_ERROR(ReadOpened(attr, stored, name, type.get(), value.data(), path));
  value.resize(strnlen(value.data(), chars));
  return value;
}

Result<std::int64_t> ReadInt64Attribute(hid_t object, const char* name, const std::string& path) {
  std::int64_t value = 0;
  TSTAT_RETURN_IF_ERROR(ReadScalar(object, name, H5T_NATIVE_INT64, &value, path));
  return value;
}

Result<double> ReadDoubleAttribute(hid_t object, const char* name, const std::string& path) {
  double value = 0;
  TSTAT_RETURN_IF_ERROR(ReadScalar(object, name, H5T_NATIVE_DOUBLE, &value, path));
  return value;
}

}  // namespace tstat::io
