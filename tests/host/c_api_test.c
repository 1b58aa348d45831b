/* The C API, compiled as C and linked against libtstat.so: a session from
 * JSON, tensors at fixed addresses and through a view callback, steps in
 * several modes, scalars, ad-hoc tensors, should_stop (request and STOP
 * file), counters, errors with their last-error text, and the real run on
 * disk (the worker's CLOSED marker).
 * With an argument RUN_DIR the run is written there and kept, for
 * c_api_readback_test.cc to read back through Trial.
 * Exit status 0 when every check passes. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tstat/tstat_c.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_OK(expr)                                                               \
  do {                                                                               \
    int rc_ = (expr);                                                                \
    if (rc_ != TSTAT_OK) {                                                           \
      fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #expr, rc_, \
              tstat_last_error());                                                   \
      ++failures;                                                                    \
    }                                                                                \
  } while (0)

/* The callback's state: two buffers, swapped each call (a reallocation). */
struct grad_state {
  float a[6];
  float b[8];
  int calls;
};

static int grad_view(void* user_data, tstat_tensor_view* view) {
  struct grad_state* g = (struct grad_state*)user_data;
  g->calls++;
  if (g->calls == 1) return TSTAT_OK; /* not allocated yet: data stays NULL */
  if (g->calls % 2 == 0) {
    view->data = g->a;
    view->ndim = 1;
    view->shape[0] = 6;
  } else {
    view->data = g->b;
    view->ndim = 2;
    view->shape[0] = 2;
    view->shape[1] = 4;
  }
  return TSTAT_OK;
}

static int file_exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void remove_tree(const char* path) {
  char cmd[4300];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path);
}

static void test_errors(void) {
  tstat_session* s = NULL;
  int rc =
      tstat_session_create_json("{\"save_config\": {\"save_intervall\": 3}}", NULL, -1, -1, &s);
  CHECK(rc == TSTAT_INVALID_ARGUMENT);
  CHECK(s == NULL);
  CHECK(strstr(tstat_last_error(), "save_config.save_intervall: unknown field") != NULL);
  rc = tstat_session_create_json("{}", NULL, -1, -1, &s); /* no out_dir, not dry_run */
  CHECK(rc == TSTAT_INVALID_ARGUMENT);
  CHECK(strstr(tstat_last_error(), "out_dir") != NULL);
  rc = tstat_session_create_json(NULL, NULL, -1, -1, &s);
  CHECK(rc == TSTAT_INVALID_ARGUMENT);
  CHECK(tstat_should_stop(NULL) == 0);
  CHECK(tstat_step_end(NULL, NULL) == TSTAT_INVALID_ARGUMENT);
  tstat_session_destroy(NULL);
}

/* Segment files (seg-*.h5) in a worker directory. */
static uint64_t count_segments(const char* worker_dir) {
  uint64_t n = 0;
  DIR* d = opendir(worker_dir);
  if (d == NULL) return 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    const size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, "seg-", 4) == 0 && len > 3 && strcmp(e->d_name + len - 3, ".h5") == 0) ++n;
  }
  closedir(d);
  return n;
}

