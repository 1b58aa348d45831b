// Reads the digits CSV through zlib's gz* API (which reads plain files too).
#include "tools/demo/digits_dataset.h"

#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace tstat::demo {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Parses one "v0,...,v63,label" line into `data`.
Status ParseRow(const char* line, std::int64_t line_no, Dataset* data) {
  const char* p = line;
  for (int i = 0; i <= kDigitPixels; ++i) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(p, &end, 10);
    const char want = i < kDigitPixels ? ',' : '\0';
    const bool at_end = *end == '\0' || *end == '\n' || *end == '\r';
    if (end == p || errno != 0 || (want == ',' ? *end != ',' : !at_end)) {
      return Status::Corruption("digits line " + std::to_string(line_no) + ": field " +
                                std::to_string(i + 1) + " is not an integer followed by " +
                                (want == ',' ? "','" : "the end of the line"));
    }
    if (i < kDigitPixels) {
      if (v < 0 || v > 16) {
        return Status::Corruption("digits line " + std::to_string(line_no) + ": pixel " +
                                  std::to_string(i) + " = " + std::to_string(v) +
                                  " is outside 0..16");
      }
      data->pixels.push_back(static_cast<float>(v) / 16.0f);
    } else {
      if (v < 0 || v >= kDigitClasses) {
        return Status::Corruption("digits line " + std::to_string(line_no) + ": label " +
                                  std::to_string(v) + " is outside 0..9");
      }
      data->labels.push_back(v);
    }
    p = end + 1;
  }
  return Status::OK();
}

// SplitMix64: a small deterministic generator, independent of libtorch.
std::uint64_t NextRandom(std::uint64_t* state) {
  std::uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
float Uniform01(std::uint64_t* state) {
  return static_cast<float>(NextRandom(state) >> 40) / static_cast<float>(1ull << 24);
}

}  // namespace

Result<Dataset> LoadDigitsCsv(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound("the digits dataset " + path +
                            " does not exist (Debian package python3-sklearn)");
  }
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) return Status::IoError("cannot open " + path + ": " + std::strerror(errno));
  Dataset data;
  data.source = "digits (" + path + ")";
  char line[1024];
  std::int64_t line_no = 0;
  while (gzgets(file.get(), line, sizeof(line)) != nullptr) {
    ++line_no;
    if (line[0] == '\n' || line[0] == '\0') continue;
    if (Status s = ParseRow(line, line_no, &data); !s.ok()) return s;
  }
  int err = Z_OK;
  const char* message = gzerror(file.get(), &err);
  if (err != Z_OK && err != Z_STREAM_END) {
    return Status::Corruption("reading " + path + ": " + message);
  }
  if (data.labels.empty()) return Status::Corruption(path + " holds no rows");
  return data;
}

Dataset SyntheticDigits(std::int64_t rows, std::uint64_t seed) {
  std::uint64_t state = seed;
  std::vector<float> prototypes(kDigitClasses * kDigitPixels);
  // Sparse strokes: about a third of the pixels of each prototype are ink.
  for (float& v : prototypes) v = Uniform01(&state) < 0.35f ? 0.5f + 0.5f * Uniform01(&state) : 0.0f;
  Dataset data;
  data.source = "synthetic digits (" + std::to_string(rows) + " rows, seed " +
                std::to_string(seed) + ")";
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t label = r % kDigitClasses;
    for (int i = 0; i < kDigitPixels; ++i) {
      const float noisy = prototypes[label * kDigitPixels + i] + 0.3f * (Uniform01(&state) - 0.5f);
      data.pixels.push_back(noisy < 0.0f ? 0.0f : (noisy > 1.0f ? 1.0f : noisy));
    }
    data.labels.push_back(label);
  }
  return data;
}

Dataset LoadDigitsOrSynthetic(const std::string& path) {
  Result<Dataset> real = LoadDigitsCsv(path);
  if (real.ok()) return std::move(real).value();
  Dataset fallback = SyntheticDigits(1797, 0);
  fallback.note = real.status().ToString() + "; using " + fallback.source + " instead";
  return fallback;
}

}  // namespace tstat::demo
