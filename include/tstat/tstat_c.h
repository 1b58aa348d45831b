/* tstat C API: the capture session for C, Python (ctypes), Julia, Rust, ...
 *
 * Every function returns a status code (TSTAT_OK = 0; the codes equal
 * tstat::StatusCode) and, on failure, sets a message readable with
 * tstat_last_error() on the same thread (thread-local; valid until the next
 * failing call on that thread). Handles are opaque. Nothing here aborts,
 * exits, prints or throws.
 *
 *   tstat_session* s = NULL;
 *   if (tstat_session_create_json("{\"out_dir\": \"/runs/exp1\"}", NULL, -1, -1, &s))
 *     fprintf(stderr, "%s\n", tstat_last_error());
 *   int64_t shape[2] = {64, 32};
 *   tstat_register_tensor(s, "fc1.weight", w, TSTAT_F32, shape, 2, TSTAT_HOST, 0, NULL, 0);
 *   for (...) { tstat_step_begin(s); ...; tstat_save_scalar(s, "loss", loss);
 *               tstat_step_end(s, NULL); if (tstat_should_stop(s)) break; }
 *   tstat_session_close(s);
 *   tstat_session_destroy(s);
 *
 * Thread safety: as tstat::Session (session.h): any thread; capture calls on
 * one session are serialized. A view callback must not call the session.
 */
#ifndef TSTAT_TSTAT_C_H_
#define TSTAT_TSTAT_C_H_

#include <stdint.h>

#include "tstat/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (tstat::StatusCode). */
enum {
  TSTAT_OK = 0,
  TSTAT_INVALID_ARGUMENT = 1,
  TSTAT_NOT_SUPPORTED = 2,
  TSTAT_CUDA_ERROR = 3,
  TSTAT_IO_ERROR = 4,
  TSTAT_RESOURCE_EXHAUSTED = 5,
  TSTAT_NOT_FOUND = 6,
  TSTAT_CORRUPTION = 7,
  TSTAT_FAILED_PRECONDITION = 8,
  TSTAT_UNAVAILABLE = 9,
  TSTAT_INTERNAL = 10,
  TSTAT_STEP_UNAVAILABLE = 11
};

/* Element types (tstat::DType). */
enum {
  TSTAT_F32 = 0,
  TSTAT_F16 = 1,
  TSTAT_BF16 = 2,
  TSTAT_F64 = 3,
  TSTAT_F8E4M3 = 4,
  TSTAT_F8E5M2 = 5,
  TSTAT_I32 = 6,
  TSTAT_I64 = 7,
  TSTAT_U8 = 8
};

/* Memory spaces (tstat::MemorySpace). */
enum { TSTAT_HOST = 0, TSTAT_CUDA = 1 };

/* Modes (tstat::Mode, numbered as smdebug's ModeKeys). */
enum { TSTAT_TRAIN = 1, TSTAT_EVAL = 2, TSTAT_PREDICT = 3, TSTAT_GLOBAL = 4 };

typedef struct tstat_session tstat_session;

/* A tensor's current view, filled by a view callback. Before the call it
 * holds the registered dtype/shape/space/device and data = NULL; set data
 * (and, when it changed, ndim/shape) and return TSTAT_OK. Leave data NULL
 * when the tensor does not exist at this step. */
#define TSTAT_MAX_DIMS 16
typedef struct tstat_tensor_view {
  const void* data;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[TSTAT_MAX_DIMS];
  int32_t memory_space;
  int32_t device;
} tstat_tensor_view;

typedef int (*tstat_view_fn)(void* user_data, tstat_tensor_view* view);

/* Pipeline counters (tstat::PipelineCounters). */
typedef struct tstat_counters {
  uint64_t steps_captured;
  uint64_t records_written;
  uint64_t bytes_written;
  uint64_t raw_dropped;
  uint64_t raw_dropped_bytes;
  uint64_t records_lost;
  uint64_t write_errors;
  uint64_t stats_waits;
  double stats_wait_seconds;
  uint64_t queue_high_water;
  uint64_t queue_high_water_bytes;
  uint64_t segments_written;
} tstat_counters;

