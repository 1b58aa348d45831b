#!/usr/bin/python3
"""h5py reads raw snapshots stored at raw_compression_level 0 and 6 (LAYOUT.md).

argv[1]: a run written by tests/io/raw_compression_test.cc at raw level 0,
argv[2]: the same at raw level 6; both with table level 4. Checks, with h5py
and zlib only (no tstat code): the seal (zlib.crc32 of the bytes after 512),
each raw dataset's values (the formula of the C++ test, bit-exact), its
storage (level 0: contiguous, no filters; level 6: chunked, shuffle +
gzip 6), and that the stats table keeps the tables' deflate level 4.
"""
import glob
import os
import re
import sys
import zlib

import h5py
import numpy as np

ROWS, COLS = 64, 1024  # 256 KiB of f32 per snapshot: larger than a compact dataset


def expected(g):
    i = np.arange(ROWS * COLS, dtype=np.int64)
    # Bit patterns: every byte varies, as float data does.
    bits = ((i * 2654435761 + g * 97) % (1 << 23)) | (((i + g) % 200 + 20) << 23)
    return bits.astype(np.uint32).view(np.float32).reshape(ROWS, COLS)


def check_seal(path):
    data = open(path, "rb").read()
    m = re.fullmatch(rb"TSTAT-SEGMENT 1\nlength (\d+)\ncrc32 ([0-9a-f]{8})\n",
                     data[:512].split(b"\0", 1)[0])
    assert m and int(m[1]) == len(data), path
    assert zlib.crc32(data[512:]) == int(m[2], 16), f"{path}: crc mismatch"


def check_run(run, level):
    segs = sorted(glob.glob(os.path.join(run, "worker-00000", "seg-*.h5")))
    assert segs, run
    seen = 0
    for path in segs:
        check_seal(path)
        with h5py.File(path, "r") as f:
            assert f.userblock_size == 512
            for row in f["raw_index"][:]:
                ds = f[row["dataset"].decode()]
                g = int(row["global_step"])
                got = ds[()]
                assert got.dtype == np.float32 and got.shape == (ROWS, COLS), (got.dtype, got.shape)
                assert got.tobytes() == expected(g).tobytes(), f"{path}: step {g} differs"
                if level == 0:
                    assert ds.chunks is None and ds.compression is None and not ds.shuffle, \
                        (ds.chunks, ds.compression, ds.shuffle)
                    assert ds.id.get_create_plist().get_layout() == h5py.h5d.CONTIGUOUS
                else:
                    assert ds.chunks is not None and ds.compression == "gzip", ds.compression
                    assert ds.compression_opts == level and ds.shuffle, ds.compression_opts
                seen += 1
            st = f["stats"]
            # The tables keep their own level (chunked + deflate 4 once larger than compact).
            if st.id.get_create_plist().get_layout() == h5py.h5d.CHUNKED:
                assert st.compression == "gzip" and st.compression_opts == 4, st.compression_opts
    return seen


def main():
    n0 = check_run(sys.argv[1], 0)
    n6 = check_run(sys.argv[2], 6)
    assert n0 == n6 and n0 > 0, (n0, n6)
    print(f"h5py_reads_raw_compression: {n0} raw snapshots per run: OK")


if __name__ == "__main__":
    main()
