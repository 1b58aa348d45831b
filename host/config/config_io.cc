// ParseConfigJson, LoadConfigFile and ConfigToJson (tstat/config.h): JSON
// through protobuf's JSON mapping, after the strict schema check.
#include <google/protobuf/util/json_util.h>

#include <cstdlib>
#include <string>

#include "host/config/config_proto.h"
#include "io/h5/posix_file.h"
#include "proto/json_schema_check.h"
#include "tstat/config.h"

namespace tstat {

Result<SessionConfig> ParseConfigJson(std::string_view json) {
  TSTAT_RETURN_IF_ERROR(json::CheckJsonAgainstSchema(json, config::SessionConfig::descriptor()));
  config::SessionConfig proto;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &proto, options);
  if (!parsed.ok()) {
    // The schema check catches these first; this is the backstop.
    return Status::InvalidArgument(std::string(parsed.message()));
  }
  SessionConfig config = host::ConfigFromProto(proto);
  TSTAT_RETURN_IF_ERROR(ValidateConfig(config));
  return config;
}

namespace {
// A session config is a few KiB; anything this large is not one.
constexpr std::uint64_t kMaxConfigFileBytes = 16ull << 20;
}  // namespace

Result<SessionConfig> LoadConfigFile(const std::string& path) {
  std::string file = path;
  if (file.empty()) {
    const char* env = std::getenv("TSTAT_CONFIG");
    if (env == nullptr || *env == '\0') {
      return Status::NotFound("no config file given and TSTAT_CONFIG is not set");
    }
    file = env;
  }
  // Bounded and non-blocking: a FIFO, a device or a directory is refused
  // with the reason, never read.
  // kIoError even for a missing file: kNotFound means "no config given".
  Result<std::string> text = io::ReadRegularFile(file, kMaxConfigFileBytes);
  if (!text.ok()) return Status::IoError("config file " + file + ": " + text.status().message());
  Result<SessionConfig> config = ParseConfigJson(*text);
  if (!config.ok()) return config.status().WithContext("config file " + file);
  return config;
}

std::string ConfigToJson(const SessionConfig& config) {
  config::SessionConfig proto;
  host::ConfigToProto(config, &proto);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  std::string json;
  // Printing a message we built cannot fail; an empty string would say so.
  (void)google::protobuf::util::MessageToJsonString(proto, &json, options);
  return json;
}

}  // namespace tstat
