# Helpers the end-to-end install tests share; sourced, not run.

fail() {
  echo "e2e FAILED: $*" >&2
  exit 1
}

# Runs a command quietly, showing its output only when it fails.
run_logged() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "command failed: $*"
  fi
}
