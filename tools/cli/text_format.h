// Text formatting shared by the CLI subcommands that print run data
// (inspect, dump): safe display of hostile tensor names, JSON and CSV
// quoting, compact and exact numbers, and close-name suggestions.
//
// Tensor names are data: any valid UTF-8 but NUL, including newlines,
// quotes, escape sequences and bidi controls. Printed to a terminal they must
// not move the cursor or hide text, so DisplayName escapes every control
// character; machine formats (JSON, CSV) carry the name verbatim.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tstat::cli {

// `s` with C0/C1 controls and DEL as \n, \t, \r, \e or \xNN, bidi controls
// (U+202A..U+202E, U+2066..U+2069) as \u{NNNN}, and bytes that are not valid
// UTF-8 as \xNN. Everything else (printable ASCII, other UTF-8) is kept.
// With `max_width`, the result is cut to at most that many columns and ends
// in "…" when it was cut (never inside a UTF-8 sequence or an escape).
std::string DisplayName(const std::string& s, std::size_t max_width = std::string::npos);

// Number of terminal columns `s` (valid UTF-8, e.g. DisplayName's output)
// takes: 2 per East Asian wide character or emoji, 0 per combining mark,
// 1 per other code point (an approximation of wcwidth, locale-free).
std::size_t DisplayWidth(const std::string& s);
// `s` padded with spaces to `width` columns (left-aligned, or right-aligned).
std::string PadRight(const std::string& s, std::size_t width);
std::string PadLeft(const std::string& s, std::size_t width);

// A JSON string literal: quotes, backslashes and controls escaped, bytes
// that are not valid UTF-8 replaced by U+FFFD (JSON text must be Unicode).
std::string JsonString(const std::string& s);
// A JSON number; NaN and infinities (not representable) become null.
std::string JsonNumber(double v);

// One RFC 4180 field: quoted (with doubled quotes) when it contains a
// comma, a double quote, CR or LF, or starts or ends with a space.
std::string CsvField(const std::string& s);

// The shortest decimal that reads back as exactly `v` ("nan", "inf", "-inf"
// for non-finite values).
std::string ExactNumber(double v);
// `v` with `digits` significant digits ("%.*g"), "nan"/"inf"/"-inf".
std::string ShortNumber(double v, int digits = 4);
// A count in compact units: 999, 1.2k, 34M, 5.6G.
std::string CompactCount(std::uint64_t n);
// Bytes in binary units: 512 B, 1.5 KiB, 20.0 MiB.
std::string CompactBytes(std::uint64_t n);
// Seconds as a duration in a readable unit: 850 ns, 12.3 us, 4.56 ms, 1.23 s.
std::string CompactSeconds(double s);

// Up to `max` names of `candidates` that look like `wanted`: those containing
// it (ignoring ASCII case) first, then the nearest by edit distance (within
// a third of its length, at least 2), closest first, then those sharing a
// prefix of at least half of it (and at least 4 bytes), longest first.
std::vector<std::string> CloseNames(const std::string& wanted,
                                    const std::vector<std::string>& candidates,
                                    std::size_t max = 5);

}  // namespace tstat::cli
