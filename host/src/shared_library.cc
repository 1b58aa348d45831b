// libtstat.so is assembled from the whole tstat_host archive (see
// host/CMakeLists.txt); CMake wants every library to have a source of its own.
// This one defines nothing.
