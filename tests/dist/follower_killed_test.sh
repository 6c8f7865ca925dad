#!/usr/bin/env bash
# A follower rank killed while rank 0 runs a command: the job must end within seconds (no
# hang) with one line from rank 0 saying why. Usage: follower_killed_test.sh MPIRUN NANOINFER
set -u
mpirun=$1
nanoinfer=$2
dir=$(mktemp -d)
err=$dir/stderr
# chat on the embedded model: rank 0 waits on stdin (a pipe held open by sleep), the follower
# in its step loop.
mkfifo "$dir/stdin"
sleep 60 >"$dir/stdin" 2>/dev/null &
holder=$!
trap 'kill $holder 2>/dev/null; rm -rf "$dir"' EXIT
"$mpirun" --oversubscribe --allow-run-as-root -np 2 "$nanoinfer" chat -t 1 <"$dir/stdin" >/dev/null 2>"$err" &
job=$!
follower=""
for _ in $(seq 100); do
  sleep 0.1
  for p in $(pgrep -f "$nanoinfer chat"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then follower=$p; fi
  done
  [ -n "$follower" ] && break
done
[ -n "$follower" ] || { echo "FAIL: the ranks did not start"; kill $job; exit 1; }
sleep 1  # both ranks have opened the model
start=$(date +%s)
kill -9 "$follower"
for _ in $(seq 150); do
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
if kill -0 $job 2>/dev/null; then
  echo "FAIL: the job still runs 15 s after a follower was killed"
  pkill -P $job; kill $job
  exit 1
fi
echo "ended $(( $(date +%s) - start )) s after the kill"
if ! grep -q "^nanoinfer: error: rank 0: ended by the MPI launcher: another rank of the job died" "$err"; then
  echo "FAIL: rank 0 did not say why; stderr was:"
  cat "$err"
  exit 1
fi
echo "ok: $(grep -c '^nanoinfer: error: rank 0' "$err") line(s) from rank 0"
