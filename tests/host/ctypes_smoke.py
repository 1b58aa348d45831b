"""Python uses libtstat.so through ctypes, with no compiler: a run of a few
steps over a numpy array (TRAIN and EVAL), a scalar, then the counters.

Usage: python3 ctypes_smoke.py /path/to/libtstat.so RUN_DIR
"""
import ctypes
import sys

import numpy as np

TSTAT_OK, TSTAT_F32, TSTAT_HOST, TSTAT_TRAIN, TSTAT_EVAL = 0, 0, 0, 1, 2


class Counters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "steps_captured", "records_written", "bytes_written", "raw_dropped",
        "raw_dropped_bytes", "records_lost", "write_errors", "stats_waits")] + [
        ("stats_wait_seconds", ctypes.c_double)] + [
        (name, ctypes.c_uint64) for name in (
            "queue_high_water", "queue_high_water_bytes", "segments_written")]


def main():
    lib = ctypes.CDLL(sys.argv[1])
    run_dir = sys.argv[2].encode()
    lib.tstat_last_error.restype = ctypes.c_char_p
    lib.tstat_version.restype = ctypes.c_char_p
    session = ctypes.c_void_p()

    def check(rc):
        if rc != TSTAT_OK:
            raise RuntimeError(lib.tstat_last_error().decode())

    config = b'{"save_config": {"save_interval": 1}, "pipeline": {"cpu_threads": 1}}'
    check(lib.tstat_session_create_json(config, run_dir, 0, 1, ctypes.byref(session)))
    weight = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    shape = (ctypes.c_int64 * 2)(*weight.shape)
    check(lib.tstat_register_tensor(session, b"fc.weight", weight.ctypes.data_as(ctypes.c_void_p),
                                    TSTAT_F32, shape, 2, TSTAT_HOST, 0, None, 0))
    rc = lib.tstat_register_tensor(session, b"fc.weight", weight.ctypes.data_as(ctypes.c_void_p),
                                   TSTAT_F32, shape, 2, TSTAT_HOST, 0, None, 0)
    assert rc != TSTAT_OK and b"duplicate" in lib.tstat_last_error(), rc
    for step, mode in enumerate([TSTAT_TRAIN, TSTAT_TRAIN, TSTAT_EVAL]):
        check(lib.tstat_set_mode(session, mode))
        weight *= 0.5
        check(lib.tstat_save_scalar(session, b"loss", ctypes.c_double(1.0 / (step + 1))))
        check(lib.tstat_step_end(session, None))
    check(lib.tstat_session_close(session))
    counters = Counters()
    check(lib.tstat_get_counters(session, ctypes.byref(counters)))
    lib.tstat_session_destroy(session)
    assert counters.records_written == 6, counters.records_written
    print("ctypes: tstat %s, %d records written" % (lib.tstat_version().decode(),
                                                     counters.records_written))


if __name__ == "__main__":
    main()
