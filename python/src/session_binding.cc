// _tstat.Session: tstat::Session for tstat.pytorch.Hook (python/tstat/pytorch.py).
//
// Tensors live in slots. A slot is registered with the session the first time
// it holds a tensor at the end of a step (its dtype and device then fix the
// registration), with a view callback that reads the slot's tensor when the
// session captures it: only tensors that are due are looked at, and a due
// tensor is read in place (CPU) or reduced where it lives (CUDA, on the
// stream end_step is given). Three kinds:
//   tensor     the latest tensor set() in this step (activations, losses,
//              labels, hook.save_tensor); none once the step ends;
//   parameter  the parameter itself, every step (held by a weak reference:
//              a parameter that is gone is skipped);
//   gradient   the parameter's .grad, when mark_fresh() said a backward
//              produced it in this step (lazily created and unused
//              gradients are skipped, not read stale).
// A non-contiguous tensor is copied to a contiguous one at capture only, and
// that copy lives until the step's reduction has been enqueued; so do the
// stored values of a CPU sparse COO tensor (a sparse embedding's gradient),
// which stand for it.
//
// A large CPU tensor due at its step is reduced when it is set, on this
// thread the first time. If nothing changed it in place by the end of the
// module's forward (or of the step; its version counter, read through a
// weak reference), it is from then on handed to the session's capture
// thread (CaptureEarly in the background) and held only until that thread
// has read it: `queued_` keeps it, with its version counter, until
// FinishQueued takes it back (at a later set() unless a parameter is ahead
// of it in the queue, at the end of the module's forward, or at once before
// an activation with inplace=True overwrites it). A tensor whose version
// moved meanwhile was changed in place while it may have been read: its
// record is left out (DropChanged), as for a held tensor changed before
// EndStep. One changed in place after its first read
// stays read on this thread. Large CPU parameters are queued when a step
// begins (queue_parameters); one changed in place before the forward ends
// is read again by EndStep.
//
// The GIL: end_step, close, and set() when it reduces a tensor at once release
// it around the session's calls (the CPU reduction runs without it); the view
// callbacks, which run inside them on the same thread, take it to read the
// tensors. Handing a tensor to the capture thread, or taking back what it has
// read without waiting, keeps it (no reduction runs on this thread).
//
// A slot that cannot be registered (a dtype tstat does not reduce, a bad
// name) is not captured and never retried; warnings() returns why, once.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "python/src/bindings.h"
#include "tstat/config.h"
#include "tstat/session.h"

namespace py = pybind11;

