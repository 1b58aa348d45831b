// The C API (tstat/tstat_c.h) over tstat::Session. Every entry point catches
// C++ exceptions (std::bad_alloc, ...) and turns them into status codes; the
// last error is thread-local, as the header promises.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "tstat/engine.h"
#include "tstat/session.h"
#include "tstat/tstat_c.h"

struct tstat_session {
  std::unique_ptr<tstat::Session> session;
};

namespace {

thread_local std::string g_last_error;  // this thread's last failure (API contract)

int Fail(const tstat::Status& s) {
  g_last_error = s.ToString();
  return static_cast<int>(s.code());
}

int Report(const tstat::Status& s) { return s.ok() ? TSTAT_OK : Fail(s); }

// A C mode outside TSTAT_TRAIN..TSTAT_GLOBAL (1..4), named as given.
tstat::Status InvalidMode(int mode) {
  return tstat::Status::InvalidArgument("invalid mode " + std::to_string(mode) +
                                        " (TSTAT_TRAIN 1, TSTAT_EVAL 2, TSTAT_PREDICT 3, "
                                        "TSTAT_GLOBAL 4)");
}

int Null(const char* what) {
  return Fail(tstat::Status::InvalidArgument(std::string(what) + " is NULL"));
}

template <class F>
int Guard(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Fail(tstat::Status::ResourceExhausted("out of memory"));
  } catch (const std::exception& e) {
    return Fail(tstat::Status::Internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return Fail(tstat::Status::Internal("unexpected exception"));
  }
}

tstat::Status MakeView(const void* data, int dtype, const int64_t* shape, int ndim, int space,
                       int device, tstat::TensorView* v) {
  if (dtype < 0 || dtype >= tstat::kNumDTypes) {
    return tstat::Status::InvalidArgument("invalid dtype " + std::to_string(dtype));
  }
  if (space != TSTAT_HOST && space != TSTAT_CUDA) {
    return tstat::Status::InvalidArgument("invalid memory_space " + std::to_string(space));
  }
  if (ndim < 0 || ndim > TSTAT_MAX_DIMS) {
    return tstat::Status::InvalidArgument("ndim must be in [0, " + std::to_string(TSTAT_MAX_DIMS) +
                                          "]");
  }
  if (ndim > 0 && shape == nullptr) return tstat::Status::InvalidArgument("shape is NULL");
  v->data = data;
  v->dtype = static_cast<tstat::DType>(dtype);
  v->space = static_cast<tstat::MemorySpace>(space);
  v->device = device;
  v->shape.assign(shape, shape + ndim);
  v->numel = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0) return tstat::Status::InvalidArgument("shape has a negative dimension");
    if (shape[i] != 0 && v->numel > INT64_MAX / shape[i]) {
      return tstat::Status::InvalidArgument("shape overflows int64");
    }
    v->numel *= shape[i];
  }
  return tstat::Status::OK();
}

tstat::Status Collections(const char* const* names, int n, std::vector<std::string>* out) {
  if (n < 0 || (n > 0 && names == nullptr)) {
    return tstat::Status::InvalidArgument("collections is NULL or num_collections < 0");
  }
  for (int i = 0; i < n; ++i) {
    if (names[i] == nullptr) return tstat::Status::InvalidArgument("a collection name is NULL");
    out->emplace_back(names[i]);
  }
  return tstat::Status::OK();
}

tstat::RunOverrides Overrides(const char* out_dir, int rank, int world_size) {
  tstat::RunOverrides o;
  if (out_dir != nullptr) o.out_dir = out_dir;
  if (rank >= 0) o.rank = rank;
  if (world_size >= 0) o.world_size = world_size;
  return o;
}

int Created(tstat::Result<std::unique_ptr<tstat::Session>> r, tstat_session** out) {
  if (!r.ok()) return Fail(r.status());
  *out = new tstat_session{std::move(r).value()};
  return TSTAT_OK;
}

}  // namespace

