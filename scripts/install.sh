#!/usr/bin/env bash
# Install reme into the active Python environment (use a venv), CPU-only by default.
#   bash scripts/install.sh          # reme + the embedded CPU model + bfcl-eval
#   bash scripts/install.sh --dev    # ... and the test tools
# On a GPU box add vLLM yourself (`pip install vllm`), which brings its own CUDA torch.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="local"
[[ "${1:-}" == "--dev" ]] && extras="local,dev"
python -m pip install -q --upgrade pip
# sentence-transformers needs torch; pin the CPU build first, or pip resolves a multi-GB
# CUDA wheel. Skipped when a torch is already installed (e.g. a GPU box).
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[${extras}]"
# bfcl-eval's declared dependencies pull torch+CUDA and ~20 vendor SDKs and pin numpy 1.26;
# its data, backends and checker need none of them (reme depends on mpmath and filelock).
python -m pip install -q --no-deps -r requirements-bfcl.txt
python -c "import reme_cli, bfcl_eval, llama_cpp, faiss, sentence_transformers" \
  && echo "reme installed: $(command -v reme)"
