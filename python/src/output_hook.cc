// _tstat.OutputHook: the forward hook tstat.pytorch.Hook puts on each leaf
// module (Hook._output_hook, python/tstat/pytorch.py), in C++.
//
// It runs after every leaf module's forward at every step, between the
// model's own kernels, which have pushed the interpreter's code and data out
// of the caches by then: what a call costs is mostly what it touches. A
// Python closure touches its frame, the Hook's methods and their frames, its
// lock and pybind11's dispatch into the session. This does the common case
// itself, with the C API: the module's first call in the step, one tensor
// out - counted in hook._calls, set on its slot under hook._lock, and its
// grad_fn noted in hook._produced. What needs naming is left to the Hook's
// Python methods, called from here:
//   _functional_activation(path, calls, x, grad_fn)  input 0 came from an
//       autograd node not seen in this step (an activation called as a
//       function, perhaps);
//   _outputs_after_first(path, calls, output)  a module called again in the
//       step, or one whose output is not one tensor.
// What goes wrong in it is a warning (hook._not_captured, once per message),
// never an exception in the training's forward.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <structmember.h>

#include <cstddef>
#include <exception>

#include "python/src/bindings.h"

// A type whose instances torch calls through vectorcall, made with
// PyType_FromSpec (its __vectorcalloffset__ member): Python 3.9 and newer.
#if PY_VERSION_HEX < 0x03090000
#error "tstat's Python module needs Python 3.9 or newer"
#endif

namespace py = pybind11;

