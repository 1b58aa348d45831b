// The entry point every fuzz target defines (libFuzzer's), and what the
// targets share. A target must accept any bytes: it may return errors, never
// crash, hang, leak or read out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace tstat::fuzz {

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A private directory for targets that must put the input in a file (one per
// process, removed at exit; libFuzzer runs one input at a time).
const std::string& ScratchDir();
// Writes `size` bytes to `path` (replacing it); false when it cannot.
bool WriteFileBytes(const std::string& path, const std::uint8_t* data, std::size_t size);

}  // namespace tstat::fuzz
