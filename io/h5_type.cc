// See h5_type.h.
#include "io/h5_type.h"

#include "io/h5_error.h"

namespace tstat::io {

CompoundBuilder::CompoundBuilder(std::size_t size) : type_(H5Tcreate(H5T_COMPOUND, size)) {
  if (!type_.valid()) {
    failed_ = true;
    failed_member_ = "(create)";
  }
}

CompoundBuilder& CompoundBuilder::Add(const char* name, std::size_t offset, hid_t type) {
  if (!failed_ && (type < 0 || H5Tinsert(type_.get(), name, offset, type) < 0)) {
    failed_ = true;
    failed_member_ = name;
  }
  return *this;
}

Result<H5Type> CompoundBuilder::Build() {
  if (failed_) {
    return H5Failure(StatusCode::kInternal,
                     "building compound type, member '" + failed_member_ + "'");
  }
  return std::move(type_);
}

Result<H5Type> VlenStringType() {
  H5Type type(H5Tcopy(H5T_C_S1));
  if (!type.valid() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    return H5Failure(StatusCode::kInternal, "building the variable-length string type");
  }
  return type;
}

Result<H5Type> FixedStringType(std::size_t chars) {
  H5Type type(H5Tcopy(H5T_C_S1));
  if (!type.valid() || H5Tset_size(type.get(), chars) < 0 ||
      H5Tset_strpad(type.get(), H5T_STR_NULLPAD) < 0) {
    return H5Failure(StatusCode::kInternal,
                     "building the " + std::to_string(chars) + "-byte string type");
  }
  return type;
}

Result<H5Type> VlenInt64Type() {
  H5Type type(H5Tvlen_create(H5T_NATIVE_INT64));
  if (!type.valid()) return H5Failure(StatusCode::kInternal, "building the vlen int64 type");
  return type;
}

Result<H5Type> PackedCopy(hid_t type) {
  H5Type copy(H5Tcopy(type));
  if (!copy.valid() || H5Tpack(copy.get()) < 0) {
    return H5Failure(StatusCode::kInternal, "packing a compound type");
  }
  return copy;
}

}  // namespace tstat::io
