#!/usr/bin/env bash
# End-to-end check of spmd-link-emulator: three network namespaces joined by the emulator,
# first with the "fast" profile (10 us, 10000 Mbit/s), then the "slow" one (1000 us,
# 1000 Mbit/s). For each: round trip and bandwidth between two namespaces (link_probe.py),
# the third namespace reaching both others (flooding and learning), the emulator's CPU while
# idle, and after SIGTERM its counter line and no tap device left behind.
#
#   tools/cluster/test_link_emulator.sh [path/to/spmd-link-emulator]
#
# Default binary: ${SPMD_BUILD_DIR:-build}/spmd-link-emulator. Needs root (CAP_NET_ADMIN);
# without it, or without /dev/net/tun, prints SKIP and exits 0. Exit 1 with a message naming
# the failed check. The namespaces (le<pid>-a/b/c) and the processes are removed on any exit.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
emu=${1:-${SPMD_BUILD_DIR:-$root/build}/spmd-link-emulator}
probe=(/usr/bin/python3 "$here/link_probe.py")
port=5201

log() { echo "test_link_emulator: $*"; }
fail() { echo "test_link_emulator: FAIL: $*" >&2; exit 1; }

[ -x "$emu" ] || fail "$emu is not an executable (build the target spmd-link-emulator, or pass its path)"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is needed for link_probe.py"

prefix="le$$-"
ns=("${prefix}a" "${prefix}b" "${prefix}c")
addr=(10.99.0.1 10.99.0.2 10.99.0.3)
work=$(mktemp -d "${TMPDIR:-/tmp}/test_link_emulator.XXXXXX")
emu_pid=""
server_pids=()

cleanup() {
  set +e
  for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  if [ -n "$emu_pid" ]; then kill -KILL "$emu_pid" 2>/dev/null; wait "$emu_pid" 2>/dev/null; fi
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # through the EXIT trap

if [ ! -c /dev/net/tun ]; then
  echo "SKIP: /dev/net/tun is missing (no tun driver)"
  exit 0
fi
if ! ip netns add "${ns[0]}" 2>"$work/netns.err"; then
  echo "SKIP: cannot create network namespaces: $(tr '\n' ' ' <"$work/netns.err")(needs root / CAP_NET_ADMIN)"
  exit 0
fi
ip netns add "${ns[1]}"
ip netns add "${ns[2]}"

# Probe servers in a and b; they outlive the emulator's restarts (they listen on 0.0.0.0).
for i in 0 1; do
  ip netns exec "${ns[$i]}" "${probe[@]}" server --port "$port" 2>"$work/server-$i.log" &
  server_pids+=($!)
done

# json FILE KEY: one value of link_probe's JSON line.
json() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# check NAME CONDITION (a python expression over floats)
check() { /usr/bin/python3 -c "import sys; sys.exit(0 if ($2) else 1)" || fail "$1 ($2)"; }

# cpu_ticks PID: user + system clock ticks so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

start_emulator() {  # NAME DELAY_US RATE_MBIT
  local name=$1 ready="$work/ready"
  rm -f "$ready"
  "$emu" --delay-us "$2" --rate-mbit "$3" --ready-file "$ready" \
    "${ns[0]}:tap0" "${ns[1]}:tap0" "${ns[2]}:tap0" 2>"$work/emu-$name.log" &
  emu_pid=$!
  for _ in $(seq 100); do
    [ -e "$ready" ] && break
    kill -0 "$emu_pid" 2>/dev/null || fail "$name: the emulator exited during setup: $(cat "$work/emu-$name.log")"
    sleep 0.05
  done
  [ -e "$ready" ] || fail "$name: no ready file after 5 s: $(cat "$work/emu-$name.log")"
  [ "$(cat "$ready")" = "$emu_pid" ] || fail "$name: the ready file holds '$(cat "$ready")', not the pid $emu_pid"
  for i in 0 1 2; do ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev tap0; done
}

stop_emulator() {  # NAME
  local name=$1 rc=0
  kill -TERM "$emu_pid"
  for _ in $(seq 100); do kill -0 "$emu_pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$emu_pid" 2>/dev/null && fail "$name: the emulator still runs 5 s after SIGTERM"
  wait "$emu_pid" || rc=$?
  emu_pid=""
  [ "$rc" -eq 0 ] || fail "$name: the emulator exited with $rc after SIGTERM: $(cat "$work/emu-$name.log")"
  local counters
  counters=$(grep 'stopped by SIGTERM' "$work/emu-$name.log") || fail "$name: no counter line on stderr: $(cat "$work/emu-$name.log")"
  log "$name: $counters"
  for n in "${ns[@]}"; do
    grep -q "$n:tap0 in [1-9][0-9]* frames" <<<"$counters" || fail "$name: no frames counted from $n:tap0"
    if ip -n "$n" -d -o link show | grep -q 'tun type'; then
      fail "$name: a tap device is left in $n after SIGTERM: $(ip -n "$n" -o link show)"
    fi
  done
  [ ! -e "$work/ready" ] || fail "$name: the ready file was not removed at exit"
}

run_profile() {  # NAME DELAY_US RATE_MBIT MIB
  local name=$1 delay=$2 rate=$3 mib=$4 out="$work/probe-$1.json"
  start_emulator "$name" "$delay" "$rate"

  timeout 120 ip netns exec "${ns[0]}" "${probe[@]}" client "${addr[1]}" "$port" --mib "$mib" >"$out" ||
    fail "$name: link_probe ${ns[0]} -> ${addr[1]} failed"
  local med p90 min bw
  med=$(json "$out" rtt_us_median) p90=$(json "$out" rtt_us_p90) min=$(json "$out" rtt_us_min)
  bw=$(json "$out" mbit_per_s)
  log "$name ($delay us, $rate Mbit/s): RTT median $med us, p90 $p90 us, min $min us (model 2 x delay = $((2 * delay)) us); bandwidth $bw Mbit/s ($mib MiB)"
  check "$name: RTT below the modelled 2 x delay" "$min >= 2 * $delay"
  check "$name: bandwidth above 1.1 x the rate" "$bw <= 1.1 * $rate"
  # Fast: software overhead (tens of us per round trip) dominates, so only report.
  if [ "$name" = slow ]; then
    check "slow: RTT median outside 2.0 .. 3.5 ms" "2000 <= $med <= 3500"
    check "slow: bandwidth below 0.3 x the rate" "$bw >= 0.3 * $rate"
  fi

  # The third namespace has sent nothing yet: its first frames flood, the replies are learnt.
  for i in 0 1; do
    timeout 60 ip netns exec "${ns[2]}" "${probe[@]}" client "${addr[$i]}" "$port" --count 5 --mib 1 \
      >"$work/reach.json" || fail "$name: ${ns[2]} cannot reach ${ns[$i]} (${addr[$i]}) through the emulator"
  done
  log "$name: ${ns[2]} reaches ${ns[0]} and ${ns[1]}"

  # Idle: nothing queued, so the emulator should sleep in ppoll.
  local t0 t1 hz=$(getconf CLK_TCK)
  sleep 0.5
  t0=$(cpu_ticks "$emu_pid"); sleep 2; t1=$(cpu_ticks "$emu_pid")
  local idle_pct=$(( (t1 - t0) * 100 / (2 * hz) ))
  log "$name: emulator CPU while idle: $((t1 - t0)) ticks in 2 s (${idle_pct}%)"
  [ "$idle_pct" -lt 5 ] || fail "$name: the emulator uses ${idle_pct}% CPU while idle"

  stop_emulator "$name"
}

run_profile fast 10 10000 256
run_profile slow 1000 1000 64
log "PASS"
