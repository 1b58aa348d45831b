// See text_format.h.
#include "tools/cli/text_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tstat::cli {
namespace {

// Decodes the UTF-8 sequence at s[i]; returns its length (1..4) and the code
// point, or 0 when the bytes there are not valid UTF-8 (overlong forms,
// surrogates and values above U+10FFFF are invalid).
std::size_t DecodeUtf8(const std::string& s, std::size_t i, std::uint32_t* cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  std::size_t len = 0;
  std::uint32_t v = 0, min = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

bool IsBidiControl(std::uint32_t cp) {
  return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// Terminal columns of a printable code point: 0 for combining marks, 2 for
// East Asian wide and fullwidth characters and emoji (the common blocks of
// Unicode's EastAsianWidth W/F), else 1.
std::size_t CodePointWidth(std::uint32_t cp) {
  if ((cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x200B && cp <= 0x200F)) return 0;
  if ((cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF && cp != 0x303F) ||
      (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
      (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
      (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x3FFFD)) {
    return 2;
  }
  return 1;
}

std::string Hex(const char* format, unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string Lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Levenshtein distance, giving up (returning limit + 1) beyond `limit`.
std::size_t EditDistance(const std::string& a, const std::string& b, std::size_t limit) {
  const std::size_t diff = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (diff > limit) return limit + 1;
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    std::size_t row_min = cur[0];
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return limit + 1;
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The display form of the code point (or invalid byte) at s[i]; advances i.
std::string DisplayToken(const std::string& s, std::size_t* i) {
  std::uint32_t cp = 0;
  const std::size_t len = DecodeUtf8(s, *i, &cp);
  if (len == 0) return Hex("\\x%02x", static_cast<unsigned char>(s[(*i)++]));
  const std::size_t at = *i;
  *i += len;
  if (cp == '\n') return "\\n";
  if (cp == '\t') return "\\t";
  if (cp == '\r') return "\\r";
  if (cp == 0x1B) return "\\e";
  if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) return Hex("\\x%02x", cp);
  if (IsBidiControl(cp)) return Hex("\\u{%04x}", cp);
  return s.substr(at, len);
}

}  // namespace

std::string DisplayName(const std::string& s, std::size_t max_width) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) out += DisplayToken(s, &i);
  if (max_width == std::string::npos || DisplayWidth(out) <= max_width) return out;
  if (max_width == 0) return "";
  // Whole tokens up to max_width - 1 columns, then the ellipsis.
  std::string cut;
  std::size_t width = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::string token = DisplayToken(s, &i);
    const std::size_t w = DisplayWidth(token);
    if (width + w > max_width - 1) break;
    cut += token;
    width += w;
  }
  return cut + "\xE2\x80\xA6";  // U+2026
}

std::size_t DisplayWidth(const std::string& s) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    const std::size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {  // not UTF-8: counted as one column per byte
      ++width, ++i;
      continue;
    }
    width += CodePointWidth(cp);
    i += len;
  }
  return width;
}

std::string PadRight(const std::string& s, std::size_t width) {
  const std::size_t w = DisplayWidth(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

std::string PadLeft(const std::string& s, std::size_t width) {
  const std::size_t w = DisplayWidth(s);
  return w >= width ? s : std::string(width - w, ' ') + s;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    const std::size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    if (cp == '"') {
      out += "\\\"";
    } else if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F || IsBidiControl(cp)) {
      out += Hex("\\u%04x", cp);
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  // The shortest text that reads back to v (what ExactNumber finds by trying
  // precisions, at a fraction of the cost: reports hold ~100,000 numbers).
  char buf[40];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string CsvField(const std::string& s) {
  const bool quote = s.find_first_of(",\"\r\n") != std::string::npos ||
                     (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string ExactNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string ShortNumber(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

std::string CompactCount(std::uint64_t n) {
  if (n < 1000) return std::to_string(n);
  static const char* const kUnits[] = {"k", "M", "G", "T", "P", "E"};
  double v = static_cast<double>(n);
  int unit = -1;
  while (v >= 999.5 && unit < 5) {
    v /= 1000.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), v < 9.95 ? "%.1f%s" : "%.0f%s", v, kUnits[unit]);
  return buf;
}

std::string CompactBytes(std::uint64_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int unit = -1;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string CompactSeconds(double s) {
  char buf[32];
  if (!std::isfinite(s)) return ShortNumber(s);
  const double a = std::fabs(s);
  if (a >= 1.0 || a == 0.0) {
    std::snprintf(buf, sizeof(buf), "%.3g s", s);
  } else if (a >= 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.3g ms", s * 1e3);
  } else if (a >= 1e-6) {
    std::snprintf(buf, sizeof(buf), "%.3g us", s * 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g ns", s * 1e9);
  }
  return buf;
}

std::vector<std::string> CloseNames(const std::string& wanted,
                                    const std::vector<std::string>& candidates, std::size_t max) {
  const std::string lw = Lower(wanted);
  const std::size_t limit = std::max<std::size_t>(2, wanted.size() / 3);
  std::vector<std::pair<std::size_t, const std::string*>> scored;  // (rank, name)
  for (const std::string& c : candidates) {
    const std::string lc = Lower(c);
    if (!lw.empty() && lc.find(lw) != std::string::npos) {
      scored.emplace_back(0, &c);
      continue;
    }
    // Distance on lower case, so that "FC1.Weight" suggests "fc1.weight".
    const std::size_t d = EditDistance(lw, lc, limit);
    if (d <= limit) {
      scored.emplace_back(1 + d, &c);
      continue;
    }
    // Hierarchical names: a long shared prefix ("model/block/blok" for
    // "model/block/block3.weight") is close too, after the near misses.
    std::size_t prefix = 0;
    while (prefix < lw.size() && prefix < lc.size() && lw[prefix] == lc[prefix]) ++prefix;
    if (prefix >= std::max<std::size_t>(4, (lw.size() + 1) / 2)) {
      scored.emplace_back(2 + limit + (lw.size() - prefix), &c);
    }
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && out.size() < max; ++i) {
    out.push_back(*scored[i].second);
  }
  return out;
}

}  // namespace tstat::cli
