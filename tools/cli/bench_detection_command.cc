// `tstat bench detection`: flag parsing only; the matrix is
// tstat::detection::RunDetectionBench (tools/detection/detection_bench.h).
// Compiled only when LibTorch is found.
// Exit codes: 0 every fault found in time by its rule and every healthy run
// clean; 1 a case missed that target, or a run failed; 2 usage errors
// (an --out that exists, an --only that matches nothing, a bad flag).
#include <iostream>
#include <memory>

#include "tools/cli/bench_detection.h"
#include "tools/cli/command.h"
#include "tools/detection/detection_bench.h"

namespace tstat::cli {

CLI::App* AddBenchDetectionCommand(CLI::App* bench, std::function<int()>* run) {
  auto o = std::make_shared<detection::DetectionBenchOptions>();
  CLI::App* app = bench->add_subcommand(
      "detection",
      "The default rules on a matrix of trainings (LibTorch, digits): per injected fault, the "
      "step it manifests and the step its rule fires; per healthy run, its findings");
  app->add_option("--seeds", o->matrix.seeds, "Seeds per configuration")
      ->check(CLI::Range(1, 100))
      ->default_str("3");
  app->add_option("--steps", o->matrix.steps, "Planned TRAIN steps per run")
      ->check(CLI::Range(std::int64_t{50}, std::int64_t{100000}))
      ->default_str("200");
  app->add_option("--eval-every", o->matrix.eval_every, "An EVAL pass after every N TRAIN steps")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}))
      ->default_str("5");
  app->add_flag("--quick", o->matrix.quick,
                "One seed, one configuration per fault, one healthy run per architecture");
  app->add_option("--only", o->matrix.only,
                  "Run only the cases whose name starts with this "
                  "(repeatable), e.g. healthy/ or dead_relu/");
  app->add_option("--out", o->out_dir,
                  "Keep the runs in this new directory (default: a "
                  "temporary one, removed)");
  app->add_option("--dataset", o->dataset, "The digits CSV (gzip); default: python3-sklearn's");
  app->add_flag("--json", o->json, "One JSON object per case, then a summary object");
  app->add_flag("--verbose", o->verbose, "Every finding and manifestation on stderr");
  *run = [o]() {
    bool passed = false;
    const Status s = detection::RunDetectionBench(*o, std::cout, std::cerr, &passed);
    if (!s.ok()) {
      ReportError(s);
      // What the flags asked for cannot be done (an --out that exists, an
      // --only that matches nothing): a usage error.
      const bool usage =
          s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kFailedPrecondition;
      return usage ? kExitUsage : kExitFailure;
    }
    return passed ? kExitOk : kExitFailure;
  };
  return app;
}

}  // namespace tstat::cli
