// Fuzz target: RUN/findings.jsonl as `tstat inspect`, `tstat check` and the
// run-level rules read it (whole file, then each line alone).
#include <string>
#include <string_view>

#include "rules/runtime/findings_log.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tstat::fuzz::ScratchDir() + "/findings.jsonl";
  if (!tstat::fuzz::WriteFileBytes(path, data, size)) return 0;
  (void)tstat::rules::ReadFindingsLog(path);
  std::string_view text = tstat::fuzz::AsText(data, size);
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    (void)tstat::rules::LogLineFromJson(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return 0;
}