namespace tstat::python {
namespace {

// A new reference to `o` (Py_NewRef is Python 3.10's).
PyObject* NewRef(PyObject* o) {
  Py_INCREF(o);
  return o;
}

struct OutputHookObject {
  PyObject ob_base;           // PyObject_HEAD
  vectorcallfunc vectorcall;  // Call
  PyObject* hook;             // the tstat.pytorch.Hook
  PyObject* path;             // the module's path in the run's names (str)
  PyObject* name;             // path + "_output"
  PyObject* calls;            // hook._calls: path -> calls in this step (cleared in place)
  PyObject* produced;         // hook._produced: id(grad_fn) -> (grad_fn, name, weakref)
  PyObject* lock;             // hook._lock
  PyObject* tensor_type;      // torch.Tensor
  PyObject* session_object;   // the _tstat.Session `session` belongs to
  SessionRef* session;
  long slot;       // the slot of `name`, -1 until the first tensor is set
  int functional;  // look at what made input 0 (activations called as functions)
  int note;        // note the output's grad_fn in `produced`
};

// An interned string, made once per place it is used (and never freed: it
// may be used until the interpreter ends).
#define TSTAT_INTERNED(text)                                            \
  ([]() -> PyObject* {                                                  \
    static PyObject* const interned = PyUnicode_InternFromString(text); \
    return interned;                                                    \
  }())

// hook._closed: 1, 0, or -1 with a Python error.
int IsClosed(OutputHookObject* h) {
  PyObject* closed = PyObject_GetAttr(h->hook, TSTAT_INTERNED("_closed"));
  if (closed == nullptr) return -1;
  const int truth = PyObject_IsTrue(closed);
  Py_DECREF(closed);
  return truth;
}

// hook._calls[path] += 1; the calls before this one, or -1 with an error.
long CountCall(OutputHookObject* h) {
  PyObject* before = PyDict_GetItemWithError(h->calls, h->path);  // borrowed
  if (before == nullptr && PyErr_Occurred()) return -1;
  const long calls = before == nullptr ? 0 : PyLong_AsLong(before);
  if (calls < 0) return -1;
  PyObject* after = PyLong_FromLong(calls + 1);
  if (after == nullptr) return -1;
  const int rc = PyDict_SetItem(h->calls, h->path, after);
  Py_DECREF(after);
  return rc < 0 ? -1 : calls;
}

// Calls hook.<method>(path, calls, a, b) and drops its result; -1 on error.
int CallBack(OutputHookObject* h, PyObject* method, long calls, PyObject* a, PyObject* b) {
  PyObject* n = PyLong_FromLong(calls);
  if (n == nullptr) return -1;
  PyObject* r = b == nullptr
                    ? PyObject_CallMethodObjArgs(h->hook, method, h->path, n, a, nullptr)
                    : PyObject_CallMethodObjArgs(h->hook, method, h->path, n, a, b, nullptr);
  Py_DECREF(n);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

// What Hook.on_output did with input 0: an autograd node not seen in this
// step goes to hook._functional_activation. 0, or -1 with an error.
int LookAtInput(OutputHookObject* h, PyObject* inputs, long calls) {
  if (!PyTuple_Check(inputs) || PyTuple_GET_SIZE(inputs) == 0) return 0;
  PyObject* x = PyTuple_GET_ITEM(inputs, 0);  // borrowed
  const int is_tensor = PyObject_IsInstance(x, h->tensor_type);
  if (is_tensor <= 0) return is_tensor;
  PyObject* fn = PyObject_GetAttr(x, TSTAT_INTERNED("grad_fn"));
  if (fn == nullptr) return -1;
  int rc = 0;
  if (fn != Py_None) {
    PyObject* key = PyLong_FromVoidPtr(fn);  // id(fn)
    const int seen = key == nullptr ? -1 : PyDict_Contains(h->produced, key);
    Py_XDECREF(key);
    if (seen < 0) {
      rc = -1;
    } else if (seen == 0) {
      rc = CallBack(h, TSTAT_INTERNED("_functional_activation"), calls, x, fn);
    }
  }
  Py_DECREF(fn);
  return rc;
}

// Hook._set(name, [], output) under hook._lock: 0, or -1 with an error.
int SetOutput(OutputHookObject* h, PyObject* output) {
  PyObject* r = PyObject_CallMethodObjArgs(h->lock, TSTAT_INTERNED("acquire"), nullptr);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  const int closed = IsClosed(h);  // closed meanwhile: nothing to set
  int rc = closed < 0 ? -1 : 0;
  if (closed == 0 && h->slot < 0) {
    PyObject* collections = PyList_New(0);
    PyObject* kind = collections == nullptr ? nullptr : PyLong_FromLong(0);  // _TENSOR
    PyObject* slot = kind == nullptr
                         ? nullptr
                         : PyObject_CallMethodObjArgs(h->hook, TSTAT_INTERNED("_slot"), h->name,
                                                      collections, kind, nullptr);
    Py_XDECREF(collections);
    Py_XDECREF(kind);
    const long n = slot == nullptr ? -1 : PyLong_AsLong(slot);
    Py_XDECREF(slot);
    if (n < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "tstat: a negative slot");
      rc = -1;
    } else {
      h->slot = n;
    }
  }
  if (closed == 0 && rc == 0) {
    try {
      SetTensor(h->session, static_cast<int>(h->slot), py::reinterpret_borrow<py::object>(output));
    } catch (py::error_already_set& e) {
      e.restore();
      rc = -1;
    } catch (const StatusError& e) {
      SetPythonError(e.status);
      rc = -1;
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      rc = -1;
    }
  }
  // Released whatever happened, the error (if any) kept.
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  r = PyObject_CallMethodObjArgs(h->lock, TSTAT_INTERNED("release"), nullptr);
  if (r == nullptr) {
    if (type != nullptr)
      PyErr_Clear();  // the first error is the one to see
    else
      return -1;
  }
  Py_XDECREF(r);
  if (type != nullptr) PyErr_Restore(type, value, traceback);
  return rc;
}

// hook._produced[id(output.grad_fn)] = (grad_fn, path, weakref(output)),
// for an output with a grad_fn: what Hook._note_produced does.
int NoteProduced(OutputHookObject* h, PyObject* output) {
  PyObject* fn = PyObject_GetAttr(output, TSTAT_INTERNED("grad_fn"));
  if (fn == nullptr) return -1;
  int rc = 0;
  if (fn != Py_None) {
    PyObject* key = PyLong_FromVoidPtr(fn);
    PyObject* ref = key == nullptr ? nullptr : PyWeakref_NewRef(output, nullptr);
    PyObject* entry = ref == nullptr ? nullptr : PyTuple_Pack(3, fn, h->path, ref);
    rc = entry == nullptr ? -1 : PyDict_SetItem(h->produced, key, entry);
    Py_XDECREF(entry);
    Py_XDECREF(ref);
    Py_XDECREF(key);
  }
  Py_DECREF(fn);
  return rc;
}

// What went wrong in the hook (an Exception: a KeyboardInterrupt or a
// SystemExit is let through) as the warning hook._not_captured gives for the
// module's output, not raised into the training's forward; None, or nullptr
// with the error that is let through.
PyObject* WarnInstead(OutputHookObject* h) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject* r = PyObject_CallMethodObjArgs(h->hook, TSTAT_INTERNED("_not_captured"), h->name,
                                           value != nullptr ? value : Py_None, nullptr);
  if (r == nullptr) PyErr_Clear();  // warnings turned into errors: still not the forward's
  Py_XDECREF(r);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return NewRef(Py_None);
}

// hook(module, inputs, output), as torch calls a forward hook: 0, or -1
// with an error.
int Run(OutputHookObject* h, PyObject* inputs, PyObject* output) {
  const int closed = IsClosed(h);
  if (closed != 0) return closed < 0 ? -1 : 0;
  const long calls = CountCall(h);
  if (calls < 0) return -1;
  if (h->functional && LookAtInput(h, inputs, calls) < 0) return -1;
  if (calls == 0) {
    const int is_tensor = PyObject_IsInstance(output, h->tensor_type);
    if (is_tensor < 0) return -1;
    if (is_tensor) {
      if (SetOutput(h, output) < 0) return -1;
      return h->note ? NoteProduced(h, output) : 0;
    }
  }
  return CallBack(h, TSTAT_INTERNED("_outputs_after_first"), calls, output, nullptr);
}

PyObject* Call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* h = reinterpret_cast<OutputHookObject*>(self);
  if (PyVectorcall_NARGS(nargsf) != 3 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0)) {
    PyErr_SetString(PyExc_TypeError, "OutputHook takes (module, inputs, output)");
    return nullptr;
  }
  if (Run(h, args[1], args[2]) < 0) return WarnInstead(h);
  return NewRef(Py_None);
}

