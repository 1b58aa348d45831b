// See report_page.h.
#include "tools/report/report_page.h"

#include <cstddef>

// The embedded assets (cmake/embed_files.cmake).
extern const unsigned char kReportHtml[];
extern const std::size_t kReportHtml_size;
extern const unsigned char kReportCss[];
extern const std::size_t kReportCss_size;
extern const unsigned char kReportJs[];
extern const std::size_t kReportJs_size;
extern const unsigned char kUplotCss[];
extern const std::size_t kUplotCss_size;
extern const unsigned char kUplotJs[];
extern const std::size_t kUplotJs_size;

namespace tstat::report {
namespace {

std::string Asset(const unsigned char* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// JSON text made safe inside <script>: '<', '>' and '&' as \u escapes (in
// JSON strings only: the document's structure has none), and U+2028/2029.
std::string ScriptSafe(const std::string& json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xe2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xa8' || json[i + 2] == '\xa9')) {
      out += json[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string HtmlText(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Replaces every `marker` in the page's text (not in what replaced one).
void Replace(std::string* page, const std::string& marker, const std::string& with) {
  for (std::size_t at = page->find(marker); at != std::string::npos;
       at = page->find(marker, at + with.size())) {
    page->replace(at, marker.size(), with);
  }
}

}  // namespace

Status PageAvailable() {
  if (kUplotJs_size > 0) return Status::OK();
  return Status::Unavailable(
      "tstat was built without the report page's charting library "
      "(tools/report/node_modules: run tools/setup.sh, then rebuild)");
}

std::string BuildPage(const std::string& title, const std::string& data_json) {
  std::string page = Asset(kReportHtml, kReportHtml_size);
  // Replaced in order: the data last, so nothing in it is taken for a marker.
  Replace(&page, "@TITLE@", HtmlText(title));
  Replace(&page, "@STYLE@",
          Asset(kUplotCss, kUplotCss_size) + "\n" + Asset(kReportCss, kReportCss_size));
  Replace(&page, "@LIBRARY@", Asset(kUplotJs, kUplotJs_size));
  Replace(&page, "@SCRIPT@", Asset(kReportJs, kReportJs_size));
  Replace(&page, "@DATA@", ScriptSafe(data_json));
  return page;
}

}  // namespace tstat::report