extern "C" {

const char* tstat_last_error(void) { return g_last_error.c_str(); }
const char* tstat_version(void) { return tstat::Version(); }

int tstat_session_create(const char* config_path, const char* out_dir, int rank, int world_size,
                         tstat_session** out) {
  return Guard([&]() -> int {
    if (out == nullptr) return Null("out");
    *out = nullptr;
    return Created(tstat::Session::CreateFromFile(config_path ? config_path : "",
                                                  Overrides(out_dir, rank, world_size)),
                   out);
  });
}

int tstat_session_create_json(const char* config_json, const char* out_dir, int rank,
                              int world_size, tstat_session** out) {
  return Guard([&]() -> int {
    if (out == nullptr) return Null("out");
    *out = nullptr;
    if (config_json == nullptr) return Null("config_json");
    return Created(
        tstat::Session::CreateFromJson(config_json, Overrides(out_dir, rank, world_size)), out);
  });
}

int tstat_session_close(tstat_session* s) {
  return Guard(
      [&]() -> int { return s == nullptr ? Null("session") : Report(s->session->Close()); });
}

void tstat_session_destroy(tstat_session* s) {
  (void)Guard([&]() -> int {
    delete s;
    return TSTAT_OK;
  });
}

int tstat_register_tensor(tstat_session* s, const char* name, const void* data, int dtype,
                          const int64_t* shape, int ndim, int memory_space, int device,
                          const char* const* collections, int num_collections) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    if (name == nullptr) return Null("name");
    tstat::TensorSpec spec;
    spec.name = name;
    tstat::Status st = MakeView(data, dtype, shape, ndim, memory_space, device, &spec.view);
    if (st.ok()) st = Collections(collections, num_collections, &spec.collections);
    if (!st.ok()) return Fail(st.WithContext("tensor \"" + spec.name + "\""));
    auto id = s->session->RegisterTensor(spec);
    return Report(id.status());
  });
}

int tstat_register_tensor_fn(tstat_session* s, const char* name, int dtype, const int64_t* shape,
                             int ndim, int memory_space, int device, tstat_view_fn fn,
                             void* user_data, const char* const* collections, int num_collections) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    if (name == nullptr) return Null("name");
    if (fn == nullptr) return Null("fn");
    tstat::TensorSpec spec;
    spec.name = name;
    tstat::Status st = MakeView(nullptr, dtype, shape, ndim, memory_space, device, &spec.view);
    if (st.ok()) st = Collections(collections, num_collections, &spec.collections);
    if (!st.ok()) return Fail(st.WithContext("tensor \"" + spec.name + "\""));
    spec.view_fn = [fn, user_data](tstat::TensorView* v) -> tstat::Status {
      tstat_tensor_view c{};
      c.data = nullptr;
      c.dtype = static_cast<int32_t>(v->dtype);
      c.ndim = static_cast<int32_t>(v->shape.size());
      for (std::size_t i = 0; i < v->shape.size() && i < TSTAT_MAX_DIMS; ++i)
        c.shape[i] = v->shape[i];
      c.memory_space = static_cast<int32_t>(v->space);
      c.device = v->device;
      const int rc = fn(user_data, &c);
      if (rc != TSTAT_OK) {
        return tstat::Status(static_cast<tstat::StatusCode>(rc >= 0 && rc <= 11 ? rc : 10),
                             "the view callback returned " + std::to_string(rc));
      }
      if (c.data == nullptr) {
        v->data = nullptr;
        return tstat::Status::OK();
      }
      return MakeView(c.data, c.dtype, c.shape, c.ndim, c.memory_space, c.device, v);
    };
    auto id = s->session->RegisterTensor(spec);
    return Report(id.status());
  });
}

int tstat_set_mode(tstat_session* s, int mode) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    // Checked as the int it is: a cast to the 8-bit Mode first would turn -1
    // into "invalid mode 255".
    if (mode < 1 || mode > 4) return Report(InvalidMode(mode));
    return Report(s->session->SetMode(static_cast<tstat::Mode>(mode)));
  });
}

