// The report page: one self-contained HTML file holding the page's style and
// script (tools/report/page/), the charting library (uPlot, from npm:
// tools/report/package.json, installed by tools/setup.sh) and the report's
// data (report_data.h) as a JSON block. Nothing is loaded from the network
// or the disk when it is viewed.
#pragma once

#include <string>

#include "tstat/status.h"

namespace tstat::report {

// OK when the charting library was installed when tstat was built;
// kUnavailable saying how to get it otherwise.
Status PageAvailable();

// The page of `data_json`, whose text is escaped so that nothing in it (a
// tensor named "</script>") can end the data block or the page's script.
std::string BuildPage(const std::string& title, const std::string& data_json);

}  // namespace tstat::report
