#!/usr/bin/env bash
# Install the pinned torch (sentence-transformers needs it) into the active environment, the
# build that fits the machine: scripts/install.sh runs this when no torch is installed.
#   bash scripts/install_torch.sh CONSTRAINTS_FILE
#
# PyPI's Linux torch is the CUDA build: it asks for the nvidia-*/cuda-* packages (several GB).
# On a machine with no NVIDIA GPU that download is waste, so torch comes from PyTorch's own
# CPU wheel index ($REME_TORCH_CPU_INDEX, default below; its 2.13.0+cpu satisfies the pin
# torch==2.13.0) with everything else from the usual index. With a GPU visible (nvidia-smi
# lists one), PyPI's CUDA build is the right one. When the CPU index cannot be reached (a
# closed network, a mirror), the script says so before the CUDA download, which runs on a CPU
# all the same. REME_TORCH_CPU_INDEX= (empty) skips the CPU index.
set -euo pipefail
constraints="${1:?usage: install_torch.sh CONSTRAINTS_FILE}"
torch_pin=$(sed -nE 's/^(torch==[^ #]+).*/\1/p' "$constraints")
[[ -n "$torch_pin" ]] || { echo "error: $constraints pins no torch" >&2; exit 2; }
cpu_index="${REME_TORCH_CPU_INDEX-https://download.pytorch.org/whl/cpu}"

if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  exec python -m pip install -q -c "$constraints" "$torch_pin"
fi
index_args=()
why=""
if [[ -z "$cpu_index" ]]; then
  why="REME_TORCH_CPU_INDEX is empty"
elif python - "$cpu_index" <<'EOF'
import os, sys, urllib.parse, urllib.request
url = sys.argv[1].rstrip("/") + "/torch/"
if url.startswith("file:"):
    sys.exit(not os.path.isdir(urllib.parse.urlparse(url).path))
try:
    urllib.request.urlopen(url, timeout=15).close()
except Exception:
    sys.exit(1)
EOF
then
  index_args=(--extra-index-url "$cpu_index")
else
  why="PyTorch's CPU index ($cpu_index) did not answer"
fi

# Which build pip would take, from its metadata-only dry run, before any download.
cuda_deps=$(python -m pip install -q --dry-run --ignore-installed --report - -c "$constraints" \
    "${index_args[@]}" "$torch_pin" 2>/dev/null \
  | python -c 'import json, sys; print(sum(i["metadata"]["name"].lower().startswith(("nvidia-", "cuda-")) for i in json.load(sys.stdin)["install"]))' \
  2>/dev/null || echo "?")
if [[ "$cuda_deps" != "0" ]]; then
  echo "note: $torch_pin is the CUDA build here ($cuda_deps nvidia-*/cuda-* packages, several GB: ${why:-the CPU index has no such build}); it runs on a CPU all the same, or install the CPU build first (README, Quick start) and rerun" >&2
fi
python -m pip install -q -c "$constraints" "${index_args[@]}" "$torch_pin"
