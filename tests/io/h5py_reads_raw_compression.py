#!/usr/bin/python3
"""h5py reads raw snapshots stored at raw_compression_level 0 and 6 (docs/storage-format.md).

argv[1]: a run written by tests/io/raw_compression_test.cc at raw level 0,
argv[2]: the same at raw level 6; both with table level 4. Checks, with h5py
and zlib only (no tstat code): the seal (zlib.crc32 of the bytes after 512),
each raw dataset's values (the formula of the C++ test, bit-exact), its
storage (level 0: contiguous, no filters; level 6: chunked, shuffle +
gzip 6; raw/packed past 1 MiB: extendible, chunks of 1 MiB, the same
filters), and that the tables (stats, raw_index) keep the tables' deflate
level 4.
"""
import glob
import os
import re
import sys
import zlib

import h5py
import numpy as np

ROWS, COLS = 64, 4096  # 1 MiB of f32 per snapshot: a dataset of its own


def expected(g):
    i = np.arange(ROWS * COLS, dtype=np.int64)
    # Bit patterns: every byte varies, as float data does.
    bits = ((i * 2654435761 + g * 97) % (1 << 23)) | (((i + g) % 200 + 20) << 23)
    return bits.astype(np.uint32).view(np.float32).reshape(ROWS, COLS)


SMALL_ROWS, SMALL_COLS = 40, 50  # 16,000 bytes of f64: packed into raw/packed (48 KB per segment)


def expected_small(g):
    return (g * 1000 + np.arange(SMALL_ROWS * SMALL_COLS, dtype=np.float64) + 0.25).reshape(
        SMALL_ROWS, SMALL_COLS)


MEDIUM, MEDIUM_ELEMENTS, MEDIUM_STEPS, MEDIUM_ID0 = 40, 15000, 3, 10  # packed, first segment


def expected_medium(m, g):
    return ((g * 7 + m) * 100000 + np.arange(MEDIUM_ELEMENTS)).astype(np.float32)


CHUNK = 1 << 20  # raw/packed past one chunk: written a chunk at a time


def check_storage(ds, level):
    layout = ds.id.get_create_plist().get_layout()
    if ds.nbytes <= 8192:  # compact (in the object header) at any level
        assert layout == h5py.h5d.COMPACT and ds.compression is None, (layout, ds.nbytes)
    elif ds.name == "/raw/packed" and ds.nbytes >= CHUNK:
        assert ds.chunks == (CHUNK,) and ds.maxshape == (None,), (ds.chunks, ds.maxshape)
        if level == 0:
            assert ds.compression is None and not ds.shuffle, (ds.compression, ds.shuffle)
        else:
            assert ds.compression == "gzip" and ds.compression_opts == level and ds.shuffle
    elif level == 0:
        assert ds.chunks is None and ds.compression is None and not ds.shuffle, \
            (ds.chunks, ds.compression, ds.shuffle)
        assert layout == h5py.h5d.CONTIGUOUS
    else:
        assert ds.chunks is not None and ds.compression == "gzip", ds.compression
        assert ds.compression_opts == level and ds.shuffle, ds.compression_opts


def check_seal(path):
    data = open(path, "rb").read()
    m = re.fullmatch(rb"TSTAT-SEGMENT 1\nlength (\d+)\ncrc32 ([0-9a-f]{8})\n",
                     data[:512].split(b"\0", 1)[0])
    assert m and int(m[1]) == len(data), path
    assert zlib.crc32(data[512:]) == int(m[2], 16), f"{path}: crc mismatch"


def check_run(run, level):
    segs = sorted(glob.glob(os.path.join(run, "worker-00000", "seg-*.h5")))
    assert segs, run
    seen = seen_small = seen_medium = 0
    chunked_packed = chunked_index = 0
    for path in segs:
        check_seal(path)
        with h5py.File(path, "r") as f:
            assert f.userblock_size == 512
            raw_shapes = f["raw_shapes"][:]

            def shape_of(row):
                off, rank = int(row["shape_offset"]), int(row["rank"])
                return [int(d) for d in raw_shapes[off:off + rank]]

            for row in f["raw_index"][:]:
                g = int(row["global_step"])
                if row["dataset"].decode() == "raw/packed":
                    packed = f["raw/packed"]
                    off, n = int(row["byte_offset"]), int(row["byte_count"])
                    if int(row["tensor_id"]) >= MEDIUM_ID0:
                        m = int(row["tensor_id"]) - MEDIUM_ID0
                        assert row["dtype"].decode() == "f32" and shape_of(row) == [MEDIUM_ELEMENTS]
                        got = packed[off:off + n].view("<f4")
                        assert got.tobytes() == expected_medium(m, g).tobytes(), f"{path}: m{m} step {g}"
                        check_storage(packed, level)
                        seen_medium += 1
                        continue
                    assert row["dtype"].decode() == "f64" and shape_of(row) == [SMALL_ROWS, SMALL_COLS]
                    got = packed[off:off + n].view("<f8").reshape(SMALL_ROWS, SMALL_COLS)
                    assert got.tobytes() == expected_small(g).tobytes(), f"{path}: step {g}"
                    check_storage(packed, level)
                    seen_small += 1
                    continue
                ds = f[row["dataset"].decode()]
                assert shape_of(row) == [ROWS, COLS], shape_of(row)
                got = ds[()]
                assert got.dtype == np.float32 and got.shape == (ROWS, COLS), (got.dtype, got.shape)
                assert got.tobytes() == expected(g).tobytes(), f"{path}: step {g} differs"
                check_storage(ds, level)
                seen += 1
            if "raw/packed" in f and f["raw/packed"].chunks == (CHUNK,):
                chunked_packed += 1
            # raw_index is a table like the others (docs/storage-format.md): the tables'
            # level once past a compact dataset, as the first segment's
            # (126 rows) is.
            ri = f["raw_index"]
            if ri.id.get_create_plist().get_layout() == h5py.h5d.CHUNKED:
                assert ri.compression == "gzip" and ri.compression_opts == 4, ri.compression_opts
                assert ri.shuffle
                chunked_index += 1
            else:
                assert ri.id.get_create_plist().get_layout() == h5py.h5d.COMPACT
            st = f["stats"]
            # The tables keep their own level (chunked + deflate 4 once larger than compact).
            if st.id.get_create_plist().get_layout() == h5py.h5d.CHUNKED:
                assert st.compression == "gzip" and st.compression_opts == 4, st.compression_opts
    assert seen_small == seen, (seen_small, seen)
    assert seen_medium == MEDIUM * MEDIUM_STEPS, seen_medium
    # The first segment's packed bytes pass one chunk, the second's do not.
    assert chunked_packed == 1, chunked_packed
    assert chunked_index == 1, chunked_index
    return seen


def main():
    n0 = check_run(sys.argv[1], 0)
    n6 = check_run(sys.argv[2], 6)
    assert n0 == n6 and n0 > 0, (n0, n6)
    print(f"h5py_reads_raw_compression: {n0} raw snapshots per run: OK")


if __name__ == "__main__":
    main()
