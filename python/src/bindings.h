// What the C++ files of the _tstat module share: Status as a Python
// exception, and the binding functions module.cc calls.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::python {

// A Status carried out of C++ into the module's exception translator
// (module.cc), which raises it as tstat.Error.
struct StatusError {
  Status status;
};

[[noreturn]] inline void Raise(const Status& s) { throw StatusError{s}; }

inline void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <class T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

inline Mode ParseMode(int mode) {
  if (mode < static_cast<int>(Mode::kTrain) || mode > static_cast<int>(Mode::kGlobal)) {
    Raise(Status::InvalidArgument("mode " + std::to_string(mode) +
                                  " is not TRAIN (1), EVAL (2), PREDICT (3) or GLOBAL (4)"));
  }
  return static_cast<Mode>(mode);
}

// A writer's counters as a dict (a worker's in a run, a live session's).
inline pybind11::dict CountersDict(const PipelineCounters& c) {
  pybind11::dict d;
  d["steps_captured"] = c.steps_captured;
  d["records_written"] = c.records_written;
  d["bytes_written"] = c.bytes_written;
  d["raw_dropped"] = c.raw_dropped;
  d["records_lost"] = c.records_lost;
  d["write_errors"] = c.write_errors;
  d["stats_waits"] = c.stats_waits;
  d["segments_written"] = c.segments_written;
  return d;
}

// The exception a Status raises in Python (tstat.Error, with its code and
// message), made the current one. Needs the GIL.
void SetPythonError(const Status& status);

// _tstat.Session (session_binding.cc): capture for tstat.pytorch.
void BindSession(pybind11::module_& m);

// A _tstat.Session's C++ side, opaque outside session_binding.cc: what
// _tstat.OutputHook (output_hook.cc) calls without going through Python.
struct SessionRef;
// The C++ side of `session`; throws pybind11::cast_error for anything that
// is not a _tstat.Session.
SessionRef* NativeSession(pybind11::handle session);
// Session.set(slot, tensor): the slot's tensor for this step.
void SetTensor(SessionRef* session, int slot, pybind11::object tensor);

// _tstat.OutputHook (output_hook.cc): tstat.pytorch.Hook's forward hook.
void BindOutputHook(pybind11::module_& m);

}  // namespace tstat::python
