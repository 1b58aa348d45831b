// `tstat bench stats`: cases, CPU timing, result checks and the driver loop.
// CUDA timing lives in cuda_bench.cu (or cuda_bench_unavailable.cc), output
// formats in stats_bench_format.cc.
#include "benchmarks/stats_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "benchmarks/bench_timing.h"
#include "benchmarks/read_bandwidth.h"

namespace tstat::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kDefaultRepeats = 5;

// "256MiB", "40MB" or "1234B".
std::string SizeLabel(std::uint64_t bytes) {
  const std::uint64_t mib = 1024 * 1024;
  if (bytes % mib == 0) return std::to_string(bytes / mib) + "MiB";
  if (bytes % 1000000 == 0) return std::to_string(bytes / 1000000) + "MB";
  return std::to_string(bytes) + "B";
}

std::string CaseName(DType dtype, std::uint64_t bytes, std::int64_t tensors, bool delta) {
  return std::string(DTypeName(dtype)) + "_" + SizeLabel(bytes) + "_x" + std::to_string(tensors) +
         (delta ? "_delta" : "");
}

// Chan merge of two tensors' stats (same conventions as TensorStats).
TensorStats MergeStats(const TensorStats& a, const TensorStats& b) {
  // The side with finite values carries min/max/mean/...; both: merge below.
  TensorStats r = a.finite_count > 0 ? a : b;
  r.count = a.count + b.count;
  r.finite_count = a.finite_count + b.finite_count;
  r.nan_count = a.nan_count + b.nan_count;
  r.pos_inf_count = a.pos_inf_count + b.pos_inf_count;
  r.neg_inf_count = a.neg_inf_count + b.neg_inf_count;
  r.zero_count = a.zero_count + b.zero_count;
  r.neg_count = a.neg_count + b.neg_count;
  r.subnormal_count = a.subnormal_count + b.subnormal_count;
  r.band_lo_count = a.band_lo_count + b.band_lo_count;
  r.band_hi_count = a.band_hi_count + b.band_hi_count;
  r.small_count = a.small_count + b.small_count;
  if (a.finite_count == 0 || b.finite_count == 0) return r;
  const double na = static_cast<double>(a.finite_count);
  const double nb = static_cast<double>(b.finite_count);
  const double n = na + nb;
  const double delta = b.mean - a.mean;
  r.min = std::min(a.min, b.min);
  r.max = std::max(a.max, b.max);
  r.sum = a.sum + b.sum;
  r.mean = a.mean + delta * (nb / n);
  r.m2 = a.m2 + b.m2 + delta * delta * (na * nb / n);
  r.l1 = a.l1 + b.l1;
  r.l2 = std::sqrt(a.l2 * a.l2 + b.l2 * b.l2);
  r.amax = std::max(a.amax, b.amax);
  return r;
}

Status CheckResults(const CaseTimings& t, const std::vector<std::int64_t>& split,
                    StatsBenchResult* out) {
  if (t.results.size() != split.size()) {
    return Status::Internal("Reduce returned " + std::to_string(t.results.size()) +
                            " results for " + std::to_string(split.size()) + " requests");
  }
  TensorStats totals;
  ExponentHistogram hist;
  std::uint64_t changed = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    const ReductionResult& r = t.results[i];
    if (!r.status.ok()) return r.status.WithContext("tensor " + std::to_string(i));
    if (r.stats.count != static_cast<std::uint64_t>(split[i])) {
      return Status::Internal("tensor " + std::to_string(i) + ": count " +
                              std::to_string(r.stats.count) + " != " + std::to_string(split[i]));
    }
    if (!r.exponent_histogram) {
      return Status::Internal("tensor " + std::to_string(i) + ": no exponent histogram");
    }
    for (int b = 0; b < kExpHistBins; ++b) hist.counts[b] += r.exponent_histogram->counts[b];
    totals = i == 0 ? r.stats : MergeStats(totals, r.stats);
    if (out->spec.delta) {
      if (!r.delta || r.delta->count != static_cast<std::uint64_t>(split[i])) {
        return Status::Internal("tensor " + std::to_string(i) + ": no delta of every pair");
      }
      changed += r.delta->changed_count;
    }
  }
  if (out->spec.delta && changed != t.changed_pairs) {
    return Status::Internal("delta: " + std::to_string(changed) +
                            " pairs changed, the copy changed " + std::to_string(t.changed_pairs));
  }
  out->totals = totals;
  out->exponent_histogram = hist;
  return Status::OK();
}

