// Walks a JSON document (parsed by json_lite.h) next to the message
// descriptor it should match.
#include "proto/json_schema_check.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "proto/json_lite.h"
#include "proto/quoted_text.h"

namespace tstat::json {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using Kind = JsonNode::Kind;

std::size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Suggestion(const std::string& key, const Descriptor* d) {
  if (key.size() > 64) return "";  // no field name is that long
  std::string best;
  std::size_t best_distance = 4;  // suggest only close names
  for (int i = 0; i < d->field_count(); ++i) {
    const std::string& name = d->field(i)->name();
    const std::size_t dist = EditDistance(key, name);
    if (dist < best_distance) {
      best_distance = dist;
      best = name;
    }
  }
  return best.empty() ? "" : " (did you mean \"" + best + "\"?)";
}

std::string KindName(const JsonNode& v) {
  switch (v.kind) {
    case Kind::kNull:
      return "null";
    case Kind::kNumber:
      return "a number";
    case Kind::kString:
      return "a string";
    case Kind::kBool:
      return "a boolean";
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
  }
  return "nothing";
}

std::string Quoted(const JsonNode& v) {
  std::string shown = v.text.size() > 64 ? v.text.substr(0, 64) + "..." : v.text;
  if (v.kind == Kind::kString) return " \"" + shown + "\"";
  if (v.kind == Kind::kNumber) return " " + shown;
  return "";
}

Status Mistyped(const std::string& path, const char* expected, const JsonNode& v) {
  return Status::InvalidArgument(path + ": expected " + expected + ", got " + KindName(v) +
                                 Quoted(v));
}

bool IntegerInRange(double x, bool is32) {
  if (!std::isfinite(x) || std::floor(x) != x) return false;
  return is32 ? (x >= -2147483648.0 && x <= 2147483647.0)
              : (x >= -9223372036854775808.0 && x < 9223372036854775808.0);
}

Status CheckObject(const JsonNode& obj, const Descriptor* d, const std::string& path);

Status CheckScalar(const JsonNode& v, const FieldDescriptor* f, const std::string& path) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      // google.protobuf.Value (any JSON), Struct (an object), ListValue (an
      // array): free-form values, e.g. rule parameters.
      const std::string& type = f->message_type()->full_name();
      if (type == "google.protobuf.Value") return Status::OK();
      if (type == "google.protobuf.Struct") {
        return v.kind == Kind::kObject ? Status::OK() : Mistyped(path, "an object", v);
      }
      if (type == "google.protobuf.ListValue") {
        return v.kind == Kind::kArray ? Status::OK() : Mistyped(path, "an array", v);
      }
      if (v.kind != Kind::kObject) return Mistyped(path, "an object", v);
      return CheckObject(v, f->message_type(), path);
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (v.kind != Kind::kBool) return Mistyped(path, "true or false", v);
      return Status::OK();
    case FieldDescriptor::CPPTYPE_STRING:
      if (v.kind != Kind::kString) return Mistyped(path, "a string", v);
      return Status::OK();
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      const bool is32 = f->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
                        f->cpp_type() == FieldDescriptor::CPPTYPE_UINT32;
      const char* expected = is32 ? "a 32-bit integer" : "an integer";
      if (v.kind == Kind::kNumber) {
        if (!IntegerInRange(v.number, is32)) {
          if (std::isfinite(v.number) && std::floor(v.number) == v.number) {
            return Status::InvalidArgument(path + ": " + Abbreviated(v.text) +
                                           " is out of the range of " +
                                           (is32 ? "a 32-bit integer" : "a 64-bit integer"));
          }
          return Mistyped(path, expected, v);
        }
        return Status::OK();
      }
      if (v.kind == Kind::kString) {  // proto3 JSON allows "123"
        const std::string& s = v.text;
        char* end = nullptr;
        errno = 0;
        const long long x = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno != 0 ||
            (is32 && (x < -2147483648ll || x > 2147483647ll))) {
          return Mistyped(path, expected, v);
        }
        return Status::OK();
      }
      return Mistyped(path, expected, v);
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      if (v.kind == Kind::kNumber) return Status::OK();
      if (v.kind == Kind::kString) {
        const std::string& s = v.text;
        if (s == "NaN" || s == "Infinity" || s == "-Infinity") return Status::OK();
        char* end = nullptr;
        std::strtod(s.c_str(), &end);
        if (!s.empty() && *end == '\0') return Status::OK();
      }
      return Mistyped(path, "a number", v);
    case FieldDescriptor::CPPTYPE_ENUM:
      if (v.kind == Kind::kString || v.kind == Kind::kNumber) {
        return Status::OK();  // protobuf's parser checks the value itself
      }
      return Mistyped(path, "an enum name", v);
  }
  return Status::OK();
}

Status CheckObject(const JsonNode& obj, const Descriptor* d, const std::string& path) {
  for (const auto& [key, v] : obj.members) {
    const std::string shown_key = Abbreviated(key);
    const std::string field_path = path.empty() ? shown_key : path + "." + shown_key;
    const FieldDescriptor* f = d->FindFieldByName(key);
    if (f == nullptr) f = d->FindFieldByCamelcaseName(key);
    if (f == nullptr) {
      return Status::InvalidArgument(field_path + ": unknown field" + Suggestion(key, d));
    }
    if (v.kind == Kind::kNull) continue;  // null means "not set"
    if (f->is_map()) {  // a JSON object: each value checked against the map's value type
      if (v.kind != Kind::kObject) return Mistyped(field_path, "an object", v);
      const FieldDescriptor* value = f->message_type()->FindFieldByName("value");
      for (const auto& [map_key, item] : v.members) {
        if (item.kind == Kind::kNull && value->message_type() == nullptr) {
          return Mistyped(field_path + "." + map_key, "a value", item);
        }
        TSTAT_RETURN_IF_ERROR(CheckScalar(item, value, field_path + "." + map_key));
      }
      continue;
    }
    if (f->is_repeated()) {
      if (v.kind != Kind::kArray) return Mistyped(field_path, "an array", v);
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        TSTAT_RETURN_IF_ERROR(
            CheckScalar(v.items[i], f, field_path + "[" + std::to_string(i) + "]"));
      }
      continue;
    }
    TSTAT_RETURN_IF_ERROR(CheckScalar(v, f, field_path));
  }
  return Status::OK();
}

}  // namespace

Status CheckJsonAgainstSchema(std::string_view json, const Descriptor* descriptor) {
  Result<JsonNode> root = ParseJsonLite(json);
  if (!root.ok()) return root.status().WithContext("not valid JSON");
  if (root->kind != Kind::kObject) {
    return Status::InvalidArgument("the config must be a JSON object, got " + KindName(*root));
  }
  return CheckObject(*root, descriptor, "");
}

}  // namespace tstat::json
