// See h5_type.h.
#include "io/h5/h5_type.h"

#include "io/h5/h5_error.h"

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
  if (chars == 0 || !type.valid() || H5Tset_size(type.get(), chars) < 0 ||
      H5Tset_strpad(type.get(), H5T_STR_NULLPAD) < 0) {
    return H5Failure(StatusCode::kInternal,
                     "building the " + std::to_string(chars) + "-byte string type");
  }
  return type;
}

Result<H5Type> FixedUtf8StringType(std::size_t chars) {
  TSTAT_ASSIGN_OR_RETURN(H5Type type, FixedStringType(chars));
  if (H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    return H5Failure(StatusCode::kInternal, "declaring a string type UTF-8");
  }
  return type;
}

Result<H5Type> FixedStringTypeLike(hid_t stored, std::size_t chars) {
  TSTAT_ASSIGN_OR_RETURN(H5Type type, FixedStringType(chars));
  const H5T_cset_t cset = H5Tget_cset(stored);
  if (cset < 0 || H5Tset_cset(type.get(), cset) < 0) {
    return H5Failure(StatusCode::kCorruption, "a string type's character set");
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

Result<H5Type> PackedCopyWithStringWidths(hid_t type, const std::vector<StringWidth>& widths) {
  const int n = H5Tget_nmembers(type);
  if (H5Tget_class(type) != H5T_COMPOUND || n < 0) {
    return H5Failure(StatusCode::kInternal, "resizing the strings of a non-compound type");
  }
  std::vector<H5Type> members;
  std::vector<std::string> names;
  std::size_t size = 0;
  for (int i = 0; i < n; ++i) {
    char* name = H5Tget_member_name(type, static_cast<unsigned>(i));
    if (name == nullptr) return H5Failure(StatusCode::kInternal, "a member without a name");
    names.emplace_back(name);
    H5free_memory(name);
    H5Type member(H5Tget_member_type(type, static_cast<unsigned>(i)));
    for (const StringWidth& w : widths) {
      if (names.back() != w.member) continue;
      member = H5Type(H5Tcopy(member.get()));
      if (!member.valid() || H5Tget_class(member.get()) != H5T_STRING ||
          H5Tset_size(member.get(), w.width) < 0) {
        return H5Failure(StatusCode::kInternal, "resizing string member '" + names.back() + "'");
      }
    }
    if (member.valid() && H5Tget_class(member.get()) == H5T_COMPOUND) {
      TSTAT_ASSIGN_OR_RETURN(member, PackedCopy(member.get()));
    }
    if (!member.valid()) return H5Failure(StatusCode::kInternal, "a member's type");
    size += H5Tget_size(member.get());
    members.push_back(std::move(member));
  }
  H5Type packed(H5Tcreate(H5T_COMPOUND, size));
  std::size_t offset = 0;
  for (std::size_t i = 0; packed.valid() && i < members.size(); ++i) {
    if (H5Tinsert(packed.get(), names[i].c_str(), offset, members[i].get()) < 0) {
      return H5Failure(StatusCode::kInternal, "building member '" + names[i] + "'");
    }
    offset += H5Tget_size(members[i].get());
  }
  if (!packed.valid()) return H5Failure(StatusCode::kInternal, "creating a packed compound");
  return packed;
}

}  // namespace tstat::io
