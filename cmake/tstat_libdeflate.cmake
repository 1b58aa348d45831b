# Finds libdeflate and defines the imported target tstat::libdeflate.
#
# libdeflate (Debian: libdeflate-dev) is the writer's CRC-32 and DEFLATE
# codec: several times faster than zlib for whole buffers and byte-for-byte
# compatible with zlib's formats, so files stay readable by h5py and zlib.
# Debian 12's package has no CMake package file: a plain header/library
# search. Safe to include twice.
if(TARGET tstat::libdeflate)
  return()
endif()

find_path(TSTAT_LIBDEFLATE_INCLUDE_DIR libdeflate.h)
find_library(TSTAT_LIBDEFLATE_LIBRARY NAMES deflate)
if(NOT TSTAT_LIBDEFLATE_INCLUDE_DIR OR NOT TSTAT_LIBDEFLATE_LIBRARY)
  message(FATAL_ERROR "tstat: libdeflate not found (Debian: apt-get install libdeflate-dev)")
endif()
add_library(tstat::libdeflate UNKNOWN IMPORTED GLOBAL)
set_target_properties(tstat::libdeflate PROPERTIES
  IMPORTED_LOCATION "${TSTAT_LIBDEFLATE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TSTAT_LIBDEFLATE_INCLUDE_DIR}")
