#!/usr/bin/env bash
# Packs what a GPU check needs into one folder that runs on a bare, offline GPU
# machine (no Debian packages, another glibc): the CUDA test binary, the
# tstat CLI (bin/tstat, without LibTorch), libtstat.so, every shared library they link except the
# C library and the GPU driver (found with ldd, loaded through $ORIGIN run
# paths), and gpu-check.sh; and the same folder as DIR.tar.gz, which is what
# travels to the GPU machine. See docs/gpu.md.
#
#   tools/gpu-bundle.sh [--out DIR] [--build-dir DIR] [--no-build]
#
# --out        the bundle folder (default gpu-bundle/, git-ignored; and
#              gpu-bundle.tar.gz); replaced
# --build-dir  a Release build with CUDA (default build/, as tools/setup.sh
#              makes it); it must target sm_90 and sm_80
# --no-build   use the binaries as they are (the test of the bundle does)
#
# Then, on the GPU machine, from the repository root:
#   tar -xzf gpu-bundle.tar.gz && bash gpu-bundle/gpu-check.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
  echo "gpu-bundle.sh: error: $*" >&2
  exit 1
}

out=gpu-bundle
build_dir="${TSTAT_BUILD_DIR:-build}"
do_build=1
while (($#)); do
  case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --build-dir) build_dir="${2:?--build-dir needs a folder}"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
# Most the packed bundle may weigh: the GPU machine takes the working tree and
# what is carried along, ~60 MiB in all, per call; kernel variants to compare
# ride along too (docs/gpu.md). The folder itself (shared libraries, 2.4x
# their gzipped size) is only bounded against runaway growth.
max_packed_bytes=$((40 * 1024 * 1024))
max_bytes=$((160 * 1024 * 1024))

# Every CUDA test is in one binary; tests/cuda/units.txt names its units.
test_binary=tstat_test_cuda_all
targets=(tstat_cli tstat_shared "$test_binary")

for tool in ldd patchelf strip; do
  command -v "$tool" >/dev/null || die "$tool is missing (tools/setup.sh installs it)"
done
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  ((do_build)) || die "$build_dir/ is not configured (run tools/setup.sh)"
  TSTAT_BUILD_DIR="$build_dir" bash tools/setup.sh
fi
# tstat-build.env: written by the top-level CMakeLists at configure time.
build_value() { sed -n "s/^$1=//p" "$build_dir/tstat-build.env" 2>/dev/null; }
[[ "$(build_value build_type)" == Release && -z "$(build_value sanitizer)" ]] ||
  die "$build_dir/ is not a Release build without sanitizers (see $build_dir/tstat-build.env)"
archs="$(build_value cuda_architectures)"
[[ "$(build_value have_cuda)" == ON && "$archs" == *90* && "$archs" == *80* ]] ||
  die "$build_dir/ is not built with CUDA for sm_90 and sm_80 (CUDA: $(build_value have_cuda), architectures '$archs')"
if ((do_build)); then
  cmake --build "$build_dir" -j "${TSTAT_JOBS:-2}" --target "${targets[@]}" ||
    die "building ${targets[*]} failed"
fi

# Where each target's binary is in the build tree.
find_binary() {
  local path
  path="$(find "$build_dir" -type f -name "$1" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)"
  [[ -n "$path" ]] || die "$1 is not built in $build_dir/ (run without --no-build)"
  echo "$path"
}

rm -rf "$out"
mkdir -p "$out/bin/tests" "$out/lib"
[[ -x "$build_dir/bin/tstat" ]] || die "$build_dir/bin/tstat is not built (run without --no-build)"
cp "$build_dir/bin/tstat" "$out/bin/tstat"
cp "$(find_binary "$test_binary")" "$out/bin/tests/$test_binary"
lib="$(readlink -f "$build_dir/lib/libtstat.so")"
[[ -f "$lib" ]] || die "$build_dir/lib/libtstat.so is not built"
cp "$lib" "$out/lib/$(basename "$lib")"
ln -s "$(basename "$lib")" "$out/lib/libtstat.so.0"
ln -s libtstat.so.0 "$out/lib/libtstat.so"

# Libraries every machine has in a compatible version: the C library family
# (glibc keeps old symbol versions) and the GPU driver (must match the kernel
# module, so it is never carried).
is_system_library() {
  case "$1" in
    ld-linux*|libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|libutil.so.*) return 0 ;;
    libresolv.so.*|libanl.so.*|libcuda.so*|libnvidia-*|linux-vdso.so.*) return 0 ;;
  esac
  return 1
}

