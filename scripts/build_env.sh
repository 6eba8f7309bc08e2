# Sourced by setup.sh, sanitize.sh and fuzz.sh: the compile cache every build directory shares,
# and a stage timer. ccache keys on paths relative to the checkout (CCACHE_BASEDIR) and not on
# the working directory, so a fresh clone in another folder hits what an earlier build cached.
#   ATTNSCOPE_CCACHE=0   build without ccache
#   CCACHE_DIR           cache location (default ~/.cache/ccache), CCACHE_MAXSIZE (default 8G)

attnscope_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CCACHE_BASEDIR="$attnscope_root"
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
# The GUI suites and libraries precompile Qt headers (tests/gui/CMakeLists.txt); ccache caches
# compilations that use a precompiled header only with pch_defines,time_macros, and those whose
# header was written moments before only with include_file_mtime,include_file_ctime. The latter
# also stores a wrong object when a header is edited while a file including it compiles, so only
# CI (ATTNSCOPE_CI=1, a tree nobody edits) turns it on.
export CCACHE_SLOPPINESS="pch_defines,time_macros"
if [[ "${ATTNSCOPE_CI:-0}" == 1 ]]; then
  CCACHE_SLOPPINESS+=",include_file_mtime,include_file_ctime"
fi

# CMake arguments that put ccache in front of every compiler (none when it is absent or off).
attnscope_launcher_args() {
  if [[ "${ATTNSCOPE_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null; then
    echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache" \
      "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
  fi
}

# attnscope_stage NAME COMMAND...: runs COMMAND (errexit still applies inside it) and prints how
# long it took.
attnscope_stage() {
  local name="$1" start
  shift
  start=$(date +%s)
  "$@"
  echo "[attnscope stage] $name: $(($(date +%s) - start)) s" >&2
}
