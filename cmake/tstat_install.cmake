# Installs libtstat.so, the public headers and the CMake package, all in the
# install component `tstat`:
#   <prefix>/lib/libtstat.so*, <prefix>/include/tstat/*.h,
#   <prefix>/lib/cmake/tstat/tstat{Config,ConfigVersion,Targets}.cmake
# Consumers: find_package(tstat) and link tstat::tstat.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TSTAT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tstat)

install(TARGETS tstat_shared EXPORT tstatTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT tstat
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT tstat
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tstat
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tstat
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT tstat
  FILES_MATCHING PATTERN "*.h")
install(EXPORT tstatTargets NAMESPACE tstat:: FILE tstatTargets.cmake
  DESTINATION ${TSTAT_INSTALL_CMAKEDIR} COMPONENT tstat)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tstatConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/tstatConfig.cmake
  INSTALL_DESTINATION ${TSTAT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/tstatConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/tstatConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/tstatConfigVersion.cmake
  DESTINATION ${TSTAT_INSTALL_CMAKEDIR} COMPONENT tstat)
