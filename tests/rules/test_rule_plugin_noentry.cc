// A shared library without the plugin entry point (a wrong --plugin path
// must be a clear error, not a crash).
extern "C" __attribute__((visibility("default"))) int not_a_tstat_plugin() { return 1; }
