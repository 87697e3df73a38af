#!/usr/bin/env bash
# Install the embedded model's llama.cpp engine into the active environment (reme_cli/llm/
# local_engine.py): scripts/install.sh runs this first as
#   bash scripts/install_llama.sh CONSTRAINTS_FILE            # install an engine
# and, once reme is installed, as
#   bash scripts/install_llama.sh CONSTRAINTS_FILE --smoke    # check it; fall back if it fails
#
# First choice: the pinned xllamacpp wheel, llama.cpp's own server prebuilt portable
# (AVX2/FMA/F16C, no AVX-512/AMX; ~2 s). Where it does not install (no wheel for the platform:
# --only-binary, since its sdist is a native Rust+cmake build), does not load (it needs the
# system's libgomp.so.1, which comes with gcc), turns out built for AVX-512, or fails the smoke
# check, it is removed and llama-cpp-python is compiled portable instead (~5 min on 2 cores).
# REME_LLAMA_ENGINE=source goes straight to that build (xllamacpp removed, so reme runs the
# build); REME_LLAMA_ENGINE=xllamacpp allows no fallback. One line says which engine and why.
set -euo pipefail
constraints="${1:?usage: install_llama.sh CONSTRAINTS_FILE [--smoke]}"
mode="${2:-install}"
choice="${REME_LLAMA_ENGINE:-auto}"
case "$choice" in
  auto|xllamacpp|source) ;;
  *) echo "error: REME_LLAMA_ENGINE=$choice is not an engine; use auto, xllamacpp or source" >&2; exit 2 ;;
esac
. "$(dirname "$0")/pip_install.sh"
pin() { sed -nE "s/^$1==([^ #]+).*/\1/Ip" "$constraints"; }
xll_version=$(pin 'xllamacpp')
llama_version=$(pin 'llama[-_]cpp[-_]python')
[[ -n "$xll_version" && -n "$llama_version" ]] \
  || { echo "error: $constraints must pin both xllamacpp and llama-cpp-python" >&2; exit 2; }

# The source build. Its default compiles for the build host's CPU (-march=native); on a Xeon
# with AVX-512/AMX that build segfaults on every prompt longer than one token. A portable
# build runs on every CPU of the architecture. pip's wheel cache keys a built wheel by
# version only, not by CMAKE_ARGS, so a cached native wheel would silently come back: build
# with --no-cache-dir, and leave a stamp naming the flags so a rerun knows whether the
# installed build is ours.
case "$(uname -m)" in
  x86_64|amd64) llama_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF" ;;
  *)            llama_flags="-DGGML_NATIVE=OFF" ;;
esac
llama_flags="${REME_LLAMA_CMAKE_ARGS:-$llama_flags}"
want_stamp="llama-cpp-python==$llama_version $llama_flags"
stamp_of() { python - <<'EOF' 2>/dev/null
import importlib.util, pathlib
spec = importlib.util.find_spec("llama_cpp")
print((pathlib.Path(spec.origin).parent / "REME_BUILD").read_text().strip() if spec else "")
EOF
}
build_source() {
  if [[ "$(stamp_of)" != "$want_stamp" ]]; then
    echo "building llama-cpp-python $llama_version for any $(uname -m) CPU ($llama_flags); ~5 min on 2 cores"
    CMAKE_ARGS="$llama_flags" python -m pip install -q --no-cache-dir --force-reinstall --no-deps \
      --no-binary llama-cpp-python "llama-cpp-python==$llama_version"
    python - "$want_stamp" <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llama_cpp")
(pathlib.Path(spec.origin).parent / "REME_BUILD").write_text(sys.argv[1] + "\n")
EOF
  fi
  # Its own dependencies and its server's (the build above took none): only this engine needs them.
  pip_install "llama-cpp-python[server]==$llama_version"
  python -c "import llama_cpp.server"
}

why=""
try_wheel() {
  local err
  if ! err=$(python -m pip install -q -c "$constraints" --only-binary=:all: "xllamacpp==$xll_version" 2>&1); then
    why="no xllamacpp $xll_version wheel for this platform ($(grep -m1 -E '^ERROR' <<<"$err" || tail -n 1 <<<"$err"))"
    return 1
  fi
  if ! err=$(python -c "import xllamacpp" 2>&1); then
    why="xllamacpp does not load ($(tail -n 1 <<<"$err"); it needs the system's libgomp.so.1, which comes with gcc)"
    return 1
  fi
  # Its portability is its release build's GGML_NATIVE=OFF; a wheel built for AVX-512 would
  # crash on older CPUs, so refuse one before the smoke check, which this host might pass.
  if python -c 'import sys, xllamacpp; sys.exit("AVX512 = 1" not in xllamacpp.get_system_info())'; then
    why="the xllamacpp $xll_version wheel is built for AVX-512 CPUs, not portable"
    return 1
  fi
}
remove_wheel() {
  python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('xllamacpp') is None)" 2>/dev/null \
    && python -m pip uninstall -q -y xllamacpp
  return 0
}
fall_back() {  # $1: why
  remove_wheel
  build_source
  echo "llama.cpp engine: llama-cpp-python $llama_version, built from source ($1)"
}

if [[ "$mode" == "--smoke" ]]; then
  # The smoke check runs the engine reme will run (python -m reme_cli.llm.smoke says which).
  python -m reme_cli.llm.smoke && exit 0
  engine=$(python -c "import importlib.util; print('xllamacpp' if importlib.util.find_spec('xllamacpp') else 'source')")
  [[ "$engine" == xllamacpp && "$choice" == auto ]] || exit 1
  fall_back "the xllamacpp wheel failed the smoke check above"
  exec python -m reme_cli.llm.smoke
fi
[[ "$mode" == install ]] || { echo "error: unknown option $mode; use --smoke (or nothing)" >&2; exit 2; }

if [[ "$choice" == source ]]; then
  fall_back "REME_LLAMA_ENGINE=source"
elif try_wheel; then
  echo "llama.cpp engine: xllamacpp $xll_version, the prebuilt portable wheel"
elif [[ "$choice" == xllamacpp ]]; then
  remove_wheel
  echo "error: REME_LLAMA_ENGINE=xllamacpp, but $why" >&2
  exit 1
else
  fall_back "$why"
fi
