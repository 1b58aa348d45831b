// Text a user gave, quoted in an error message: a huge value (a 10 MB name,
// a pasted file) is never echoed back in full.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tstat::json {

inline constexpr std::size_t kMaxQuotedChars = 120;

// `text`, or its first kMaxQuotedChars characters and how long it was.
inline std::string Abbreviated(std::string_view text) {
  if (text.size() <= kMaxQuotedChars) return std::string(text);
  return std::string(text.substr(0, kMaxQuotedChars)) + "... (" + std::to_string(text.size()) +
         " characters)";
}

}  // namespace tstat::json
