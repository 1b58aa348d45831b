// `tstat serve RUN [RUN...] [--host 127.0.0.1] [--port 8080] [--interval S]` and the
// report's --max-points, --layers, --heatmaps:
// the report's page as a live dashboard. A thread looks at the runs every
// --interval seconds (0.5) and rebuilds their data (tools/report/
// report_data.h; a run still being written is read as far as it is flushed)
// when a file of theirs changed; the page (the report's, with "live" in its
// data) fetches /data.json every half interval and redraws when the data
// changed: a flushed step is drawn within 0.75 intervals and a build. Read-only and generated: `/`
// and `/data.json` are the only paths (anything else 404, any method but GET and HEAD 405), so
// nothing outside the runs is ever served. Binds 127.0.0.1 unless --host
// says otherwise. Prints its URL, then serves until SIGINT or SIGTERM.
// Exit codes: 0 stopped by a signal, 1 a run cannot be read or the address
// cannot be bound (in use), 2 usage.
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/cli/command.h"
#include "tools/cli/page_options.h"
#include "tools/report/report_data.h"
#include "tools/report/report_page.h"

namespace tstat::cli {
namespace {

struct ServeFlags {
  std::vector<std::string> runs;
  std::string host = "127.0.0.1";
  int port = 8080;
  double interval_s = 0.5;
  PageFlags page;
};

// The latest data of the runs, rebuilt by a thread of its own.
class LiveData {
 public:
  LiveData(std::vector<std::string> runs, report::ReportOptions options)
      : runs_(runs), builder_(std::move(runs), options) {}
  ~LiveData() { Stop(); }

  Status BuildOnce() {
    // Nothing written since the last build: nothing to read again.
    std::string fingerprint = Fingerprint(runs_);
    if (!json_.empty() && fingerprint == fingerprint_) return Status::OK();
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::string> data = builder_.Build(revision_ + 1);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!data.ok()) return data.status();
    std::lock_guard<std::mutex> lock(mu_);
    // A new revision only when the data changed (the build time aside).
    const std::string body = WithoutTimes(*data);
    if (body != last_body_) {
      last_body_ = body;
      json_ = std::move(data).value();
      ++revision_;
    }
    fingerprint_ = std::move(fingerprint);
    build_seconds_ = seconds;
    ++builds_;
    return Status::OK();
  }

  void Start(double interval_s) {
    thread_ = std::thread([this, interval_s] {
      std::unique_lock<std::mutex> lock(stop_mu_);
      while (!stop_cv_.wait_for(lock, std::chrono::duration<double>(interval_s),
                                [this] { return stopping_; })) {
        lock.unlock();
        const Status s = BuildOnce();
        if (!s.ok()) std::cerr << "tstat serve: warning: " << s.ToString() << "\n";
        lock.lock();
      }
    });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::string json() const {
    std::lock_guard<std::mutex> lock(mu_);
    return json_;
  }
  // How long the last build took and how many there were (what an update
  // costs: a header of /data.json).
  std::string build_info() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::to_string(builds_) + " builds, the last " + std::to_string(build_seconds_) + " s";
  }

 private:
  // Names, sizes and modification times of the files of each run and of
  // its workers' folders (two levels, links not followed, at most 100,000
  // entries): they change when a writer flushes.
  static std::string Fingerprint(const std::vector<std::string>& runs) {
    namespace fs = std::filesystem;
    std::string out;
    std::size_t entries = 0;
    auto add = [&](const fs::directory_entry& e) {
      std::error_code ec;
      const auto status = e.symlink_status(ec);
      if (ec) return false;
      out += e.path().string();
      if (fs::is_regular_file(status)) {
        out += ":" + std::to_string(e.file_size(ec));
        out += ":" + std::to_string(e.last_write_time(ec).time_since_epoch().count());
      }
      out += "\n";
      return fs::is_directory(status);
    };
    for (const std::string& run : runs) {
      std::error_code ec;
      for (fs::directory_iterator it(run, ec), end; !ec && it != end && entries < 100000;
           it.increment(ec), ++entries) {
        if (!add(*it)) continue;
        std::error_code inner;
        for (fs::directory_iterator w(it->path(), inner), wend;
             !inner && w != wend && entries < 100000; w.increment(inner), ++entries) {
          add(*w);
        }
      }
    }
    return out;
  }

