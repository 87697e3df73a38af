#!/usr/bin/env bash
# Record the exact package set of the active (tested) environment in constraints.txt,
# which scripts/install.sh installs with `pip install -c`. Run it in the venv that CI's
# install produced, after the tests pass on it.
#
# A venv holds one llama.cpp engine (scripts/install_llama.sh): where CI took the xllamacpp
# wheel, llama-cpp-python and its server's dependencies are not installed, and the other way
# round. Their pins in the previous constraints.txt are kept (and named), so the fallback
# installs from a tested set too.
set -euo pipefail
cd "$(dirname "$0")/.."
# Written beside it and moved over it only when complete: a failed freeze keeps the old file.
tmp=$(mktemp constraints.txt.XXXXXX)
trap 'rm -f "$tmp"' EXIT
frozen=$(python -m pip freeze --exclude-editable --all | grep -viE '^(reme-harness|reme|pip|setuptools|wheel)==' \
  | sed -E 's/\+[a-z0-9.]+$//')  # local version labels (torch's +cpu) would not match the same release built elsewhere
kept=$(python - "$frozen" <<'EOF'
import pathlib, re, sys
norm = lambda line: re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
now = {norm(l) for l in sys.argv[1].splitlines() if "==" in l}
old = pathlib.Path("constraints.txt")
lines = old.read_text().splitlines() if old.exists() else []
print("\n".join(l for l in lines if "==" in l and not l.startswith("#") and norm(l) not in now))
EOF
)
{
  echo "# The package set reme's CI passed with (scripts/freeze_constraints.sh; $(python -V 2>&1), $(uname -m))."
  echo "# scripts/install.sh installs with -c constraints.txt; pyproject.toml keeps the wider ranges."
  printf '%s\n%s\n' "$frozen" "$kept" | grep -v '^$' | sort -f
} > "$tmp"
chmod 644 "$tmp"
mv "$tmp" constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)"
[[ -z "$kept" ]] || echo "kept $(wc -l <<<"$kept") pin(s) of packages not installed here (the other llama.cpp engine's; drop any that nothing installs any more): $(tr '\n' ' ' <<<"$kept")"
