#include "tools/demo/report.h"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

namespace tstat::demo {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream s;
  s << std::setprecision(6) << v;
  return s.str();
}

std::string Join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

std::string Pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

}  // namespace

double ComputeSavedPercent(const ScenarioResult& r) {
  if (r.steps_planned <= 0) return 0.0;
  return 100.0 * static_cast<double>(r.steps_planned - r.steps_run) /
         static_cast<double>(r.steps_planned);
}

// "TRAIN 12", "EVAL 3": a step in the user's terms.
std::string StepName(const StepKey& k) {
  return std::string(ModeName(k.mode)) + " " + std::to_string(k.mode_step);
}

void PrintTable(const std::vector<ScenarioResult>& results, std::ostream& out) {
  out << Pad("scenario", 21) << Pad("expected", 28) << Pad("found (rule@step)", 60)
      << Pad("train steps", 12) << Pad("saved", 7) << "result\n";
  for (const ScenarioResult& r : results) {
    std::vector<std::string> found;
    for (const RuleHit& h : r.found) found.push_back(h.rule + "@" + StepName(h.step));
    char saved[16];
    std::snprintf(saved, sizeof(saved), "%.0f%%", ComputeSavedPercent(r));
    out << Pad(r.scenario, 21)
        << Pad(r.expected_rules.empty() ? "(none)" : Join(r.expected_rules, ","), 28)
        << Pad(found.empty() ? "(none)" : Join(found, " "), 60)
        << Pad(std::to_string(r.steps_run) + "/" + std::to_string(r.steps_planned), 12)
        << Pad(saved, 7) << (r.passed() ? "ok" : "FAILED") << "\n";
  }
  out << "\n";
  for (const ScenarioResult& r : results) {
    out << r.scenario << ": " << r.fault << "\n";
    if (r.found.empty()) {
      out << "  no finding; loss " << r.first_loss << " -> " << r.last_loss << "\n";
      continue;
    }
    const RuleHit& first = r.found.front();
    std::size_t same_step = 0;
    for (const RuleHit& h : r.found) same_step += h.step.global_step == first.step.global_step;
    out << "  " << StepName(first.step) << " (global " << first.step.global_step << ") "
        << first.rule << " [" << SeverityName(first.severity) << "]"
        << (first.tensor.empty() ? "" : " " + first.tensor) << ": " << first.message << "\n";
    if (same_step > 1) {
      out << "  (" << same_step - 1 << " other rule(s) fired at the same step)\n";
    }
    if (!r.stop_reason.empty()) {
      out << "  auto-stop after " << r.steps_run << " of " << r.steps_planned
          << " training steps\n";
    }
  }
}

std::string ResultJson(const ScenarioResult& r) {
  std::vector<std::string> expected, found_rules, findings;
  for (const std::string& e : r.expected_rules) expected.push_back(JsonString(e));
  for (const RuleHit& h : r.found) {
    found_rules.push_back(JsonString(h.rule));
    findings.push_back("{\"rule\": " + JsonString(h.rule) + ", \"type\": " + JsonString(h.type) +
                       ", \"step\": " + std::to_string(h.step.global_step) +
                       ", \"mode\": " + JsonString(ModeName(h.step.mode)) +
                       ", \"mode_step\": " + std::to_string(h.step.mode_step) +
                       ", \"tensor\": " + JsonString(h.tensor) +
                       ", \"severity\": " + JsonString(SeverityName(h.severity)) +
                       ", \"message\": " + JsonString(h.message) +
                       ", \"episodes\": " + std::to_string(h.episodes) + "}");
  }
  const std::int64_t first = r.first_finding_step();
  std::ostringstream o;
  o << "{\"scenario\": " << JsonString(r.scenario) << ", \"fault\": " << JsonString(r.fault)
    << ", \"expected_rules\": [" << Join(expected, ", ") << "]"
    << ", \"found_rules\": [" << Join(found_rules, ", ") << "]"
    << ", \"first_finding_step\": " << (first < 0 ? "null" : std::to_string(first))
    << ", \"first_finding_rule\": "
    << (r.found.empty() ? "null" : JsonString(r.found.front().rule))
    << ", \"findings\": [" << Join(findings, ", ") << "]"
    << ", \"steps_run\": " << r.steps_run << ", \"steps_planned\": " << r.steps_planned
    << ", \"compute_saved_percent\": " << JsonNumber(ComputeSavedPercent(r))
    << ", \"stopped\": " << (r.stop_reason.empty() ? "false" : "true")
    << ", \"passed\": " << (r.passed() ? "true" : "false")
    << ", \"first_loss\": " << JsonNumber(r.first_loss)
    << ", \"last_loss\": " << JsonNumber(r.last_loss)
    << ", \"seconds\": " << JsonNumber(r.seconds) << ", \"run_dir\": " << JsonString(r.run_dir)
    << "}";
  return o.str();
}

}  // namespace tstat::demo
