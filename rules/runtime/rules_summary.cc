// RulesSummary (rules_summary.h): its JSON form (protobuf's JSON mapping of
// tstat.rulesconfig.RulesSummary) and its lines for people.
#include "rules/runtime/rules_summary.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>

#include "io/h5/posix_file.h"
#include "rules/runtime/actions.h"
#include "tstat_rules.pb.h"

namespace tstat::rules {
namespace {

std::string ModesText(std::uint8_t modes) {
  if (modes == CaptureNeeds::AllModes()) return "every step";
  if (modes == CaptureNeeds::TrainModes()) return "TRAIN and GLOBAL steps";
  std::string out;
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
    if (modes & CaptureNeeds::ModeBit(m))
      out += (out.empty() ? "" : ", ") + std::string(ModeName(m));
  }
  return out + " steps";
}

std::string Percent(std::uint64_t part, std::uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole ? 100.0 * static_cast<double>(part) / whole : 0.0);
  return buf;
}

std::string Bytes(std::uint64_t n) {
  char buf[32];
  if (n < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  } else if (n < (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  }
  return buf;
}

}  // namespace

void RulesSummary::NoteCapture(const std::string& rule, const std::string& what,
                               const std::string& collection, const std::string& tensor) {
  auto it = std::find_if(captures.begin(), captures.end(), [&](const Capture& c) {
    return c.rule == rule && c.collection == collection;
  });
  if (it == captures.end()) {
    captures.push_back({rule, what, collection, 0, {}});
    it = captures.end() - 1;
  }
  ++it->tensors;
  if (it->examples.size() < kExamples) it->examples.push_back(tensor);
}

std::string DescribeNeeds(const CaptureNeeds& n) {
  std::string what;
  if (n.per_unit) what = "per-unit stats";
  if (n.band) {
    char band[96];
    std::snprintf(band, sizeof band, " with counts outside (%g, %g)", n.band_lo, n.band_hi);
    what += (what.empty() ? "counts" : "") + std::string(band);
  }
  if (n.label_counts) what += (what.empty() ? "" : ", ") + std::string("label counts");
  if (n.delta) what += (what.empty() ? "" : ", ") + std::string("deltas");
  if (what.empty()) what = "the stat set";
  what += " (" + ModesText(n.modes);
  if (n.until_step > 0) what += ", the first " + std::to_string(n.until_step);
  return what + ")";
}

std::string RulesSummaryFileName(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rules-%05d.json", rank);
  return name;
}

std::string RulesSummaryToJson(const RulesSummary& s) {
  rulesconfig::RulesSummary p;
  p.set_worker(s.worker);
  p.set_stop_on(s.stop_on);
  for (const auto& r : s.rules) {
    auto* e = p.add_rules();
    e->set_name(r.name);
    e->set_type(r.type);
    e->set_severity(SeverityName(r.severity));
    e->set_stops(r.stops);
  }
  for (const auto& c : s.captures) {
    auto* e = p.add_captures();
    e->set_rule(c.rule);
    e->set_what(c.what);
    e->set_collection(c.collection);
    e->set_tensors(c.tensors);
    for (const std::string& x : c.examples) e->add_examples(x);
  }
  for (const auto& l : s.label_classes) {
    auto* e = p.add_label_classes();
    e->set_tensor(l.tensor);
    e->set_classes(l.classes);
    e->set_source(l.source);
  }
  p.set_steps(s.steps);
  p.set_steps_judged(s.steps_judged);
  p.set_records(s.records);
  p.set_rules_records(s.rules_records);
  p.set_rules_extended(s.rules_extended);
  p.set_delta_copy_bytes(s.delta_copy_bytes);
  p.set_episodes(s.episodes);
  p.set_open_episodes(s.open_episodes);
  for (const std::string& d : s.diagnostics) p.add_diagnostics(d);
  for (const std::string& n : s.notes) p.add_notes(n);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(p, &out, options).ok()) return "{}";
  return out;
}