Status CheckOptions(const StatsBenchOptions& o) {
  if (o.size_mib && !(*o.size_mib > 0.0)) {
    return Status::InvalidArgument("--size-mib must be positive");
  }
  if (o.tensors && *o.tensors < 1) return Status::InvalidArgument("--tensors must be at least 1");
  if (o.repeats < 0) return Status::InvalidArgument("--repeats must be at least 1");
  if (o.threads < 0) return Status::InvalidArgument("--threads must be >= 0");
  if (o.dtype) {
    const DType t = *o.dtype;
    if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16 &&
        t != DType::kFloat64) {
      return Status::InvalidArgument(std::string("--dtype ") + DTypeName(t) +
                                     " is not benchmarked (valid: f32, f16, bf16, f64)");
    }
  }
  if (o.size_mib && !o.input_path.empty()) {
    return Status::InvalidArgument("--size-mib and --input exclude each other");
  }
  return Status::OK();
}

}  // namespace

std::vector<StatsBenchCase> DefaultCases() {
  const auto elements_of = [](DType t, double mib) {
    return static_cast<std::int64_t>(mib * kMiB) / static_cast<std::int64_t>(DTypeSize(t));
  };
  std::vector<StatsBenchCase> cases;
  cases.push_back({"", DType::kFloat32, elements_of(DType::kFloat32, 256), 1, ""});
  cases.push_back({"", DType::kFloat32, 10000 * 1000, 10000, ""});
  cases.push_back({"", DType::kFloat16, elements_of(DType::kFloat16, 256), 1, ""});
  cases.push_back({"", DType::kBFloat16, elements_of(DType::kBFloat16, 256), 1, ""});
  for (StatsBenchCase& c : cases) {
    c.name = CaseName(c.dtype, static_cast<std::uint64_t>(c.elements) * DTypeSize(c.dtype),
                      c.tensors, false);
  }
  return cases;
}

Summary Summarize(std::vector<double> seconds) {
  Summary s;
  if (seconds.empty()) return s;
  s.best = *std::min_element(seconds.begin(), seconds.end());
  s.median = Median(std::move(seconds));
  return s;
}

std::vector<std::int64_t> SplitElements(std::int64_t n, std::int64_t k) {
  std::vector<std::int64_t> split(static_cast<std::size_t>(k), n / k);
  for (std::int64_t i = 0; i < n % k; ++i) split[static_cast<std::size_t>(i)] += 1;
  return split;
}

Result<HostBuffer> PreviousCopy(const HostBuffer& data, std::uint64_t* changed) {
  TSTAT_ASSIGN_OR_RETURN(HostBuffer copy, HostBuffer::Allocate(data.dtype(), data.elements()));
  std::memcpy(copy.mutable_data(), data.data(), data.bytes());
  auto* bytes = static_cast<unsigned char*>(copy.mutable_data());
  const std::size_t elem = DTypeSize(data.dtype());
  std::uint64_t n = 0;
  for (std::int64_t i = 0; i < data.elements(); i += 2) {
    bytes[static_cast<std::size_t>(i) * elem] ^= 1;  // little-endian: the lowest mantissa bit
    ++n;
  }
  *changed = n;
  return copy;
}

Result<CaseTimings> TimeOnCpu(const HostBuffer& data, const HostBuffer* previous,
                              const std::vector<std::int64_t>& split, int threads, int repeats) {
  CpuBackendOptions backend_options;
  backend_options.threads = threads;
  std::unique_ptr<Backend> backend = CreateCpuBackend(backend_options);
  if (!backend) return Status::Internal("CreateCpuBackend returned null");

  std::vector<ReductionRequest> requests(split.size());
  const auto* base = static_cast<const unsigned char*>(data.data());
  const std::size_t elem = DTypeSize(data.dtype());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    requests[i].tensor = TensorView::Host(base + offset * elem, data.dtype(), split[i]);
    if (previous != nullptr) {
      requests[i].options.delta.previous =
          static_cast<const unsigned char*>(previous->data()) + offset * elem;
      requests[i].options.delta.atol = 0.0;
      requests[i].options.delta.rtol = 0.0;
    }
    offset += split[i];
  }
  const auto read_all = [&] {
    XorReduce(data.data(), data.bytes(), threads);
    if (previous != nullptr) XorReduce(previous->data(), previous->bytes(), threads);
  };

  CaseTimings t;
  t.backend_description = backend->description();
  t.threads = ResolveThreads(threads);
  // Warm-up: starts the OpenMP pools and brings the buffer into the TLB.
  read_all();
  TSTAT_RETURN_IF_ERROR(backend->Reduce(requests, &t.results));
  for (int r = 0; r < repeats; ++r) {
    const double t0 = NowSeconds();
    read_all();
    const double t1 = NowSeconds();
    TSTAT_RETURN_IF_ERROR(backend->Reduce(requests, &t.results));
    const double t2 = NowSeconds();
    t.read_seconds.push_back(t1 - t0);
    t.stats_seconds.push_back(t2 - t1);
  }
  return t;
}

