// Output of `tstat bench stats`: a fixed-width table for people, one JSON
// object per line per case for scripts (benchmarks/stats_numpy.py reads it).
#include <cmath>
#include <cstdio>
#include <string>

#include "benchmarks/bench_json.h"
#include "benchmarks/stats_bench.h"

namespace tstat::bench {
namespace {

const char* BackendName(BackendKind k) { return k == BackendKind::kCuda ? "cuda" : "cpu"; }

std::string Num(double v, const char* fmt = "%.17g") { return JsonNumber(v, fmt); }

std::string StatsJson(const TensorStats& s, const ExponentHistogram& h) {
  JsonObject o;
  o.Add("count", s.count).Add("finite_count", s.finite_count).Add("nan_count", s.nan_count);
  o.Add("pos_inf_count", s.pos_inf_count).Add("neg_inf_count", s.neg_inf_count);
  o.Add("zero_count", s.zero_count).Add("neg_count", s.neg_count);
  o.Add("subnormal_count", s.subnormal_count);
  o.Add("band_lo_count", s.band_lo_count).Add("band_hi_count", s.band_hi_count);
  o.Add("small_count", s.small_count);
  o.Add("min", Num(s.min)).Add("max", Num(s.max)).Add("sum", Num(s.sum));
  o.Add("mean", Num(s.mean)).Add("variance", Num(s.variance()));
  o.Add("l1", Num(s.l1)).Add("l2", Num(s.l2)).Add("amax", Num(s.amax));
  // Sparse histogram keyed by the exponent floor(log2|x|) of each bin.
  JsonObject hist;
  for (int b = 0; b < kExpHistBins; ++b) {
    if (h.counts[b] == 0) continue;
    const std::string key = std::to_string(ExponentHistogram::BinExponent(b));
    hist.Add(key.c_str(), h.counts[b]);
  }
  o.Add("exponent_histogram", hist.Close());
  return o.Close();
}

std::string Fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string FormatTableHeader(const StatsBenchResult& first) {
  char line[256];
  std::string out = "tstat bench stats: backend " + first.backend_description + ", " +
                    std::to_string(first.repeats) +
                    " repeats per case (read loop and Reduce alternate)\n"
                    "GB/s = 1e9 input bytes per second, median (best); ratio = stats / read, "
                    "medians\n";
  std::snprintf(line, sizeof line, "%-18s %5s %11s %8s %18s %18s %7s %12s\n", "case", "dtype",
                "bytes", "tensors", "stats GB/s", "read GB/s", "ratio", "vs 1 tensor");
  return out + line;
}

std::string FormatTableRow(const StatsBenchResult& r) {
  const std::string stats = Fixed(r.gbps(), 2) + " (" + Fixed(r.best_gbps(), 2) + ")";
  const std::string read = Fixed(r.read_gbps(), 2) + " (" + Fixed(r.best_read_gbps(), 2) + ")";
  const std::string rel = r.relative_to_single ? Fixed(*r.relative_to_single, 2) : "";
  char line[256];
  std::snprintf(line, sizeof line, "%-18s %5s %11llu %8lld %18s %18s %7s %12s\n",
                r.spec.name.c_str(), DTypeName(r.spec.dtype),
                static_cast<unsigned long long>(r.bytes),  // NOLINT(runtime/int)
                static_cast<long long>(r.spec.tensors),    // NOLINT(runtime/int)
                stats.c_str(), read.c_str(), Fixed(r.ratio(), 3).c_str(), rel.c_str());
  std::string row = line;
  while (row.size() > 1 && row[row.size() - 2] == ' ') row.erase(row.size() - 2, 1);
  return row;
}

std::string FormatJsonLine(const StatsBenchResult& r) {
  JsonObject o;
  o.Str("case", r.spec.name).Str("backend", BackendName(r.backend));
  o.Str("backend_description", r.backend_description);
  o.Add("threads", std::to_string(r.threads)).Str("dtype", DTypeName(r.spec.dtype));
  o.Add("bytes", r.bytes).Add("elements", static_cast<std::uint64_t>(r.spec.elements));
  o.Add("tensors", static_cast<std::uint64_t>(r.spec.tensors));
  o.Add("repeats", std::to_string(r.repeats));
  o.Add("seconds", Num(r.stats_seconds.median, "%.6g"));
  o.Add("best_seconds", Num(r.stats_seconds.best, "%.6g"));
  o.Add("gbps", Num(r.gbps(), "%.4g")).Add("best_gbps", Num(r.best_gbps(), "%.4g"));
  o.Add("read_seconds", Num(r.read_seconds.median, "%.6g"));
  o.Add("read_bw_gbps", Num(r.read_gbps(), "%.4g"));
  o.Add("best_read_bw_gbps", Num(r.best_read_gbps(), "%.4g"));
  o.Add("ratio_to_read_bw", Num(r.ratio(), "%.4g"));
  if (r.relative_to_single) {
    o.Add("relative_to_single", Num(*r.relative_to_single, "%.4g"));
  }
  o.Add("stats", StatsJson(r.totals, r.exponent_histogram));
  return o.Close();
}

}  // namespace tstat::bench
