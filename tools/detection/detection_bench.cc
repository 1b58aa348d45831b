// `tstat bench detection` (detection_bench.h): runs the cases, prints the
// table or JSON lines.
#include "tools/detection/detection_bench.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "tools/cli/text_format.h"
#include "tools/demo/digits_dataset.h"
#include "tools/detection/run_case.h"

namespace tstat::detection {
namespace {

namespace fs = std::filesystem;
using cli::JsonNumber;
using cli::JsonString;
using cli::PadRight;

std::string StepText(std::int64_t step) { return step < 0 ? "-" : std::to_string(step); }

std::string CaseJson(const CaseResult& r) {
  const Case& c = r.spec;
  std::string j = "{\"kind\":\"case\",\"name\":" + JsonString(c.name) +
                  ",\"fault\":" + JsonString(FaultName(c.fault)) +
                  ",\"arch\":" + JsonString(ArchName(c.arch)) +
                  ",\"optimizer\":" + JsonString(OptimizerName(c.optimizer)) +
                  ",\"schedule\":" + JsonString(ScheduleName(c.schedule)) +
                  ",\"seed\":" + std::to_string(c.seed) +
                  ",\"intended_rule\":" + JsonString(IntendedRule(c.fault)) +
                  ",\"fault_step\":" + std::to_string(c.fault_step) +
                  ",\"pretrain_steps\":" + std::to_string(c.pretrain_steps) +
                  ",\"loss_scale\":" + JsonNumber(c.loss_scale) +
                  ",\"accumulate\":" + std::to_string(c.accumulate);
  j += ",\"updates_skipped\":" + std::to_string(r.updates_skipped);
  j += ",\"manifest_step\":" +
       (r.manifest.step < 0 ? std::string("null") : std::to_string(r.manifest.step));
  j += ",\"manifest\":" + JsonString(r.manifest.detail);
  j += ",\"fired_step\":" +
       (r.intended_step < 0 ? std::string("null") : std::to_string(r.intended_step));
  j += ",\"steps_run\":" + std::to_string(r.steps_run) +
       ",\"steps_planned\":" + std::to_string(c.steps) +
       ",\"stopped\":" + (r.stopped ? std::string("true") : "false") +
       ",\"stop_reason\":" + JsonString(r.stop_reason) +
       ",\"first_loss\":" + JsonNumber(r.first_loss) + ",\"last_loss\":" + JsonNumber(r.last_loss) +
       ",\"seconds\":" + JsonNumber(r.seconds);
  j += ",\"oracle_flags\":[";
  for (std::size_t i = 0; i < r.oracle_flags.size(); ++i) {
    j += (i ? "," : "") + JsonString(r.oracle_flags[i]);
  }
  j += "],\"findings\":[";
  for (std::size_t i = 0; i < r.detections.size(); ++i) {
    const Detection& d = r.detections[i];
    j += std::string(i ? "," : "") + "{\"rule\":" + JsonString(d.rule) +
         ",\"severity\":" + JsonString(d.severity) + ",\"tensor\":" + JsonString(d.tensor) +
         ",\"mode\":" + JsonString(d.mode) + ",\"step\":" + std::to_string(d.train_step) +
         ",\"steps\":" + std::to_string(d.steps) + ",\"message\":" + JsonString(d.message) + "}";
  }
  j += "],\"passed\":" + std::string(r.passed ? "true" : "false") +
       ",\"verdict\":" + JsonString(r.verdict) + "}";
  return j;
}

std::string FindingsText(const CaseResult& r, std::size_t max_items) {
  std::string out;
  for (std::size_t i = 0; i < r.detections.size() && i < max_items; ++i) {
    out += (i ? " " : "") + r.detections[i].rule + "@" + std::to_string(r.detections[i].train_step);
  }
  if (r.detections.size() > max_items) {
    out += " (+" + std::to_string(r.detections.size() - max_items) + ")";
  }
  return out.empty() ? "none" : out;
}

void PrintRow(const CaseResult& r, std::ostream& out) {
  const Case& c = r.spec;
  const std::string steps = std::to_string(r.steps_run) + "/" + std::to_string(c.steps);
  if (c.fault == Fault::kNone) {
    out << PadRight(c.name, 44) << PadRight("-", 10) << PadRight("-", 8) << PadRight(steps, 10)
        << PadRight(r.passed ? "ok" : "FAILED", 8) << FindingsText(r, 4) << "\n";
    return;
  }
  out << PadRight(c.name, 44) << PadRight(StepText(r.manifest.step), 10)
      << PadRight(StepText(r.intended_step), 8) << PadRight(steps, 10)
      << PadRight(r.passed ? "ok" : "FAILED", 8) << FindingsText(r, 4) << "\n";
}

}  // namespace

Status RunDetectionBench(const DetectionBenchOptions& options, std::ostream& out, std::ostream& err,
                         bool* all_passed) {
  *all_passed = false;
  const std::vector<Case> cases = MakeMatrix(options.matrix);
  if (cases.empty()) return Status::InvalidArgument("no case matches --only");
  const demo::Dataset data = options.dataset.empty() ? demo::LoadDigitsOrSynthetic()
                                                     : demo::LoadDigitsOrSynthetic(options.dataset);
  if (!data.note.empty()) err << "tstat bench detection: " << data.note << "\n";

  std::error_code ec;
  fs::path root = options.out_dir;
  const bool temporary = root.empty();
  if (temporary) {
    root = fs::temp_directory_path(ec) / ("tstat-detection-" + std::to_string(::getpid()));
  }
  if (fs::exists(root, ec)) {
    return Status::FailedPrecondition(root.string() + " already exists; choose another --out");
  }
  fs::create_directories(root, ec);
  if (ec) return Status::IoError("cannot create " + root.string() + ": " + ec.message());
  // One thread: the same results on every machine; the other core is tstat's.
  torch::set_num_threads(1);

  if (!options.json) {
    out << PadRight("case", 44) << PadRight("manifest", 10) << PadRight("fired", 8)
        << PadRight("steps", 10) << PadRight("result", 8) << "findings (rule@TRAIN step)\n";
  }
  int faults = 0, faults_found = 0, healthy = 0, healthy_clean = 0;
  std::vector<CaseResult> failed;
  std::size_t index = 0;
  for (const Case& c : cases) {
    const fs::path dir = root / ("run" + std::to_string(index++));
    Result<CaseResult> r = RunCase(c, data, dir.string());
    if (!r.ok()) {
      if (temporary) fs::remove_all(root, ec);
      return r.status().WithContext(c.name);
    }
    if (c.fault == Fault::kNone) {
      ++healthy;
      healthy_clean += r->passed ? 1 : 0;
    } else {
      ++faults;
      faults_found += r->passed ? 1 : 0;
    }
    if (options.json) {
      out << CaseJson(*r) << std::endl;
    } else {
      PrintRow(*r, out);
      out.flush();
    }
    if (!r->passed) failed.push_back(*r);
    if (options.verbose) {
      for (const Detection& d : r->detections) {
        err << "  " << c.name << ": " << d.rule << " " << d.mode << " step " << d.train_step << " x"
            << d.steps << " " << d.tensor << ": " << d.message << "\n";
      }
      if (r->manifest.step >= 0)
        err << "  " << c.name << ": manifest: " << r->manifest.detail << "\n";
    }
  }
  if (temporary) fs::remove_all(root, ec);
  *all_passed = failed.empty();
  if (options.json) {
    out << "{\"kind\":\"summary\",\"faults\":" << faults
        << ",\"faults_found_in_time\":" << faults_found << ",\"healthy\":" << healthy
        << ",\"healthy_clean\":" << healthy_clean << ",\"max_delay_steps\":" << kMaxDelaySteps
        << ",\"passed\":" << (failed.empty() ? "true" : "false") << "}" << std::endl;
    return Status::OK();
  }
  out << "\nfaults found by their rule within " << kMaxDelaySteps << " steps: " << faults_found
      << "/" << faults << "; healthy runs without findings: " << healthy_clean << "/" << healthy
      << "\n";
  for (const CaseResult& r : failed) out << "  FAILED " << r.spec.name << ": " << r.verdict << "\n";
  if (!temporary) out << "runs are in " << root.string() << "/run<N> (in case order)\n";
  return Status::OK();
}

}  // namespace tstat::detection
