// `tstat bench read`: what reading a run back costs, as the run grows.
//
// Writes a synthetic run of K tensors x S steps through the HDF5 run writer
// (one worker; each record the stat set and an exponent histogram of about
// 20 bins, values that change every step; a loss scalar; a flush every
// `steps_per_segment` steps, as a run flushing every second at that many
// steps per second), or measures an existing run (`run_dir`). Then each
// question a user asks of a run, each in a process of its own so that its
// wall time, CPU time and peak resident memory are its own:
//   open     Trial::Open, then workers() and steps()
//   inspect  `tstat inspect RUN`
//   series   Trial::Open, then series() of one stat of one tensor
//   step     Trial::Open, then step_records() of one step (every tensor)
// open, series and step also report the open's or the query's own wall
// time (query s): what a program that holds the Trial open pays per question.
//   check    `tstat check RUN` with the default rules (records/s per core =
//            the run's records / the process's CPU seconds)
// The CLI cases run `cli` (the tstat binary; empty: this process's own
// executable). A forked case's peak includes what it shares with the bench
// process at the fork (about 15 MiB).
// Thread safety: a run uses the whole machine.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tstat/config.h"
#include "tstat/status.h"

namespace tstat::bench {

struct ReadBenchOptions {
  std::int64_t tensors = 1000;
  std::int64_t steps = 10000;
  std::int64_t steps_per_segment = 100;
  // The writer's deflate level of its tables: a session's default unless
  // set (config.h: PipelineConfig::compression_level).
  int compression_level = PipelineConfig{}.compression_level;
  std::string dir;      // where the run is written (empty: $TMPDIR or /tmp)
  std::string run_dir;  // measure this run instead of writing one
  bool keep = false;    // leave the written run in place (its path is printed)
  std::string cli;      // the tstat binary for inspect and check
  bool json = false;
  // The cases to run, by name (empty: all of them). The run is written
  // whatever they are.
  std::vector<std::string> cases;
};

struct ReadCase {
  std::string name;
  double wall_s = 0, cpu_s = 0;
  // open: Trial::Open alone; series, step: the query alone, after the
  // open (in-process wall seconds; 0 for the others).
  double query_s = 0;
  double peak_mib = 0;        // the case's process, peak resident set
  std::uint64_t records = 0;  // records written or judged (write, check; else 0)
  std::uint64_t answer = 0;   // steps opened, points of the series, records of the step
  bool ok = false;
  std::string error;
};

std::string FormatReadJsonLine(const ReadCase& c, std::int64_t tensors, std::int64_t steps);

// Writes the run (unless run_dir), runs every case and prints a table (or
// JSON lines) to `out`.
Status RunReadBench(const ReadBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tstat::bench
