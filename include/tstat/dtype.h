// Element types tstat understands, with their sizes and names.
//
// Floating types feed the stat set; integer types feed label counts (and the
// stat set, which converts them to double). fp8 follows the OCP FP8 spec:
// e4m3 ("fn": no infinities, NaN = S.1111.111) and e5m2 (IEEE-like).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tstat {

enum class DType : std::uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat64 = 3,
  kFloat8E4M3 = 4,
  kFloat8E5M2 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kUInt8 = 8,
};
inline constexpr int kNumDTypes = 9;

inline constexpr std::size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kFloat8E4M3: return 1;
    case DType::kFloat8E5M2: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
  }
  return 0;
}

// Short names used in configs, files and the CLI: f32 f16 bf16 f64 f8e4m3
// f8e5m2 i32 i64 u8.
inline constexpr const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "f32";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat64: return "f64";
    case DType::kFloat8E4M3: return "f8e4m3";
    case DType::kFloat8E5M2: return "f8e5m2";
    case DType::kInt32: return "i32";
    case DType::kInt64: return "i64";
    case DType::kUInt8: return "u8";
  }
  return "invalid";
}

inline constexpr bool IsValidDType(DType t) {
  return static_cast<unsigned>(t) < static_cast<unsigned>(kNumDTypes);
}
inline constexpr bool IsFloatingDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64 || t == DType::kFloat8E4M3 || t == DType::kFloat8E5M2;
}
inline constexpr bool IsIntegerDType(DType t) {
  return t == DType::kInt32 || t == DType::kInt64 || t == DType::kUInt8;
}

// Parses a short name (also accepts "float32", "float16", "bfloat16",
// "float64", "int32", "int64", "uint8"). Returns false on an unknown name.
inline bool ParseDType(std::string_view s, DType* out) {
  struct Alias { const char* name; DType t; };
  static constexpr Alias kAliases[] = {
      {"f32", DType::kFloat32},     {"float32", DType::kFloat32},
      {"f16", DType::kFloat16},     {"float16", DType::kFloat16},
      {"bf16", DType::kBFloat16},   {"bfloat16", DType::kBFloat16},
      {"f64", DType::kFloat64},     {"float64", DType::kFloat64},
      {"f8e4m3", DType::kFloat8E4M3}, {"f8e5m2", DType::kFloat8E5M2},
      {"i32", DType::kInt32},       {"int32", DType::kInt32},
      {"i64", DType::kInt64},       {"int64", DType::kInt64},
      {"u8", DType::kUInt8},        {"uint8", DType::kUInt8},
  };
  for (const Alias& a : kAliases) {
    if (s == a.name) { *out = a.t; return true; }
  }
  return false;
}

}  // namespace tstat
