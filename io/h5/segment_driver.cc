// See segment_driver.h. The driver follows the HDF5 1.10 virtual file layer:
// HDF5 passes absolute file offsets (its base address, the user block, is
// already added) and tells every write's memory type, which is how raw data
// (H5FD_MEM_DRAW) is told from metadata.
#include "io/h5/segment_driver.h"

#include <hdf5.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "io/h5/h5_error.h"

namespace tstat::io {
namespace {

// What the file access list carries to Open: the store of the file.
struct DriverInfo {
  SegmentStore* store;
};

// HDF5 fills `pub` after Open returns; the rest is ours.
struct DriverFile {
  H5FD_t pub;
  SegmentStore* store;
};

SegmentStore* StoreOf(const H5FD_t* file) {
  return reinterpret_cast<const DriverFile*>(file)->store;
}

void* InfoCopy(const void* info) {
  void* copy = std::malloc(sizeof(DriverInfo));
  if (copy != nullptr) std::memcpy(copy, info, sizeof(DriverInfo));
  return copy;
}
void* InfoGet(H5FD_t* file) {
  const DriverInfo info{StoreOf(file)};
  return InfoCopy(&info);
}
herr_t InfoFree(void* info) {
  std::free(info);
  return 0;
}

H5FD_t* Open(const char*, unsigned, hid_t fapl, haddr_t maxaddr) {
  const auto* info = static_cast<const DriverInfo*>(H5Pget_driver_info(fapl));
  if (info == nullptr || info->store == nullptr || maxaddr == 0 || maxaddr == HADDR_UNDEF) {
    return nullptr;
  }
  auto* file = static_cast<DriverFile*>(std::calloc(1, sizeof(DriverFile)));
  if (file == nullptr) return nullptr;
  file->store = info->store;
  return &file->pub;
}

herr_t Close(H5FD_t* file) {
  std::free(reinterpret_cast<DriverFile*>(file));
  return 0;
}

int Compare(const H5FD_t* a, const H5FD_t* b) {
  const SegmentStore* x = StoreOf(a);
  const SegmentStore* y = StoreOf(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

herr_t Query(const H5FD_t*, unsigned long* flags) {
  // As the core driver: HDF5 gathers metadata and small raw data into blocks,
  // and sieves small contiguous raw reads and writes.
  if (flags != nullptr) {
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA;
  }
  return 0;
}

haddr_t GetEoa(const H5FD_t* file, H5FD_mem_t) { return StoreOf(file)->end_of_allocation(); }

herr_t SetEoa(H5FD_t* file, H5FD_mem_t, haddr_t addr) {
  StoreOf(file)->set_end_of_allocation(addr);
  return 0;
}

haddr_t GetEof(const H5FD_t* file, H5FD_mem_t) { return StoreOf(file)->end_of_file(); }

herr_t Read(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buffer) {
  SegmentStore* store = StoreOf(file);
  if (addr == HADDR_UNDEF || addr + size > store->end_of_allocation()) return -1;
  return store->Read(addr, size, buffer) ? 0 : -1;
}

herr_t Write(H5FD_t* file, H5FD_mem_t type, hid_t, haddr_t addr, size_t size, const void* buffer) {
  SegmentStore* store = StoreOf(file);
  if (addr == HADDR_UNDEF || addr + size > store->end_of_allocation()) return -1;
  return store->Write(type == H5FD_MEM_DRAW, addr, size, buffer) ? 0 : -1;
}

herr_t Flush(H5FD_t*, hid_t, hbool_t) { return 0; }     // Finish() writes and syncs
herr_t Truncate(H5FD_t*, hid_t, hbool_t) { return 0; }  // the length is the final EOA

H5FD_class_t MakeDriverClass() {
  H5FD_class_t c;
  std::memset(&c, 0, sizeof(c));
  c.name = "tstat_segment";
#if H5_VERSION_GE(1, 13, 2)
  // Newer HDF5 versions identify driver classes (only 1.10 is tested here);
  // 520 is in the range left to unregistered drivers.
  c.version = H5FD_CLASS_VERSION;
  c.value = static_cast<H5FD_class_value_t>(520);
#endif
  c.maxaddr = static_cast<haddr_t>(std::numeric_limits<std::int64_t>::max());  // off_t
  c.fc_degree = H5F_CLOSE_WEAK;
  c.fapl_size = sizeof(DriverInfo);
  c.fapl_get = &InfoGet;
  c.fapl_copy = &InfoCopy;
  c.fapl_free = &InfoFree;
  c.open = &Open;
  c.close = &Close;
  c.cmp = &Compare;
  c.query = &Query;
  c.get_eoa = &GetEoa;
  c.set_eoa = &SetEoa;
  c.get_eof = &GetEof;
  c.read = &Read;
  c.write = &Write;
  c.flush = &Flush;
  c.truncate = &Truncate;
  const H5FD_mem_t dichotomy[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
  std::memcpy(c.fl_map, dichotomy, sizeof(dichotomy));
  return c;
}

// The driver's identifier, registered with HDF5 once per process (HDF5's
// driver registry is the one place it lives).
hid_t DriverId() {
  static const H5FD_class_t kClass = MakeDriverClass();
  static const hid_t kId = H5FDregister(&kClass);
  return kId;
}

}  // namespace

Result<H5File> CreateSegmentH5File(SegmentStore* store, std::size_t user_block) {
  const std::string& path = store->path();
  const hid_t driver = DriverId();
  if (driver < 0)
    return H5Failure(StatusCode::kInternal, "cannot register tstat's HDF5 file driver");
  const DriverInfo info{store};
  H5Plist fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Plist fcpl(H5Pcreate(H5P_FILE_CREATE));
  if (!fapl.valid() || !fcpl.valid() || H5Pset_driver(fapl.get(), driver, &info) < 0 ||
      H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0 ||
      (user_block > 0 && H5Pset_userblock(fcpl.get(), user_block) < 0)) {
    return H5Failure(StatusCode::kInternal, path + ": cannot build the file property lists");
  }
  H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
  if (!file.valid()) return H5Failure(StatusCode::kIoError, path + ": cannot create HDF5 file");
  return file;
}

}  // namespace tstat::io