/* The message of the last failing call on this thread ("" if none). */
TSTAT_EXPORT const char* tstat_last_error(void);
/* "MAJOR.MINOR.PATCH". */
TSTAT_EXPORT const char* tstat_version(void);

/* Creates a session from a JSON config file (path NULL or "": $TSTAT_CONFIG,
 * and when that is unset too, the default config) or from JSON text.
 * out_dir (NULL: the config's), rank and world_size (< 0: the config's)
 * override the config. */
TSTAT_EXPORT int tstat_session_create(const char* config_path, const char* out_dir, int rank,
                                      int world_size, tstat_session** out);
TSTAT_EXPORT int tstat_session_create_json(const char* config_json, const char* out_dir, int rank,
                                           int world_size, tstat_session** out);
/* Ends an open step, drains, flushes, closes the run. Returns the session's
 * final status; calling it again returns it again. */
TSTAT_EXPORT int tstat_session_close(tstat_session* s);
/* Closes (if needed) and frees. NULL is ignored. */
TSTAT_EXPORT void tstat_session_destroy(tstat_session* s);

/* Registers a tensor at a fixed address. collections may be NULL when
 * num_collections is 0. */
TSTAT_EXPORT int tstat_register_tensor(tstat_session* s, const char* name, const void* data,
                                       int dtype, const int64_t* shape, int ndim, int memory_space,
                                       int device, const char* const* collections,
                                       int num_collections);
/* Registers a tensor whose view is asked for at each capture. */
TSTAT_EXPORT int tstat_register_tensor_fn(tstat_session* s, const char* name, int dtype,
                                          const int64_t* shape, int ndim, int memory_space,
                                          int device, tstat_view_fn fn, void* user_data,
                                          const char* const* collections, int num_collections);

TSTAT_EXPORT int tstat_set_mode(tstat_session* s, int mode);
TSTAT_EXPORT int tstat_step_begin(tstat_session* s);
/* Opens a step of your own numbers (from the first step on, or resuming
 * after a checkpoint); must be after the last. global_step -1: the next
 * global step (number the mode step only). */
TSTAT_EXPORT int tstat_step_begin_at(tstat_session* s, int mode, int64_t global_step,
                                     int64_t mode_step);
/* cuda_stream: a cudaStream_t (NULL: the legacy default stream). */
TSTAT_EXPORT int tstat_step_end(tstat_session* s, void* cuda_stream);

TSTAT_EXPORT int tstat_save_scalar(tstat_session* s, const char* name, double value);
/* raw != 0 also stores the bytes. cuda_stream: for CUDA tensors. */
TSTAT_EXPORT int tstat_save_tensor(tstat_session* s, const char* name, const void* data, int dtype,
                                   const int64_t* shape, int ndim, int memory_space, int device,
                                   int raw, void* cuda_stream);

/* 1 when training should stop (RequestStop or the run's STOP file), 0 when
 * not, 0 for NULL. */
TSTAT_EXPORT int tstat_should_stop(const tstat_session* s);
TSTAT_EXPORT int tstat_request_stop(tstat_session* s, const char* reason);
/* Copies the stop reason (NUL-terminated, truncated to size) into buf. */
TSTAT_EXPORT int tstat_stop_reason(const tstat_session* s, char* buf, int64_t size);

TSTAT_EXPORT int tstat_get_counters(const tstat_session* s, tstat_counters* out);
/* The first asynchronous error (failed write/flush) as a status code; its
 * message goes to tstat_last_error(). */
TSTAT_EXPORT int tstat_session_status(const tstat_session* s);
/* Totals over every step ended so far (capture overhead): steps, their wall
 * time and the time spent inside tstat calls. Any pointer may be NULL. */
TSTAT_EXPORT int tstat_capture_totals(const tstat_session* s, uint64_t* steps, double* step_seconds,
                                      double* capture_seconds);
/* The step being captured (or the last one ended). */
TSTAT_EXPORT int tstat_current_step(const tstat_session* s, int* mode, int64_t* global_step,
                                    int64_t* mode_step);

#ifdef __cplusplus
}
#endif

#endif /* TSTAT_TSTAT_C_H_ */
