// See h5_lock.h.
#include "io/h5/h5_lock.h"

#include <hdf5.h>

namespace tstat::io {

std::recursive_mutex& H5Mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

H5Lock::H5Lock() : guard_(H5Mutex()) {
  // The serial library keeps one error-handler setting for the process; turn
  // the automatic stderr printing off once (library code never prints).
  static std::once_flag silenced;
  std::call_once(silenced, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

}  // namespace tstat::io
