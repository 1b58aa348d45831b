// low_precision_range: would this tensor fit in a low-precision format? From
// the exponent histogram (bin e holds the finite non-zero x with
// floor(log2|x|) == e) and for each format in `formats`, with every value
// first multiplied by `scale` (e.g. a loss scale), the percentage of the
// finite non-zero values that
//   - underflow: |x * scale| < the format's smallest subnormal 2^s (they
//     round to 0 or to that subnormal, losing every significant bit),
//   - are subnormal: |x * scale| < the smallest normal 2^n (reduced
//     precision; includes the underflowing ones),
//   - overflow: |x * scale| >= 2^(emax + 1) (certainly beyond the largest
//     finite value; values in (max finite, 2^(emax+1)), e.g. (65504, 65536)
//     for fp16 or (448, 512) for fp8_e4m3, share the top bin with
//     representable ones and count as in range, though some overflow).
// A bin counts only when all of it is past the boundary: exact for a scale
// that is a power of two, a lower bound otherwise. Fires, per tensor and
// format, at every step where underflow > underflow_percent (default 1),
// overflow > overflow_percent (default 0: any) or subnormal >
// subnormal_percent (default 100: off). Needs the exponent histogram
// (captured by default). Default selection: collections "weights",
// "gradients" and "activations".
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

struct Format {
  const char* name;
  int min_subnormal_exp;  // log2 of the smallest positive subnormal
  int min_normal_exp;     // log2 of the smallest positive normal
  int max_exp;            // exponent of the largest finite value
};
constexpr Format kFormats[] = {
    {"fp16", -24, -14, 15},
    {"bf16", -133, -126, 127},
    {"fp8_e4m3", -9, -6, 8},
    {"fp8_e5m2", -16, -14, 15},
};

struct RangeParams {
  std::vector<Format> formats;
  double scale = 1.0;
  double underflow_percent = 1.0;
  double overflow_percent = 0.0;
  double subnormal_percent = 100.0;
};

// The bins each check of a format counts, fixed by the format and the scale:
// bin e spans [2^e, 2^(e+1)) before scaling, [2^(e+l), 2^(e+1+l)) after
// (l = log2 scale), so "all of the bin past the boundary" holds for a prefix
// (underflow, subnormal) or a suffix (overflow) of the bins.
struct FormatBins {
  int under_end = 0;   // bins [0, under_end) underflow
  int sub_end = 0;     // bins [0, sub_end) are subnormal
  int over_begin = 0;  // bins [over_begin, kExpHistBins) overflow
};

FormatBins BinsOf(const Format& f, double log2_scale) {
  FormatBins b;
  b.over_begin = kExpHistBins;
  for (int bin = 0; bin < kExpHistBins; ++bin) {
    const double e = ExponentHistogram::BinExponent(bin) + log2_scale;
    if (e + 1 <= f.min_subnormal_exp) b.under_end = bin + 1;
    if (e + 1 <= f.min_normal_exp) b.sub_end = bin + 1;
    if (e >= f.max_exp + 1 && b.over_begin == kExpHistBins) b.over_begin = bin;
  }
  return b;
}

class LowPrecisionRangeRule final : public TensorRuleT<LowPrecisionRangeRule> {
 public:
  LowPrecisionRangeRule(const RuleSpec& spec, RangeParams p)
      : TensorRuleT(spec, {"weights", "gradients", "activations"},
                    "the exponent histogram (capture with exponent_histogram)"),
        p_(std::move(p)),
        log2_scale_(std::log2(p_.scale)) {
    // A percentage never exceeds 100, so a check at threshold 100 cannot
    // fire: only the bins of the checks that can ("live") need reading to
    // know that a record fires nothing.
    const bool under_live = p_.underflow_percent < 100;
    const bool sub_live = p_.subnormal_percent < 100;
    const bool over_live = p_.overflow_percent < 100;
    for (const Format& f : p_.formats) {
      bins_.push_back(BinsOf(f, log2_scale_));
      const FormatBins& b = bins_.back();
      if (under_live) low_end_ = std::max(low_end_, b.under_end);
      if (sub_live) low_end_ = std::max(low_end_, b.sub_end);
      if (over_live) high_begin_ = std::min(high_begin_, b.over_begin);
    }
    high_begin_ = std::max(high_begin_, low_end_);
  }

  bool ReadsExponentHistograms() const override { return true; }