Result<RulesSummary> RulesSummaryFromJson(const std::string& text) {
  rulesconfig::RulesSummary p;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &p, options);
  if (!status.ok()) return Status::Corruption("rules summary: " + std::string(status.message()));
  RulesSummary s;
  s.worker = p.worker();
  s.stop_on = p.stop_on();
  for (const auto& r : p.rules()) {
    RulesSummary::RuleEntry e{r.name(), r.type(), Severity::kError, r.stops()};
    (void)ParseSeverity(r.severity(), &e.severity);
    s.rules.push_back(std::move(e));
  }
  for (const auto& c : p.captures()) {
    s.captures.push_back({c.rule(),
                          c.what(),
                          c.collection(),
                          c.tensors(),
                          {c.examples().begin(), c.examples().end()}});
  }
  for (const auto& l : p.label_classes())
    s.label_classes.push_back({l.tensor(), l.classes(), l.source()});
  s.steps = p.steps();
  s.steps_judged = p.steps_judged();
  s.records = p.records();
  s.rules_records = p.rules_records();
  s.rules_extended = p.rules_extended();
  s.delta_copy_bytes = p.delta_copy_bytes();
  s.episodes = p.episodes();
  s.open_episodes = p.open_episodes();
  s.diagnostics.assign(p.diagnostics().begin(), p.diagnostics().end());
  s.notes.assign(p.notes().begin(), p.notes().end());
  return s;
}

std::vector<RulesSummary> ReadRulesSummaries(const std::string& run_dir,
                                             std::vector<std::string>* problems) {
  std::vector<RulesSummary> out;
  Result<std::vector<std::string>> names = io::ListDir(run_dir);
  if (!names.ok()) {
    problems->push_back(names.status().ToString());
    return out;
  }
  std::vector<std::string> files;
  for (const std::string& n : names.value()) {
    int rank = -1;
    char tail = 0;
    // Exactly the names RulesSummaryFileName makes.
    if (std::sscanf(n.c_str(), "rules-%5d.jso%c", &rank, &tail) == 2 && tail == 'n' && rank >= 0 &&
        n == RulesSummaryFileName(rank)) {
      files.push_back(n);
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string& n : files) {
    const std::string path = io::JoinPath(run_dir, n);
    Result<std::string> text = io::ReadRegularFile(path, kMaxRulesSummaryBytes);
    if (!text.ok()) {
      problems->push_back(text.status().message());
      continue;
    }
    Result<RulesSummary> summary = RulesSummaryFromJson(text.value());
    if (!summary.ok()) {
      problems->push_back(path + ": " + summary.status().message());
      continue;
    }
    out.push_back(std::move(summary.value()));
  }
  return out;
}

std::vector<std::string> RulesSummaryLines(const RulesSummary& s,
                                           const std::vector<Episode>& episodes) {
  std::vector<std::string> out;
  std::string head =
      std::to_string(s.rules.size()) + " rule(s) judged " + std::to_string(s.steps_judged) +
      " step(s) (training stops on: " + (s.stop_on.empty() ? "critical" : s.stop_on) + "); " +
      std::to_string(s.episodes) + " episode(s)";
  if (s.open_episodes > 0)
    head += ", " + std::to_string(s.open_episodes) + " still open at the end";
  out.push_back(head);
  for (const Episode& e : episodes) out.push_back("  " + FormatEpisode(e));
  for (const auto& c : s.captures) {
    std::string names;
    for (std::size_t i = 0; i < c.examples.size(); ++i) names += (i ? ", " : "") + c.examples[i];
    if (c.tensors > c.examples.size()) {
      names += ", +" + std::to_string(c.tensors - c.examples.size()) + " more";
    }
    out.push_back("captured for " + c.rule + ": " + c.what + " of " + std::to_string(c.tensors) +
                  " tensor(s) (" + names + ")");
  }
  for (const auto& l : s.label_classes) {
    out.push_back("label classes of " + l.tensor + ": " + std::to_string(l.classes) + " (" +
                  l.source + ")");
  }
  if (s.records > 0) {
    std::string cost =
        "cost: " + std::to_string(s.rules_records) + " of " + std::to_string(s.records) +
        " records (" + Percent(s.rules_records, s.records) +
        ") were captured only for the rules, " + std::to_string(s.rules_extended) + " (" +
        Percent(s.rules_extended, s.records) + ") got more statistics for them";
    if (s.delta_copy_bytes > 0)
      cost += "; deltas keep " + Bytes(s.delta_copy_bytes) + " of host memory";
    out.push_back(cost);
  }
  for (const std::string& d : s.diagnostics) out.push_back("could not judge: " + d);
  for (const std::string& n : s.notes) out.push_back("note: " + n);
  return out;
}

}  // namespace tstat::rules
