#!/usr/bin/python3
"""h5py decodes the chunks tstat shuffles and deflates itself (no tstat code).

argv[1]: an HDF5 file written by tests/io/chunk_deflate_test.cc holding pairs
of datasets NAME (chunks from io/chunk_deflate.cc via H5Dwrite_chunk) and
NAME_ref (the same rows written through HDF5's own filter pipeline). For each
pair: the same values, and the creation properties docs/storage-format.md promises
(chunked with shuffle + gzip at the level in the NAME's "level" attribute,
compact when small, contiguous at level 0). Exit status 0 on success.
"""
import sys

import h5py
import numpy as np

path = sys.argv[1]
checked = 0
with h5py.File(path, "r") as f:
    names = [n for n in f if not n.endswith("_ref")]
    assert names, "no datasets in " + path
    for name in names:
        ours, ref = f[name], f[name + "_ref"]
        level = int(ours.attrs["level"])
        assert ours.dtype == ref.dtype, (name, ours.dtype, ref.dtype)
        assert ours.shape == ref.shape, (name, ours.shape, ref.shape)
        a, b = ours[()], ref[()]
        if a.dtype.names:
            for field in a.dtype.names:
                assert np.array_equal(a[field], b[field], equal_nan=a[field].dtype.kind == "f"), \
                    (name, field)
        else:
            assert np.array_equal(a, b), name
        assert a.tobytes() == b.tobytes(), name
        plist = ours.id.get_create_plist()
        layout = plist.get_layout()
        if ours.nbytes <= 8 * 1024:
            assert layout == h5py.h5d.COMPACT, (name, layout)
        elif level == 0:
            assert layout == h5py.h5d.CONTIGUOUS, (name, layout)
        else:
            assert layout == h5py.h5d.CHUNKED, (name, layout)
            assert ours.shuffle and ours.compression == "gzip", name
            assert ours.compression_opts == level, (name, ours.compression_opts)
            assert ours.chunks == ref.chunks, (name, ours.chunks, ref.chunks)
        checked += 1
print("h5py_reads_self_chunks: %d datasets match" % checked)
