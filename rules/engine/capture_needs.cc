// Collection names of the rules' capture needs (capture_needs.h).
#include "rules/engine/capture_needs.h"

#include <cstdio>

namespace tstat::rules {
namespace {

std::string Number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string BandTag(double lo, double hi) { return "band_" + Number(lo) + "_" + Number(hi); }

std::string NeedsCollectionName(const CaptureNeeds& n) {
  std::string name = kRulesCollectionPrefix;
  if (n.per_unit) name += "units";
  if (n.label_counts) name += name.size() > 6 ? ".labels" : "labels";
  if (n.delta) name += name.size() > 6 ? ".delta" : "delta";
  if (name.size() == 6) name += "stats";
  if (n.band) name += "." + BandTag(n.band_lo, n.band_hi);
  if (n.modes == CaptureNeeds::AllModes()) {
    name += ".all";
  } else if (n.modes == CaptureNeeds::TrainModes()) {
    name += ".train";
  } else {
    for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
      if (n.modes & CaptureNeeds::ModeBit(m)) {
        std::string lower = ModeName(m);
        for (char& c : lower) c = static_cast<char>(c - 'A' + 'a');
        name += "." + lower;
      }
    }
  }
  if (n.until_step > 0) name += ".until_" + std::to_string(n.until_step);
  return name;
}

bool HasBandCounts(const TensorInfo& t, double lo, double hi) {
  const std::string tag = "." + BandTag(lo, hi) + ".";
  for (const std::string& c : t.collections) {
    if (c.rfind(kRulesCollectionPrefix, 0) == 0 && (c + ".").find(tag) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace tstat::rules
