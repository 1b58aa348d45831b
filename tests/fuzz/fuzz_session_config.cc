// Fuzz target: the session config (JSON), parsed and validated as
// Session::Create and `tstat check --config` do.
#include "tests/fuzz/fuzz_target.h"
#include "tstat/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tstat::Result<tstat::SessionConfig> config =
      tstat::ParseConfigJson(tstat::fuzz::AsText(data, size));
  if (config.ok()) (void)tstat::ValidateConfig(*config);
  return 0;
}
