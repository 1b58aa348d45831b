// Strict structural check of a JSON config against a protobuf schema, before
// protobuf's own parser sees it.
//
// protobuf's JSON parser names unknown and mistyped fields, but it accepts
// some mistakes silently ("dry_run": "yes" becomes true). This check walks the
// JSON with the message descriptor and reports the first problem with its path
// ("collections[2].stats.histogram_bins: expected an integer, got 1.5"), and
// suggests the closest field name for unknown fields. The first problem in
// document order is reported.
// Thread safety: pure function.
#pragma once

#include <google/protobuf/descriptor.h>

#include <string_view>

#include "tstat/status.h"

namespace tstat::json {

// OK when `json` is an object whose fields all exist in `descriptor` with
// values of the right JSON type (recursively). kInvalidArgument otherwise.
Status CheckJsonAgainstSchema(std::string_view json,
                              const google::protobuf::Descriptor* descriptor);

}  // namespace tstat::json
