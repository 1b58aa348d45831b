// Conversion between tstat::SessionConfig (config.h) and its protobuf schema
// tstat.config.SessionConfig (proto/tstat_config.proto). Lossless both ways
// for every valid config. Thread safety: pure functions.
#pragma once

#include "tstat/config.h"
#include "tstat_config.pb.h"

namespace tstat::host {

void ConfigToProto(const SessionConfig& in, config::SessionConfig* out);
SessionConfig ConfigFromProto(const config::SessionConfig& in);

}  // namespace tstat::host
