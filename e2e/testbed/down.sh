#!/usr/bin/env bash
# Stops a test bed started by up.sh and removes its state directory. Safe to run twice, and on a test bed that
# up.sh left half started.
#
# Usage: down.sh [--keep] STATE_DIR    (--keep: stop the processes but keep STATE_DIR, e.g. for its logs)
#
# Stops exactly the processes listed in STATE_DIR/pids ("name pid start-time"; each one its own process group):
# SIGTERM to each group, then SIGKILL to what is left after 15 s; controller-managers, apiservers and MinIO first,
# then etcd. A pid whose start time no longer matches is a
# different process that reused the number, and is left alone. Removes only a directory that up.sh marked as its
# own (STATE_DIR/.ferry-testbed).
set -euo pipefail
keep=0
if [ "${1:-}" = "--keep" ]; then
  keep=1
  shift
fi
[ $# -eq 1 ] || { echo "usage: $0 [--keep] STATE_DIR" >&2; exit 2; }
state="$1"
if [ ! -e "$state" ]; then
  echo "down: $state: nothing to stop" >&2
  exit 0
fi
if [ ! -e "$state/.ferry-testbed" ]; then
  echo "down: $state is not a test bed directory (no .ferry-testbed); leaving it alone" >&2
  exit 1
fi

# ours PID START: the process is still the one up.sh started, and running (a zombie has ended).
ours() {
  local stat
  stat="$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null)" || return 1
  # shellcheck disable=SC2086 # split the fields of /proc/PID/stat
  set -- "$2" $stat
  [ -n "$1" ] && [ "$2" != Z ] && [ "${21}" = "$1" ]
}

# stop PATTERN: SIGTERM to the process groups of the listed processes whose name matches PATTERN (an extended
# regular expression), then wait for them; SIGKILL to what is left after 15 s.
stop() {
  local live=() still entry name pid start deadline=$((SECONDS + 15))
  [ -f "$state/pids" ] || return 0
  while read -r name pid start; do
    [ -n "${pid:-}" ] && [[ "$name" =~ $1 ]] || continue
    if ours "$pid" "${start:-}"; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      live+=("$name:$pid:$start")
    fi
  done <"$state/pids"
  while [ "${#live[@]}" -gt 0 ]; do
    still=()
    for entry in "${live[@]}"; do
      IFS=: read -r name pid start <<<"$entry"
      if ours "$pid" "$start"; then still+=("$entry"); fi
    done
    live=("${still[@]+"${still[@]}"}")
    [ "${#live[@]}" -gt 0 ] || break
    if [ "$SECONDS" -ge "$deadline" ]; then
      for entry in "${live[@]}"; do
        IFS=: read -r name pid start <<<"$entry"
        echo "down: $name ($pid) did not stop in 15 s; killing it" >&2
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      done
      sleep 0.5
      break
    fi
    sleep 0.1
  done
}

# etcd last: stopped together with its apiserver, each waits for the other (~10 s); after it, ~1 s.
stop '^(kube-|minio)'
stop '.'

if [ "$keep" = 1 ]; then
  rm -f "$state/pids" "$state/env"
else
  rm -rf "$state"
fi
