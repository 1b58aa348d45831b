// JsonLite: a small strict JSON (RFC 8259) parser into a plain tree, for the
// schema check of the JSON configs (json_schema_check.h).
//
// Why not google.protobuf.Struct: the check must see every key in order and
// report duplicates and positions, and protobuf's Map is not usable in
// ThreadSanitizer builds against Debian's uninstrumented libprotobuf (its
// iteration crashes there). Limits: nesting depth 64; numbers are kept as
// text and as double. Errors carry line:column.
// Thread safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tstat/status.h"

namespace tstat::json {

struct JsonNode {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0.0;
  std::string text;                                       // a string's value, or a number's text
  std::vector<JsonNode> items;                            // kArray
  std::vector<std::pair<std::string, JsonNode>> members;  // kObject, in order
};

// kInvalidArgument "line L, column C: ..." for malformed input (including a
// key repeated in one object).
Result<JsonNode> ParseJsonLite(std::string_view text);

}  // namespace tstat::json
