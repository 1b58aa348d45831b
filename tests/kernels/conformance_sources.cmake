# The files of the backend conformance suite (TEST_Ps only, fixture in
# backend_conformance.h). Every backend's test target compiles all of them and
# instantiates BackendConformanceTest once.
set(TSTAT_CONFORMANCE_SOURCES
    ${PROJECT_SOURCE_DIR}/tests/kernels/conformance_stat_set.cc
    ${PROJECT_SOURCE_DIR}/tests/kernels/conformance_histograms.cc
    ${PROJECT_SOURCE_DIR}/tests/kernels/conformance_slices.cc
    ${PROJECT_SOURCE_DIR}/tests/kernels/conformance_batches.cc)