Result<StatsBenchResult> RunCase(const StatsBenchCase& spec, BackendKind backend, int threads,
                                 int repeats) {
  Result<HostBuffer> data = spec.input_path.empty() ? GenerateNormal(spec.dtype, spec.elements)
                                                    : ReadRawFile(spec.input_path, spec.dtype);
  if (!data.ok()) return data.status().WithContext(spec.name);
  StatsBenchResult result;
  result.spec = spec;
  result.spec.elements = data->elements();
  if (result.spec.tensors > result.spec.elements) {
    return Status::InvalidArgument(spec.name + ": --tensors " + std::to_string(spec.tensors) +
                                   " exceeds the element count " +
                                   std::to_string(result.spec.elements));
  }
  const std::vector<std::int64_t> split = SplitElements(result.spec.elements, spec.tensors);
  std::uint64_t changed = 0;
  std::optional<HostBuffer> previous;
  if (spec.delta) {
    Result<HostBuffer> copy = PreviousCopy(*data, &changed);
    if (!copy.ok()) return copy.status().WithContext(spec.name);
    previous = std::move(*copy);
  }
  const HostBuffer* prev = previous ? &*previous : nullptr;
  Result<CaseTimings> timings = backend == BackendKind::kCuda
                                    ? TimeOnCuda(*data, prev, split, repeats)
                                    : TimeOnCpu(*data, prev, split, threads, repeats);
  if (!timings.ok()) return timings.status().WithContext(spec.name);
  timings->changed_pairs = changed;
  TSTAT_RETURN_IF_ERROR(CheckResults(*timings, split, &result).WithContext(spec.name));
  result.backend = backend;
  result.backend_description = timings->backend_description;
  result.threads = timings->threads;
  result.repeats = repeats;
  result.bytes = data->bytes() * (spec.delta ? 2 : 1);
  result.stats_seconds = Summarize(timings->stats_seconds);
  result.read_seconds = Summarize(timings->read_seconds);
  return result;
}

Status RunStatsBench(const StatsBenchOptions& options, std::ostream& out, std::ostream& err) {
  TSTAT_RETURN_IF_ERROR(CheckOptions(options));
  std::ostream& note = options.json ? err : out;
  if (options.backend == BackendKind::kCuda && CudaDeviceCount() == 0) {
    note << "no CUDA device: CUDA throughput not measured"
         << (BuiltWithCuda() ? "" : " (this tstat was built without CUDA)") << "\n";
    return Status::OK();
  }

  std::vector<StatsBenchCase> cases;
  const bool single =
      options.size_mib || options.dtype || options.tensors || !options.input_path.empty();
  if (single) {
    StatsBenchCase c;
    c.dtype = options.dtype.value_or(DType::kFloat32);
    c.tensors = options.tensors.value_or(1);
    c.input_path = options.input_path;
    const std::size_t elem = DTypeSize(c.dtype);
    if (c.input_path.empty()) {
      c.elements = static_cast<std::int64_t>(options.size_mib.value_or(256.0) * kMiB) /
                   static_cast<std::int64_t>(elem);
      if (c.elements < 1) return Status::InvalidArgument("--size-mib is below one element");
      c.name = CaseName(c.dtype, static_cast<std::uint64_t>(c.elements) * elem, c.tensors,
                        options.delta);
    } else {
      c.name = std::string("input_") + DTypeName(c.dtype) + "_x" + std::to_string(c.tensors) +
               (options.delta ? "_delta" : "");
    }
    c.delta = options.delta;
    cases.push_back(c);
  } else {
    cases = DefaultCases();
    for (StatsBenchCase& c : cases) {
      c.delta = options.delta;
      if (c.delta) c.name += "_delta";
    }
  }
  const int repeats = options.repeats > 0 ? options.repeats : kDefaultRepeats;

  std::optional<double> single_gbps;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    TSTAT_ASSIGN_OR_RETURN(StatsBenchResult r,
                           RunCase(cases[i], options.backend, options.threads, repeats));
    if (!single && r.spec.tensors == 1 && r.spec.dtype == DType::kFloat32 && !single_gbps) {
      single_gbps = r.gbps();
    } else if (!single && r.spec.tensors > 1 && single_gbps) {
      r.relative_to_single = r.gbps() / *single_gbps;
    }
    if (options.json) {
      out << FormatJsonLine(r) << "\n";
    } else {
      if (i == 0) out << FormatTableHeader(r);
      out << FormatTableRow(r);
    }
    out.flush();
  }
  return Status::OK();
}

}  // namespace tstat::bench
