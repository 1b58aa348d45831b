// `tstat bench capture --device cuda`: output and the subcommand.
#include <cstdio>
#include <string>

#include "benchmarks/bench_json.h"
#include "benchmarks/capture_cuda_bench.h"

namespace tstat::bench {

std::string FormatCudaCaptureJson(const CudaCaptureBenchResult& r) {
  JsonObject o;
  o.Str("case", "capture_cuda_" + std::to_string(r.tensors) + "x" + std::to_string(r.elements) +
                    (r.allocations > 1 ? "_separate" : "") + (r.in_process_rules ? "_rules" : ""));
  o.Int("tensors", r.tensors).Int("elements", r.elements).Str("dtype", "f32").Int("steps", r.steps);
  o.Int("allocations", r.allocations).Bool("in_process_rules", r.in_process_rules);
  o.Num("end_step_s", r.end_step_s).Num("end_step_p90_s", r.end_step_p90_s);
  o.Num("end_step_max_s", r.end_step_max_s).Num("busy_ms", r.busy_ms);
  o.Num("busy_end_step_s", r.busy_end_step_s).Bool("returned_while_busy", r.returned_while_busy);
  o.Int("busy_steps_waited", r.busy_steps_waited).Num("device_step_s", r.device_step_s);
  o.Add("records_written", r.records_written);
  return o.Close();
}

std::string FormatCudaCaptureText(const CudaCaptureBenchResult& r) {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "%lld CUDA tensors x %lld f32 in %lld allocation(s), %d steps each%s:\n"
                "  EndStep host time, idle GPU:   median %.1f us, p90 %.1f us, max %.1f us\n"
                "  EndStep host time, GPU busy:   median %.1f us (a %.0f ms kernel before it)\n"
                "  returned before that kernel ended: %s (%d of %d waited)\n"
                "  device time of a step's reduction: %.1f us\n"
                "  records written: %llu\n",
                static_cast<long long>(r.tensors), static_cast<long long>(r.elements),
                static_cast<long long>(r.allocations), r.steps,
                r.in_process_rules ? " (with the in-process rules)" : "", r.end_step_s * 1e6,
                r.end_step_p90_s * 1e6, r.end_step_max_s * 1e6, r.busy_end_step_s * 1e6, r.busy_ms,
                r.returned_while_busy ? "yes" : "NO", r.busy_steps_waited, r.steps,
                r.device_step_s * 1e6, static_cast<unsigned long long>(r.records_written));
  return buf;
}

Status RunCudaCaptureBench(const CudaCaptureBenchOptions& options, std::ostream& out) {
  TSTAT_ASSIGN_OR_RETURN(CudaCaptureBenchResult r, RunCudaCaptureCase(options));
  out << (options.json ? FormatCudaCaptureJson(r) + "\n" : FormatCudaCaptureText(r));
  if (!r.returned_while_busy) {
    return Status::Internal(std::to_string(r.busy_steps_waited) + " of " + std::to_string(r.steps) +
                            " EndStep calls returned only after the device finished earlier work");
  }
  return Status::OK();
}

}  // namespace tstat::bench
