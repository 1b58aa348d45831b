// See h5_file.h.
#include "io/h5/h5_file.h"

#include "io/h5/h5_error.h"
#include "io/h5/h5_lock.h"

namespace tstat::io {
namespace {

Result<H5Plist> MakeReadAccess(const std::string& path) {
  H5Plist fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl.valid() || H5Pset_fapl_sec2(fapl.get()) < 0 ||
      H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0) {
    return H5Failure(StatusCode::kInternal, path + ": cannot build the file access list");
  }
  return fapl;
}

}  // namespace

Result<H5File> OpenH5FileReadOnly(const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(H5Plist fapl, MakeReadAccess(path));
  H5File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!file.valid()) return H5Failure(StatusCode::kCorruption, path + ": cannot open HDF5 file");
  return file;
}

Status CloseH5File(H5File* file, const std::string& path) {
  if (!file->valid()) return Status::OK();
  hid_t id = file->release();
  // Called once only: after a failed H5Fclose the identifier must not be
  // used again (a second H5Fclose crashes HDF5 1.10.8).
  if (H5Fclose(id) < 0) {
    return H5Failure(StatusCode::kIoError, path + ": closing the HDF5 file failed");
  }
  return Status::OK();
}

std::int64_t OpenH5ObjectCount() {
  H5Lock lock;
  const ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  TakeH5ErrorStack();
  return static_cast<std::int64_t>(n);
}

Result<H5Group> CreateH5Group(hid_t loc, const char* name, const std::string& path) {
  H5Group group(H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!group.valid()) {
    return H5Failure(StatusCode::kIoError, path + ": cannot create group '" + name + "'");
  }
  return group;
}

Result<bool> H5LinkExists(hid_t loc, const char* name, const std::string& path) {
  htri_t exists = H5Lexists(loc, name, H5P_DEFAULT);
  if (exists < 0) {
    return H5Failure(StatusCode::kCorruption, path + ": cannot look up '" + name + "'");
  }
  return exists > 0;
}

}  // namespace tstat::io
