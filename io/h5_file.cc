// See h5_file.h.
#include "io/h5_file.h"

#include <sys/mman.h>

#include <algorithm>
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

// The core driver's file-image callbacks on CoreFileMemory (udata). Only
// FILE_RESIZE (realloc) and FILE_CLOSE (free) happen for a file created
// without an initial image; the others are implemented for completeness.
struct CoreFileMemoryCallbacks {
  static CoreFileMemory* Of(void* udata) { return static_cast<CoreFileMemory*>(udata); }
  // Anonymous mappings in 2 MiB steps, with transparent huge pages asked
  // for: the driver zero-fills every byte it grows by and HDF5 then copies
  // the raw snapshots in, so 4 KiB page faults would cost as much as the
  // copies themselves.
  static void* Resize(CoreFileMemory* m, std::size_t size) {
    constexpr std::size_t kStep = 2u << 20;
    const std::size_t want = (std::max<std::size_t>(size, 1) + kStep - 1) / kStep * kStep;
    void* p = m->bytes_;
    if (p == nullptr) {
      p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    } else if (want != m->mapped_) {
      p = ::mremap(p, m->mapped_, want, MREMAP_MAYMOVE);
    }
    if (p == MAP_FAILED) return nullptr;
    if (want != m->mapped_) ::madvise(p, want, MADV_HUGEPAGE);  // best effort
    m->bytes_ = p;
    m->mapped_ = want;
    m->size_ = size;
    return p;
  }
  static void* Malloc(size_t size, H5FD_file_image_op_t, void* udata) {
    CoreFileMemory* m = Of(udata);
    if (m->bytes_ != nullptr) return nullptr;  // one image per file
    return Resize(m, size);
  }
  static void* Memcpy(void* dest, const void* src, size_t size, H5FD_file_image_op_t, void*) {
    return std::memcpy(dest, src, size);
  }
  static void* Realloc(void* ptr, size_t size, H5FD_file_image_op_t, void* udata) {
    CoreFileMemory* m = Of(udata);
    if (ptr != m->bytes_) return nullptr;
    return Resize(m, size);
  }
  static herr_t Free(void* ptr, H5FD_file_image_op_t op, void* udata) {
    CoreFileMemory* m = Of(udata);
    if (ptr == m->bytes_ && op == H5FD_FILE_IMAGE_OP_FILE_CLOSE) {
      m->closed_ = true;  // kept: the complete file
      return 0;
    }
    if (ptr != m->bytes_) return -1;  // not ours
    m->Release();
    return 0;
  }
  // The fapl is copied when the file is created; every copy points at the
  // same CoreFileMemory, which the caller owns.
  static void* CopyUdata(void* udata) { return udata; }
  static herr_t FreeUdata(void*) { return 0; }
};

void CoreFileMemory::Release() {
  if (bytes_ != nullptr) ::munmap(bytes_, mapped_);
  bytes_ = nullptr;
  mapped_ = 0;
  size_ = 0;
}

CoreFileMemory::~CoreFileMemory() { Release(); }

Result<H5File> CreateInMemoryH5File(const std::string& path, std::size_t user_block,
                                    CoreFileMemory* memory) {
  TSTAT_ASSIGN_OR_RETURN(H5Plist fapl, MakeFileAccess(path, true));
  H5FD_file_image_callbacks_t callbacks = {
      &CoreFileMemoryCallbacks::Malloc,   &CoreFileMemoryCallbacks::Memcpy,
      &CoreFileMemoryCallbacks::Realloc,  &CoreFileMemoryCallbacks::Free,
      &CoreFileMemoryCallbacks::CopyUdata, &CoreFileMemoryCallbacks::FreeUdata, memory};
  H5Plist fcpl(H5Pcreate(H5P_FILE_CREATE));
  if (!fcpl.valid() || H5Pset_file_image_callbacks(fapl.get(), &callbacks) < 0 ||
      (user_block > 0 && H5Pset_userblock(fcpl.get(), user_block) < 0)) {
    return H5Failure(StatusCode::kInternal, path + ": cannot build the file property lists");
  }
  H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
  if (!file.valid()) return H5Failure(StatusCode::kIoError, path + ": cannot create HDF5 file");
  return file;
}

Result<std::size_t> FlushedH5FileSize(hid_t file, std::size_t user_block,
                                      const std::string& name) {
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) {
    return H5Failure(StatusCode::kIoError, name + ": cannot flush the file");
  }
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  if (size < 0) return H5Failure(StatusCode::kIoError, name + ": cannot size the file image");
  // HDF5 1.10 sizes the image from the base address (the superblock), not
  // from byte 0: the user block comes on top (the superblock's end-of-file
  // address says so too). tests/io/raw_compression_test.cc opens the result.
  return static_cast<std::size_t>(size) + user_block;
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
