// See h5_file.h.
#include "io/h5_file.h"

#include <cstring>

#include "io/h5_error.h"
#include "io/h5_lock.h"

namespace tstat::io {
namespace {

Result<H5Plist> MakeFileAccess(const std::string& path, bool in_memory) {
  H5Plist fapl(H5Pcreate(H5P_FILE_ACCESS));
  // The in-memory file grows in 4 MiB steps (glibc remaps large blocks, so
  // growing does not copy).
  const herr_t driver = in_memory ? H5Pset_fapl_core(fapl.get(), 4 << 20, /*backing_store=*/0)
                                  : H5Pset_fapl_sec2(fapl.get());
  if (!fapl.valid() || driver < 0 || H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0) {
    return H5Failure(StatusCode::kInternal, path + ": cannot build the file access list");
  }
  return fapl;
}

}  // namespace

Result<H5File> CreateInMemoryH5File(const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(H5Plist fapl, MakeFileAccess(path, true));
  H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!file.valid()) return H5Failure(StatusCode::kIoError, path + ": cannot create HDF5 file");
  return file;
}

Status GetH5FileImage(hid_t file, std::size_t prefix_bytes, H5FileImage* image,
                      const std::string& name) {
  // The image is what is in the (in-memory) file now: flush the metadata
  // cache and the superblock's end-of-file address into it first.
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) {
    return H5Failure(StatusCode::kIoError, name + ": cannot flush the file image");
  }
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  if (size < 0) return H5Failure(StatusCode::kIoError, name + ": cannot size the file image");
  image->size = prefix_bytes + static_cast<std::size_t>(size);
  // new[] of a scalar type leaves the bytes uninitialised: only the prefix
  // is zeroed, the rest is overwritten by the copy.
  image->bytes.reset(new std::uint8_t[image->size]);
  std::memset(image->bytes.get(), 0, prefix_bytes);
  if (H5Fget_file_image(file, image->bytes.get() + prefix_bytes, static_cast<std::size_t>(size)) !=
      size) {
    return H5Failure(StatusCode::kIoError, name + ": cannot copy the file image");
  }
  return Status::OK();
}

Result<H5File> OpenH5FileReadOnly(const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(H5Plist fapl, MakeFileAccess(path, false));
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
