#!/usr/bin/env bash
# Makes this machine ready to build tstat and builds it.
#
# 1. Installs the Debian packages the build and the tests need, if any are
#    missing (dpkg-query first, so this is fast and quiet when all are there;
#    apt-get update only when something must be installed), and the report
#    page's npm packages (tools/report/node_modules).
# 2. Configures and builds Release into build/ (with CUDA when nvcc exists).
#
# Idempotent. Environment: TSTAT_BUILD_DIR (default build), TSTAT_JOBS
# (default 2), TSTAT_ENABLE_CUDA (default ON), TSTAT_SKIP_BUILD=1 (packages only).
set -euo pipefail
cd "$(dirname "$0")/.."

# The one list of packages; add new dependencies here.
PACKAGES=(
  cmake
  ninja-build
  g++
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  libhdf5-dev
  libdeflate-dev   # CRC-32 and DEFLATE of segment files (zlib-compatible, faster)
  hdf5-tools
  protobuf-compiler
  libprotobuf-dev
  libre2-dev
  libcli11-dev
  libfmt-dev
  python3-h5py
  python3-numpy
  python3-dev      # the Python package (python/): its C++ module ...
  pybind11-dev     # ... built with pybind11
  python3-pandas   # tstat.trials returns Series and DataFrames
  python3-pytest   # the Python package's tests
  python3-torch    # tstat.pytorch.Hook's tests and benchmarks/overhead_python.py (torch 1.13, CPU)
  python3-pil      # the report tests: screenshots are not blank
  chromium         # the report tests open the page in headless Chromium
  nodejs           # npm (install_npm_assets): the report page's charting library
  libcpp-httplib-dev  # tstat serve's HTTP server
  pkg-config       # finds it
  libopenblas-dev
  libopenblas0-pthread  # libblas.so.3 -> OpenBLAS for libtorch (bench overhead)
  libtorch-dev          # LibTorch adapter (host/torch), its tests, bench overhead
  python3-sklearn  # the digits dataset of `tstat demo`
  zlib1g-dev       # reads it (digits.csv.gz)
  patchelf         # tools/gpu-bundle.sh: $ORIGIN run paths of the bundled libraries
  clang              # tools/fuzz.sh: the libFuzzer build (build-fuzz/)
  libclang-rt-14-dev # libFuzzer and the sanitizer runtimes for clang
  libomp-14-dev      # OpenMP for clang (the CPU backend in build-fuzz/)
  ccache             # compiler cache shared by every build directory and clone (TSTAT_CCACHE)
)

die() {
  echo "setup.sh: error: $*" >&2
  exit 1
}

install_missing_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
      missing+=("$p")
    fi
  done
  ((${#missing[@]} == 0)) && return 0

  echo "setup.sh: installing missing packages: ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null ||
      die "packages missing (${missing[*]}) and not root, and sudo is not installed"
    sudo=(sudo -n)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q ||
    die "apt-get update failed (network or apt sources?); could not install: ${missing[*]}"
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "apt-get install failed for: ${missing[*]}"
}

configure_and_build() {
  local build_dir="${TSTAT_BUILD_DIR:-build}"
  local args=(-S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
              "-DTSTAT_ENABLE_CUDA=${TSTAT_ENABLE_CUDA:-ON}")
  # nvcc is often installed but not on PATH.
  if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  fi
  mkdir -p "$build_dir"
  cmake "${args[@]}" >"$build_dir/configure.log" 2>&1 || {
    cat "$build_dir/configure.log" >&2
    die "cmake configure of $build_dir/ failed (log above)"
  }
  echo "setup.sh: building $build_dir/ (Release)"
  cmake --build "$build_dir" -j "${TSTAT_JOBS:-2}" || die "build of $build_dir/ failed"
  install_python_path "$build_dir"
}

# `import tstat` in Debian's python3 from anywhere: a .pth file in its
# site-packages naming <build>/python (the package built there). Skipped,
# with a note, where site-packages cannot be written.
install_python_path() {
  local package_dir site
  package_dir="$(cd "$1" && pwd)/python"
  [[ -f "$package_dir/tstat/__init__.py" ]] || return 0
  site="$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')" || return 0
  if [[ "$(cat "$site/tstat.pth" 2>/dev/null)" == "$package_dir" ]]; then
    return 0
  fi
  if mkdir -p "$site" 2>/dev/null && echo "$package_dir" >"$site/tstat.pth" 2>/dev/null; then
    echo "setup.sh: python3 imports tstat from $package_dir ($site/tstat.pth)"
  else
    echo "setup.sh: note: cannot write $site; use PYTHONPATH=$package_dir to import tstat"
  fi
}

# The report page's npm packages (tools/report/package.json, pinned by its
# package-lock.json) into tools/report/node_modules, which the build embeds.
# Debian's nodejs ships npm as a package of its own; NodeSource's includes it.
install_npm_assets() {
  if ! command -v npm >/dev/null; then
    local sudo=()
    ((EUID == 0)) || sudo=(sudo -n)
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends npm ||
      die "npm is missing and apt-get could not install it"
  fi
  local stamp=tools/report/node_modules/.package-lock.json
  if [[ -f "$stamp" && "$stamp" -nt tools/report/package-lock.json ]]; then
    return 0
  fi
  echo "setup.sh: installing the report page's npm packages (tools/report/)"
  npm ci --prefix tools/report --no-audit --no-fund --ignore-scripts >/dev/null ||
    die "npm ci in tools/report failed (network, or the npm registry?)"
}

install_missing_packages
install_npm_assets
[[ "${TSTAT_SKIP_BUILD:-0}" == 1 ]] || configure_and_build
