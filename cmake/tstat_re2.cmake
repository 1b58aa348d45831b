# Finds RE2 and defines the imported target tstat::re2.
#
# Debian 12's libre2-dev ships a pkg-config file but no CMake package, newer
# RE2 releases ship re2Config.cmake: try the CMake package first, then
# pkg-config, then a plain header/library search. Safe to include twice.
if(TARGET tstat::re2)
  return()
endif()

find_package(re2 CONFIG QUIET GLOBAL)
if(TARGET re2::re2)
  add_library(tstat::re2 INTERFACE IMPORTED GLOBAL)
  set_target_properties(tstat::re2 PROPERTIES INTERFACE_LINK_LIBRARIES re2::re2)
  return()
endif()

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(TSTAT_PC_RE2 QUIET IMPORTED_TARGET GLOBAL re2)
  if(TSTAT_PC_RE2_FOUND)
    add_library(tstat::re2 INTERFACE IMPORTED GLOBAL)
    set_target_properties(tstat::re2 PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::TSTAT_PC_RE2)
    return()
  endif()
endif()

find_path(TSTAT_RE2_INCLUDE_DIR re2/re2.h)
find_library(TSTAT_RE2_LIBRARY NAMES re2)
if(NOT TSTAT_RE2_INCLUDE_DIR OR NOT TSTAT_RE2_LIBRARY)
  message(FATAL_ERROR "tstat: RE2 not found (Debian: apt-get install libre2-dev)")
endif()
find_package(Threads REQUIRED)
add_library(tstat::re2 UNKNOWN IMPORTED GLOBAL)
set_target_properties(tstat::re2 PROPERTIES
  IMPORTED_LOCATION "${TSTAT_RE2_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TSTAT_RE2_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
