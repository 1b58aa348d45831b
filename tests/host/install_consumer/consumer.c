/* C consumer of the installed tstat: a short run written to argv[1]. */
#include <stdio.h>

#include "tstat/tstat_c.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  tstat_session* s = NULL;
  if (tstat_session_create_json("{\"save_config\": {\"save_interval\": 1}}", argv[1], 0, 1, &s)) {
    fprintf(stderr, "%s\n", tstat_last_error());
    return 1;
  }
  double x[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  int rc = tstat_register_tensor(s, "x", x, TSTAT_F64, shape, 1, TSTAT_HOST, 0, NULL, 0);
  for (int i = 0; i < 4 && rc == TSTAT_OK; ++i) rc = tstat_step_end(s, NULL);
  if (rc == TSTAT_OK) rc = tstat_session_close(s);
  tstat_counters c;
  tstat_get_counters(s, &c);
  printf("C consumer: rc %d, %llu records written\n", rc, (unsigned long long)c.records_written);
  tstat_session_destroy(s);
  return rc == TSTAT_OK && c.records_written == 4 ? 0 : 1;
}
