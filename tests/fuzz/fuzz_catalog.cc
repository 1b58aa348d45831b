// Fuzz target: the worker catalog (io/format/segment_catalog.h) as a Trial
// reads it. The input is decoded twice: as catalog bytes (frame headers,
// CRCs), and as the payload of one frame given a valid header and CRC, which
// a fuzzer could not forge, so that mutations reach the payload's parser and
// the checks the reader then makes of the rows (ValidateSegmentTables).
#include <libdeflate.h>

#include <cstring>
#include <string>
#include <unordered_set>

#include "io/format/segment_catalog.h"
#include "io/read/segment_reader.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

void Check(const tstat::io::CatalogFrames& frames) {
  std::unordered_set<std::uint32_t> ids;
  for (const tstat::io::CatalogEntry& e : frames.entries) {
    if (e.has_registry) {
      ids.clear();
      for (const tstat::TensorInfo& t : e.tensors) ids.insert(t.id);
    }
    (void)tstat::io::ValidateSegmentTables(
        e.tables, [&ids](std::uint32_t id) { return ids.count(id) != 0; }, "catalog");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Check(tstat::io::DecodeCatalogFrames(data, size));
  if (size > tstat::io::kMaxCatalogFrameBytes) return 0;
  std::string framed = "TSCF";
  const auto length = static_cast<std::uint32_t>(size);
  const auto crc = static_cast<std::uint32_t>(libdeflate_crc32(0, data, size));
  framed.append(reinterpret_cast<const char*>(&length), 4);
  framed.append(reinterpret_cast<const char*>(&crc), 4);
  framed.append(reinterpret_cast<const char*>(data), size);
  Check(tstat::io::DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(framed.data()),
                                       framed.size()));
  return 0;
}