  // The data without what changes at every build ("generated" and
  // "generated_unix" come first in the document, before "live").
  static std::string WithoutTimes(const std::string& json) {
    const std::size_t runs = json.find(",\"runs\":");
    return runs == std::string::npos ? json : json.substr(runs);
  }

  const std::vector<std::string> runs_;
  report::ReportBuilder builder_;  // used by one thread at a time (BuildOnce)
  mutable std::mutex mu_;
  std::string json_, last_body_, fingerprint_;
  std::uint64_t revision_ = 0;
  std::uint64_t builds_ = 0;
  double build_seconds_ = 0;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

int RunServe(const ServeFlags& f) {
  if (Status page = report::PageAvailable(); !page.ok()) return ReportError(page);
  // SIGINT and SIGTERM go to the thread that waits for them (blocked in
  // every thread started from here on).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  report::ReportOptions options = PageReportOptions(f.page);
  options.live_interval_ms = static_cast<int>(f.interval_s * 1000);
  auto data = std::make_shared<LiveData>(f.runs, options);
  if (Status s = data->BuildOnce(); !s.ok()) return ReportError(s);
  const std::string title = PageTitle("serve", f.runs);

  httplib::Server server;
  server.Get("/", [data, title](const httplib::Request&, httplib::Response& res) {
    res.set_content(report::BuildPage(title, data->json()), "text/html; charset=utf-8");
    res.set_header("Cache-Control", "no-store");
  });
  server.Get("/data.json", [data](const httplib::Request&, httplib::Response& res) {
    res.set_content(data->json(), "application/json");
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Tstat-Builds", data->build_info());
  });
  auto refuse = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("tstat serve is read-only\n", "text/plain");
  };
  server.Post(".*", refuse);
  server.Put(".*", refuse);
  server.Patch(".*", refuse);
  server.Delete(".*", refuse);
  server.Options(".*", refuse);
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404)
      res.set_content("not found: tstat serve has / and /data.json\n", "text/plain");
  });
  const int port = f.port == 0 ? server.bind_to_any_port(f.host)
                               : (server.bind_to_port(f.host, f.port) ? f.port : -1);
  if (port <= 0) {
    return ReportError(Status::Unavailable("cannot listen on " + f.host + ":" +
                                           std::to_string(f.port) +
                                           " (in use, or not an address of this machine)"));
  }
  data->Start(f.interval_s);
  std::thread waiter([&server, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop();
  });
  std::cout << "tstat serve: http://" << f.host << ":" << port << "/ (" << f.runs.size()
            << " run(s), data rebuilt every " << f.interval_s << " s); Ctrl-C stops" << std::endl;
  server.listen_after_bind();
  // listen returned: stopped by the waiter, or failed; make the waiter go.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  data->Stop();
  return kExitOk;
}

}  // namespace

Command AddServeCommand(CLI::App& root) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* app = root.add_subcommand(
      "serve", "Serve the report of runs as a live dashboard, updating as steps arrive");
  app->add_option("runs", flags->runs, "Run directories (finished or still being written)")
      ->required();
  app->add_option("--host", flags->host, "Address to bind (127.0.0.1: this machine only)")
      ->default_str("127.0.0.1");
  app->add_option("--port", flags->port, "Port (0: any free one, printed)")
      ->check(CLI::Range(0, 65535))
      ->default_str("8080");
  app->add_option("--interval", flags->interval_s, "Seconds between data rebuilds and page polls")
      ->check(CLI::Range(0.1, 3600.0))
      ->default_str("0.5");
  AddPageOptions(app, &flags->page);
  Command c;
  c.app = app;
  c.run = [flags]() { return RunServe(*flags); };
  return c;
}

}  // namespace tstat::cli