int Traverse(PyObject* self, visitproc visit, void* arg) {
  auto* h = reinterpret_cast<OutputHookObject*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(h->hook);
  Py_VISIT(h->path);
  Py_VISIT(h->name);
  Py_VISIT(h->calls);
  Py_VISIT(h->produced);
  Py_VISIT(h->lock);
  Py_VISIT(h->tensor_type);
  Py_VISIT(h->session_object);
  return 0;
}

int Clear(PyObject* self) {
  auto* h = reinterpret_cast<OutputHookObject*>(self);
  Py_CLEAR(h->hook);
  Py_CLEAR(h->path);
  Py_CLEAR(h->name);
  Py_CLEAR(h->calls);
  Py_CLEAR(h->produced);
  Py_CLEAR(h->lock);
  Py_CLEAR(h->tensor_type);
  Py_CLEAR(h->session_object);
  h->session = nullptr;
  return 0;
}

void Dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

// OutputHook(hook, session, path, functional, note, tensor_type).
PyObject* New(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *hook, *session, *path, *tensor_type;
  int functional = 0, note = 0;
  static const char* kNames[] = {"hook", "session",     "path", "functional",
                                 "note", "tensor_type", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOUppO:OutputHook", const_cast<char**>(kNames),
                                   &hook, &session, &path, &functional, &note, &tensor_type)) {
    return nullptr;
  }
  if (!PyType_Check(tensor_type)) {
    PyErr_SetString(PyExc_TypeError, "OutputHook: tensor_type must be a type (torch.Tensor)");
    return nullptr;
  }
  SessionRef* native = nullptr;
  try {
    native = NativeSession(session);
  } catch (const std::exception&) {
    PyErr_SetString(PyExc_TypeError, "OutputHook: session must be a _tstat.Session");
    return nullptr;
  }
  PyObject* calls = PyObject_GetAttrString(hook, "_calls");
  PyObject* produced = calls == nullptr ? nullptr : PyObject_GetAttrString(hook, "_produced");
  PyObject* lock = produced == nullptr ? nullptr : PyObject_GetAttrString(hook, "_lock");
  PyObject* name = lock == nullptr ? nullptr : PyUnicode_FromFormat("%U_output", path);
  if (name != nullptr && (!PyDict_CheckExact(calls) || !PyDict_CheckExact(produced))) {
    PyErr_SetString(PyExc_TypeError, "OutputHook: hook._calls and hook._produced must be dicts");
    Py_CLEAR(name);
  }
  auto* h =
      name == nullptr ? nullptr : reinterpret_cast<OutputHookObject*>(type->tp_alloc(type, 0));
  if (h == nullptr) {
    Py_XDECREF(calls);
    Py_XDECREF(produced);
    Py_XDECREF(lock);
    Py_XDECREF(name);
    return nullptr;
  }
  h->vectorcall = Call;
  h->hook = NewRef(hook);
  h->path = NewRef(path);
  h->name = name;
  h->calls = calls;
  h->produced = produced;
  h->lock = lock;
  h->tensor_type = NewRef(tensor_type);
  h->session_object = NewRef(session);
  h->session = native;
  h->slot = -1;
  h->functional = functional;
  h->note = note;
  return reinterpret_cast<PyObject*>(h);
}

PyMemberDef kMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET,
     static_cast<Py_ssize_t>(offsetof(OutputHookObject, vectorcall)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot kSlots[] = {
    {Py_tp_doc, const_cast<char*>("tstat.pytorch.Hook's forward hook on a leaf module.")},
    {Py_tp_new, reinterpret_cast<void*>(New)},
    {Py_tp_dealloc, reinterpret_cast<void*>(Dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(Traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(Clear)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_members, kMembers},
    {0, nullptr},
};

PyType_Spec kSpec = {
    "tstat._tstat.OutputHook",
    sizeof(OutputHookObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    kSlots,
};

}  // namespace

void BindOutputHook(py::module_& m) {
  PyObject* type = PyType_FromSpec(&kSpec);
  if (type == nullptr) throw py::error_already_set();
  m.add_object("OutputHook", py::reinterpret_steal<py::object>(type));
}

}  // namespace tstat::python
