#!/usr/bin/env bash
# Record the exact package set of the active (tested) environment in constraints.txt,
# which scripts/install.sh installs with `pip install -c`. Run it in the venv that CI's
# install produced, after the tests pass on it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Written beside it and moved over it only when complete: a failed freeze keeps the old file.
tmp=$(mktemp constraints.txt.XXXXXX)
trap 'rm -f "$tmp"' EXIT
{
  echo "# The package set reme's CI passed with (scripts/freeze_constraints.sh; $(python -V 2>&1), $(uname -m))."
  echo "# scripts/install.sh installs with -c constraints.txt; pyproject.toml keeps the wider ranges."
  # Local version labels (torch's +cpu) would not match the same release built elsewhere.
  python -m pip freeze --exclude-editable --all | grep -viE '^(reme-harness|reme|pip|setuptools|wheel)==' | sed -E 's/\+[a-z0-9.]+$//' | sort -f
} > "$tmp"
chmod 644 "$tmp"
mv "$tmp" constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)"
