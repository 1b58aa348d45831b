// The demo's dataset: the handwritten digits that Debian's python3-sklearn
// ships (sklearn/datasets/data/digits.csv.gz: 1,797 rows of 64 pixel values
// 0..16 of an 8x8 image, then the label 0..9), read with zlib. When the file
// is missing or unreadable, a deterministic synthetic stand-in of the same
// shape is made instead and `note` says why.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tstat/status.h"

namespace tstat::demo {

inline constexpr int kDigitPixels = 64;
inline constexpr int kDigitClasses = 10;
inline constexpr const char* kDigitsCsvPath =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

struct Dataset {
  std::vector<float> pixels;         // rows x 64, scaled to [0, 1]
  std::vector<std::int64_t> labels;  // rows, in [0, 10)
  std::string source;                // what the data is, for the report
  std::string note;                  // why the fallback was used ("" when real)
  std::int64_t rows() const { return static_cast<std::int64_t>(labels.size()); }
};

// Parses the digits CSV (gzip or plain). kNotFound when the file does not
// exist, kCorruption naming the line when a row is malformed.
Result<Dataset> LoadDigitsCsv(const std::string& path);

// `rows` synthetic digits: ten fixed random prototype images (from `seed`)
// plus per-sample noise, labels cycling through the classes.
Dataset SyntheticDigits(std::int64_t rows, std::uint64_t seed);

// LoadDigitsCsv(path), or SyntheticDigits(1797, 0) with `note` set.
Dataset LoadDigitsOrSynthetic(const std::string& path = kDigitsCsvPath);

}  // namespace tstat::demo