  // Check() reads the exponent histogram (and no stats).
  static void Prefetch(const TensorStatsRecord* r) {
    PrefetchRecordBytes(r, offsetof(TensorStatsRecord, exponent_histogram),
                        sizeof(r->exponent_histogram));
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    NoteNeeded(step, info, r.exponent_histogram.has_value());
    if (!r.exponent_histogram) return;
    const ExponentBins& h = *r.exponent_histogram;
    // The usual case: no value in any bin a live check counts, so no check
    // of any format fires (each would compare 0 > threshold >= 0).
    if (h.Sum(0, low_end_) == 0 && h.Sum(high_begin_, kExpHistBins) == 0) return;
    const double total = static_cast<double>(h.total());
    if (total == 0) return;
    for (std::size_t k = 0; k < p_.formats.size(); ++k) {
      const Format& f = p_.formats[k];
      const FormatBins& fb = bins_[k];
      const std::uint64_t under = h.Sum(0, fb.under_end);
      const std::uint64_t sub = h.Sum(0, fb.sub_end);
      const std::uint64_t over = h.Sum(fb.over_begin, kExpHistBins);
      const double u = 100.0 * static_cast<double>(under) / total;
      const double s = 100.0 * static_cast<double>(sub) / total;
      const double o = 100.0 * static_cast<double>(over) / total;
      std::string what;
      auto add = [&what](const std::string& w) { what += (what.empty() ? "" : ", ") + w; };
      if (u > p_.underflow_percent) {
        add(Num(u) + "% would flush to zero (|x| < 2^" + std::to_string(f.min_subnormal_exp) +
            ", underflow_percent " + Num(p_.underflow_percent) + ")");
      }
      if (s > p_.subnormal_percent) {
        add(Num(s) + "% would be subnormal (|x| < 2^" + std::to_string(f.min_normal_exp) +
            ", subnormal_percent " + Num(p_.subnormal_percent) + ")");
      }
      if (o > p_.overflow_percent) {
        add(Num(o) + "% would overflow (|x| >= 2^" + std::to_string(f.max_exp + 1) +
            ", overflow_percent " + Num(p_.overflow_percent) + ")");
      }
      if (what.empty()) continue;
      const std::string fmt = f.name;
      findings->push_back(MakeFinding(
          step, info.name,
          "in " + fmt + (p_.scale != 1.0 ? " at scale " + Num(p_.scale) : "") + ", of the " +
              std::to_string(h.total()) + " nonzero values of " + info.name + ": " + what +
              (o > p_.overflow_percent ? "; lower the (loss) scale or use a wider format"
                                       : "; raise the (loss) scale or keep it in a wider format"),
          {{fmt + "_underflow_percent", u},
           {fmt + "_subnormal_percent", s},
           {fmt + "_overflow_percent", o},
           {"underflow_percent", p_.underflow_percent},
           {"subnormal_percent", p_.subnormal_percent},
           {"overflow_percent", p_.overflow_percent},
           {"scale", p_.scale}}));
    }
  }

 private:
  RangeParams p_;
  double log2_scale_;
  std::vector<FormatBins> bins_;   // of p_.formats
  int low_end_ = 0;                // bins [0, low_end_) and [high_begin_, end) are
  int high_begin_ = kExpHistBins;  // the ones some live check counts
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateLowPrecisionRangeRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  RangeParams q;
  const std::vector<std::string> names = p.List("formats", {"fp16", "bf16"});
  q.scale = p.Double("scale", 1.0);
  p.CheckRange("scale", q.scale, 0x1p-1000, 0x1p1000);
  q.underflow_percent = p.Double("underflow_percent", q.underflow_percent);
  p.CheckRange("underflow_percent", q.underflow_percent, 0, 100);
  q.overflow_percent = p.Double("overflow_percent", q.overflow_percent);
  p.CheckRange("overflow_percent", q.overflow_percent, 0, 100);
  q.subnormal_percent = p.Double("subnormal_percent", q.subnormal_percent);
  p.CheckRange("subnormal_percent", q.subnormal_percent, 0, 100);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  std::string known;
  for (const Format& f : kFormats) known += (known.empty() ? "" : ", ") + std::string(f.name);
  for (const std::string& n : names) {
    const Format* found = nullptr;
    for (const Format& f : kFormats) found = n == f.name ? &f : found;
    if (found == nullptr) {
      return Status::InvalidArgument("rule " + label +
                                     ": parameter formats names unknown format \"" + n +
                                     "\" (known: " + known + ")");
    }
    q.formats.push_back(*found);
  }
  if (q.formats.empty()) {
    return Status::InvalidArgument("rule " + label +
                                   ": parameter formats is empty (known: " + known + ")");
  }
  return MakeRule<LowPrecisionRangeRule>(spec, std::move(q));
}

}  // namespace tstat::rules