static void test_session(const char* run_dir) {
  tstat_session* s = NULL;
  const char* config =
      "{\"save_config\": {\"save_interval\": 1, \"eval\": {\"save_interval\": 2}},"
      " \"pipeline\": {\"flush_interval_seconds\": 0.05, \"stop_check_interval_ms\": 10,"
      "               \"cpu_threads\": 1}}";
  CHECK_OK(tstat_session_create_json(config, run_dir, 0, 1, &s));
  if (s == NULL) return;

  float w[12];
  int i;
  for (i = 0; i < 12; ++i) w[i] = (float)i - 6.0f;
  int64_t wshape[2] = {3, 4};
  const char* colls[1] = {"weights"};
  CHECK_OK(
      tstat_register_tensor(s, "fc1.weight", w, TSTAT_F32, wshape, 2, TSTAT_HOST, 0, colls, 1));
  CHECK(tstat_register_tensor(s, "fc1.weight", w, TSTAT_F32, wshape, 2, TSTAT_HOST, 0, NULL, 0) ==
        TSTAT_INVALID_ARGUMENT);
  CHECK(strstr(tstat_last_error(), "duplicate tensor name") != NULL);
  CHECK(tstat_register_tensor(s, "x", NULL, TSTAT_F32, wshape, 2, TSTAT_HOST, 0, NULL, 0) ==
        TSTAT_INVALID_ARGUMENT);
  CHECK(strstr(tstat_last_error(), "null data pointer") != NULL);
  CHECK(tstat_register_tensor(s, "y", w, 99, wshape, 2, TSTAT_HOST, 0, NULL, 0) ==
        TSTAT_INVALID_ARGUMENT);
  const char* bad_coll[1] = {"nope"};
  CHECK(tstat_register_tensor(s, "z", w, TSTAT_F32, wshape, 2, TSTAT_HOST, 0, bad_coll, 1) ==
        TSTAT_INVALID_ARGUMENT);
  CHECK(strstr(tstat_last_error(), "unknown collection") != NULL);
  /* A mode outside 1..4 is named as given (not as its 8-bit cast). */
  CHECK(tstat_set_mode(s, -1) == TSTAT_INVALID_ARGUMENT);
  CHECK(strstr(tstat_last_error(), "invalid mode -1") != NULL);
  CHECK(tstat_step_begin_at(s, 300, -1, 0) == TSTAT_INVALID_ARGUMENT);
  CHECK(strstr(tstat_last_error(), "invalid mode 300") != NULL);

  struct grad_state g;
  memset(&g, 0, sizeof(g));
  for (i = 0; i < 6; ++i) g.a[i] = 0.5f * (float)i;
  for (i = 0; i < 8; ++i) g.b[i] = -0.25f * (float)i;
  int64_t gshape[1] = {6};
  CHECK_OK(tstat_register_tensor_fn(s, "gradient/fc1.weight", TSTAT_F32, gshape, 1, TSTAT_HOST, 0,
                                    grad_view, &g, NULL, 0));

  /* TRAIN 0..2, EVAL 0..3, TRAIN 3. */
  int modes[8] = {TSTAT_TRAIN, TSTAT_TRAIN, TSTAT_TRAIN, TSTAT_EVAL,
                  TSTAT_EVAL,  TSTAT_EVAL,  TSTAT_EVAL,  TSTAT_TRAIN};
  int64_t want_mode_step[8] = {0, 1, 2, 0, 1, 2, 3, 3};
  for (i = 0; i < 8; ++i) {
    CHECK_OK(tstat_set_mode(s, modes[i]));
    CHECK_OK(tstat_step_begin(s));
    w[0] = (float)i;
    CHECK_OK(tstat_save_scalar(s, "loss", 1.0 / (i + 1)));
    if (i == 2) {
      double probe[3] = {1.0, 2.0, 3.0};
      int64_t pshape[1] = {3};
      CHECK_OK(tstat_save_tensor(s, "probe", probe, TSTAT_F64, pshape, 1, TSTAT_HOST, 0, 1, NULL));
    }
    CHECK_OK(tstat_step_end(s, NULL));
    int mode = 0;
    int64_t global_step = -1, mode_step = -1;
    CHECK_OK(tstat_current_step(s, &mode, &global_step, &mode_step));
    CHECK(mode == modes[i]);
    CHECK(global_step == i);
    CHECK(mode_step == want_mode_step[i]);
  }
  CHECK(tstat_step_begin_at(s, TSTAT_TRAIN, 3, 10) == TSTAT_FAILED_PRECONDITION);
  CHECK(strstr(tstat_last_error(), "steps going backwards") != NULL);
  CHECK(strstr(tstat_last_error(), "-1") != NULL); /* says how to number mode steps only */
  /* Gradients are saved in TRAIN only (never in EVAL): steps 0, 1, 2, 7. */
  CHECK(g.calls == 4);

  /* should_stop: the STOP file, then a request. */
  CHECK(tstat_should_stop(s) == 0);
  char stop_path[4300];
  snprintf(stop_path, sizeof(stop_path), "%s/STOP", run_dir);
  FILE* f = fopen(stop_path, "w");
  CHECK(f != NULL);
  if (f) {
    fputs("stop from C\n", f);
    fclose(f);
  }
  for (i = 0; i < 2000 && !tstat_should_stop(s); ++i) {
    CHECK_OK(tstat_step_end(s, NULL));
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  CHECK(tstat_should_stop(s) == 1);
  char reason[256];
  CHECK_OK(tstat_stop_reason(s, reason, sizeof(reason)));
  CHECK(strstr(reason, "stop from C") != NULL);
  CHECK_OK(tstat_request_stop(s, "ignored: already stopping"));

  CHECK_OK(tstat_session_close(s));
  CHECK_OK(tstat_session_close(s)); /* idempotent */
  tstat_counters c;
  CHECK_OK(tstat_get_counters(s, &c));
  CHECK(c.steps_captured >= 8);
  CHECK(c.records_written >= 8 * 2);
  CHECK(c.records_lost == 0);
  CHECK(c.write_errors == 0);
  CHECK(c.bytes_written > 0);
  char worker_dir[4300];
  snprintf(worker_dir, sizeof(worker_dir), "%s/worker-00000", run_dir);
  CHECK(c.segments_written >= 1);  /* after close: what CLOSED says */
  CHECK(c.segments_written == count_segments(worker_dir));
  CHECK_OK(tstat_session_status(s));
  uint64_t steps = 0;
  double step_seconds = 0, capture_seconds = 0;
  CHECK_OK(tstat_capture_totals(s, &steps, &step_seconds, &capture_seconds));
  CHECK(steps >= 9);
  CHECK(capture_seconds > 0 && capture_seconds <= step_seconds);
  CHECK(tstat_step_end(s, NULL) == TSTAT_FAILED_PRECONDITION);
  tstat_session_destroy(s);

  char closed[4300];
  snprintf(closed, sizeof(closed), "%s/worker-00000/CLOSED", run_dir);
  CHECK(file_exists(closed));
}

/* Your own step numbers from the first step on: mode steps only (global
 * -1), then explicit ones. */
static void test_own_step_numbers(void) {
  tstat_session* s = NULL;
  CHECK_OK(tstat_session_create_json("{\"dry_run\": true}", NULL, -1, -1, &s));
  if (s == NULL) return;
  int modes[4] = {TSTAT_TRAIN, TSTAT_EVAL, TSTAT_TRAIN, TSTAT_EVAL};
  int64_t mode_steps[4] = {0, 0, 1, 1};
  int i;
  for (i = 0; i < 4; ++i) {
    CHECK_OK(tstat_step_begin_at(s, modes[i], -1, mode_steps[i]));
    CHECK_OK(tstat_step_end(s, NULL));
    int mode = 0;
    int64_t global_step = -1, mode_step = -1;
    CHECK_OK(tstat_current_step(s, &mode, &global_step, &mode_step));
    CHECK(mode == modes[i] && global_step == i && mode_step == mode_steps[i]);
  }
  CHECK_OK(tstat_step_begin_at(s, TSTAT_TRAIN, 100, 50)); /* resuming */
  CHECK_OK(tstat_step_end(s, NULL));
  CHECK(tstat_step_begin_at(s, TSTAT_TRAIN, -1, 50) == TSTAT_FAILED_PRECONDITION);
  CHECK(strstr(tstat_last_error(), "TRAIN step 50 is not after the last TRAIN step 50") != NULL);
  tstat_session_destroy(s);
}

static void test_dry_run_without_close(void) {
  tstat_session* s = NULL;
  CHECK_OK(tstat_session_create_json("{\"dry_run\": true}", NULL, -1, -1, &s));
  if (s == NULL) return;
  float v[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  CHECK_OK(tstat_register_tensor(s, "v", v, TSTAT_F32, shape, 1, TSTAT_HOST, 0, NULL, 0));
  CHECK_OK(tstat_step_end(s, NULL));
  tstat_session_destroy(s); /* closes */
}

int main(int argc, char** argv) {
  char tmpl[] = "/tmp/tstat_c_api_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  CHECK(dir != NULL);
  if (dir == NULL) return EXIT_FAILURE;
  char run_dir[4096];
  snprintf(run_dir, sizeof(run_dir), "%s/run", dir);
  if (argc > 1) snprintf(run_dir, sizeof(run_dir), "%s", argv[1]);
  printf("tstat %s\n", tstat_version());
  test_errors();
  test_session(run_dir);
  test_own_step_numbers();
  test_dry_run_without_close();
  remove_tree(dir);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return EXIT_FAILURE;
  }
  printf("c_api_test: all checks passed\n");
  return EXIT_SUCCESS;
}