namespace tstat::python {
namespace {

enum class SlotKind { kTensor = 0, kParameter = 1, kGradient = 2 };

struct Slot {
  std::string name;
  std::vector<std::string> collections;
  SlotKind kind = SlotKind::kTensor;
  int unit_axis = -1;              // TensorSpec::unit_axis
  py::object source = py::none();  // the tensor set, or the parameter
  bool fresh = false;              // gradient produced in this step
  bool registered = false;
  bool failed = false;
  std::uint32_t id = 0;          // the session's, once registered
  py::object keep = py::none();  // a contiguous copy for this step's capture
  // torch's version counter of `source` when it was set and left for
  // EndStep to read (-1: not left, or no counter); EndStep compares.
  std::int64_t version = -1;
  // Its tensor was changed in place after it was set (x += y, an activation
  // with inplace=True): it is read when set from then on.
  bool early = false;
  bool queued = false;  // its tensor is being read by the capture thread (queued_)
  // Read on this thread when set, the first time: a weak reference to that
  // tensor and its version then, checked when the step ends.
  py::object probe = py::none();
  std::int64_t probe_version = -1;
  bool background = false;  // the probe saw no change: read on the capture thread
};

// torch's version counter of `t` (bumped by every in-place change), or -1
// for a tensor without one (created under torch.inference_mode()).
// (The C API directly: it is read twice per held tensor per step.)
std::int64_t VersionOf(const py::object& t) {
  static PyObject* const name = PyUnicode_InternFromString("_version");
  PyObject* v = PyObject_GetAttr(t.ptr(), name);
  if (v == nullptr) {
    PyErr_Clear();
    return -1;
  }
  const long long version = PyLong_AsLongLong(v);
  Py_DECREF(v);
  if (version == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  return version;
}

// An interned attribute name, made once per place it is used (and never
// freed: it may be used until the interpreter ends).
#define TSTAT_INTERNED(name)                                            \
  ([]() -> PyObject* {                                                  \
    static PyObject* const interned = PyUnicode_InternFromString(name); \
    return interned;                                                    \
  }())

// o.<name>, or throws error_already_set.
py::object Attr(const py::handle& o, PyObject* name) {
  PyObject* r = PyObject_GetAttr(o.ptr(), name);
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

// o.<name>(), or throws error_already_set.
py::object Call(const py::handle& o, PyObject* name) {
  PyObject* r = PyObject_CallMethodObjArgs(o.ptr(), name, nullptr);  // any Python 3
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

// Status for a Python exception raised while reading a tensor.
Status FromPython(const std::string& name, py::error_already_set& e) {
  const std::string what = e.what();
  e.restore();
  PyErr_Clear();
  return Status::InvalidArgument(name + ": " + what);
}

class PySession {
 public:
  PySession(const std::string& config_json, const std::string& config_path,
            const std::optional<std::string>& out_dir, std::optional<int> rank,
            std::optional<int> world_size, std::optional<bool> dry_run, py::dict dtypes,
            int num_classes, const std::string& predictions_name)
      : dtypes_(std::move(dtypes)) {
    SessionConfig config;
    const char* env = std::getenv("TSTAT_CONFIG");
    if (!config_json.empty()) {
      config = Take(ParseConfigJson(config_json));
    } else if (!config_path.empty() || (env != nullptr && *env != '\0')) {
      config = Take(LoadConfigFile(config_path));
    }
    if (out_dir) config.out_dir = *out_dir;
    if (rank) config.rank = *rank;
    if (world_size) config.world_size = *world_size;
    if (dry_run) config.dry_run = *dry_run;
    if (num_classes > 0) AddLabels(&config, num_classes, predictions_name);
    // One CPU thread per reduction unless the config says more: the cores are
    // torch's (its intra-op threads, its BLAS's), and an OpenMP team's idle
    // workers spin-wait after each reduction, on the cores the training uses.
    if (config.pipeline.cpu_threads == 0) config.pipeline.cpu_threads = 1;
    session_ = Take(Session::Create(config));
  }

  ~PySession() {
    if (session_ == nullptr) return;
    {
      py::gil_scoped_release release;
      (void)session_->Close();
    }
    ClearStep();
  }

  int add_slot(const std::string& name, const std::vector<std::string>& collections, int kind,
               py::object source, int unit_axis) {
    if (kind < 0 || kind > 2) Raise(Status::InvalidArgument("slot kind " + std::to_string(kind)));
    auto slot = std::make_unique<Slot>();
    slot->name = name;
    slot->collections = collections;
    slot->kind = static_cast<SlotKind>(kind);
    slot->unit_axis = unit_axis;
    slot->source = std::move(source);
    slots_.push_back(std::move(slot));
    return static_cast<int>(slots_.size() - 1);
  }

  // A layer's output or a saved tensor for this step. A large CPU tensor
  // due at this step is reduced at once (Session::CaptureEarly) and not
  // held: holding every layer's output until the backward pass ends keeps
  // the allocator from reusing their memory (on the benchmark CNN, ~2x the
  // page faults and 15% of the step). Small ones wait for EndStep's one
  // batched reduction, and CUDA ones for its launch on the stream, unless
  // `now` (the input of an activation with inplace=True, which the module
  // is about to overwrite) or the slot's tensor was seen changed in place
  // after an earlier step's set: then a CPU tensor is reduced at once and a
  // CUDA one copied (on the current stream, no synchronisation). What is
  // left for EndStep keeps its version counter, checked there.
  void set(int slot, py::object tensor, bool now) {
    Slot& s = At(slot);
    if (!queued_.empty()) FinishQueued(/*wait=*/s.queued);  // its tensor may go now
    s.source = std::move(tensor);
    s.version = -1;
    try {
      Hold(s, now);
    } catch (...) {  // a tensor whose attributes raise: not held for EndStep either
      s.source = py::none();
      s.version = -1;
      throw;
    }
  }
  // `tensor` is about to be changed in place (the input of an activation
  // with inplace=True): the slots that hold it for EndStep read it now.
  void settle(py::object tensor) {
    for (const Queued& q : queued_) {
      if (q.tensor.is(tensor)) {
        FinishQueued(/*wait=*/true);  // read before the activation writes
        break;
      }
    }
    for (auto& s : slots_) {
      if (s->kind != SlotKind::kTensor || s->version < 0 || !s->source.is(tensor)) continue;
      if (VersionOf(s->source) != s->version) {
        DropChanged(*s);  // already changed (x += y before the activation)
      } else {
        set(static_cast<int>(&s - slots_.data()), tensor, true);
      }
    }
  }

  // The gradient slots a backward produced in this step.
  // (A list read through the C API: pybind11's conversion to a vector
  // costs ~1 us per item here, 35 items per step on a small CNN.)
  void mark_fresh(const py::list& slots) {
    const Py_ssize_t n = PyList_GET_SIZE(slots.ptr());
    for (Py_ssize_t i = 0; i < n; ++i) {
      const long slot = PyLong_AsLong(PyList_GET_ITEM(slots.ptr(), i));
      if (slot == -1 && PyErr_Occurred()) throw py::error_already_set();
      At(static_cast<int>(std::clamp<long>(slot, -1, INT32_MAX))).fresh = true;
    }
  }
  // A step began (the forward of the registered module): its CPU
  // parameters of 8,192 values or more go to the capture thread, read while
  // the forward and backward passes run - nothing changes them before the
  // optimizer steps, after the step ends. One found changed when the step
  // ends is read again by EndStep; without a capture thread (or room in its
  // queue) they are all left to EndStep.
  void queue_parameters() {
    for (auto& sp : slots_) {
      Slot& s = *sp;
      if (s.kind != SlotKind::kParameter || !s.registered || s.queued) continue;
      py::object p = Current(s);
      if (p.is_none() || !Attr(p, TSTAT_INTERNED("is_cpu")).cast<bool>() ||
          Call(p, TSTAT_INTERNED("numel")).cast<std::int64_t>() < kSmallTensorElements) {
        continue;
      }
      Result<EarlyCapture> early = CaptureEarly(s.id, EarlyCaptureMode::kInBackgroundOrAtEndStep);
      if (early.ok() && *early == EarlyCapture::kQueued) Queue(s, std::move(p));
    }
  }

  // The forward of the registered module returned: every tensor handed to
  // the capture thread is read and let go, and the tensors read on this
  // thread for the first time are checked for in-place changes while they
  // are alive (autograd frees them during the backward pass).
  void finish_queued() {
    FinishQueued(/*wait=*/true);
    CheckProbes();
  }

  void begin_step() { Check(session_->BeginStep()); }
  // A step at explicit numbers (a run resumed from a checkpoint).
  void begin_step_at(std::int64_t global_step, int mode, std::int64_t mode_step) {
    Check(session_->BeginStep(StepKey{global_step, ParseMode(mode), mode_step}));
  }
  void set_mode(int mode) { Check(session_->SetMode(ParseMode(mode))); }

  void end_step(std::uintptr_t stream) {
    RegisterPending();
    finish_queued();
    DropChangedInPlace();
    Status s;
    {
      py::gil_scoped_release release;
      s = session_->EndStep(reinterpret_cast<CUstream_st*>(stream));
    }
    ClearStep();
    Check(s);
  }

  void close() {
    FinishQueued(/*wait=*/true);
    DropChangedInPlace();  // Close ends the open step
    Status s;
    {
      py::gil_scoped_release release;
      s = session_->Close();
    }
    ClearStep();
    Check(s);
  }

  void save_scalar(const std::string& name, double value) {
    Check(session_->SaveScalar(name, value));
  }
  bool should_stop() const { return session_->ShouldStop(); }
  std::string stop_reason() const { return session_->stop_reason(); }
  void request_stop(const std::string& reason) { session_->RequestStop(reason); }
  py::tuple current_step() const {
    const StepKey k = session_->current_step();
    return py::make_tuple(k.global_step, static_cast<int>(k.mode), k.mode_step);
  }
  std::string out_dir() const { return session_->config().out_dir; }
  py::dict counters() const {
    const PipelineCounters c = session_->counters();
    py::dict d = CountersDict(c);
    d["rules_waits"] = c.rules_waits;
    d["changed_in_place"] = changed_in_place_;
    d["background_captures"] = background_captures_;
    d["capture_seconds"] = session_->capture_totals().capture_seconds;
    return d;
  }
  std::vector<std::string> warnings() {
    std::vector<std::string> out;
    out.swap(warnings_);
    return out;
  }

 private:
  // Label counts and the confusion matrix in the config's `labels`
  // collection (added when the config has none).
  static void AddLabels(SessionConfig* config, int num_classes, const std::string& predictions) {
    auto& collections = config->collections;
    auto it = std::find_if(collections.begin(), collections.end(),
                           [](const CollectionConfig& c) { return c.name == "labels"; });
    CollectionConfig& c = it != collections.end() ? *it : collections.emplace_back();
    c.name = "labels";
    c.stats.label_classes = num_classes;
    c.stats.confusion_predictions = predictions;
    c.stats.confusion_argmax = true;
  }

  Slot& At(int slot) {
    if (slot < 0 || static_cast<std::size_t>(slot) >= slots_.size()) {
      Raise(Status::InvalidArgument("no slot " + std::to_string(slot)));
    }
    return *slots_[static_cast<std::size_t>(slot)];
  }

  // The tensor the slot holds now; None when it holds none this step.
  static py::object Current(Slot& s) {
    switch (s.kind) {
      case SlotKind::kTensor:
        return s.source;
      case SlotKind::kParameter: {
        // A weakref: None once the parameter is gone. A frozen parameter
        // (requires_grad false) is skipped while frozen: nothing trains it,
        // and its update of 0 is no fault of training.
        py::object p = Referent(s.source);
        if (!p.is_none() && !Attr(p, TSTAT_INTERNED("requires_grad")).cast<bool>()) {
          return py::none();
        }
        return p;
      }
      case SlotKind::kGradient: {
        if (!s.fresh) return py::none();
        py::object p = Referent(s.source);
        return p.is_none() ? p : Attr(p, TSTAT_INTERNED("grad"));
      }
    }
    return py::none();
  }

  // What the weak reference `ref` refers to (None once it is gone); any
  // other callable is called. (The C API: twice per parameter per step.)
  static py::object Referent(const py::object& ref) {
    if (!PyWeakref_CheckRef(ref.ptr())) return ref();
    return py::reinterpret_borrow<py::object>(PyWeakref_GetObject(ref.ptr()));
  }

  // `t`'s view: its storage in place, or a contiguous copy kept in `keep`.
  // (Attributes by interned name, and the layout and device by identity
  // and flag where they are the common ones: this runs for every due tensor
  // at every step, ~70 per step on a small CNN.)
  Status ViewOf(const std::string& name, py::object t, TensorView* v, py::object* keep) {
    try {
      const py::object dtype = Attr(t, TSTAT_INTERNED("dtype"));
      PyObject* code = PyDict_GetItem(dtypes_.ptr(), dtype.ptr());
      if (code == nullptr) {
        return Status::NotSupported(
            name + ": dtype " + py::str(dtype).cast<std::string>() +
            " is not one tstat reduces (float32, float16, bfloat16, float64, int32, int64, uint8)");
      }
      const py::object layout = Attr(t, TSTAT_INTERNED("layout"));
      if (!layout.is(strided_)) {
        const std::string text = py::str(layout).cast<std::string>();
        if (text == "torch.sparse_coo" && Attr(t, TSTAT_INTERNED("is_cpu")).cast<bool>()) {
          // nn.Embedding(sparse=True)'s gradient: its stored rows, with the
          // rows given twice summed (the gradient's norms are exact).
          *keep = Call(Call(t, TSTAT_INTERNED("coalesce")), TSTAT_INTERNED("values"));
          return ViewOf(name, *keep, v, keep);
        }
        if (text != "torch.strided") {
          return Status::NotSupported(
              name + ": a " + text +
              " tensor (tstat reads dense tensors and CPU sparse COO ones; a CUDA sparse "
              "gradient comes from nn.Embedding(sparse=True), and coalescing it would wait "
              "for the device: capture the embedding with sparse=False, or save "
              "grad.coalesce().values() with save_tensor)");
        }
        strided_ = layout;  // torch's layouts are singletons
      }
      if (Attr(t, TSTAT_INTERNED("is_cpu")).cast<bool>()) {
        v->space = MemorySpace::kHost;
        v->device = 0;
      } else if (Attr(t, TSTAT_INTERNED("is_cuda")).cast<bool>()) {
        v->space = MemorySpace::kCuda;
        v->device = Call(t, TSTAT_INTERNED("get_device")).cast<int>();
      } else {
        return Status::NotSupported(
            name + ": a tensor on device '" +
            Attr(Attr(t, TSTAT_INTERNED("device")), TSTAT_INTERNED("type")).cast<std::string>() +
            "' (tstat reads CPU and CUDA tensors)");
      }
      if (!Call(t, TSTAT_INTERNED("is_contiguous")).cast<bool>()) {
        *keep = t.attr("contiguous")();
        t = *keep;
      }
      v->dtype = static_cast<DType>(py::reinterpret_borrow<py::object>(code).cast<int>());
      v->data =
          reinterpret_cast<const void*>(Call(t, TSTAT_INTERNED("data_ptr")).cast<std::uintptr_t>());
      v->shape.clear();
      v->numel = 1;
      for (py::handle d : py::tuple(Attr(t, TSTAT_INTERNED("shape")))) {
        v->shape.push_back(d.cast<std::int64_t>());
        v->numel *= v->shape.back();
      }
      return Status::OK();
    } catch (py::error_already_set& e) {
      return FromPython(name, e);
    } catch (const py::cast_error& e) {
      return Status::InvalidArgument(name + ": not a torch tensor (" + e.what() + ")");
    }
  }

  // Takes back the tensors the capture thread has read (all of them with
  // `wait`), releasing them; one whose version counter moved since it was
  // queued is dropped (its record left out).
  void FinishQueued(bool wait) {
    if (queued_.empty()) return;
    // A parameter may be changed in place during the forward (clamped,
    // renormalized): its version is compared only when the forward or the
    // step has ended (a waiting take-back), or a read that finished before
    // the change would be kept. What was queued after it waits as well.
    if (!wait && queued_.front().slot->kind == SlotKind::kParameter) return;
    changed_.clear();
    const auto unchanged = [this](std::uint32_t id) {
      py::gil_scoped_acquire gil;
      const Queued& q = queued_[changed_.size()];
      changed_.push_back(q.slot->id == id && q.version >= 0 && VersionOf(q.tensor) != q.version);
      return !changed_.back();
    };
    std::size_t taken = 0;
    if (wait) {
      py::gil_scoped_release release;  // other Python threads run meanwhile
      taken = session_->FinishEarly(wait, unchanged);
    } else {
      taken = session_->FinishEarly(wait, unchanged);
    }
    for (std::size_t i = 0; i < taken; ++i) {
      Slot& s = *queued_[i].slot;
      s.queued = false;
      // A parameter changed meanwhile is still there: EndStep reads it.
      if (i < changed_.size() && changed_[i] && s.kind == SlotKind::kTensor) DropChanged(s);
    }
    queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(taken));
  }

  // Session::CaptureEarly of slot `id`. A reduction on this thread (kNow)
  // runs without the GIL; handing a tensor to the capture thread keeps it:
  // that only resolves the view (a callback that would take the GIL back)
  // and queues a job. (A queue without room reduces at once, with the GIL:
  // rare, and only as long as one reduction.) Deadlock-free as the other
  // calls are: the hook's lock serialises every call that takes the
  // session's mutex, and no session thread takes the GIL.
  Result<EarlyCapture> CaptureEarly(std::uint32_t id, EarlyCaptureMode mode) {
    if (mode != EarlyCaptureMode::kNow) return session_->CaptureEarly(id, mode);
    py::gil_scoped_release release;
    return session_->CaptureEarly(id, mode);
  }

  // `tensor`, `s`'s, is with the capture thread: held until taken back.
  void Queue(Slot& s, py::object tensor) {
    const std::int64_t version = VersionOf(tensor);
    queued_.push_back({&s, std::move(tensor), version});
    s.queued = true;
    s.version = -1;
    ++background_captures_;
  }

  // Watches `s`'s tensor, just read on this thread, for an in-place change
  // until the step ends. A tensor without a version counter, or one that
  // takes no weak reference, is not watched: it stays read on this thread.
  void Probe(Slot& s) {
    const std::int64_t version = VersionOf(s.source);
    PyObject* ref = version < 0 ? nullptr : PyWeakref_NewRef(s.source.ptr(), nullptr);
    if (ref == nullptr) {
      PyErr_Clear();
      return;
    }
    s.probe = py::reinterpret_steal<py::object>(ref);
    s.probe_version = version;
  }

  // The probes: a tensor that is still there with another version was
  // changed in place after it was read (x += y on a layer's output), so its
  // slot stays read on this thread; the others go to the capture thread. (A
  // tensor freed meanwhile was not kept by autograd or the model; should
  // later code change it after all, the queued read's version check drops
  // that step.)
  void CheckProbes() {
    for (auto& s : slots_) {
      if (s->probe.is_none()) continue;
      PyObject* t = PyWeakref_GetObject(s->probe.ptr());  // borrowed; Py_None once freed
      const bool changed = t != nullptr && t != Py_None &&
                           VersionOf(py::reinterpret_borrow<py::object>(t)) != s->probe_version;
      if (t == nullptr) PyErr_Clear();
      s->early = s->early || changed;
      s->background = !s->early;
      s->probe = py::none();
    }
  }

  // Tensors left for EndStep whose values changed since they were set: what
  // EndStep would read is not what the layer produced, so it is not read
  // (counted, and said once per tensor); later steps read it when it is set.
  void DropChangedInPlace() {
    for (auto& s : slots_) {
      if (s->kind != SlotKind::kTensor || s->source.is_none() || s->version < 0) continue;
      if (VersionOf(s->source) != s->version) DropChanged(*s);
    }
  }

  void DropChanged(Slot& s) {
    s.source = py::none();
    s.keep = py::none();
    s.version = -1;
    s.early = true;
    ++changed_in_place_;
    warnings_.push_back(
        s.name +
        " was changed in place after the hook read it (an in-place op on it later in the "
        "step, such as x += y or an activation with inplace=True): its values at this step "
        "are not captured (counters()['changed_in_place']); from the next step on it is read "
        "when it is produced");
  }

  // set()'s part after the slot took `s.source`: registers it, reads it now
  // or hands it to the capture thread, or leaves it for EndStep.
  void Hold(Slot& s, bool now) {
    if (!s.registered && !s.failed) Register(s);
    if (!s.registered || s.source.is_none()) return;
    PyObject* numel = PyObject_GetAttr(s.source.ptr(), TSTAT_INTERNED("numel"));
    if (numel == nullptr) {  // not a tensor: EndStep's view says so
      PyErr_Clear();
      return;
    }
    const py::object numel_fn = py::reinterpret_steal<py::object>(numel);
    const bool read_now = now || s.early;
    if (Attr(s.source, TSTAT_INTERNED("is_cuda")).cast<bool>()) {
      if (read_now) s.source = s.source.attr("detach")().attr("clone")();
    } else if (read_now || numel_fn().cast<std::int64_t>() >= kSmallTensorElements) {
      const EarlyCaptureMode mode =
          !read_now && s.background ? EarlyCaptureMode::kInBackground : EarlyCaptureMode::kNow;
      Result<EarlyCapture> early = CaptureEarly(s.id, mode);
      if (early.ok() && *early == EarlyCapture::kQueued) {
        Queue(s, std::move(s.source));
        s.source = py::none();
        return;
      }
      if (early.ok() && *early != EarlyCapture::kAtEndStep) {
        if (*early == EarlyCapture::kCaptured && !read_now && !s.background) Probe(s);
        s.source = py::none();
        s.keep = py::none();
        return;
      }
    }
    s.version = VersionOf(s.source);
  }

  void RegisterPending() {
    for (auto& s : slots_) {
      if (!s->registered && !s->failed) Register(*s);
    }
  }

  // Registers `s` with its current tensor (none: not yet). A slot that
  // cannot be registered is never retried; warnings() says why.
  void Register(Slot& s) {
    py::object t = Current(s);
    if (t.is_none()) return;
    TensorSpec spec;
    spec.name = s.name;
    spec.collections = s.collections;
    spec.unit_axis = s.unit_axis;
    py::object copy = py::none();
    Status st = ViewOf(s.name, t, &spec.view, &copy);
    if (st.ok()) {
      Slot* slot = &s;  // slots_ holds unique_ptrs: the address is stable
      spec.view_fn = [this, slot](TensorView* view) -> Status {
        py::gil_scoped_acquire gil;
        py::object current;
        try {
          current = Current(*slot);
        } catch (py::error_already_set& e) {
          return FromPython(slot->name, e);
        }
        if (current.is_none()) {
          view->data = nullptr;
          return Status::OK();
        }
        return ViewOf(slot->name, current, view, &slot->keep);
      };
      Result<std::uint32_t> id = session_->RegisterTensor(spec);
      st = id.status();
      if (id.ok()) s.id = *id;
    }
    if (!st.ok()) {
      if (st.code() == StatusCode::kFailedPrecondition) Raise(st);  // closed
      s.failed = true;
      warnings_.push_back(s.name + " is not captured: " + st.message());
      return;
    }
    s.registered = true;
  }

  void ClearStep() {
    for (auto& s : slots_) {
      if (s->kind == SlotKind::kTensor) s->source = py::none();
      s->fresh = false;
      s->keep = py::none();
    }
  }

  py::dict dtypes_;                  // torch dtype -> tstat::DType
  py::object strided_ = py::none();  // torch.strided, once a tensor showed it
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::string> warnings_;
  std::uint64_t changed_in_place_ = 0;  // tensors not captured: changed after set
  // A tensor with the capture thread: its slot, the tensor (held until taken
  // back) and its version counter then.
  struct Queued {
    Slot* slot;
    py::object tensor;
    std::int64_t version;
  };
  std::vector<Queued> queued_;             // oldest first
  std::vector<char> changed_;              // FinishQueued's verdicts, in queued_'s order
  std::uint64_t background_captures_ = 0;  // tensors handed to the capture thread
  std::unique_ptr<Session> session_;       // last: closed (view callbacks run) before the slots go
};

}  // namespace

SessionRef* NativeSession(py::handle session) {
  return reinterpret_cast<SessionRef*>(&session.cast<PySession&>());
}

void SetTensor(SessionRef* session, int slot, py::object tensor) {
  reinterpret_cast<PySession*>(session)->set(slot, std::move(tensor), /*now=*/false);
}

void BindSession(py::module_& m) {
  py::class_<PySession>(m, "Session")
      .def(py::init<const std::string&, const std::string&, const std::optional<std::string>&,
                    std::optional<int>, std::optional<int>, std::optional<bool>, py::dict, int,
                    const std::string&>(),
           py::arg("config_json"), py::arg("config_path"), py::arg("out_dir"), py::arg("rank"),
           py::arg("world_size"), py::arg("dry_run"), py::arg("dtypes"), py::arg("num_classes"),
           py::arg("predictions_name"))
      .def("add_slot", &PySession::add_slot, py::arg("name"), py::arg("collections"),
           py::arg("kind"), py::arg("source"), py::arg("unit_axis") = -1)
      .def("set", &PySession::set, py::arg("slot"), py::arg("tensor"), py::arg("now") = false)
      .def("settle", &PySession::settle)
      .def("mark_fresh", &PySession::mark_fresh)
      .def("begin_step", &PySession::begin_step)
      .def("begin_step_at", &PySession::begin_step_at)
      .def("set_mode", &PySession::set_mode)
      .def("end_step", &PySession::end_step, py::arg("stream") = 0)
      .def("finish_queued", &PySession::finish_queued)
      .def("queue_parameters", &PySession::queue_parameters)
      .def("close", &PySession::close)
      .def("save_scalar", &PySession::save_scalar)
      .def("should_stop", &PySession::should_stop)
      .def("stop_reason", &PySession::stop_reason)
      .def("request_stop", &PySession::request_stop)
      .def("current_step", &PySession::current_step)
      .def("out_dir", &PySession::out_dir)
      .def("counters", &PySession::counters)
      .def("warnings", &PySession::warnings);
}

}  // namespace tstat::python
