# ctest script (cmake -P): install tstat (component "tstat") into a temp
# prefix, then configure, build and run tests/host/install_consumer against it
# with find_package(tstat). Variables: BUILD_DIR, CONSUMER_DIR, WORK_DIR,
# GENERATOR, C_COMPILER, CXX_COMPILER.
foreach(v BUILD_DIR CONSUMER_DIR WORK_DIR GENERATOR)
  if(NOT ${v})
    message(FATAL_ERROR "install_test.cmake: ${v} is not set")
  endif()
endforeach()

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${step} failed (${rc})\n${out}\n${err}")
  endif()
  message(STATUS "install test: ${step}: ok\n${out}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component tstat)
foreach(f include/tstat/session.h include/tstat/tstat_c.h lib/cmake/tstat/tstatConfig.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install test: ${prefix}/${f} was not installed")
  endif()
endforeach()
file(GLOB internal ${prefix}/include/*/*.pb.h ${prefix}/include/host ${prefix}/include/kernels)
if(internal)
  message(FATAL_ERROR "install test: internal headers were installed: ${internal}")
endif()

# The public C++ API leaves libtstat.so (TSTAT_EXPORT); the reader's
# internals (tstat::io::) do not.
find_program(NM_PROGRAM nm)
file(GLOB installed_libs ${prefix}/lib*/libtstat.so)
if(NM_PROGRAM AND installed_libs)
  list(GET installed_libs 0 lib)
  execute_process(COMMAND ${NM_PROGRAM} -DC --defined-only ${lib} OUTPUT_VARIABLE symbols
                  RESULT_VARIABLE nm_rc)
  if(nm_rc EQUAL 0)
    foreach(want "tstat::Trial::Open(" "tstat::StatValue(" "tstat::Version()"
                 "tstat::CreateCpuBackend(" "tstat::Session::Create(")
      string(FIND "${symbols}" "${want}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "install test: ${lib} does not export ${want}")
      endif()
    endforeach()
    if(symbols MATCHES "tstat::io::[A-Za-z]")
      message(FATAL_ERROR "install test: ${lib} exports internals: ${CMAKE_MATCH_0}")
    endif()
  endif()
endif()

# The loader as a user's machine may have it: no LD_LIBRARY_PATH and no
# ld.so.cache (which is where /etc/ld.so.conf.d/ puts CUDA's library folder),
# only the system's default folders and the binaries' own run paths.
find_program(READELF_PROGRAM readelf REQUIRED)
set(bare_env ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH --unset=LD_PRELOAD)
function(elf_interpreter binary out_var)
  execute_process(COMMAND ${READELF_PROGRAM} -l ${binary} OUTPUT_VARIABLE headers RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT headers MATCHES "program interpreter: ([^\n]+)\\]")
    message(FATAL_ERROR "install test: readelf -l ${binary} shows no program interpreter")
  endif()
  set(${out_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

# Consumers must link and run where the loader does not know CUDA's folder:
# libtstat.so neither needs nor exports the CUDA runtime, and every library
# it needs resolves without ld.so.cache.
if(installed_libs)
  list(GET installed_libs 0 lib)
  execute_process(COMMAND ${READELF_PROGRAM} -d ${lib} OUTPUT_VARIABLE dynamic)
  if(dynamic MATCHES "NEEDED[^\n]*\\[(libcudart[^\n]*|libcuda\\.so[^\n]*)\\]")
    message(FATAL_ERROR "install test: ${lib} needs ${CMAKE_MATCH_1}; the CUDA runtime must be "
                        "linked statically and the driver opened at run time")
  endif()
  if(symbols MATCHES "\n[0-9a-f]+ [TWDBRVu] (cuda[A-Z][A-Za-z0-9_]*|__cuda[A-Za-z0-9_]*|cuda::[^\n]*)")
    message(FATAL_ERROR "install test: ${lib} exports the CUDA runtime's ${CMAKE_MATCH_1}")
  endif()
  elf_interpreter(${CMAKE_COMMAND} loader)  # a library has none; any program's will do
  execute_process(COMMAND ${bare_env} ${loader} --inhibit-cache --list ${lib}
                  OUTPUT_VARIABLE deps ERROR_VARIABLE deps_err RESULT_VARIABLE list_rc)
  if(NOT list_rc EQUAL 0 OR deps MATCHES "([^\n]*not found)")
    message(FATAL_ERROR "install test: ${lib} does not load without ld.so.cache: "
                        "${CMAKE_MATCH_1}\n${deps}${deps_err}")
  endif()
  message(STATUS "install test: ${lib} loads without ld.so.cache:\n${deps}")
endif()

run("configure the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build
    -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
run("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
elf_interpreter(${WORK_DIR}/build/consumer_cxx loader)
run("run the C++ consumer without ld.so.cache"
    ${bare_env} ${loader} --inhibit-cache ${WORK_DIR}/build/consumer_cxx ${WORK_DIR}/run_cxx)
run("run the C consumer without ld.so.cache"
    ${bare_env} ${loader} --inhibit-cache ${WORK_DIR}/build/consumer_c ${WORK_DIR}/run_c)
file(REMOVE_RECURSE ${WORK_DIR})