# Copies every non-system library of the given files (recursively: ldd lists
# the whole closure), under its SONAME.
carry_libraries() {
  local file name path
  for file in "$@"; do
    while read -r name path; do
      [[ -n "$name" ]] || continue
      is_system_library "$name" && continue
      [[ "$path" == /* && -f "$path" ]] ||
        die "$file needs $name, which ldd cannot find here"
      [[ -e "$out/lib/$name" ]] || cp -L "$path" "$out/lib/$name"
    done < <(ldd "$file" | sed -n 's/^[[:space:]]*\([^ ]*\) => \([^ ]*\) (.*$/\1 \2/p;
                                     s/^[[:space:]]*\([^ ]*\) => not found$/\1 NOTFOUND/p')
  done
}
carry_libraries "$out/bin/tstat" "$out"/bin/tests/* "$out/lib/$(basename "$lib")"

# The Python package, for the hook's check on the device's own PyTorch
# (tools/gpu_hook_check.py), with its module built here and the module's
# sources and tstat's headers: a device whose Python is not this one builds
# its own there (tools/gpu_build_module.py).
py_module="$(find "$build_dir/python/tstat" -maxdepth 1 -name '_tstat*.so' 2>/dev/null | head -1)"
if [[ -n "$py_module" ]]; then
  mkdir -p "$out/python/tstat" "$out/python/module-src/python/src" "$out/python/module-src/include"
  cp "$build_dir"/python/tstat/*.py "$py_module" "$out/python/tstat/"
  cp tools/gpu_hook_check.py tools/gpu_build_module.py tests/python/test_hook_cuda.py \
     benchmarks/overhead_python.py "$out/python/"
  cp python/src/*.cc python/src/*.h "$out/python/module-src/python/src/"
  cp -r include/tstat "$out/python/module-src/include/"
  py_module="$out/python/tstat/$(basename "$py_module")"
  carry_libraries "$py_module"
fi

chmod u+w "$out"/lib/* "$out"/bin/tstat "$out"/bin/tests/*
strip --strip-unneeded "$out/bin/tstat" "$out"/bin/tests/* "$out/lib/$(basename "$lib")"
patchelf --set-rpath '$ORIGIN/../lib' "$out/bin/tstat"
for t in "$out"/bin/tests/*; do patchelf --set-rpath '$ORIGIN/../../lib' "$t"; done
if [[ -n "$py_module" ]]; then
  chmod u+w "$py_module"
  strip --strip-unneeded "$py_module"
  patchelf --set-rpath '$ORIGIN/../../lib' "$py_module"
fi
for l in "$out"/lib/*; do
  [[ -L "$l" ]] || patchelf --set-rpath '$ORIGIN' "$l"
done

cp tools/gpu-check.sh tools/gpu_check_summary.py "$out/"
{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "cuda_architectures $archs"
  echo "nvcc $("$(build_value cuda_compiler)" --version | tail -2 | head -1)"
} > "$out/MANIFEST"
cp tests/cuda/units.txt "$out/units.txt"

bytes=$(du -sb "$out" | cut -f1)
((bytes <= max_bytes)) || die "$out/ is $bytes bytes, over the limit of $max_bytes"
packed="$out.tar.gz"
rm -f "$packed"
tar -czf "$packed" -C "$(dirname "$out")" "$(basename "$out")" || die "packing $packed failed"
packed_bytes=$(stat -c %s "$packed")
echo "gpu-bundle.sh: $out/ holds $(find "$out" -type f | wc -l) files, $((bytes / 1024 / 1024)) MiB;" \
     "$packed $((packed_bytes / 1024 / 1024)) MiB (limit $((max_packed_bytes / 1024 / 1024)) MiB)"
((packed_bytes <= max_packed_bytes)) ||
  die "$packed is $packed_bytes bytes, over the limit of $max_packed_bytes"