int tstat_step_begin(tstat_session* s) {
  return Guard(
      [&]() -> int { return s == nullptr ? Null("session") : Report(s->session->BeginStep()); });
}

int tstat_step_begin_at(tstat_session* s, int mode, int64_t global_step, int64_t mode_step) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    if (mode < 1 || mode > 4) return Report(InvalidMode(mode));
    tstat::StepKey key;
    key.mode = static_cast<tstat::Mode>(mode);
    key.global_step = global_step;
    key.mode_step = mode_step;
    return Report(s->session->BeginStep(key));
  });
}

int tstat_step_end(tstat_session* s, void* cuda_stream) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    return Report(s->session->EndStep(static_cast<CUstream_st*>(cuda_stream)));
  });
}

int tstat_save_scalar(tstat_session* s, const char* name, double value) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    if (name == nullptr) return Null("name");
    return Report(s->session->SaveScalar(name, value));
  });
}

int tstat_save_tensor(tstat_session* s, const char* name, const void* data, int dtype,
                      const int64_t* shape, int ndim, int memory_space, int device, int raw,
                      void* cuda_stream) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    if (name == nullptr) return Null("name");
    tstat::TensorView view;
    const tstat::Status st = MakeView(data, dtype, shape, ndim, memory_space, device, &view);
    if (!st.ok()) return Fail(st.WithContext(std::string("tensor \"") + name + "\""));
    tstat::SaveTensorOptions options;
    options.raw = raw != 0;
    options.stream = static_cast<CUstream_st*>(cuda_stream);
    return Report(s->session->SaveTensor(name, view, options));
  });
}

int tstat_should_stop(const tstat_session* s) {
  return s != nullptr && s->session->ShouldStop() ? 1 : 0;
}

int tstat_request_stop(tstat_session* s, const char* reason) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    s->session->RequestStop(reason ? reason : "");
    return TSTAT_OK;
  });
}

int tstat_stop_reason(const tstat_session* s, char* buf, int64_t size) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    if (buf == nullptr || size <= 0) return Null("buf");
    const std::string r = s->session->stop_reason();
    const std::size_t n = std::min<std::size_t>(r.size(), static_cast<std::size_t>(size - 1));
    std::memcpy(buf, r.data(), n);
    buf[n] = '\0';
    return TSTAT_OK;
  });
}

int tstat_get_counters(const tstat_session* s, tstat_counters* out) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    if (out == nullptr) return Null("out");
    const tstat::PipelineCounters c = s->session->counters();
    *out = tstat_counters{
        c.steps_captured,     c.records_written,  c.bytes_written,          c.raw_dropped,
        c.raw_dropped_bytes,  c.records_lost,     c.write_errors,           c.stats_waits,
        c.stats_wait_seconds, c.queue_high_water, c.queue_high_water_bytes, c.segments_written};
    return TSTAT_OK;
  });
}

int tstat_session_status(const tstat_session* s) {
  return Guard(
      [&]() -> int { return s == nullptr ? Null("session") : Report(s->session->status()); });
}

int tstat_capture_totals(const tstat_session* s, uint64_t* steps, double* step_seconds,
                         double* capture_seconds) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    const tstat::CaptureTotals t = s->session->capture_totals();
    if (steps) *steps = t.steps;
    if (step_seconds) *step_seconds = t.step_seconds;
    if (capture_seconds) *capture_seconds = t.capture_seconds;
    return TSTAT_OK;
  });
}

int tstat_current_step(const tstat_session* s, int* mode, int64_t* global_step,
                       int64_t* mode_step) {
  return Guard([&]() -> int {
    if (s == nullptr) return Null("session");
    const tstat::StepKey k = s->session->current_step();
    if (mode) *mode = static_cast<int>(k.mode);
    if (global_step) *global_step = k.global_step;
    if (mode_step) *mode_step = k.mode_step;
    return TSTAT_OK;
  });
}

}  // extern "C"
