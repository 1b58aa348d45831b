// Built-in collection settings and collection-name rules.
#include "host/config/builtin_collections.h"

namespace tstat::host {

bool IsBuiltinCollection(std::string_view name) {
  for (const char* b : kBuiltinCollections) {
    if (name == b) return true;
  }
  return false;
}

CollectionConfig BuiltinCollection(std::string_view name) {
  CollectionConfig c;
  c.name = std::string(name);
  if (name == "weights") {
    c.include_regex = {"weight"};
    c.exclude_regex = {"^gradient"};
  } else if (name == "biases") {
    c.include_regex = {"bias"};
    c.exclude_regex = {"^gradient"};
  } else if (name == "gradients") {
    c.include_regex = {"^gradient"};
    // As smdebug: gradients are never saved in EVAL or PREDICT mode.
    for (SaveSchedule* s : {&c.save_config.eval, &c.save_config.predict}) {
      s->save_interval = 0;
      s->end_step = 0;
    }
  } else if (name == "activations") {
    c.include_regex = {"_output(_\\d+)?$", "^activations?/"};
  } else if (name == "inputs") {
    c.include_regex = {"_input(_\\d+)?$", "^inputs?/"};
  } else if (name == "labels") {
    c.include_regex = {"(^|[/_.])labels?($|[/_.])"};
  } else if (name == "losses") {
    c.include_regex = {"[Ll]oss"};
    c.exclude_regex = {"_input(_\\d+)?$"};
  } else if (name == "all") {
    c.include_regex = {""};  // the empty regex matches every name
  }
  return c;
}

Status CheckCollectionName(const std::string& name) {
  if (name.empty() || name.size() > 128) {
    return Status::InvalidArgument("collection names have 1 to 128 characters, got " +
                                   std::to_string(name.size()));
  }
  if (name.rfind("rules.", 0) == 0) {
    return Status::InvalidArgument(
        "collection names starting with \"rules.\" are the in-process "
        "rules' (what they capture), got \"" +
        name + "\"");
  }
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
    if (!ok) {
      return Status::InvalidArgument("invalid collection name \"" + name +
                                     "\" (use letters, digits, '_', '.', '-')");
    }
  }
  return Status::OK();
}

}  // namespace tstat::host
