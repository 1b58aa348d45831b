// RAII ownership of HDF5 identifiers.
//
// H5Handle<Close> owns one hid_t and releases it with `Close` when it goes
// out of scope (errors on that path are ignored: it is the cleanup path). Code
// that must know whether a close succeeded -- closing a file flushes it -- calls
// the checked CloseFile() of h5_file.h instead. Handles are move-only.
// Thread safety: destroy handles with the HDF5 lock held (h5_lock.h).
#pragma once

#include <hdf5.h>

#include <utility>

namespace tstat::io {

template <herr_t (*CloseFn)(hid_t)>
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  ~H5Handle() { Reset(); }
  H5Handle(H5Handle&& other) noexcept : id_(std::exchange(other.id_, -1)) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = std::exchange(other.id_, -1);
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Gives up ownership (the caller closes it).
  hid_t release() { return std::exchange(id_, -1); }
  void Reset() {
    if (id_ >= 0) CloseFn(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
};

using H5File = H5Handle<H5Fclose>;
using H5Group = H5Handle<H5Gclose>;
using H5DataSet = H5Handle<H5Dclose>;
using H5Space = H5Handle<H5Sclose>;
using H5Type = H5Handle<H5Tclose>;
using H5Plist = H5Handle<H5Pclose>;
using H5Attr = H5Handle<H5Aclose>;

}  // namespace tstat::io
